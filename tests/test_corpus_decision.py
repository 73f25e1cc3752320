"""hearsay.evaluate.corpus_decision: the drop rule read from two recipes' runs (each at its own
out-of-fold threshold), the decision file (keep / cap share / drop) and the line it gives the
gate (how the gate weighs that line: tests/test_gate.py)."""

import json

import numpy as np
import pandas as pd
import pytest
from fakes.fake_stream import run_metas, stream_groups

from hearsay.evaluate import corpus_decision as cd
from hearsay.evaluate import corpus_probe as cp
from hearsay.evaluate import gate

RISE = cp.CorpusProbeConfig().drop_rise


@pytest.mark.parametrize("without,with_,drop", [(0.030, 0.041, True), (0.030, 0.040, False),
                                                (0.030, 0.020, False)])
def test_the_drop_rule_drops_a_corpus_that_raises_false_alarms_over_one_point(without, with_,
                                                                              drop):
    r = cd.drop_rule(without, with_, RISE)
    assert r["drop"] is drop and r["delta_points"] == pytest.approx(100 * (with_ - without))


def key_and_oof(tmp_path, name, spoof_low):
    """A recipe's inner-fold scores (20 bona fide at -3..-2, 20 synthetic from `spoof_low` up):
    its minDCF threshold of record lies between the two."""
    bona = [f"in/b{i}.flac" for i in range(20)]
    spoof = [f"in/s{i}.flac" for i in range(20)]
    key = pd.DataFrame({"path": bona + spoof, "label": ["bonafide"] * 20 + ["spoof"] * 20})
    logits = np.r_[np.linspace(-3, -2, 20), np.linspace(spoof_low, spoof_low + 1, 20)]
    oof = pd.DataFrame({"path": bona + spoof, "fold": "0", "split": "inner_oof",
                        "logit": logits})
    (tmp_path / name).mkdir(exist_ok=True)
    oof.to_csv(tmp_path / name / "fold0_inner_oof.csv", index=False)
    return key, tmp_path / name / "fold0_inner_oof.csv"


def probe_csv(path, n_alarms, n=1000, extra_rows=(), n_mid=0):
    """n bona fide probe clips, n_alarms of them scored far above any threshold, n_mid at 3.5
    (above the threshold of a recipe whose synthetic clips start at 2, below one's from 5)."""
    logits = np.r_[np.full(n_alarms, 9.0), np.full(n_mid, 3.5),
                   np.full(n - n_alarms - n_mid, -9.0)]
    df = pd.DataFrame({"path": [f"itw/{i}.wav" for i in range(n)], "logit": logits})
    df = pd.concat([df, pd.DataFrame(list(extra_rows), columns=["path", "logit"])])
    df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("alarms_with,drop", [(41, True), (40, False), (20, False)])
def test_the_drop_rule_reads_each_recipe_at_its_own_out_of_fold_threshold(tmp_path, alarms_with,
                                                                          drop):
    key, without = key_and_oof(tmp_path, "core", 2.0)
    _, with_ = key_and_oof(tmp_path, "extra", 5.0)  # another threshold: read at its own
    a = cd.recipe_probe(without, probe_csv(tmp_path / "p0.csv", 30), key)
    b = cd.recipe_probe(with_, probe_csv(tmp_path / "p1.csv", alarms_with, n_mid=30), key)
    assert a["threshold"] != b["threshold"] and a["from"] == "runs"
    assert a["false_alarm_rate"] == 0.030 and b["false_alarm_rate"] == alarms_with / 1000
    r = cd.drop_from_runs(a, b, RISE)
    assert r["drop"] is drop and r["without"]["source"] == str(without)


def test_probe_rows_the_bundle_labels_synthetic_are_left_out_and_other_clips_refused(tmp_path):
    key, oof = key_and_oof(tmp_path, "core", 2.0)
    mixed = probe_csv(tmp_path / "p.csv", 30, extra_rows=[("in/s0.flac", 9.0)])
    r = cd.recipe_probe(oof, mixed, key)
    assert r["spoof_left_out"] == 1 and r["n"] == 1000 and r["false_alarm_rate"] == 0.030
    other = cd.recipe_probe(oof, probe_csv(tmp_path / "q.csv", 30, n=999), key)
    with pytest.raises(cd.DecisionRefused, match="other clips"):
        cd.drop_from_runs(r, other, RISE)


def test_an_assembled_campaign_is_read_from_its_meta_json_probe_record(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"probe": {
        "false_alarm_rate": 0.05, "set_sha256": "s", "threshold": 1.0}}))
    assert cd.recipe_probe(tmp_path, None, None)["from"] == "assembly"
    (tmp_path / "meta.json").write_text(json.dumps({"probe": None}))
    with pytest.raises(cd.DecisionError, match="assemble it with --probe"):
        cd.recipe_probe(tmp_path, None, None)


def probe_result(separable=False, lands=()):
    return {"corpus": "mlaad", "against": "diffssd", "label": "spoof", "strength": 0.9 if
            separable else 0.6, "bound": 0.85, "separable": separable,
            "landing": {s: {"n": 10, "share": 0.8 if s in lands else 0.1, "lands": s in lands}
                        for s in ("itw", "la")}}


@pytest.mark.parametrize("separable,lands,fa_with,decision", [
    (False, (), 0.035, "keep"), (True, (), 0.035, "cap share"), (False, ("la",), 0.035,
                                                                  "cap share"),
    (True, ("la",), 0.045, "drop"), (False, (), 0.045, "drop")])
def test_the_decision_is_drop_then_cap_share_then_keep(separable, lands, fa_with, decision):
    cfg = {**cp.CorpusProbeConfig().__dict__}
    d = cd.decide(probe_result(separable, lands), cd.drop_rule(0.03, fa_with, RISE), cfg)
    assert d["decision"] == decision
    assert (d["cap_share"] == cfg["cap_share"]) is (decision == "cap share")
    if lands:
        assert "la" in d["why"] or decision == "drop"


def decision_file(tmp_path, decision):
    rec = cd.decide(probe_result(decision != "keep"), cd.drop_rule(
        0.03, 0.05 if decision == "drop" else 0.03, RISE), {**cp.CorpusProbeConfig().__dict__})
    assert rec["decision"] == decision
    path = tmp_path / f"{decision.replace(' ', '_')}.json"
    return path, cd.write(path, rec)


def test_the_gate_line_passes_runs_trained_under_the_decision_and_fails_the_others(tmp_path):
    cap, sha = decision_file(tmp_path, "cap share")
    assert cd.gate_check(cap, run_metas(sha, sha))["outcome"] == "pass"
    got = cd.gate_check(cap, run_metas(sha, None))
    assert got["outcome"] == "fail" and "fold1 were not trained under it" in got["why"]
    got = cd.gate_check(cap, run_metas(sha, "0" * 64))
    assert got["outcome"] == "fail" and "fold1 cite another decision" in got["why"]
    keep, _ = decision_file(tmp_path, "keep")
    assert cd.gate_check(keep, run_metas(None, None))["outcome"] == "pass"
    assert cd.gate_check(None, run_metas(sha))["outcome"] == "not measured"
    assert cd.gate_check(None, run_metas(None)) is None
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(cd.DecisionError, match="not a corpus decision"):
        cd.gate_check(tmp_path / "bad.json", run_metas(None))


def test_the_cli_writes_the_decision_from_two_recipes_runs(tmp_path, capsys):
    key, without = key_and_oof(tmp_path, "core", 2.0)
    _, with_ = key_and_oof(tmp_path, "extra", 5.0)
    key.to_csv(tmp_path / "key.csv", index=False)
    (tmp_path / "probe.json").write_text(json.dumps(probe_result()))
    args = ["--drop-rule", "--without", str(without), "--with", str(with_),
            "--probe-without", str(probe_csv(tmp_path / "p0.csv", 30)),
            "--probe-with", str(probe_csv(tmp_path / "p1.csv", 50, n_mid=30))]
    assert cp.main(args) == cp.EXIT_BAD_INPUT  # the probe files are read against the labels
    assert "give --bundle BUNDLE" in capsys.readouterr().err
    out = tmp_path / "decision.json"
    assert cp.main(args + ["--key", str(tmp_path / "key.csv"), "--probe-result",
                           str(tmp_path / "probe.json"), "--decision", str(out)]) == cp.EXIT_OK
    d = cd.load(out)
    assert d["decision"] == "drop" and d["drop_rule"]["delta_points"] == pytest.approx(2.0)
    assert d["sha256"] in capsys.readouterr().err  # what the recipe cites
    conf = tmp_path / "rise.json"
    conf.write_text(json.dumps({"drop_rise": 0.025}))  # the rise is the config's
    assert cp.main(args + ["--key", str(tmp_path / "key.csv"), "--probe-result",
                           str(tmp_path / "probe.json"), "--decision", str(out), "--config",
                           str(conf)]) == cp.EXIT_OK
    assert cd.load(out)["decision"] == "keep"
    other = probe_csv(tmp_path / "p2.csv", 50, n=999)
    assert cp.main(args[:-1] + [str(other), "--key", str(tmp_path / "key.csv")]) == \
        cp.EXIT_REFUSED


def test_a_cited_cap_or_drop_must_show_in_each_run_s_training_stream(tmp_path):
    cap, sha = decision_file(tmp_path, "cap share")             # mlaad at most 0.1 of spoof
    cap_share = json.loads(cap.read_text())["cap_share"]
    assert cap_share == 0.1
    assert cd.gate_check(cap, run_metas(sha, sha, stream=stream_groups(0.1)))["outcome"] == "pass"
    over = {**run_metas(sha), "fold1": run_metas(sha, stream=stream_groups(0.100002))["fold0"]}
    got = cd.gate_check(cap, over)
    assert got["outcome"] == "fail"
    assert "run fold1 draws mlaad at 0.100 of its spoof clips, above the cap 0.1" in got["why"]
    drop, dsha = decision_file(tmp_path, "drop")
    assert cd.gate_check(drop, run_metas(dsha, stream=stream_groups(0.0, 0)))["outcome"] == "pass"
    got = cd.gate_check(drop, run_metas(dsha, stream=stream_groups(0.0, 3)))
    assert got["outcome"] == "fail" and "run fold0 trains 3 row(s) of mlaad" in got["why"]
    old = {"fold0": {"selection": {"corpus_decision": dsha}}}   # trained before the record
    got = cd.gate_check(drop, old)
    assert got["outcome"] == "not measured" and "fold0 cite it but" in got["why"]
    keep, ksha = decision_file(tmp_path, "keep")               # keep: nothing to apply
    assert cd.gate_check(keep, {"fold0": {"selection": {"corpus_decision": ksha}}})[
        "outcome"] == "pass"


def runs_folder(tmp_path, name, spoof_low, n_alarms, weights="w0", probe_weights=None):
    """A recipe's collected fold-0 run files as runner/collect_ablation.sh leaves them: the
    inner-fold scores and the probe scores its box wrote, each with a sidecar naming the
    run's weights."""
    from hearsay.contracts import score_file

    key, inner = key_and_oof(tmp_path, name, spoof_low)
    probe = probe_csv(tmp_path / name / "fold0_probe.csv", n_alarms)
    score_file.sidecar(inner).write_text(json.dumps({"weights_sha256": weights,
                                                     "split": "inner_oof", "fold": 0}))
    score_file.sidecar(probe).write_text(json.dumps({
        "weights_sha256": probe_weights or weights, "split": "probe", "fold": None,
        "set_sha256": gate.probe_set_sha(pd.read_csv(probe))}))
    return key, tmp_path / name


def test_the_drop_rule_reads_each_recipes_probe_from_its_runs_without_a_probe_file(tmp_path,
                                                                                  capsys):
    key, without = runs_folder(tmp_path, "core", 2.0, 30)
    _, with_ = runs_folder(tmp_path, "extra", 5.0, 50)
    a, b = cd.recipe_probe(without, None, key), cd.recipe_probe(with_, None, key)
    assert a["from"] == "runs" and a["probe_files"] == [str(without / "fold0_probe.csv")]
    assert a["false_alarm_rate"] == 0.030 and b["false_alarm_rate"] == 0.050
    assert cd.drop_from_runs(a, b, RISE)["drop"] is True
    key.to_csv(tmp_path / "key.csv", index=False)
    (tmp_path / "probe.json").write_text(json.dumps(probe_result()))
    out = tmp_path / "decision.json"
    assert cp.main(["--drop-rule", "--without", str(without), "--with", str(with_), "--key",
                    str(tmp_path / "key.csv"), "--probe-result", str(tmp_path / "probe.json"),
                    "--decision", str(out)]) == cp.EXIT_OK
    assert cd.load(out)["decision"] == "drop"
    # a run that brought no probe file is named, with the fix
    (without / "fold0_probe.csv").unlink()
    with pytest.raises(cd.DecisionError, match=r"fold0_probe\.csv'\] \(each fold box scores "
                                               r"the probe set: bring it back with "
                                               r"runner/collect_ablation\.sh"):
        cd.recipe_probe(without, None, key)


def test_a_runs_probe_file_of_other_weights_than_its_inner_scores_is_refused(tmp_path):
    key, folder = runs_folder(tmp_path, "core", 2.0, 30, probe_weights="w-other")
    with pytest.raises(cd.DecisionRefused, match="scored by weights w-other, "
                                                 "fold0_inner_oof.csv by w0"):
        cd.recipe_probe(folder, None, key)


@pytest.mark.parametrize("delta_points, rise_points, drop", [
    (1.00000000006, 1.0, False),  # equal to 1e-9 points (float noise): not over the rise
    (1.0, 0.99999999994, False),
    (1.000000002, 1.0, True),  # 2e-9 points over it: over
    (1.005, 1.0, True),
    (1.1, 1.25, False),  # the rise's fraction of a point counts
])
def test_the_drop_rule_compares_in_points_to_1e_9(delta_points, rise_points, drop):
    r = cd.drop_rule(0.25, 0.25 + delta_points / 100, rise_points / 100)
    assert r == {"fa_without": 0.25, "fa_with": 0.25 + delta_points / 100,
                 "delta_points": pytest.approx(delta_points), "rise_points":
                 pytest.approx(rise_points), "drop": drop}


def reading(fa, sha="s" * 64):
    return {"false_alarm_rate": fa, "set_sha256": sha}


def test_the_drop_rule_from_runs_keeps_both_readings_and_their_probe_set():
    rec = cd.drop_from_runs(reading(0.02), reading(0.05), RISE)
    assert rec["drop"] is True and rec["set_sha256"] == "s" * 64
    assert rec["without"] == reading(0.02) and rec["with"] == reading(0.05)


@pytest.mark.parametrize("without, with_", [(None, 0.05), (0.02, None)])
def test_the_drop_rule_from_runs_refuses_either_undefined_rate(without, with_):
    with pytest.raises(cd.DecisionError) as err:
        cd.drop_from_runs(reading(without), reading(with_), RISE)
    assert str(err.value) == "a probe false-alarm rate is undefined (no out-of-fold threshold)"


def test_the_drop_rule_from_runs_refuses_two_probe_sets_naming_both():
    with pytest.raises(cd.DecisionRefused) as err:
        cd.drop_from_runs(reading(0.02, "a1"), reading(0.05, "b2"), RISE)
    assert str(err.value) == ("the two recipes' probe readings are of other clips (set_sha256 a1 "
                              "vs b2): score the same probe set with both")
