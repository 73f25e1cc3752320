"""hearsay.contracts.pin at its edges: what a written pin holds, which pins a strict read
refuses and how it says so, and `hearsay pin`'s usage and exit codes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hearsay.contracts import pin, protocol, run_dir

SHA = "b" * 64


def make_run(root: Path, key: str, complete=True) -> Path:
    job, fold = protocol.run_job(key)
    run = root / "runs" / key
    run_dir.final_dir(run).mkdir(parents=True)
    run_dir.weights(run).write_bytes(f"weights of {key}".encode())
    run_dir.write_meta(run, {"job": job, "fold": fold, "complete": complete,
                             "config_hash": f"cfg-{key}"})
    return run


def runs_of(root: Path, n: int = 3) -> dict[str, Path]:
    return {k: make_run(root, k) for k in protocol.run_keys(n)}


def test_a_campaign_pin_holds_each_runs_folder_config_hash_and_weights_sha(tmp_path):
    runs = runs_of(tmp_path)
    path = tmp_path / "models" / "stamp" / pin.FINAL
    doc = pin.write(path, name="stamp", bundle_tree_sha=SHA, runs=runs, min_steps="7",
                    parity=pin.parity_waived("no box"))
    assert doc == {"name": "stamp", "bundle_tree_sha": SHA, "min_steps": 7,
                   "parity": {"waived": "no box"},
                   "runs": {k: {"dir": f"../../runs/{k}", "config_hash": f"cfg-{k}",
                                "weights_sha256": hashlib.sha256(
                                    f"weights of {k}".encode()).hexdigest()} for k in runs}}
    assert json.loads(path.read_text()) == doc
    got = pin.read(path)
    assert got["parity"] == {"waived": "no box"} and got["stamp_dir"] == path.parent
    assert got["runs"]["fold1"]["dir"] == runs["fold1"].resolve()


def test_an_ablation_pin_holds_its_recipe_and_fold_runs_only(tmp_path):
    runs = {"fold0": make_run(tmp_path, "fold0"), "fold2": make_run(tmp_path, "fold2")}
    doc = pin.write(tmp_path / pin.ABLATION, name="r", recipe="r", bundle_tree_sha=SHA,
                    runs=runs)
    assert list(doc) == ["name", "recipe", "bundle_tree_sha", "runs"]
    assert sorted(doc["runs"]) == ["fold0", "fold2"]
    for bad in ({}, {**runs, "full": make_run(tmp_path, "full")}):
        with pytest.raises(pin.PinError, match="an ablation pin holds fold runs only, got"):
            pin.write(tmp_path / "x.json", name="r", recipe="r", bundle_tree_sha=SHA, runs=bad)


@pytest.mark.parametrize("min_steps", [None, 0, -3])
def test_a_campaign_pin_needs_at_least_one_step(tmp_path, min_steps):
    with pytest.raises(pin.PinError, match=r"needs min_steps >= 1"):
        pin.write(tmp_path / "p.json", name="c", bundle_tree_sha=SHA, runs=runs_of(tmp_path),
                  min_steps=min_steps)
    assert not (tmp_path / "p.json").exists()


def test_the_fold_count_is_two_to_five_and_a_wrong_set_is_named_with_the_pin(tmp_path):
    assert [pin.fold_count(protocol.run_keys(n)) for n in (2, 3, 4, 5)] == [2, 3, 4, 5]
    for keys in (["fold0", "full"], ["fold0", "fold1"], [*protocol.run_keys(5), "fold5"]):
        with pytest.raises(pin.PinError, match=r"n in 2\.\.5 .* got \["):
            pin.fold_count(keys)
    runs = {k: make_run(tmp_path, k) for k in ("fold0", "fold1")}
    with pytest.raises(pin.PinError, match=r"^.*p\.json: runs must be exactly fold0"):
        pin.write(tmp_path / "p.json", name="c", bundle_tree_sha=SHA, runs=runs, min_steps=1)


def pin_text(tmp_path, doc) -> Path:
    p = tmp_path / "p.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def good(tmp_path) -> dict:
    doc = pin.write(tmp_path / "w.json", name="c", bundle_tree_sha=SHA, runs=runs_of(tmp_path),
                    min_steps=1, parity=pin.parity_record("box.json"))
    return json.loads(json.dumps(doc))


def test_a_strict_read_refuses_each_broken_pin_and_says_what_is_wrong(tmp_path):
    doc = good(tmp_path)
    run = doc["runs"]["fold0"]
    cases = [("{", "not JSON"), ([], 'no "runs" object'), ({"runs": []}, 'no "runs" object'),
             ({k: v for k, v in doc.items() if k != "min_steps"},
              r"unknown keys \[\], missing keys \['min_steps'\] \(a pin file has exactly "
              r"\['bundle_tree_sha', 'min_steps', 'name', 'parity', 'runs'\]\)"),
             ({**doc, "runs": {**doc["runs"], "fold0": {**run, "note": 1}}},
              r"runs\.fold0 needs exactly \['config_hash', 'dir', 'weights_sha256'\], got "
              r"\['config_hash', 'dir', 'note', 'weights_sha256'\]"),
             ({**doc, "runs": {**doc["runs"], "fold0": "runs/fold0"}},
              r"runs\.fold0 needs exactly .* got 'runs/fold0'")]
    for text, why in cases:
        with pytest.raises(pin.PinError, match=why):
            pin.read(pin_text(tmp_path, text))
    with pytest.raises(FileNotFoundError, match="hearsay pin write"):
        pin.read(tmp_path / "none.json")


def test_a_lax_read_takes_any_runs_object_but_never_a_run_that_is_not_an_object(tmp_path):
    p = pin_text(tmp_path, {"runs": {"fold0": {"dir": "r0", "extra": 1}}, "recipe": "x"})
    got = pin.read(p, strict=False)
    assert got["runs"]["fold0"] == {"dir": (tmp_path / "r0").resolve(), "extra": 1}
    assert got["recipe"] == "x" and got["stamp_dir"] == tmp_path
    assert pin.read(pin_text(tmp_path, {"runs": {"fold0": {}}}), strict=False)["runs"] == {
        "fold0": {}}  # no dir: nothing to resolve
    with pytest.raises(pin.PinError, match="runs.fold0 needs exactly"):
        pin.read(pin_text(tmp_path, {"runs": {"fold0": "r0"}}), strict=False)


def test_a_parity_records_file_is_resolved_against_the_pin_a_waiver_is_kept_as_written(
        tmp_path):
    doc = good(tmp_path)
    assert pin.read(pin_text(tmp_path, doc))["parity"] == {
        "file": (tmp_path / "export" / "parity.json").resolve(),
        "require": ["parity_a", "parity_b"], "box_logits": "box.json"}
    waived = {**doc, "parity": {"waived": "why", "file": "x.json"}}
    assert pin.read(pin_text(tmp_path, waived))["parity"] == {"waived": "why", "file": "x.json"}
    named = {**doc, "parity": {"require": ["parity_a"]}}  # no file: nothing to resolve
    assert pin.read(pin_text(tmp_path, named))["parity"] == {"require": ["parity_a"]}


@pytest.mark.parametrize("meta", [{}, {"folds": None}, {"folds": {"config": {"n_folds": "x"}}}])
def test_pin_keys_refuses_a_bundle_meta_without_a_fold_count(tmp_path, capsys, meta):
    (tmp_path / "m.json").write_text(json.dumps(meta))
    assert pin.main(["keys", str(tmp_path / "m.json")]) == pin.EXIT_REFUSED == 4
    assert capsys.readouterr().err == (
        f"hearsay pin keys: {tmp_path / 'm.json'} records no folds.config.n_folds: rebuild the "
        "bundle with hearsay bundle\n")


def cli_write(tmp_path, runs, *extra):
    return ["write", str(tmp_path / "p.json"), "--name", "c", "--bundle", SHA,
            *[f"--run={k}={d}" for k, d in runs.items()], *extra]


def test_pin_write_records_the_parity_asked_for_and_prints_the_pin(tmp_path, capsys):
    runs = runs_of(tmp_path)
    for extra, parity in (([], None), (["--parity-waived", "no box"], {"waived": "no box"}),
                          (["--parity-box-logits", "b.json"], pin.parity_record("b.json"))):
        assert pin.main(cli_write(tmp_path, runs, "--min-steps", "3", *extra)) == pin.EXIT_OK
        assert capsys.readouterr().out == f"{tmp_path / 'p.json'}\n"
        assert json.loads((tmp_path / "p.json").read_text())["parity"] == parity
    assert pin.parity_record("b.json") == {"file": "export/parity.json",
                                           "require": ["parity_a", "parity_b"],
                                           "box_logits": "b.json"}
    assert pin.main(cli_write(tmp_path, {"fold1": runs["fold1"]}, "--recipe", "r")) == 0
    assert json.loads((tmp_path / "p.json").read_text())["recipe"] == "r"


@pytest.mark.parametrize("extra", [[], ["--min-steps", "3", "--recipe", "r"], ["--run", "fold0"]])
def test_pin_write_usage_needs_key_dir_runs_and_one_of_min_steps_or_recipe(tmp_path, capsys,
                                                                           extra):
    args = cli_write(tmp_path, {"fold0": tmp_path}, *extra)
    if extra and extra[0] == "--run":
        args += ["--min-steps", "3"]
    with pytest.raises(SystemExit) as e:
        pin.main(args)
    assert e.value.code == pin.EXIT_USAGE == 2
    assert "--run KEY=RUN_DIR each, and exactly one of --min-steps / --recipe" in (
        capsys.readouterr().err)


def test_pin_check_refuses_strictly_and_accepts_laxly_and_names_the_verb(tmp_path, capsys):
    p = pin_text(tmp_path, {"runs": {"fold0": {"dir": "r"}}})
    assert pin.main(["check", str(p), "--lax"]) == 0
    assert pin.main(["check", str(p)]) == pin.EXIT_REFUSED
    assert capsys.readouterr().err.startswith(f"hearsay pin check: {p}: unknown keys")
    runs = runs_of(tmp_path)
    run_dir.write_meta(runs["full"], {"complete": False})
    assert pin.main(cli_write(tmp_path, runs, "--min-steps", "1")) == pin.EXIT_INCOMPLETE == 3
    assert capsys.readouterr().err.startswith("hearsay pin write: ")


def test_pin_help_is_the_module_docstring_under_its_own_name(capsys):
    with pytest.raises(SystemExit) as e:
        pin.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: hearsay pin [-h]")
    assert pin.__doc__.splitlines()[0] in out
    assert "    models/<stamp>/final_runs.json      the campaign's pin (FINAL)" in out  # as written
    for verb_help in ("write a pin from the runs as they are",
                      "read a pin as hearsay assemble (or with --lax, compare)",
                      "the runs a campaign pin on this bundle holds, one a line"):
        assert verb_help in out
    with pytest.raises(SystemExit) as e:
        pin.main([])
    assert e.value.code == pin.EXIT_USAGE
    assert capsys.readouterr().err.splitlines()[-1] == (
        "hearsay pin: error: the following arguments are required: verb")


def test_each_pin_verb_help_names_its_arguments_and_what_they_do(capsys):
    wanted = {"write": ["--name NAME", "--bundle BUNDLE", "--run KEY=RUN_DIR",
                        "--min-steps MIN_STEPS", "--recipe RECIPE", "--parity-box-logits REL",
                        "--parity-waived WHY", "the bundle tree-sha every run trained on",
                        "a campaign pin: the steps each run is held to",
                        "an ablation pin: the recipe's name",
                        "require parity A and B, B on these box logits (relative to the pin)",
                        "pin without parity B, recorded"],
              "check": ["[--lax] pin", "any pin with a runs object"],
              "keys": ["keys [-h] bundle_meta"]}
    for verb, fragments in wanted.items():
        with pytest.raises(SystemExit):
            pin.main([verb, "--help"])
        out = " ".join(capsys.readouterr().out.split())  # argparse wraps by the terminal width
        assert out.startswith(f"usage: hearsay pin {verb} [-h]")
        assert all(f in out for f in fragments), (verb, out)
    with pytest.raises(SystemExit) as e:
        pin.main(["write", "p.json"])
    assert e.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == (
        "hearsay pin write: error: the following arguments are required: --name, --bundle, "
        "--run")


def test_pin_write_records_the_name_and_bundle_and_a_run_folder_holding_an_equals_sign(tmp_path,
                                                                                       capsys):
    runs = {k: make_run(tmp_path / "a=b", k) for k in protocol.run_keys(2)}
    args = ["write", str(tmp_path / "p.json"), "--name", "camp", "--bundle", SHA,
            "--min-steps", "2", *[f"--run={k}={d}" for k, d in runs.items()]]
    assert pin.main(args) == 0
    doc = pin.read(tmp_path / "p.json")
    assert (doc["name"], doc["bundle_tree_sha"]) == ("camp", SHA)
    assert doc["runs"]["fold1"]["dir"] == runs["fold1"].resolve()
    args[-1] = "--run=full"  # no =DIR
    with pytest.raises(SystemExit):
        pin.main(args)
    assert capsys.readouterr().err.splitlines()[-1] == (
        "hearsay pin: error: --run KEY=RUN_DIR each, and exactly one of --min-steps / "
        "--recipe")


def test_refusals_name_the_fix(tmp_path):
    with pytest.raises(pin.PinError) as err:
        pin.write(tmp_path / "p.json", name="c", bundle_tree_sha=SHA, runs={}, min_steps=0)
    assert str(err.value) == "a campaign pin needs min_steps >= 1 (the recipe's optimiser steps)"
    with pytest.raises(FileNotFoundError) as err:
        pin.read(tmp_path / "none.json")
    assert str(err.value) == (f"pin file {tmp_path / 'none.json'} not found (write it: "
                              "runner/collect.sh, or hearsay pin write)")
    p = pin_text(tmp_path, {**good(tmp_path), "runs": {"fold0": {}}})
    with pytest.raises(pin.PinError, match=rf"^{p}: runs must be exactly"):
        pin.read(p)


def test_each_pin_help_line_ends_with_its_own_text(capsys, monkeypatch):
    import re

    monkeypatch.setenv("COLUMNS", "200")  # one line per entry
    lines = {"": [r"write\s+write a pin from the runs as they are"],
             "write": [r"--bundle BUNDLE\s+the bundle tree-sha every run trained on",
                       r"--min-steps MIN_STEPS\s+a campaign pin: the steps each run is held to",
                       r"--recipe RECIPE\s+an ablation pin: the recipe's name",
                       r"--parity-box-logits REL\s+require parity A and B, B on these box logits "
                       r"\(relative to the pin\)",
                       r"--parity-waived WHY\s+pin without parity B, recorded"],
              "check": [r"--lax\s+any pin with a runs object"]}
    for verb, patterns in lines.items():
        with pytest.raises(SystemExit):
            pin.main([verb, "--help"] if verb else ["--help"])
        out = capsys.readouterr().out
        for pattern in patterns:
            assert re.search(rf"^\s+{pattern}$", out, re.M), (pattern, out)


def test_min_steps_that_is_not_a_whole_number_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        pin.main(cli_write(tmp_path, {"fold0": tmp_path}, "--min-steps", "many"))
    assert e.value.code == pin.EXIT_USAGE
    assert "argument --min-steps: invalid int value: 'many'" in capsys.readouterr().err
