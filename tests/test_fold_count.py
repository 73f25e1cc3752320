"""The number of folds is the bundle's fold file's, never a literal: fold K exists for K in
0..n_folds-1 (hearsay.contracts.protocol.check_fold), `hearsay bundle info` answers the runner
from the bundle meta, the trainer refuses a fold the bundle has no model for, and the pilot
validates on the bundle's last inner fold. Each at its boundary, with a 3-fold bundle."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from hearsay import cli
from hearsay.contracts import protocol
from hearsay.contracts.bundle import META
from hearsay.contracts.folds import trains_on
from hearsay.train.data import plan_job
from hearsay.train.errors import EXIT_USAGE, ConfigError

SHA = "ab" * 32


def meta_file(tmp_path, n_folds: int | None = 3, name: str = META):
    meta = {"tree_sha": SHA, "status": "ok"}
    if n_folds is not None:
        meta["folds"] = {"config": {"n_folds": n_folds}}
    path = tmp_path / name
    path.write_text(json.dumps(meta))
    return path


def test_the_last_fold_of_a_three_fold_bundle_is_accepted_and_one_past_it_refused():
    assert protocol.check_fold(2, 3) == 2 and protocol.check_fold("0", 3) == 0
    with pytest.raises(protocol.FoldOutside, match=r"^fold 3 is not one of this bundle's folds "
                                                    r"0\.\.2 \(its fold file has n_folds 3\)"):
        protocol.check_fold(3, 3)
    for bad in (-1, "x", "", "1.0"):
        with pytest.raises(protocol.FoldOutside):
            protocol.check_fold(bad, 3)


def test_bundle_info_answers_the_tree_sha_and_the_fold_count(tmp_path, capsys):
    path = meta_file(tmp_path)
    assert cli.main(["bundle", "info", str(path), "--tree-sha"]) == 0
    assert capsys.readouterr().out == f"{SHA}\n"
    assert cli.main(["bundle", "info", str(tmp_path), "--n-folds"]) == 0  # the folder works too
    assert capsys.readouterr().out == "3\n"
    assert cli.main(["bundle", "info", str(path)]) == 0
    assert capsys.readouterr().out == f"tree_sha {SHA}\nn_folds 3\n"


def test_bundle_info_accepts_the_last_fold_and_refuses_one_past_it_with_exit_4(tmp_path, capsys):
    path = meta_file(tmp_path)
    assert cli.main(["bundle", "info", str(path), "--fold", "2"]) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(["bundle", "info", str(path), "--fold", "3"]) == 4
    assert "fold 3 is not one of this bundle's folds 0..2 (its fold file has n_folds 3)" in \
        capsys.readouterr().err


def test_bundle_info_refuses_a_word_for_a_fold_as_usage(tmp_path):
    with pytest.raises(SystemExit) as exc:
        cli.main(["bundle", "info", str(meta_file(tmp_path)), "--fold", "two"])
    assert exc.value.code == 2


def test_bundle_info_exits_3_naming_the_fix_when_the_meta_lacks_what_is_asked(tmp_path, capsys):
    no_folds = meta_file(tmp_path, n_folds=None)
    assert cli.main(["bundle", "info", str(no_folds), "--tree-sha"]) == 0  # what it has
    capsys.readouterr()
    for ask in (["--n-folds"], ["--fold", "0"]):
        assert cli.main(["bundle", "info", str(no_folds), *ask]) == 3
        assert "records no folds.config.n_folds" in capsys.readouterr().err
    assert cli.main(["bundle", "info", str(tmp_path / "absent.json"), "--tree-sha"]) == 3
    assert "cannot read the bundle meta" in capsys.readouterr().err
    (tmp_path / "empty.json").write_text("{}")
    assert cli.main(["bundle", "info", str(tmp_path / "empty.json"), "--tree-sha"]) == 3
    assert "records no tree_sha" in capsys.readouterr().err


def test_pin_keys_are_the_three_fold_bundles_runs(tmp_path, capsys):
    assert cli.main(["pin", "keys", str(meta_file(tmp_path))]) == 0
    assert capsys.readouterr().out.split() == ["fold0", "fold1", "fold2", "full"]


def three_fold_bundle():
    """A stand-in bundle (what plan_job reads): two core rows per inner fold 0..2, extra rows."""
    rows = [{"id": f"c{k}{label[0]}", "fold": str(k), "train_scope": "core", "label": label,
             "generator": "bona" if label == "bonafide" else "gen_a"}
            for k in range(3) for label in ("bonafide", "spoof")]
    rows += [{"id": "x1", "fold": "extra", "train_scope": "extra", "label": "spoof",
              "generator": "gen_b"}]
    meta = {"folds": {"config": {"n_folds": 3}}}
    return SimpleNamespace(manifest=pd.DataFrame(rows), meta=meta)


def test_the_trainer_takes_the_last_fold_of_the_bundle_and_refuses_one_past_it():
    bundle = three_fold_bundle()
    train, val, _ = plan_job(bundle, "fold", 2)
    assert set(val["fold"]) == {"2"} and set(train["fold"]) == {"0", "1", "extra"}
    with pytest.raises(ConfigError, match=r"--fold 3: fold 3 is not one of this bundle's folds "
                                          r"0\.\.2") as exc:
        plan_job(bundle, "fold", 3)
    assert exc.value.code == EXIT_USAGE


def test_the_pilot_of_a_three_fold_bundle_validates_on_its_last_fold():
    assert protocol.validation_fold("pilot", n_folds=3) == "2"
    assert protocol.validation_fold("pilot") == "4"  # the widest bundle's, as before
    train, val, _ = plan_job(three_fold_bundle(), "pilot", None)
    assert set(val["fold"]) == {"2"}
    assert set(train["fold"]) == set(trains_on("pilot", 3)) == {"0", "1", "extra"}


def test_train_fold_takes_any_whole_number_and_refuses_a_word():
    from hearsay.train import _fold

    assert _fold("7") == 7  # whether the bundle has it is judged once the bundle is loaded
    with pytest.raises(Exception, match="not a fold number"):
        _fold("-1")


def test_bundle_info_identity_holds_the_meta_to_the_hashed_selection(tmp_path, capsys):
    """What runner/bundle_put.sh asks before it copies a bundle (no jq of its own)."""
    meta_file(tmp_path)  # folds.config.n_folds 3, no selection
    (tmp_path / "selection.json").write_text(json.dumps(
        {"folds": {"config": {"n_folds": 3}}, "selection": None}))
    assert cli.main(["bundle", "info", str(tmp_path), "--identity"]) == 0
    (tmp_path / "selection.json").write_text(json.dumps(
        {"folds": {"config": {"n_folds": 5}}, "selection": None}))
    assert cli.main(["bundle", "info", str(tmp_path / META), "--identity"]) == 5
    assert "bundle_meta.json's 'folds' differs from the hashed selection.json" in \
        capsys.readouterr().err


def test_bundle_info_help_is_its_usage_its_description_as_written_and_each_options_text(
        capsys, monkeypatch):
    from hearsay.contracts import bundle

    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps at the terminal's width
    with pytest.raises(SystemExit):
        bundle.main(["--help"])
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("usage: hearsay bundle info [-h] [--tree-sha | --n-folds | "
                                   "--fold K | --identity] bundle")
    # the module docstring, its lines kept as written (the verbs' table reads as a table)
    assert "\n    hearsay bundle info BUNDLE --tree-sha    the tree-sha alone\n" in out
    assert out.endswith("\n".join([
        "positional arguments:",
        "  bundle      the bundle folder or its bundle_meta.json",
        "",
        "options:",
        "  -h, --help  show this help message and exit",
        "  --tree-sha  print the tree-sha alone",
        "  --n-folds   print the fold count alone",
        "  --fold K    exit 0 when K is one of the bundle's folds",
        "  --identity  exit 0 when the meta's folds/selection are the hashed selection.json's",
        ""]))


@pytest.mark.parametrize("meta, ask, why", [
    ({"status": "ok"}, [], "records no tree_sha: is it a finished bundle? rebuild it with "
                           "hearsay bundle"),
    ({"tree_sha": 123}, ["--tree-sha"], "records no tree_sha: is it a finished bundle? rebuild "
                                        "it with hearsay bundle"),  # a sha is a string
    ({"tree_sha": SHA}, [], "records no folds.config.n_folds: rebuild the bundle with hearsay "
                            "bundle"),
    ({"tree_sha": SHA}, ["--n-folds"], "records no folds.config.n_folds: rebuild the bundle "
                                       "with hearsay bundle"),
    ({"tree_sha": SHA}, ["--fold", "0"], "records no folds.config.n_folds: rebuild the bundle "
                                         "with hearsay bundle"),
])
def test_bundle_info_names_the_file_it_was_given_and_what_it_lacks(tmp_path, capsys, meta, ask,
                                                                    why):
    from hearsay.contracts import bundle

    path = tmp_path / "copy-of-the-meta.json"  # the runner's copy (RUNNER_BUNDLE_META)
    path.write_text(json.dumps(meta))
    assert bundle.main([str(path), *ask]) == 3
    assert capsys.readouterr().err == f"hearsay bundle info: {path} {why}\n"


def test_bundle_info_fold_usage_error_names_the_word_and_what_to_give(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["bundle", "info", str(meta_file(tmp_path)), "--fold", "two"])
    assert capsys.readouterr().err.endswith(
        "error: --fold 'two': give a whole number (0, 1, ...)\n")


def test_bundle_info_identity_given_the_meta_file_reads_the_selection_beside_it(tmp_path):
    meta_file(tmp_path)
    (tmp_path / "selection.json").write_text(json.dumps(
        {"folds": {"config": {"n_folds": 3}}, "selection": None}))
    assert cli.main(["bundle", "info", str(tmp_path / META), "--identity"]) == 0


def test_bundle_info_refuses_a_meta_that_is_not_a_json_object_naming_it(tmp_path, capsys):
    path = tmp_path / META
    path.write_text("[]")
    assert cli.main(["bundle", "info", str(path)]) == 3
    assert capsys.readouterr().err == (f"hearsay bundle info: {path} is not a bundle meta (a JSON "
                                       "object): rebuild the bundle\n")
