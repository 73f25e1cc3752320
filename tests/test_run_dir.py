"""hearsay.contracts.run_dir: the run directory's layout, spelled once, and the errors that name
the fix."""

import pytest

from hearsay.contracts import run_dir


def test_layout_names_match_the_documented_tree(tmp_path):
    assert run_dir.meta_path(tmp_path) == tmp_path / "run_meta.json"
    assert run_dir.config_path(tmp_path) == tmp_path / "config.json"
    assert run_dir.weights(tmp_path) == tmp_path / "final" / "model.safetensors"
    assert run_dir.checkpoint_dir(tmp_path, 3) == tmp_path / "checkpoints" / "epoch_0003"


def test_meta_round_trip_and_find_from_below(tmp_path):
    run_dir.write_meta(tmp_path, {"job": "fold", "fold": 2})
    assert run_dir.read_meta(tmp_path) == {"fold": 2, "job": "fold"}
    (tmp_path / "final").mkdir()
    assert run_dir.find_meta(tmp_path / "final")["fold"] == 2


def test_missing_files_are_named_with_the_fix(tmp_path):
    with pytest.raises(run_dir.RunDirError, match="no run_meta.json in .*hearsay train"):
        run_dir.read_meta(tmp_path)
    with pytest.raises(run_dir.RunDirError, match="is the run complete"):
        run_dir.weights_of(tmp_path)


def test_weights_of_takes_a_run_dir_or_the_folder_itself(tmp_path):
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "model.safetensors").write_bytes(b"w")
    assert run_dir.weights_of(tmp_path) == tmp_path / "final" / "model.safetensors"
    assert run_dir.weights_of(tmp_path / "final") == tmp_path / "final" / "model.safetensors"


def test_find_meta_looks_at_the_run_and_two_folders_up_no_further(tmp_path):
    run_dir.write_meta(tmp_path, {"fold": 1})
    deep = run_dir.checkpoint_dir(tmp_path, 2)
    deep.mkdir(parents=True)
    assert run_dir.find_meta(deep) == {"fold": 1}
    with pytest.raises(run_dir.RunDirError, match=r"no run_meta.json at or above .*hearsay train"):
        run_dir.find_meta(deep / "deeper")
    assert run_dir.checkpoint_name(12) == "epoch_0012"


def test_weights_of_prefers_the_runs_final_weights_and_refuses_an_empty_folder(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"own")
    assert run_dir.weights_of(tmp_path) == tmp_path / "model.safetensors"
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "model.safetensors").write_bytes(b"final")
    assert run_dir.weights_of(tmp_path) == tmp_path / "final" / "model.safetensors"
    with pytest.raises(run_dir.RunDirError, match=r"no final/model.safetensors under "):
        run_dir.weights_of(tmp_path / "final" / "x")


def test_a_meta_that_is_not_json_or_not_an_object_is_not_complete(tmp_path):
    run_dir.meta_path(tmp_path).write_text('{"complete": tr')
    assert run_dir.incomplete(tmp_path) == "run_meta.json is not JSON (a copy cut short?)"
    run_dir.meta_path(tmp_path).write_text("[true]")
    assert run_dir.incomplete(tmp_path) == "run_meta.json does not say complete"
    assert run_dir.meta_says_complete({"complete": True})
    assert not run_dir.meta_says_complete({})


def test_a_run_checked_against_a_bundle_alone_is_judged_as_its_own_key(tmp_path, capsys):
    run = tmp_path / "r"
    (run / "final").mkdir(parents=True)
    (run / "final" / "model.safetensors").write_bytes(b"w")
    run_dir.write_meta(run, {"job": "full", "fold": None, "complete": True,
                             "bundle_tree_sha": "a"})
    assert run_dir.identity_key(run) == "full"
    assert run_dir.main(["check", str(run), "--bundle", "a"]) == run_dir.EXIT_OK
    assert run_dir.main(["check", str(run), "--bundle", "b"]) == run_dir.EXIT_IDENTITY
    assert capsys.readouterr().err == (f"hearsay run check: {run}: another run: "
                                       "bundle_tree_sha 'a' (want 'b')\n")
    assert run_dir.identity_problems(run, "fold0", None) == [
        "job 'full' (want 'fold')", "fold None (want 0)"]  # no bundle given: not judged
    run_dir.write_meta(run, {"job": "pilot", "fold": None, "complete": True})
    with pytest.raises(SystemExit) as e:
        run_dir.main(["check", str(run), "--bundle", "a"])  # a pilot has no campaign key
    assert e.value.code == run_dir.EXIT_USAGE


def test_readout_and_progress_lines_show_absent_figures_as_null(tmp_path, capsys,
                                                                monkeypatch):
    assert run_dir.readout_line({"epoch": 1, "min_dcf": 0.123456, "auc": 1, "n": 8}) == (
        "READOUT epoch 1 step None: minDCF(pi None) 0.1235 EER null AUC 1 on 8 validation "
        "clips")
    assert run_dir.progress_line({"line": "hearsay train: step 3/9", "at": "t"}) == (
        "PROGRESS step 3/9 (at t)")
    assert run_dir.progress_line({}) == "PROGRESS  (at None)"
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('{"line": "x", "at": 5}'))
    assert run_dir.main(["progress", "-"]) == 0
    assert capsys.readouterr().out == "PROGRESS x (at 5)\n"
    assert run_dir.main(["progress", str(tmp_path / "none.json")]) == run_dir.EXIT_INCOMPLETE
    assert capsys.readouterr().err.startswith(f"hearsay run progress: {tmp_path / 'none.json'}:")


def test_run_help_is_the_module_docstring_under_its_own_name(capsys):
    with pytest.raises(SystemExit) as e:
        run_dir.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: hearsay run [-h]")
    assert run_dir.__doc__.splitlines()[0] in out
    assert "      config.json             the resolved training config" in out  # as written
    for verb_help in ("is RUN_DIR complete, and the run --key of --bundle?",
                      "print readout.json as runner/status.sh --why shows it",
                      "print progress.json as runner/status.sh --why shows it"):
        assert verb_help in out
    with pytest.raises(SystemExit) as e:
        run_dir.main([])
    assert e.value.code == run_dir.EXIT_USAGE
    assert capsys.readouterr().err.splitlines()[-1] == (
        "hearsay run: error: the following arguments are required: verb")


def test_a_folder_without_weights_is_refused_naming_both_places_looked(tmp_path):
    with pytest.raises(run_dir.RunDirError) as err:
        run_dir.weights_of(tmp_path)
    assert str(err.value) == (f"no final/model.safetensors under {tmp_path} (is the run "
                              "complete? pass a run dir with final/ or a checkpoint dir)")


def test_identity_reads_a_parsed_meta_and_a_key_stands_for_its_job_fold_and_bundle(tmp_path,
                                                                                 capsys):
    meta = {"job": "fold", "fold": 3, "bundle_tree_sha": "s"}
    assert run_dir.identity(meta) == run_dir.Identity("fold", 3, "s")
    assert run_dir.wanted("fold3", "s") == ("fold", 3, "s")
    assert run_dir.wanted("full", None) == ("full", None, None)
    run = tmp_path / "r"
    (run / "final").mkdir(parents=True)
    (run / "final" / "model.safetensors").write_bytes(b"w")
    run_dir.write_meta(run, {**meta, "complete": True})
    assert run_dir.identity_key(run) == "fold3"
    assert run_dir.main(["check", str(run), "--key", "full", "--bundle", "t"]) == 4
    assert capsys.readouterr().err == (
        f"hearsay run check: {run}: another run: job 'fold' (want 'full'); fold 3 (want None); "
        "bundle_tree_sha 's' (want 't')\n")
    with pytest.raises(SystemExit):
        run_dir.main(["check", str(run), "--key", "fold9"])
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "hearsay run: error: run 'fold9' is not one of fold0, ")


def test_each_run_verb_help_names_its_arguments(capsys):
    wanted = {"check": ["--key KEY", "the campaign key it must be: fold0..fold4 or full",
                        "--bundle BUNDLE", "the bundle tree-sha it must have trained on"],
              "readout": ["the file, or - for stdin"], "progress": ["the file, or - for stdin"]}
    for verb, fragments in wanted.items():
        with pytest.raises(SystemExit):
            run_dir.main([verb, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert all(f in out for f in fragments), (verb, out)


def test_each_run_help_line_ends_with_its_own_text(capsys, monkeypatch):
    import re

    monkeypatch.setenv("COLUMNS", "200")
    wanted = {"check": [r"--key KEY\s+the campaign key it must be: fold0..fold4 or full",
                        r"--bundle BUNDLE\s+the bundle tree-sha it must have trained on"],
              "readout": [r"file\s+the file, or - for stdin"]}
    for verb, patterns in wanted.items():
        with pytest.raises(SystemExit):
            run_dir.main([verb, "--help"])
        out = capsys.readouterr().out
        for pattern in patterns:
            assert re.search(rf"^\s+{pattern}$", out, re.M), (pattern, out)
