"""hearsay.evaluate.readouts' two scoring readouts, on a hand-made bundle and a random-init tiny
model (seconds, no training): the codec panel scores each codec's own copies of the same holdout
clips, and the holdout variants are the fixed-seed test-length crops and the whole clips."""

import dataclasses
import types
from pathlib import Path

import numpy as np
import pytest
from fakes.fake_runs import TREE_SHA, make_bundle, make_run

from hearsay.contracts import protocol, run_dir
from hearsay.detector.logits import expit
from hearsay.detector.model import load_detector
from hearsay.evaluate import readouts
from hearsay.evaluate import score as scoring
from hearsay.util.hashing import sha256_file

CODECS = ("mp3", "opus")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("readout-bundle")
    b = make_bundle(root, n_holdout=4, n_test=3, codecs=CODECS)
    # one holdout clip lacks its opus copy: it belongs to no codec row, nor to the clean one
    m = b.manifest
    b.manifest.loc[m.index[m["fold"] == "holdout"][-1], "codec_ids"] = "mp3"
    return b


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs") / "full", job="full", fold=None)


def _direct(run: Path, bundle, rows, aug: str) -> np.ndarray:
    det, _ = load_detector(run_dir.weights_of(run).parent)
    return scoring.score_rows(det, Path(bundle.root), rows, [aug] * len(rows),
                              scoring.ScoreConfig())


def test_the_codec_panel_scores_each_codecs_own_copy_of_the_same_holdout_clips(bundle, full_run):
    df, side = readouts.score_codec_panel(bundle, full_run)
    rows, codecs = readouts.codec_panel_rows(bundle.manifest)
    assert codecs == list(CODECS) and len(rows) == 3   # the clip without opus is left out
    assert list(df.columns) == ["path", "fold", "split", "score", "logit", "codec"]
    assert len(df) == 2 * len(rows) and set(df["split"]) == {"holdout"}
    for c in CODECS:
        part = df[df["codec"] == c]
        assert list(part["path"]) == list(rows["path"]) and set(part["fold"]) == {"holdout"}
        np.testing.assert_allclose(part["logit"], _direct(full_run, bundle, rows, f"codec:{c}"))
        np.testing.assert_allclose(part["score"], expit(part["logit"].to_numpy()))
    mp3, opus = (df.loc[df["codec"] == c, "logit"].to_numpy() for c in CODECS)
    assert not np.allclose(mp3, opus)  # two copies, two inputs: not one codec scored twice
    assert side == {"run": str(full_run), "job": "full", "run_fold": None,
                    "config_hash": "cfg0",
                    "weights_sha256": sha256_file(run_dir.weights_of(full_run)),
                    "bundle_tree_sha": TREE_SHA, "split": "holdout", "fold": None,
                    "augmented": "codecs", "codecs": list(CODECS), "n_rows": 6,
                    "config": dataclasses.asdict(scoring.ScoreConfig())}


def test_a_fold_models_codec_panel_records_its_fold(bundle, tmp_path):
    run = make_run(tmp_path / "fold2", job="fold", fold=2)
    _, side = readouts.score_codec_panel(bundle, run)
    assert side["job"] == "fold" and side["run_fold"] == 2


def test_a_holdout_without_codec_copies_gives_an_empty_panel_with_the_columns(bundle, full_run):
    plain = types.SimpleNamespace(**{**vars(bundle),
                                     "manifest": bundle.manifest.assign(codec_ids="")})
    df, side = readouts.score_codec_panel(plain, full_run)
    assert df.empty and list(df.columns) == ["path", "fold", "split", "score", "logit", "codec"]
    assert side["codecs"] == [] and side["n_rows"] == 0


@pytest.mark.parametrize("variant", ["codecs", "test_length", "whole"])
def test_a_run_of_another_bundle_is_refused_by_every_readout(bundle, tmp_path, variant):
    other = make_run(tmp_path / "other", job="full", fold=None, tree_sha="o" * 40)
    with pytest.raises(scoring.ScoreRefused, match="score with the bundle the run used"):
        if variant == "codecs":
            readouts.score_codec_panel(bundle, other)
        else:
            readouts.score_holdout_variant(bundle, other, variant)


def test_test_length_crops_are_drawn_from_the_test_durations_and_repeat_exactly(bundle,
                                                                             full_run):
    df, side = readouts.score_holdout_variant(bundle, full_run, "test_length")
    again, _ = readouts.score_holdout_variant(bundle, full_run, "test_length")
    holdout = protocol.split_rows(bundle.manifest, "holdout")
    assert list(df["path"]) == list(holdout["path"]) and set(df["split"]) == {"holdout"}
    np.testing.assert_array_equal(df["logit"], again["logit"])   # the same crops every time
    np.testing.assert_allclose(df["score"], expit(df["logit"].to_numpy()))
    assert list(df.columns) == ["path", "fold", "split", "score", "logit"]
    assert set(df["fold"]) == {"holdout"}
    assert side == {"run": str(full_run),
                    "weights_sha256": sha256_file(run_dir.weights_of(full_run)),
                    "bundle_tree_sha": TREE_SHA, "split": "holdout", "fold": None,
                    "augmented": "test_length", "seed": readouts.TEST_LENGTH_SEED,
                    "n_rows": len(holdout), "config": dataclasses.asdict(scoring.ScoreConfig())}
    # each crop is as long as a test clip, or the whole holdout clip when that is shorter
    test_s = protocol.split_rows(bundle.manifest, "test")["duration"].astype(float).to_numpy()
    waves = readouts.test_length_inputs(Path(bundle.root), holdout, test_s)
    for w, dur in zip(waves, holdout["duration"].astype(float), strict=True):
        n = len(w) / 16000
        assert any(abs(n - min(t, dur)) < 0.02 for t in test_s)
    det, _ = load_detector(run_dir.weights_of(full_run).parent)
    one_by_one = [scoring.run_model(det, [w])[0] for w in waves]  # each clip's logit, unpadded
    np.testing.assert_allclose(df["logit"], one_by_one, rtol=1e-4, atol=1e-5)

def test_whole_clips_are_the_holdout_scored_up_to_fourteen_seconds(bundle, full_run):
    df, side = readouts.score_holdout_variant(bundle, full_run, "whole")
    assert side["augmented"] == "whole" and side["config"]["max_s"] == readouts.WHOLE_MAX_S
    holdout = protocol.split_rows(bundle.manifest, "holdout")
    assert list(df["path"]) == list(holdout["path"])
    np.testing.assert_allclose(df["logit"], _direct(full_run, bundle, holdout, "none"))


def test_an_unknown_holdout_variant_names_the_two_there_are(bundle, full_run):
    with pytest.raises(ValueError, match="holdout variant 'codec': test_length or whole"):
        readouts.score_holdout_variant(bundle, full_run, "codec")
