"""hearsay.evaluate.compare's refusals at their edges: a later recipe that scored extra clips (not
only
fewer), and rows of the test split (not only the holdout)."""

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hearsay.evaluate import compare


def recipe(paths, split="inner_oof", seed=0):
    z = np.random.default_rng(seed).normal(size=len(paths))
    return pd.DataFrame({"path": paths, "fold": "0", "split": split, "logit": z})


PATHS = [f"c{i}" for i in range(10)]
KEY = pd.DataFrame({"path": [*PATHS, "extra0"], "label": ["bonafide", "spoof"] * 5 + ["spoof"]})


@pytest.mark.parametrize("later", [PATHS + ["extra0"], PATHS[:-1], PATHS[:-1] + ["extra0"]])
def test_compare_refuses_a_later_recipe_that_scored_other_clips(later):
    recipes = {"first": recipe(PATHS), "second": recipe(PATHS, seed=1),
               "later": recipe(later, seed=2)}
    with pytest.raises(compare.CompareRefused, match="first and later score different clips"):
        compare.compare(recipes, KEY)


def test_compare_ranks_recipes_that_scored_the_same_clips_in_any_order():
    d = compare.compare({"a": recipe(PATHS), "b": recipe(PATHS[::-1], seed=1)}, KEY)
    assert d["n_clips"] == 10


@pytest.mark.parametrize("split", ["test", "holdout"])
def test_compare_refuses_rows_of_the_test_or_holdout_split(tmp_path, split):
    rows = pd.concat([recipe(PATHS), recipe(["t0"], split=split)], ignore_index=True)
    rows.to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(compare.CompareRefused, match=rf"1 row\(s\) of split \['{split}'\]"):
        compare.recipe_scores("r", [tmp_path / "r.csv"])
    recipe(PATHS).to_csv(tmp_path / "ok.csv", index=False)
    assert len(compare.recipe_scores("ok", [tmp_path / "ok.csv"])) == 10


@pytest.mark.parametrize("name,inner", [
    ("fold0_inner_oof.csv", True), ("fold4_inner_oof.csv", True),
    ("fold0_inner_oof_aug.csv", False),      # an augmented scoring of the inner rows
    ("full_inner_oof.csv", False),           # not a fold run's
    ("fold0_holdout.csv", False), ("notes.csv", False)])
def test_only_a_fold_run_s_plain_inner_file_is_a_recipe_s_inner_file(name, inner):
    assert compare.is_inner_file(name) is inner


def test_a_recipe_argument_is_name_then_source_split_at_the_first_equals_sign():
    assert compare.parse_recipe("core=runs/a=b.json") == ("core", Path("runs/a=b.json"))
    for bad in ("core", "=runs/a", "core=", "="):
        with pytest.raises(argparse.ArgumentTypeError, match="want NAME=SOURCE"):
            compare.parse_recipe(bad)


def test_the_decision_counts_clips_per_class_and_names_its_errors(tmp_path):
    paths = [f"c{i}" for i in range(12)]
    key = pd.DataFrame({"path": paths, "label": ["bonafide"] * 8 + ["spoof"] * 4})
    a, b = recipe(paths, seed=1), recipe(paths, seed=2)
    d = compare.compare({"a": a, "b": b}, key)
    assert (d["n_clips"], d["n_bonafide"], d["n_spoof"]) == (12, 8, 4)
    with pytest.raises(compare.CompareError, match="^compare needs at least two recipes$"):
        compare.compare({"a": a}, key)
    one = pd.DataFrame({"path": paths, "label": ["spoof"] * 12})
    with pytest.raises(compare.CompareError,
                       match="^minDCF undefined: the inner rows hold one class only$"):
        compare.compare({"a": a, "b": b}, one)
    with pytest.raises(compare.CompareError, match=f"^{tmp_path / 'none.csv'}: not found$"):
        compare.read_csv(tmp_path / "none.csv")
    with pytest.raises(compare.CompareError, match="no pin file, score CSV or fold<k>_inner_oof"):
        compare.recipe_files(tmp_path)
    (tmp_path / "nopath.csv").write_text("clip,logit\nc0,1.0\n")
    with pytest.raises(compare.CompareError, match="^x: score files lack a `path` column$"):
        compare.recipe_scores("x", [tmp_path / "nopath.csv"])


def test_a_pin_s_other_runs_are_passed_over_and_each_fold_file_must_be_its_fold_s(tmp_path):
    from test_compare import flip_pair, per_run_folder

    sharp, _, _ = flip_pair()
    root = per_run_folder(tmp_path / "a", sharp)
    pin = json.loads((root / "final_runs.json").read_text())
    pin["runs"] = {"ablate-x": {"dir": ".", "config_hash": "c", "weights_sha256": "z"},
                   **pin["runs"]}                      # sorted first, and no fold run: skipped
    (root / "final_runs.json").write_text(json.dumps(pin))
    files = compare.recipe_files(root / "final_runs.json")
    assert [f.name for f in files] == ["fold0_inner_oof.csv", "fold1_inner_oof.csv"]
    side = root / "scores" / "fold1_inner_oof.csv.meta.json"
    side.write_text(json.dumps({"weights_sha256": "w1", "split": "inner_oof", "fold": 0}))
    with pytest.raises(compare.CompareRefused, match=r"split inner_oof, fold 0; the pin names w1"):
        compare.recipe_files(root / "final_runs.json")
    side.write_text(json.dumps({"weights_sha256": "w1", "split": "holdout", "fold": 1}))
    with pytest.raises(compare.CompareRefused, match=r"names weights w1, split holdout, fold 1"):
        compare.recipe_files(root / "final_runs.json")
    side.unlink()
    with pytest.raises(compare.CompareRefused, match="no sidecar"):
        compare.recipe_files(root / "final_runs.json")


def test_the_markdown_states_the_choice_the_clips_each_reading_and_any_flip():
    d = {"chosen": "a", "reading": "pi 0.3, as stated", "n_clips": 12, "n_bonafide": 8,
         "n_spoof": 4, "ranking": ["a", "b"],
         "readings": ["pi 0.3, as stated", "pi 0.5, as stated"],
         "recipes": {"a": {"min_dcf": {"pi 0.3, as stated": 0.25, "pi 0.5, as stated": 0.5},
                           "eer": 0.125, "auc": 0.875},
                     "b": {"min_dcf": {"pi 0.3, as stated": 0.5, "pi 0.5, as stated": 0.25},
                           "eer": 0.25, "auc": 0.75}},
         "flips": [{"reading": "pi 0.5, as stated", "best": "b"}]}
    assert compare.markdown(d).splitlines() == [
        "## Recipe comparison: **a**", "",
        "Pooled inner-fold scores of 12 clips (8 bona fide + 4 synthetic), the same clips for "
        "every recipe; chosen on minDCF at pi 0.3, as stated (lower is better). Ranking: a, b.", "",
        "| recipe | minDCF pi 0.3, as stated | minDCF pi 0.5, as stated | EER | AUC |",
        "|---|---|---|---|---|",
        "| a | 0.2500 | 0.5000 | 0.1250 | 0.8750 |",
        "| b | 0.5000 | 0.2500 | 0.2500 | 0.7500 |", "",
        "**The decision flips** under: pi 0.5, as stated (best: b)."]
    tie = {**d, "chosen": None, "flips": [{"reading": "pi 0.5, as stated", "best": None}]}
    lines = compare.markdown(tie).splitlines()
    assert lines[0] == "## Recipe comparison: **tie: none chosen**"
    assert lines[-1] == "**The decision flips** under: pi 0.5, as stated (best: a tie)."
    same = compare.markdown({**d, "flips": []})
    assert same.endswith("\nThe same recipe is best under every reading.\n")


def test_a_decision_file_is_read_back_and_anything_else_is_refused_naming_the_command(tmp_path):
    paths = [f"c{i}" for i in range(12)]
    key = pd.DataFrame({"path": paths, "label": ["bonafide"] * 8 + ["spoof"] * 4})
    d = compare.compare({"a": recipe(paths, seed=1), "b": recipe(paths, seed=2)}, key)
    (tmp_path / "d.json").write_text(json.dumps(d))
    assert compare.load_decision(tmp_path / "d.json") == d
    (tmp_path / "x.json").write_text(json.dumps({k: d[k] for k in ("reading", "recipes")}))
    with pytest.raises(ValueError, match=r"not a hearsay compare decision \(no \['chosen', "
                                         r"'flips', 'ranking', 'readings'\]\): write it with "
                                         "hearsay compare --json"):
        compare.load_decision(tmp_path / "x.json")
    (tmp_path / "l.json").write_text("[]")
    with pytest.raises(ValueError, match="not a hearsay compare decision"):
        compare.load_decision(tmp_path / "l.json")


def test_the_cli_prints_the_decision_naming_each_recipe_s_source_and_files(tmp_path, capsys):
    from test_compare import flip_pair

    sharp, broad, key = flip_pair()
    key.to_csv(tmp_path / "key.csv", index=False)
    sharp.to_csv(tmp_path / "sharp.csv", index=False)
    broad.to_csv(tmp_path / "broad.csv", index=False)
    rc = compare.main(["--recipe", f"sharp={tmp_path / 'sharp.csv'}", "--recipe",
                       f"broad={tmp_path / 'broad.csv'}", "--key", str(tmp_path / "key.csv")])
    out, err = capsys.readouterr()
    assert rc == 0
    d = json.loads(out)                                      # no --json: the JSON on stdout
    assert out == json.dumps(d, indent=2) + "\n"
    assert d["recipes"]["sharp"]["source"] == str(tmp_path / "sharp.csv")
    assert d["recipes"]["broad"]["files"] == [str(tmp_path / "broad.csv")]
    flips = ", ".join(f["reading"] for f in d["flips"])
    assert err == f"hearsay compare: chosen sharp on {compare.RECORD}; flips under {flips}\n"
    with pytest.raises(SystemExit):                          # one recipe is no comparison
        compare.main(["--recipe", f"a={tmp_path / 'sharp.csv'}", "--key", "k.csv"])
    assert "give two or more --recipe NAME=SOURCE with distinct names" in capsys.readouterr().err
    rc = compare.main(["--recipe", f"a={tmp_path / 'sharp.csv'}", "--recipe",
                       f"b={tmp_path / 'broad.csv'}", "--key", str(tmp_path / "key.csv"),
                       "--json", str(tmp_path / "no" / "d.json")])
    assert rc == compare.EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith("hearsay compare: cannot write the decision: ")


@pytest.mark.parametrize("argv", [["--key", "k.csv"],                        # no recipe
                                  ["--recipe", "a=x.csv", "--recipe", "b=y.csv"],   # no labels
                                  ["--recipe", "a=x.csv", "--recipe", "b=y.csv", "--key", "k.csv",
                                   "--bundle", "b/"]])                       # both label sources
def test_a_usage_error_is_argparse_s_exit_2_before_anything_is_read(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        compare.main(argv)
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("usage: hearsay compare")
