"""hearsay.evaluate.bar: an earlier detector's score file + meta.json -> the bar folder, chosen by
a named
field (never the newest), refused when its rows are not our holdout / inner rows."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from hearsay.evaluate import bar, gate

FOLDS = ["0", "1", "2", "3", "4"] * 8 + ["holdout"] * 10 + ["test"] * 6


@pytest.fixture
def manifest():
    n = len(FOLDS)
    return pd.DataFrame({"id": [f"c{i}" for i in range(n)],
                         "path": [f"clips/c{i}.flac" for i in range(n)],
                         "label": np.where(np.arange(n) % 2, "spoof", "bonafide"),
                         "generator": "g", "source": "s", "group": "x", "fold": FOLDS,
                         "train_scope": "core", "duration": 3.0})


def candidate(root, name, meta, manifest, drop=(), extra_holdout=(), mtime=None):
    """An earlier detector's folder: scores.csv over every row of `manifest` (less `drop`),
    plus rows it calls holdout that are not ours."""
    d = root / name
    d.mkdir(parents=True)
    rows = manifest[~manifest["path"].isin(drop)][["path", "fold"]].copy()
    rows["split"] = rows["fold"].map(lambda f: f if f in ("holdout", "test") else "inner_oof")
    rows = pd.concat([rows, pd.DataFrame({"path": list(extra_holdout), "fold": "holdout",
                                          "split": "holdout"})])
    rows["logit"] = np.random.default_rng(len(name)).normal(size=len(rows))
    rows.to_csv(d / "scores.csv", index=False)
    (d / "meta.json").write_text(json.dumps({"name": name, **meta}))
    if mtime is not None:
        for f in (d / "scores.csv", d / "meta.json", d):
            os.utime(f, (mtime, mtime))
    return d


def test_the_bar_is_the_candidate_named_by_the_field_not_the_newest(tmp_path, manifest):
    root = tmp_path / "earlier"
    candidate(root, "old_la", {"train": "asvspoof2019-la"}, manifest, mtime=1_000_000)
    candidate(root, "new_mix", {"train": "mixed"}, manifest, mtime=2_000_000_000)
    meta = bar.build([root], "train", "asvspoof2019-la", manifest, tmp_path / "bar")
    assert meta["name"] == "old_la" and meta["train"] == "asvspoof2019-la"
    assert meta["picked_by"] == {"field": "train", "value": "asvspoof2019-la"}
    loaded = gate.load_bar(tmp_path / "bar")  # the gate reads what the command wrote
    assert loaded["why"] is None and loaded["name"] == "old_la"
    assert set(loaded["scores"]["path"]) == set(manifest["path"][~manifest["fold"].eq("test")])


def test_a_rerun_into_a_bar_folder_among_the_candidates_picks_the_detector_again(tmp_path,
                                                                               manifest):
    root = tmp_path / "earlier"
    candidate(root, "la", {"train": "la"}, manifest)
    for _ in range(2):  # the bar folder, written under --from, carries train=la as well
        assert bar.build([root], "train", "la", manifest, root / "bar")["name"] == "la"


def test_a_nested_field_picks_and_an_ambiguous_or_absent_value_is_refused(tmp_path, manifest):
    root = tmp_path / "earlier"
    candidate(root, "a", {"train": "la", "runs": {"full": {"config_hash": "abc"}}}, manifest)
    candidate(root, "b", {"train": "la"}, manifest)
    assert bar.build([root], "runs.full.config_hash", "abc", manifest,
                     tmp_path / "bar")["name"] == "a"
    with pytest.raises(bar.BarRefused, match="2 candidates have train='la'"):
        bar.build([root], "train", "la", manifest, tmp_path / "bar2")
    with pytest.raises(bar.BarRefused, match="no candidate has train='itw'.*train='la'"):
        bar.build([root], "train", "itw", manifest, tmp_path / "bar3")


def test_a_score_file_missing_holdout_rows_is_refused_naming_them(tmp_path, manifest):
    gone = ["clips/c41.flac", "clips/c45.flac"]
    assert set(manifest.set_index("path").loc[gone, "fold"]) == {"holdout"}
    root = tmp_path / "earlier"
    candidate(root, "short", {"train": "la"}, manifest, drop=gone)
    with pytest.raises(bar.BarRefused, match=r"holdout: .*2 of ours missing.*c41\.flac, "
                                             r"clips/c45\.flac"):
        bar.build([root], "train", "la", manifest, tmp_path / "bar")
    assert not (tmp_path / "bar").exists()


def test_a_score_file_with_one_holdout_row_too_many_is_refused(tmp_path, manifest):
    root = tmp_path / "earlier"
    candidate(root, "other", {"train": "la"}, manifest, extra_holdout=["clips/theirs.flac"])
    with pytest.raises(bar.BarRefused, match=r"1 in its holdout not in ours.*theirs\.flac"):
        bar.build([root], "train", "la", manifest, tmp_path / "bar")


def test_a_score_file_missing_an_inner_row_is_refused(tmp_path, manifest):
    root = tmp_path / "earlier"
    candidate(root, "short", {"train": "la"}, manifest, drop=["clips/c0.flac"])
    with pytest.raises(bar.BarRefused, match=r"inner: .*1 of ours missing.*c0\.flac"):
        bar.build([root], "train", "la", manifest, tmp_path / "bar")


def test_the_bar_records_the_holdout_set_sha_and_its_own_probe_rate(tmp_path, manifest):
    root = tmp_path / "earlier"
    probe_paths = [f"clips/c{i}.flac" for i in range(50, 56)]  # the test rows
    candidate(root, "la", {"train": "la"}, manifest)
    probe = tmp_path / "probe.csv"
    pd.DataFrame({"path": probe_paths, "logit": 0.0}).to_csv(probe, index=False)
    meta = bar.build([root], "train", "la", manifest, tmp_path / "bar", probe=probe)
    hold = manifest[manifest["fold"] == "holdout"]
    assert meta["holdout"] == {"n": 10, "set_sha256": gate.probe_set_sha(hold)}
    assert meta["probe"]["set_sha256"] == gate.probe_set_sha(pd.DataFrame({"path": probe_paths}))
    assert meta["probe"]["false_alarm_rate"] is not None


def test_the_command_writes_two_bars_side_by_side_and_exits_4_on_refusal(tmp_path, manifest,
                                                                         capsys, monkeypatch):
    class Bundle:
        pass

    b = Bundle()
    b.manifest = manifest
    monkeypatch.setattr("hearsay.contracts.bundle.load_bundle", lambda root: b)
    root = tmp_path / "earlier"
    candidate(root, "la", {"train": "la"}, manifest)
    candidate(root, "itw", {"train": "itw"}, manifest, drop=["clips/c40.flac"])
    args = ["--from", str(root), "--bundle", "B", "--pick", "train=la",
            "--out", str(tmp_path / "b1")]
    assert bar.main(args) == bar.EXIT_OK
    assert bar.main(args + ["--pick2", "train=la", "--out2", str(tmp_path / "b2")]) == 0
    out = capsys.readouterr().out
    assert "bar 1 (gates)" in out and "bar 2 (beside)" in out
    assert bar.main(args + ["--pick2", "train=itw", "--out2", str(tmp_path / "b3")]) == 4
    assert "refused: holdout" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # --pick2 without --out2: usage
        bar.main(args + ["--pick2", "train=la"])
