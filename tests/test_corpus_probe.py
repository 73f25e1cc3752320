"""hearsay.evaluate.corpus_probe: handcrafted features, the gradient-boosted corpus probe, the drop
rule."""

import json

import numpy as np
import pytest
import soundfile as sf

from hearsay.evaluate import corpus_probe as cp

SR = 16000


def tone(seconds, lead=0.0, trail=0.0, f=220.0, level=0.3, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    x = level * np.sin(2 * np.pi * f * t) + 0.01 * rng.normal(size=len(t))
    return np.r_[np.zeros(int(lead * SR)), x, np.zeros(int(trail * SR))].astype(np.float32)


def test_features_measure_silence_level_and_spectrum():
    f = cp.features(tone(1.0, lead=0.5, trail=0.25, f=1000.0))
    assert f["duration_s"] == pytest.approx(1.75)
    assert f["lead_silence_s"] == pytest.approx(0.5, abs=0.03)
    assert f["trail_silence_s"] == pytest.approx(0.25, abs=0.03)
    assert f["rms_dbfs"] == pytest.approx(20 * np.log10(0.3 / np.sqrt(2)), abs=0.5)
    assert f["centroid_hz"] == pytest.approx(1000.0, rel=0.1)
    assert f["rolloff85_hz"] == pytest.approx(1000.0, rel=0.1)
    assert set(f) == set(cp.FEATURES)


def test_a_corpus_with_its_own_silence_is_separable_and_a_like_one_is_not(tmp_path):
    rows = ["id,path,label,generator,source,group,fold,train_scope"]
    for i in range(36):
        src = ("x", "a", "b")[i % 3]
        lead = 0.6 if src == "x" else 0.0  # corpus x: long leading silence, nothing else
        x = tone(np.random.default_rng(i).uniform(0.8, 1.6), lead=lead,
                 f=np.random.default_rng(100 + i).uniform(150, 300), seed=i)
        sf.write(tmp_path / f"c{i}.wav", x, SR)
        rows.append(f"c{i},c{i}.wav,bonafide,bonafide,{src},g{i},0,core")
    (tmp_path / "manifest.csv").write_text("\n".join(rows) + "\n")
    out = cp.probe_manifest(tmp_path / "manifest.csv", "x")
    assert out["auc"] > 0.95 and out["separable"] and out["n_corpus"] == 12
    assert out["grouped"] and out["bound"] == 0.85
    rc = cp.main([str(tmp_path / "manifest.csv"), "--corpus", "a", "--json",
                  str(tmp_path / "a.json")])
    assert rc == 0 and json.loads((tmp_path / "a.json").read_text())["corpus"] == "a"
    assert cp.main([str(tmp_path / "manifest.csv"), "--corpus", "nope"]) == cp.EXIT_BAD_INPUT


def test_features_drawn_alike_are_not_separable():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(200, len(cp.FEATURES)))
    out = cp.separability(table, np.arange(200) % 4 == 0)
    assert out["strength"] < 0.65 and out["n_corpus"] == 50
    with pytest.raises(cp.ProbeError, match="need 10"):
        cp.separability(table[:20], np.arange(20) % 4 == 0)


@pytest.mark.parametrize("without,with_,drop", [(0.030, 0.041, True), (0.030, 0.040, False),
                                                (0.030, 0.020, False)])
def test_the_drop_rule_drops_a_corpus_that_raises_false_alarms_over_one_point(without, with_,
                                                                              drop):
    r = cp.drop_rule(without, with_)
    assert r["drop"] is drop and r["delta_points"] == pytest.approx(100 * (with_ - without))
    assert cp.main(["--drop-rule", "--fa-without", str(without), "--fa-with", str(with_)]) == 0
