"""hearsay.evaluate.gate: holdout and out-of-fold judged apart, probe against the bar's own rate,
stream
shortcuts, four readings and their flips - on synthetic score frames with known answers."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from hearsay import metrics
from hearsay.evaluate import gate

GOOD_SHORTCUTS = {"stream_shortcuts": {"per_source": {
    "studio": {"auc": {"duration_s": 0.52, "peak": 0.6, "lead_silence_s": 0.4}},
    "all": {"auc": {"duration_s": 0.5, "peak": 0.55, "lead_silence_s": 0.45}}}}}


def frame(prefix, split, n, sep, seed):
    """(scores, key) of n clips, half synthetic, logits separated by `sep`."""
    rng = np.random.default_rng(seed)
    label = np.where(np.arange(n) % 2, "spoof", "bonafide")
    logit = rng.normal(size=n) + sep * (label == "spoof")
    paths = [f"{prefix}{i}" for i in range(n)]
    scores = pd.DataFrame({"path": paths, "fold": "0" if split == "inner_oof" else split,
                           "split": split, "logit": logit, "score": 1 / (1 + np.exp(-logit))})
    return scores, pd.DataFrame({"path": paths, "label": label})


def campaign(oof_sep, hold_sep, seed=0, n_oof=400, n_hold=60):
    oof, k1 = frame("o", "inner_oof", n_oof, oof_sep, seed)
    hold, k2 = frame("h", "holdout", n_hold, hold_sep, seed + 1)
    return oof, hold, pd.concat([k1, k2], ignore_index=True)


def bar_dir(tmp_path, name, oof, hold, probe_fa=None, probe_file=None):
    d = tmp_path / name
    d.mkdir()
    pd.concat([oof, hold]).to_csv(d / "scores.csv", index=False)
    meta = {"name": name}
    if probe_fa is not None:
        meta["probe"] = {"false_alarm_rate": probe_fa,
                         "set_sha256": gate.probe_set_sha(gate.read_scores(probe_file))}
    (d / "meta.json").write_text(json.dumps(meta))
    return gate.load_bar(d)


@pytest.fixture
def probe(tmp_path):
    p = tmp_path / "probe.csv"
    pd.DataFrame({"path": [f"w{i}" for i in range(20)],
                  "logit": np.linspace(-2, 4, 20)}).to_csv(p, index=False)
    return p, gate.read_scores(p)


def ours_probe_fa(oof, key, probe_frame):
    return gate.probe_reading(oof, key, probe_frame, None)["false_alarm_rate"]


def test_a_bar_beaten_on_both_with_no_worse_probe_and_no_shortcut_passes(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    fa = ours_probe_fa(oof, key, probe[1])
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold, probe_fa=fa, probe_file=probe[0])
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["outcome"] == "pass", g["why"]
    st = g["bars"][0]["stages"]
    assert st["holdout"]["outcome"] == st["out-of-fold"]["outcome"] == "pass"
    assert set(st["holdout"]["readings"]) == {metrics.reading_name(*r) for r in metrics.READINGS}
    assert len(metrics.READINGS) == 4


def test_a_bar_that_wins_on_holdout_fails_the_gate_though_the_pooled_minDCF_is_ours(tmp_path,
                                                                                    probe):
    oof, hold, key = campaign(3.0, 0.2)  # ours: strong out-of-fold, weak on the holdout
    b_oof, b_hold, _ = campaign(1.5, 1.5, seed=7)
    pooled = metrics.evaluate(pd.concat([oof, hold]), key)["min_dcf"]
    bar_pooled = metrics.evaluate(pd.concat([b_oof, b_hold]), key)["min_dcf"]
    assert pooled < bar_pooled  # the old pooled gate would have passed this campaign
    fa = ours_probe_fa(oof, key, probe[1])
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold, probe_fa=fa, probe_file=probe[0])
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    st = g["bars"][0]["stages"]
    assert st["out-of-fold"]["outcome"] == "pass" and st["holdout"]["outcome"] == "fail"
    assert g["outcome"] == "fail"
    # and the other way round: winning the holdout does not make up for losing out-of-fold
    oof, hold, key = campaign(0.2, 3.0)
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["bars"][0]["stages"]["out-of-fold"]["outcome"] == "fail" and g["outcome"] == "fail"


def test_probe_false_alarms_worse_than_the_bars_own_fail_equal_passes(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    fa = ours_probe_fa(oof, key, probe[1])
    assert 0 < fa < 1
    for bar_fa, want in ((fa, "pass"), (fa - 0.05, "fail"), (fa + 0.05, "pass")):
        shutil.rmtree(tmp_path / "b", ignore_errors=True)
        bar = bar_dir(tmp_path, "b", b_oof, b_hold, probe_fa=bar_fa, probe_file=probe[0])
        g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
        assert g["bars"][0]["probe"]["outcome"] == want and g["outcome"] == want, g["why"]
        assert g["bars"][0]["probe"]["bar"] == bar_fa  # the bar's OWN rate, from its meta.json


def test_probe_is_not_measured_without_the_bars_rate_or_on_another_probe_file(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "nometa", b_oof, b_hold)
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["outcome"] == "not measured" and "no probe false-alarm rate" in g["why"]
    other = tmp_path / "other_probe.csv"
    other.write_text("path,logit\nz,0\n")  # other clips
    bar = bar_dir(tmp_path, "otherprobe", b_oof, b_hold, probe_fa=1.0, probe_file=other)
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["outcome"] == "not measured" and "other probe clips" in g["why"]
    rescored = tmp_path / "rescored_probe.csv"  # the same clips scored by another detector
    probe[1].assign(logit=-probe[1]["logit"]).to_csv(rescored, index=False)
    bar = bar_dir(tmp_path, "sameclips", b_oof, b_hold, probe_fa=1.0, probe_file=rescored)
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["bars"][0]["probe"]["outcome"] == "pass"
    (tmp_path / "nosha").mkdir()
    pd.concat([b_oof, b_hold]).to_csv(tmp_path / "nosha" / "scores.csv", index=False)
    (tmp_path / "nosha" / "meta.json").write_text(json.dumps(
        {"name": "nosha", "probe": {"false_alarm_rate": 1.0}}))
    g = gate.judge(oof, hold, key, [gate.load_bar(tmp_path / "nosha")], probe[1], probe[0],
                   {"full": GOOD_SHORTCUTS})
    assert g["outcome"] == "not measured" and "names no probe set" in g["why"]
    bar = bar_dir(tmp_path, "ok", b_oof, b_hold, probe_fa=1.0, probe_file=probe[0])
    assert gate.judge(oof, hold, key, [bar], None, None, {"full": GOOD_SHORTCUTS})[
        "outcome"] == "not measured"  # no probe set: the check cannot be measured


def test_a_bar_missing_our_clips_or_its_folder_is_not_measured(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "short", b_oof.iloc[5:], b_hold, probe_fa=1.0, probe_file=probe[0])
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["outcome"] == "not measured" and "5 of our clips" in g["why"]
    g = gate.judge(oof, hold, key, [gate.load_bar(tmp_path / "nowhere")], probe[1], probe[0], {})
    assert g["outcome"] == "not measured" and "meta.json missing" in g["why"]
    assert gate.judge(oof, hold, key, [], None, None, {})["outcome"] == "not measured"


def flip_frames(prefix, split):
    """Ours wins at pi 0.3 (few false alarms matter) and loses at pi 0.5 (known by hand):
    ours: 3 of 10 synthetic clips above every bona fide one, 7 below -> minDCF 0.7 at both pi;
    bar: every synthetic clip between bona fide 5 and 6 -> P_miss 0, P_fa 0.4: minDCF 0.933 at
    pi 0.3, 0.4 at pi 0.5."""
    bona = np.arange(10.0)
    ours = np.r_[bona, [20.0] * 3, [-1.0] * 7]
    bar = np.r_[bona, [5.5] * 10]
    paths = [f"{prefix}{i}" for i in range(20)]
    key = pd.DataFrame({"path": paths, "label": ["bonafide"] * 10 + ["spoof"] * 10})
    mk = lambda z: pd.DataFrame({"path": paths, "fold": "0", "split": split, "logit": z})  # noqa
    return mk(ours), mk(bar), key


def test_a_decision_that_flips_between_readings_is_flagged(tmp_path, probe):
    o, bo, k1 = flip_frames("o", "inner_oof")
    h, bh, k2 = flip_frames("h", "holdout")
    key = pd.concat([k1, k2], ignore_index=True)
    bar = bar_dir(tmp_path, "bar", bo, bh, probe_fa=1.0, probe_file=probe[0])
    g = gate.judge(o, h, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    r = g["bars"][0]["stages"]["holdout"]["readings"]
    assert r["pi 0.3, as stated"]["ours"] == pytest.approx(0.7)
    assert r["pi 0.3, as stated"]["bar"] == pytest.approx(0.7 / 0.3 * 0.4)
    assert r["pi 0.5, as stated"]["bar"] == pytest.approx(0.4)
    assert g["outcome"] == "pass"  # decided at the reading of record...
    assert g["flips"] == ["pi 0.3, swapped", "pi 0.5, as stated", "pi 0.5, swapped"]  # ...flagged
    md = "\n".join(gate.markdown(g))
    assert "**The decision flips** under: pi 0.3, swapped" in md and "(of record)" in md
    # no flip when the same scores are the bar (ours never beats: every reading says no)
    same = bar_dir(tmp_path, "same", o, h, probe_fa=1.0, probe_file=probe[0])
    assert gate.judge(o, h, key, [same], probe[1], probe[0], {})["bars"][0]["flips"] == []


def test_the_second_bar_is_reported_beside_and_never_gates(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    weak_oof, weak_hold, _ = campaign(1.0, 1.0, seed=7)
    strong = bar_dir(tmp_path, "strong", oof, hold, probe_fa=1.0, probe_file=probe[0])
    weak = bar_dir(tmp_path, "weak", weak_oof, weak_hold, probe_fa=1.0, probe_file=probe[0])
    g = gate.judge(oof, hold, key, [weak, strong], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["outcome"] == "pass" and g["bars"][1]["outcome"] == "fail"
    assert "### Bar 2 (beside (not gating)): strong: fail" in "\n".join(gate.markdown(g))
    g = gate.judge(oof, hold, key, [strong, weak], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    assert g["outcome"] == "fail"


@pytest.mark.parametrize("auc,want", [(0.84, "pass"), (0.85, "fail"), (0.1, "fail"),
                                      (None, "not measured")])
def test_stream_shortcut_aucs_are_gated_at_the_bound_both_ways(auc, want):
    metas = {"fold0": GOOD_SHORTCUTS,
             "full": {"stream_shortcuts": {"per_source": {"phone": {"auc": {"peak": auc}}}}}}
    s = gate.shortcut_check(metas)
    assert s["outcome"] == want and s["bound"] == gate.SHORTCUT_BOUND == 0.85
    assert gate.shortcut_check({"full": {}})["outcome"] == "not measured"


def test_a_flagged_shortcut_fails_a_gate_that_beats_the_bar(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold, probe_fa=1.0, probe_file=probe[0])
    bad = {"stream_shortcuts": {"per_source": {"all": {"auc": {"duration_s": 0.97}}}}}
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"fold0": GOOD_SHORTCUTS,
                                                                "full": bad})
    assert g["bars"][0]["outcome"] == "pass" and g["outcome"] == "fail"
    assert "full/all/duration_s AUC 0.970" in g["why"]


def test_bar_record_is_the_probe_rate_at_the_detectors_own_oof_threshold(tmp_path, probe):
    oof, _, key = campaign(3.0, 3.0)
    rec = gate.bar_record("x", oof, key, probe[1], probe[0])
    j = metrics.join(oof, key)
    thr = metrics.compute(j["rank"], j["is_spoof"])["min_dcf_threshold"]
    assert rec["probe"]["threshold"] == thr
    assert rec["probe"]["false_alarm_rate"] == pytest.approx(np.mean(probe[1]["logit"] >= thr))
    assert rec["probe"]["set_sha256"] == gate.probe_set_sha(probe[1].iloc[::-1])  # order-free
