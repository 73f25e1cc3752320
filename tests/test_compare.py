"""hearsay.evaluate.compare: recipes ranked on pooled inner-fold minDCF at pi 0.3, the other
readings
beside, a flip named; holdout rows, different clips and unpinned files refused."""

import json

import numpy as np
import pandas as pd
import pytest

from hearsay.evaluate import compare


def key_of(paths, labels):
    return pd.DataFrame({"path": paths, "label": labels})


def flip_pair():
    """(sharp, broad, key): "sharp" puts 3 of 10 synthetic clips above every bona fide one and 7
    below (minDCF 0.7 at pi 0.3 and 0.5); "broad" puts all 10 between bona fide 5 and 6 (P_fa 0.4:
    minDCF 0.933 at pi 0.3, 0.4 at pi 0.5). Sharp wins at pi 0.3, broad at pi 0.5."""
    paths = [f"c{i}" for i in range(20)]
    bona = np.arange(10.0)
    mk = lambda z: pd.DataFrame({"path": paths, "fold": "0", "split": "inner_oof",  # noqa
                                 "logit": z})
    return (mk(np.r_[bona, [20.0] * 3, [-1.0] * 7]), mk(np.r_[bona, [5.5] * 10]),
            key_of(paths, ["bonafide"] * 10 + ["spoof"] * 10))


def test_the_recipe_of_record_is_chosen_and_a_flip_to_another_reading_is_named():
    sharp, broad, key = flip_pair()
    d = compare.compare({"broad": broad, "sharp": sharp}, key)
    assert d["chosen"] == "sharp" and d["ranking"] == ["sharp", "broad"]
    assert d["recipes"]["sharp"]["min_dcf"]["pi 0.3, as stated"] == pytest.approx(0.7)
    assert d["recipes"]["broad"]["min_dcf"]["pi 0.5, as stated"] == pytest.approx(0.4)
    assert d["flips"] == [{"reading": r, "best": "broad"}
                          for r in ("pi 0.3, swapped", "pi 0.5, as stated", "pi 0.5, swapped")]
    md = compare.markdown(d)
    assert "## Recipe comparison: **sharp**" in md and "**The decision flips** under" in md


def test_a_clear_winner_has_no_flip_and_a_tie_chooses_none():
    rng = np.random.default_rng(0)
    paths = [f"c{i}" for i in range(200)]
    y = np.arange(200) % 2 == 1
    key = key_of(paths, np.where(y, "spoof", "bonafide"))
    noise = rng.normal(size=200)
    good = pd.DataFrame({"path": paths, "logit": noise + 3 * y})
    bad = pd.DataFrame({"path": paths, "logit": noise + 0.5 * y})
    d = compare.compare({"bad": bad, "good": good}, key)
    assert d["chosen"] == "good" and d["flips"] == []
    assert "The same recipe is best under every reading." in compare.markdown(d)
    d = compare.compare({"a": good, "b": good.copy()}, key)
    assert d["chosen"] is None and d["ranking"] == ["a", "b"]


def test_holdout_rows_different_clips_and_duplicates_are_refused(tmp_path):
    def _write(df, name="s.csv"):
        df.to_csv(tmp_path / name, index=False)
        return tmp_path / name

    sharp, broad, key = flip_pair()
    held = sharp.copy()
    held.loc[0, "split"] = "holdout"
    with pytest.raises(compare.CompareRefused, match="never used for selection"):
        compare.recipe_scores("x", [_write(held)])
    with pytest.raises(compare.CompareRefused, match="score different clips"):
        compare.compare({"a": sharp, "b": broad.iloc[1:]}, key)
    with pytest.raises(compare.CompareRefused, match="scored twice"):
        compare.recipe_scores("x", [_write(sharp), _write(sharp, "again.csv")])


def per_run_folder(root, frame, folds=(0, 1), pin_sha=None):
    """assemble's layout: <root>/scores/fold<k>_inner_oof.csv (+ sidecars), and a pin file."""
    (root / "scores").mkdir(parents=True)
    parts = np.array_split(np.arange(len(frame)), len(folds))
    runs = {}
    for k, idx in zip(folds, parts, strict=True):
        csv = root / "scores" / f"fold{k}_inner_oof.csv"
        frame.iloc[idx].assign(fold=str(k)).to_csv(csv, index=False)
        (root / "scores" / f"fold{k}_inner_oof.csv.meta.json").write_text(json.dumps(
            {"weights_sha256": f"w{k}", "split": "inner_oof", "fold": k}))
        runs[f"fold{k}"] = {"dir": ".", "config_hash": "c", "weights_sha256": pin_sha or f"w{k}"}
    (root / "final_runs.json").write_text(json.dumps({"runs": runs}))
    return root


def test_cli_reads_pin_files_folders_and_csvs_and_writes_json_and_markdown(tmp_path, capsys):
    sharp, broad, key = flip_pair()
    key.to_csv(tmp_path / "key.csv", index=False)
    a = per_run_folder(tmp_path / "a", sharp)
    b = per_run_folder(tmp_path / "b", broad)
    broad.to_csv(tmp_path / "broad.csv", index=False)
    for sources in ((a / "final_runs.json", b), (a, tmp_path / "broad.csv"),
                    (a / "scores", b / "final_runs.json")):
        rc = compare.main(["--recipe", f"sharp={sources[0]}", "--recipe", f"broad={sources[1]}",
                           "--key", str(tmp_path / "key.csv"), "--json", str(tmp_path / "d.json"),
                           "--markdown", str(tmp_path / "d.md")])
        assert rc == 0, capsys.readouterr().err
        d = json.loads((tmp_path / "d.json").read_text())
        assert d["chosen"] == "sharp" and len(d["flips"]) == 3 and d["n_clips"] == 20
    assert "## Recipe comparison" in (tmp_path / "d.md").read_text()
    assert len(d["recipes"]["sharp"]["files"]) == 2


def test_cli_refuses_a_per_run_file_that_is_not_the_pinned_run(tmp_path, capsys):
    sharp, broad, key = flip_pair()
    key.to_csv(tmp_path / "key.csv", index=False)
    a = per_run_folder(tmp_path / "a", sharp, pin_sha="other")
    b = per_run_folder(tmp_path / "b", broad)
    rc = compare.main(["--recipe", f"a={a / 'final_runs.json'}", "--recipe", f"b={b}",
                       "--key", str(tmp_path / "key.csv")])
    assert rc == compare.EXIT_REFUSED and "the pin names other" in capsys.readouterr().err
    rc = compare.main(["--recipe", f"a={tmp_path / 'nothing'}", "--recipe", f"b={b}",
                       "--key", str(tmp_path / "key.csv")])
    assert rc == compare.EXIT_BAD_INPUT
    with pytest.raises(SystemExit):
        compare.main(["--recipe", f"a={b}", "--recipe", f"a={b}", "--key", "k.csv"])
