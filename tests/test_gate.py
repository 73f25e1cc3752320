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


def test_a_bar_folder_reads_its_named_score_file_relative_or_absolute_else_scores_csv(tmp_path):
    oof, hold, _ = campaign(1.0, 1.0)
    d = tmp_path / "stamp"
    d.mkdir()
    pd.concat([oof, hold]).to_csv(d / "mine.csv", index=False)
    (d / "meta.json").write_text(json.dumps({"name": "old", "scores_csv": "mine.csv"}))
    bar = gate.load_bar(d)
    assert {k: v for k, v in bar.items() if k != "scores"} == {
        "dir": str(d), "name": "old", "meta": {"name": "old", "scores_csv": "mine.csv"},
        "why": None, "scores_csv": str(d / "mine.csv")}
    assert len(bar["scores"]) == len(oof) + len(hold)
    (d / "meta.json").write_text(json.dumps({"scores_csv": str(d / "mine.csv")}))  # absolute
    bar = gate.load_bar(d)
    assert bar["name"] == "stamp" and bar["scores_csv"] == str(d / "mine.csv")  # no name: folder
    (d / "meta.json").write_text(json.dumps({"name": "old"}))
    pd.concat([oof, hold]).to_csv(d / "scores.csv", index=False)
    assert gate.load_bar(d)["scores_csv"] == str(d / "scores.csv")  # none named: scores.csv
    (d / "meta.json").write_text(json.dumps({"scores_csv": "/gone/elsewhere.csv"}))
    assert gate.load_bar(d)["scores_csv"] == str(d / "scores.csv")  # named one gone: scores.csv


def test_a_bar_folder_without_meta_or_score_file_says_which_without_its_path(tmp_path):
    bar = gate.load_bar(tmp_path / "nowhere")
    assert bar == {"dir": str(tmp_path / "nowhere"), "name": "nowhere", "meta": {},
                   "scores": None, "why": "nowhere/meta.json missing (the bar folder is "
                   "models/<stamp>/ of its campaign)"}
    d = tmp_path / "stamp"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"name": "old", "scores_csv": "mine.csv"}))
    bar = gate.load_bar(d)
    assert bar["scores"] is None and bar["name"] == "old"
    assert bar["why"] == "the bar's score file mine.csv is missing"
    g = gate.judge(*campaign(1.0, 1.0), [bar])
    assert g["bars"][0] == {"name": "old", "dir": str(d), "outcome": "not measured",
                            "why": "the bar's score file mine.csv is missing"}


def test_bar_record_names_the_detector_its_score_file_and_the_probe_file(tmp_path, probe):
    oof, _, key = campaign(3.0, 3.0)
    rec = gate.bar_record("old", oof, key, probe[1], probe[0])
    assert rec == {"name": "old", "scores_csv": "scores.csv",
                   "probe": gate.probe_reading(oof, key, probe[1], probe[0])}
    assert rec["probe"]["file"] == str(probe[0]) and rec["probe"]["n"] == 20
    assert rec["probe"]["reading"] == "pi 0.3, as stated"


def test_every_reading_compares_ours_and_the_bars_minDCF_at_that_reading(tmp_path, probe):
    o, bo, k1 = flip_frames("o", "inner_oof")
    h, bh, k2 = flip_frames("h", "holdout")
    key = pd.concat([k1, k2], ignore_index=True)
    bar = bar_dir(tmp_path, "bar", bo, bh, probe_fa=1.0, probe_file=probe[0])
    g = gate.judge(o, h, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    for stage, ours, theirs in (("holdout", h, bh), ("out-of-fold", o, bo)):
        readings = g["bars"][0]["stages"][stage]["readings"]
        for pi, d in metrics.READINGS:
            r = readings[metrics.reading_name(pi, d)]
            a, b = metrics.join(ours, key), metrics.join(theirs, key)
            assert r["ours"] == metrics.min_dcf_reading(a["rank"], a["is_spoof"], pi, d)[0]
            assert r["bar"] == metrics.min_dcf_reading(b["rank"], b["is_spoof"], pi, d)[0]
            assert r["margin"] == pytest.approx(r["bar"] - r["ours"])
            assert r["beats"] is (r["ours"] < r["bar"])
    swapped = g["bars"][0]["stages"]["holdout"]["readings"]["pi 0.3, swapped"]
    assert swapped["bar"] != g["bars"][0]["stages"]["holdout"]["readings"][
        "pi 0.3, as stated"]["bar"]  # the direction reaches the bar's reading too


def test_a_stage_with_one_class_only_is_not_measured_never_won_or_lost(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold, probe_fa=1.0, probe_file=probe[0])
    bona_only = hold[hold["path"].isin(key.loc[key["label"] == "bonafide", "path"])]
    g = gate.judge(oof, bona_only, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    st = g["bars"][0]["stages"]["holdout"]
    assert st["outcome"] == "not measured" and st["why"] == (
        "holdout: minDCF undefined (one class only)")
    assert st["n_spoof"] == 0 and st["n_bonafide"] == len(bona_only)
    assert all(r == {"ours": None, "bar": None, "margin": None, "beats": None}
               for r in st["readings"].values())
    assert g["bars"][0]["flips"] == [] and g["outcome"] == "not measured"


def test_a_stage_names_its_figures_and_clip_counts(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold, probe_fa=1.0, probe_file=probe[0])
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS})
    st = g["bars"][0]["stages"]["holdout"]
    rec = st["readings"][gate.RECORD]
    assert (st["n_bonafide"], st["n_spoof"]) == (30, 30)
    assert st["why"] == (f"holdout: minDCF ours {rec['ours']:.4f} vs bar {rec['bar']:.4f} "
                         f"(margin {rec['margin']:+.4f}, 30 bona fide + 30 synthetic)")
    assert g["bars"][0]["why"] == "; ".join([st["why"], g["bars"][0]["stages"]["out-of-fold"][
        "why"], g["bars"][0]["probe"]["why"]])
    assert g["why"] == (f"against bar: {g['bars'][0]['why']}; {g['shortcuts']['why']}")
    assert (g["reading"], g["metric"]) == ("pi 0.3, as stated", "min_dcf")
    assert g["readings"] == ["pi 0.3, as stated", "pi 0.3, swapped", "pi 0.5, as stated",
                             "pi 0.5, swapped"]


def gate_doc(bars, probe=None):
    """A judged gate as judge() returns it, by hand: every figure known."""
    return {"outcome": "fail", "reading": gate.RECORD, "why": "WHY", "bars": bars,
            "readings": [metrics.reading_name(*r) for r in metrics.READINGS], "probe": probe,
            "shortcuts": {"bound": 0.85, "outcome": "pass", "why": "SHORTCUTS"}}


def stage(ours, bar):
    names = [metrics.reading_name(*r) for r in metrics.READINGS]
    return {"readings": {n: {"ours": ours + i, "bar": bar, "beats": ours + i < bar}
                         for i, n in enumerate(names)}}


def test_the_report_section_states_the_rule_each_bar_its_readings_probe_and_shortcuts():
    flipping = {"name": "b1", "outcome": "pass", "flips": ["pi 0.5, swapped", "pi 0.3, swapped"],
                "stages": {"holdout": stage(0.1, 0.2), "out-of-fold": {"why": "no readings"}},
                "probe": {"why": "PROBE1"}}
    unread = {"name": "b2", "outcome": "not measured", "why": "B2 UNREAD"}
    steady = {"name": "b3", "outcome": "fail", "flips": [], "probe": {"why": "PROBE3"},
              "stages": {"holdout": stage(0.5, 0.25), "out-of-fold": stage(0.5, 0.25)}}
    probe = {"file": "/deep/path/probe.csv", "n": 20, "false_alarm_rate": 0.25, "threshold": None}
    assert gate.markdown(gate_doc([flipping, unread, steady], probe)) == [
        "## Gate: **fail** (minDCF at pi 0.3, as stated; holdout and out-of-fold each below the "
        "bar's, probe false alarms no worse than the bar's own, no stream shortcut)", "",
        "The bar: b1. It is the bar because a campaign is worth shipping only if it beats the "
        "detector it would replace, on exactly the same clips.", "", "WHY", "",
        "### Bar 1 (gate): b1: pass", "",
        "| reading | holdout ours | holdout bar | beats | OOF ours | OOF bar | beats |",
        "|---|---|---|---|---|---|---|",
        "| pi 0.3, as stated (of record) | 0.1000 | 0.2000 | True | - | - | None |",
        "| pi 0.3, swapped | 1.1000 | 0.2000 | False | - | - | None |",
        "| pi 0.5, as stated | 2.1000 | 0.2000 | False | - | - | None |",
        "| pi 0.5, swapped | 3.1000 | 0.2000 | False | - | - | None |", "",
        "- PROBE1", "- **The decision flips** under: pi 0.5, swapped, pi 0.3, swapped.", "",
        "### Bar 2 (beside (not gating)): b2: not measured", "", "B2 UNREAD", "",
        "### Bar 3 (beside (not gating)): b3: fail", "",
        "| reading | holdout ours | holdout bar | beats | OOF ours | OOF bar | beats |",
        "|---|---|---|---|---|---|---|",
        "| pi 0.3, as stated (of record) | 0.5000 | 0.2500 | False | 0.5000 | 0.2500 | False |",
        "| pi 0.3, swapped | 1.5000 | 0.2500 | False | 1.5000 | 0.2500 | False |",
        "| pi 0.5, as stated | 2.5000 | 0.2500 | False | 2.5000 | 0.2500 | False |",
        "| pi 0.5, swapped | 3.5000 | 0.2500 | False | 3.5000 | 0.2500 | False |", "",
        "- PROBE3", "- The decision is the same under every reading.", "",
        "Probe (probe.csv, n=20): our false-alarm rate 0.2500 at the out-of-fold minDCF "
        "threshold -.", "",
        "Stream shortcuts (bound 0.85): pass: SHORTCUTS.", ""]


def test_the_report_section_names_a_given_bar_note_an_unnamed_probe_and_a_missing_bar():
    probe = {"file": None, "n": 3, "false_alarm_rate": None, "threshold": 1.23456}
    lines = gate.markdown(gate_doc([], probe), bar_note="models/old (picked by name)")
    assert lines[2].startswith("The bar: models/old (picked by name). It is the bar because")
    assert ("Probe (in memory, n=3): our false-alarm rate - at the out-of-fold minDCF threshold "
            "1.2346.") in lines
    assert gate.markdown(gate_doc([]))[2].startswith("The bar: none given. It is")
    assert not any(line.startswith("Probe") for line in gate.markdown(gate_doc([])))


def test_the_probe_check_records_both_rates_and_sets_and_says_why_in_each_case():
    ours = {"false_alarm_rate": 0.2, "set_sha256": "s1"}
    assert gate._probe_check(None, {}) == {
        "outcome": "not measured", "why": "probe: no probe set given (--probe)"}
    cases = [({}, "not measured", "probe: the bar's meta.json holds no probe false-alarm rate"),
             ({"false_alarm_rate": 0.3}, "not measured",
              "probe: the bar's probe record names no probe set (set_sha256)"),
             ({"false_alarm_rate": 0.3, "set_sha256": "s2"}, "not measured",
              "probe: the bar's rate was read on other probe clips (set_sha256 differs)"),
             ({"false_alarm_rate": 0.3, "set_sha256": "s1"}, "pass",
              "probe false alarms ours 0.2000 vs the bar's own 0.3000 (no worse)"),
             ({"false_alarm_rate": 0.1, "set_sha256": "s1"}, "fail",
              "probe false alarms ours 0.2000 vs the bar's own 0.1000 (WORSE)")]
    for theirs, outcome, why in cases:
        assert gate._probe_check(ours, {"probe": theirs}) == {
            "ours": 0.2, "bar": theirs.get("false_alarm_rate"), "set_sha256": "s1",
            "bar_set_sha256": theirs.get("set_sha256"), "outcome": outcome, "why": why}
    unknown = gate._probe_check({"false_alarm_rate": None, "set_sha256": "s1"},
                                {"probe": {"false_alarm_rate": 0.3, "set_sha256": "s1"}})
    assert (unknown["outcome"], unknown["why"]) == ("not measured",
                                                    "probe: our false-alarm rate is unknown")


def test_a_bar_missing_one_of_our_clips_names_it(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "short", b_oof, b_hold.iloc[1:], probe_fa=1.0, probe_file=probe[0])
    st = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {})["bars"][0]["stages"]
    assert st["holdout"] == {"n_bonafide": 30, "n_spoof": 30, "outcome": "not measured",
                             "why": "holdout: the bar scores 1 of our clips not at all, "
                                    "e.g. 'h0'"}
    assert st["out-of-fold"]["outcome"] == "pass"


def test_a_bar_that_scored_a_clip_twice_is_judged_on_its_first_score(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    once = bar_dir(tmp_path, "once", b_oof, b_hold, probe_fa=1.0, probe_file=probe[0])
    again = b_hold.iloc[:10].assign(logit=-b_hold["logit"].iloc[:10] * 5)  # rescored, later rows
    twice = bar_dir(tmp_path, "twice", b_oof, pd.concat([b_hold, again]), probe_fa=1.0,
                    probe_file=probe[0])
    g1, g2 = (gate.judge(oof, hold, key, [b], probe[1], probe[0], {})["bars"][0]["stages"]
              for b in (once, twice))
    assert g2["holdout"]["readings"] == g1["holdout"]["readings"]


def test_no_decision_is_taken_and_nothing_flips_while_a_stage_has_no_readings(tmp_path, probe):
    o, bo, k1 = flip_frames("o", "inner_oof")  # out-of-fold alone would flip (test above)
    h, bh, k2 = flip_frames("h", "holdout")
    key = pd.concat([k1, k2], ignore_index=True)
    unread = bar_dir(tmp_path, "unread", bo, bh.iloc[1:], probe_fa=1.0, probe_file=probe[0])
    g = gate.judge(o, h, key, [unread], probe[1], probe[0], {})
    assert "readings" not in g["bars"][0]["stages"]["holdout"] and g["flips"] == []
    one_class = h[key.set_index("path").loc[h["path"], "label"].to_numpy() == "spoof"]
    bar = bar_dir(tmp_path, "bar", bo, bh, probe_fa=1.0, probe_file=probe[0])
    g = gate.judge(o, one_class, key, [bar], probe[1], probe[0], {})
    assert g["bars"][0]["stages"]["holdout"]["readings"][gate.RECORD]["beats"] is None
    assert g["flips"] == [] and g["bars"][0]["flips"] == []


def test_the_gate_names_its_probe_file_and_no_bar_and_an_unread_bar_has_no_flips(tmp_path,
                                                                                 probe):
    oof, hold, key = campaign(3.0, 3.0)
    g = gate.judge(oof, hold, key, [], probe[1], probe[0], {})
    assert (g["outcome"], g["why"]) == ("not measured", "no bar given (--bar DIR)")
    assert g["probe"] == gate.probe_reading(oof, key, probe[1], probe[0])
    assert g["probe"]["file"] == str(probe[0])
    g = gate.judge(oof, hold, key, [gate.load_bar(tmp_path / "none")], probe[1], probe[0], {})
    assert g["flips"] == [] and g["bars"][0]["outcome"] == "not measured"


def test_an_unmeasured_run_or_auc_never_hides_a_flagged_one_after_it():
    unmeasured_first = {"fold0": {}, "full": {"stream_shortcuts": {"per_source": {
        "all": {"auc": {"peak": None, "duration_s": 0.97}}}}}}
    s = gate.shortcut_check(unmeasured_first)
    assert s["outcome"] == "fail" and s["flagged"] == ["full/all/duration_s AUC 0.970"]
    assert s["unmeasured"] == ["fold0: no stream_shortcuts in run_meta.json",
                               "full/all/peak: too few clips per class"]
    assert s["runs"] == {"full": {"max_strength": 0.97, "per_feature": {"all/duration_s": 0.97}}}


def test_the_probe_set_is_the_sha256_of_its_sorted_paths_one_per_line():
    import hashlib

    frame = pd.DataFrame({"path": ["b.wav", "a.wav", "b.wav"], "logit": [0.0, 1.0, 2.0]})
    assert gate.probe_set_sha(frame) == hashlib.sha256(b"a.wav\nb.wav").hexdigest()


def test_a_probe_reading_without_clips_or_without_a_threshold_has_no_rate():
    oof, _, key = campaign(2.0, 2.0)
    empty = gate.probe_reading(oof, key, pd.DataFrame({"path": [], "logit": []}), None)
    assert (empty["n"], empty["false_alarm_rate"], empty["file"]) == (0, None, None)
    one_class = oof[oof["path"].isin(key.loc[key["label"] == "spoof", "path"])]
    probe = pd.DataFrame({"path": ["w0", "w1"], "logit": [0.0, 1.0]})
    rec = gate.probe_reading(one_class, key, probe, None)
    assert (rec["n"], rec["threshold"], rec["false_alarm_rate"]) == (2, None, None)


def test_each_stage_names_itself_in_its_why(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold, probe_fa=1.0, probe_file=probe[0])
    st = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {})["bars"][0]["stages"]
    assert st["holdout"]["why"].startswith("holdout: minDCF ours ")
    assert st["out-of-fold"]["why"].startswith("out-of-fold: minDCF ours ")
    assert st["out-of-fold"]["why"].endswith("(margin " + format(
        st["out-of-fold"]["readings"][gate.RECORD]["margin"], "+.4f") +
        ", 200 bona fide + 200 synthetic)")


def test_the_shortcut_why_lists_four_flagged_at_most_or_the_first_unmeasured():
    aucs = {f"f{i}": 0.9 + i / 100 for i in range(5)}
    s = gate.shortcut_check({"full": {"stream_shortcuts": {"per_source": {"all": {"auc": aucs}}}}})
    assert s["why"] == ("stream shortcuts: 5 at max(AUC, 1-AUC) >= 0.85: full/all/f0 AUC 0.900, "
                        "full/all/f1 AUC 0.910, full/all/f2 AUC 0.920, full/all/f3 AUC 0.930")
    s = gate.shortcut_check({"a": {}, "b": {}})
    assert s["why"] == ("stream shortcuts: 2 AUC(s) unmeasured, e.g. a: no stream_shortcuts in "
                        "run_meta.json")
    assert gate.shortcut_check({"fold0": GOOD_SHORTCUTS})["why"] == (
        "stream shortcuts: every AUC within (1-0.85, 0.85)")


def test_a_gate_without_a_why_reports_an_empty_line_for_it():
    doc = gate_doc([])
    del doc["why"]
    assert gate.markdown(doc)[3:6] == ["", "", ""]


# ------------------------------------------------------------------ the extra corpus's line
# hearsay.evaluate.corpus_decision.gate_check gives the line (tests/test_corpus_decision.py); the
# gate owns how it weighs: it joins the bar and the shortcuts, the worst of the three wins.


@pytest.mark.parametrize("extra, want", [
    (None, "pass"),  # no decision given or cited: the line is absent, the rest decide
    ({"outcome": "pass", "why": "extra corpus x: keep"}, "pass"),
    ({"outcome": "not measured", "why": "extra corpus x: give it"}, "not measured"),
    ({"outcome": "fail", "why": "extra corpus x: cap share"}, "fail"),
])
def test_the_extra_corpus_line_joins_a_passing_gate_and_the_worst_outcome_wins(tmp_path, probe,
                                                                               extra, want):
    oof, hold, key = campaign(3.0, 3.0)
    b_oof, b_hold, _ = campaign(1.0, 1.0, seed=7)
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold, probe_fa=ours_probe_fa(oof, key, probe[1]),
                  probe_file=probe[0])
    g = gate.judge(oof, hold, key, [bar], probe[1], probe[0], {"full": GOOD_SHORTCUTS},
                   extra=extra)
    assert g["outcome"] == want, g["why"]
    assert g["extra_corpus"] == extra
    section = "\n".join(gate.markdown(g))
    if extra is None:
        assert "Extra corpus" not in section and "extra corpus" not in g["why"]
    else:
        assert g["why"].endswith(f"; {extra['why']}")
        assert f"Extra corpus: {extra['outcome']}: {extra['why']}." in section


def test_a_failing_extra_corpus_line_fails_a_gate_whose_bar_is_unread():
    rng = np.random.default_rng(0)
    paths = [f"c{i}" for i in range(40)]
    key = pd.DataFrame({"path": paths, "label": ["bonafide"] * 20 + ["spoof"] * 20})
    ours = pd.DataFrame({"path": paths, "logit": np.r_[rng.normal(-2, 1, 20),
                                                        rng.normal(2, 1, 20)]})
    bar = {"dir": "b", "name": "b", "meta": {}, "scores": ours.assign(logit=0.0), "why": None}
    fail = {"outcome": "fail", "why": "extra corpus x: cap share"}
    g = gate.judge(ours, ours, key, [bar], extra=fail)
    assert g["outcome"] == "fail" and g["extra_corpus"] == fail and "cap share" in g["why"]


# --------------------------------------------------------------------------- unmeasured shortcuts


@pytest.mark.parametrize("record", [
    {},  # a trainer before stream_shortcuts
    {"stream_shortcuts": None},
    {"stream_shortcuts": {}},  # the record without per_source
    {"stream_shortcuts": {"per_source": None}},
    {"stream_shortcuts": {"per_source": {}}},
    {"stream_shortcuts": {"status": "unknown"}},
])
def test_a_shortcut_record_without_per_source_is_not_measured_never_a_crash(record):
    s = gate.shortcut_check({"fold0": GOOD_SHORTCUTS, "full": record})
    assert s["outcome"] == "not measured"
    assert s["unmeasured"] == ["full: no stream_shortcuts in run_meta.json"]
    assert set(s["runs"]) == {"fold0"}
    # the side that has per_source: measured, and a pass
    assert gate.shortcut_check({"full": GOOD_SHORTCUTS})["outcome"] == "pass"


def consistent_edge(n=2000, hit=0.08, seed=0):
    """(ours, bar, is_spoof): the bar is our ranking with `hit` of the synthetic clips pushed
    down by 3, so on the same clips it is worse by a small margin every resample sees."""
    rng = np.random.default_rng(seed)
    is_spoof = np.arange(n) % 2 == 1
    ours = rng.normal(size=n) + 2.5 * is_spoof
    bar = ours.copy()
    bar[is_spoof & (rng.random(n) < hit)] -= 3.0
    return ours, bar, is_spoof


def test_the_paired_interval_of_ours_minus_bar_is_read_on_the_same_clips():
    from hearsay.evaluate.report_stats import paired_margin_ci

    ours, bar, is_spoof = consistent_edge()
    ci = paired_margin_ci(ours, bar, is_spoof)
    lo, hi = ci["interval"]
    assert lo <= ci["ours_minus_bar"] <= hi < 0  # ours lower on every resample's clips
    assert ci["ours_minus_bar"] == pytest.approx(
        metrics.min_dcf_reading(ours, is_spoof, *metrics.READING_OF_RECORD)[0]
        - metrics.min_dcf_reading(bar, is_spoof, *metrics.READING_OF_RECORD)[0])
    same = paired_margin_ci(ours, ours, is_spoof)
    assert same["ours_minus_bar"] == 0 and same["interval"] == [0.0, 0.0]
    assert paired_margin_ci(ours[is_spoof], bar[is_spoof], is_spoof[is_spoof])["interval"] is None


def test_a_margin_is_within_noise_when_its_interval_holds_zero_or_the_holdout_gap_is_in_band():
    ours, bar, is_spoof = consistent_edge()
    # an interval clear of 0 and a gap of about 0.07: beyond noise out-of-fold, within the band
    # of 0.15 on the holdout
    oof = gate.noise(ours, bar, is_spoof, "out-of-fold", None)
    hold = gate.noise(ours, bar, is_spoof, "holdout", gate.HOLDOUT_NOISE_BAND)
    assert oof["verdict"] == "beyond noise" and "excludes 0" in oof["why"]
    assert hold["verdict"] == "within noise" and "under the 0.15 band" in hold["why"]
    assert gate.HOLDOUT_NOISE_BAND == 0.15
    # a bar no different on these clips: the interval holds 0
    same = gate.noise(ours, ours, is_spoof, "out-of-fold", None)
    assert same["verdict"] == "within noise" and same["why"].endswith("holds 0")
    # a wide edge on the holdout is beyond the band too
    far_ours, far_bar, far_spoof = consistent_edge(hit=0.5)
    far = gate.noise(far_ours, far_bar, far_spoof, "holdout", gate.HOLDOUT_NOISE_BAND)
    assert far["verdict"] == "beyond noise" and "at or over the 0.15 band" in far["why"]


def test_the_gate_says_within_noise_in_meta_and_the_report_beside_its_outcome(tmp_path, probe):
    oof, hold, key = campaign(3.0, 3.0, n_hold=40)
    b_oof, b_hold, _ = campaign(2.9, 2.9, seed=7, n_hold=40)
    bar = bar_dir(tmp_path, "bar", b_oof, b_hold)
    g = gate.judge(oof, hold, key, [bar], None, None, {"full": GOOD_SHORTCUTS})
    st = g["bars"][0]["stages"]
    assert st["holdout"]["noise"]["band"] == 0.15 and st["out-of-fold"]["noise"]["band"] is None
    assert g["noise"]["verdict"] == "within noise"  # 40 holdout clips cannot resolve it
    text = "\n".join(gate.markdown(g))
    assert "**Margin against noise: within noise**" in text
    assert "a holdout gap under 0.15 minDCF is within noise" in text
    assert "- Margin against noise: " in text
    far_oof, far_hold, key = campaign(4.0, 4.0, n_oof=2000, n_hold=2000)
    b_oof, b_hold, _ = campaign(0.5, 0.5, seed=7, n_oof=2000, n_hold=2000)
    g = gate.judge(far_oof, far_hold, key, [bar_dir(tmp_path, "far", b_oof, b_hold)], None,
                   None, {"full": GOOD_SHORTCUTS})
    assert g["noise"]["verdict"] == "beyond noise", g["noise"]["why"]
