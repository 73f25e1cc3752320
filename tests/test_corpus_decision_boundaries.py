"""hearsay.evaluate.corpus_decision at its edges, word for word: the decision's texts and record,
the file `write` leaves and `load` takes back, each line `gate_check` gives, what `applied` reads
from a run's training stream, and how a recipe's probe reading names what it lacks. (The rules'
main cases: tests/test_corpus_decision.py.)"""

import json
import math

import pandas as pd
import pytest
from fakes.fake_stream import run_metas, stream_groups

from hearsay.evaluate import corpus_decision as cd
from hearsay.evaluate import corpus_probe as cp
from hearsay.util.hashing import sha256_file

CFG = {**cp.CorpusProbeConfig().__dict__}


def probe(separable=False, lands=(), strength=None):
    return {"corpus": "mlaad", "against": "diffssd", "label": "spoof",
            "strength": strength if strength is not None else (0.9 if separable else 0.6),
            "bound": 0.85, "separable": separable,
            "landing": {s: {"n": 10, "share": 0.8 if s in lands else 0.1, "lands": s in lands}
                        for s in ("la", "itw", "asv")}}


def rule(fa_with):
    return cd.drop_rule(0.03, fa_with, CFG["drop_rise"])


# ------------------------------------------------------------------------------ decide


def test_a_drop_names_the_rise_and_the_bound_in_points():
    d = cd.decide(probe(True, ("la",)), rule(0.0525), CFG)
    assert d["decision"] == "drop" and d["cap_share"] is None
    assert d["why"] == "the probe false-alarm rate rises +2.25 points with the corpus (> 1.00)"


def test_a_cap_share_names_the_separation_the_landing_sources_sorted_and_the_cap():
    d = cd.decide(probe(True, ("la", "asv")), rule(0.035), CFG)
    assert d["decision"] == "cap share" and d["cap_share"] == CFG["cap_share"]
    assert d["why"] == (f"separable from diffssd (max(AUC, 1-AUC) 0.900, bound 0.85); bona fide "
                        f"sources landing on its side (share >= {CFG['landing_share']}): asv, "
                        f"la; cap it at {CFG['cap_share']} of its class")
    alone = cd.decide(probe(True), rule(0.035), CFG)["why"]
    assert alone == (f"separable from diffssd (max(AUC, 1-AUC) 0.900, bound 0.85); cap it at "
                     f"{CFG['cap_share']} of its class")
    landed = cd.decide(probe(False, ("itw",), strength=0.8125), rule(0.035), CFG)["why"]
    assert landed == (f"not separable from diffssd (0.812); bona fide sources landing on its "
                      f"side (share >= {CFG['landing_share']}): itw; cap it at "
                      f"{CFG['cap_share']} of its class")


def test_a_keep_names_the_strength_its_bound_and_the_false_alarm_change():
    d = cd.decide(probe(strength=0.6), rule(0.0375), CFG)
    assert d["decision"] == "keep" and d["cap_share"] is None
    assert d["why"] == ("not separable from diffssd (0.600 < 0.85), no bona fide source lands "
                        "on its side, false alarms +0.75 points (<= 1.00)")


def test_the_record_carries_the_probe_the_rule_and_the_config_whole():
    p, r = probe(), rule(0.035)
    d = cd.decide(p, r, CFG)
    assert set(d) == cd.KEYS
    assert (d["corpus"], d["against"], d["label"]) == ("mlaad", "diffssd", "spoof")
    assert d["probe"] is p and d["drop_rule"] is r and d["config"] is CFG


def test_a_probe_without_its_landing_readout_is_refused_with_the_flag_that_gives_it():
    p = probe()
    del p["landing"]
    with pytest.raises(cd.DecisionError) as err:
        cd.decide(p, rule(0.035), CFG)
    assert str(err.value) == ("the probe result has no landing readout: run corpus-probe with "
                              "--against PEER")
    assert cd.decide({**probe(), "landing": None}, rule(0.035), CFG)["decision"] == "keep"


# ------------------------------------------------------------------------------ write, load


def test_write_leaves_strict_indented_json_and_returns_the_files_sha256(tmp_path):
    rec = {**cd.decide(probe(), rule(0.035), CFG), "extra": math.inf}
    path = tmp_path / "d.json"
    sha = cd.write(path, rec)
    text = path.read_text()
    assert sha == sha256_file(path) and len(sha) == 64
    assert text.endswith("}\n") and text.startswith('{\n  "decision": "keep",\n')
    assert json.loads(text)["extra"] == "inf"  # no Infinity: strict JSON


def test_load_adds_the_sha256_and_refuses_what_is_not_a_decision(tmp_path):
    path = tmp_path / "d.json"
    sha = cd.write(path, cd.decide(probe(), rule(0.035), CFG))
    d = cd.load(path)
    assert d["sha256"] == sha and d["decision"] == "keep"
    fix = "write it with hearsay corpus-probe --drop-rule ... --decision FILE"
    rec = json.loads(path.read_text())
    for bad, missing in [({k: v for k, v in rec.items() if k not in ("why", "config")},
                          "['config', 'why']"),
                         ([rec], str(sorted(cd.KEYS))),
                         ({**rec, "decision": "cap"}, "[]")]:
        path.write_text(json.dumps(bad))
        with pytest.raises(cd.DecisionError) as err:
            cd.load(path)
        assert str(err.value) == f"{path}: not a corpus decision (missing {missing}): {fix}"
    for ok in cd.DECISIONS:
        path.write_text(json.dumps({**rec, "decision": ok}))
        assert cd.load(path)["decision"] == ok


def test_load_names_a_file_it_cannot_read_or_parse(tmp_path):
    with pytest.raises(cd.DecisionError, match=r"^.*nope\.json: \[Errno 2\]"):
        cd.load(tmp_path / "nope.json")
    (tmp_path / "half.json").write_text('{"decision": ')
    with pytest.raises(cd.DecisionError, match=r"half\.json: Expecting value"):
        cd.load(tmp_path / "half.json")


# ------------------------------------------------------------------------------ gate_check


def decision(tmp_path, fa_with=0.035, separable=True, name="d.json"):
    rec = cd.decide(probe(separable), rule(fa_with), CFG)
    return tmp_path / name, cd.write(tmp_path / name, rec), rec


def test_the_gate_line_without_a_file_names_the_cited_decision_by_its_first_12_digits():
    got = cd.gate_check(None, run_metas("ab" * 32, ""))
    assert got == {"outcome": "not measured", "cited": {"fold0": "ab" * 32, "fold1": None},
                   "why": "extra corpus: the runs cite decision abababababab…; give it with "
                          "--corpus-decision FILE"}
    assert cd.gate_check(None, {"fold0": {}, "fold1": {"selection": None}}) is None


def test_the_gate_line_carries_the_decision_its_file_and_what_each_run_cites(tmp_path):
    path, sha, rec = decision(tmp_path)
    got = cd.gate_check(path, run_metas(sha, sha))
    head = f"extra corpus mlaad: cap share ({rec['why']})"
    assert got == {"file": "d.json", "sha256": sha, "decision": "cap share", "corpus": "mlaad",
                   "against": "diffssd", "cited": {"fold0": sha, "fold1": sha},
                   "delta_points": rec["drop_rule"]["delta_points"], "decision_why": rec["why"],
                   "outcome": "pass", "why": f"{head}; every run's recipe cites it and its "
                                             "training stream applies it"}


def test_the_gate_line_names_every_run_that_cites_another_decision_or_none(tmp_path):
    path, sha, rec = decision(tmp_path)
    head = f"extra corpus mlaad: cap share ({rec['why']})"
    got = cd.gate_check(path, run_metas("0" * 64, sha, "1" * 64))
    assert (got["outcome"], got["why"]) == ("fail", f"{head}; runs fold0, fold2 cite another "
                                                     "decision")
    got = cd.gate_check(path, run_metas(None, sha, ""))
    assert (got["outcome"], got["why"]) == (
        "fail", f"{head}; runs fold0, fold2 were not trained under it (their recipe does not "
                "cite it: selection.corpus_decision)")


def test_a_keep_passes_uncited_runs_and_says_so_when_every_run_cites_it(tmp_path):
    path, sha, rec = decision(tmp_path, separable=False)
    head = f"extra corpus mlaad: keep ({rec['why']})"
    assert cd.gate_check(path, run_metas(sha, None))["why"] == head
    assert cd.gate_check(path, run_metas(sha, sha))["why"] == f"{head}; every run's recipe cites it"
    # a keep is applied by training as usual: a stream that could not show a cap is no matter
    got = cd.gate_check(path, run_metas(sha, stream=stream_groups(0.9)))
    assert got["outcome"] == "pass"


def test_a_cited_cap_that_no_run_can_show_is_not_measured_naming_the_runs(tmp_path):
    path, sha, rec = decision(tmp_path)
    metas = {"fold0": {"selection": {"corpus_decision": sha}},
             "fold1": {"selection": {"corpus_decision": sha}, "stream_groups": stream_groups()},
             "fold2": {"selection": {"corpus_decision": sha}, "stream_groups": "rows"}}
    got = cd.gate_check(path, metas)
    assert got["outcome"] == "not measured"
    assert got["why"] == (f"extra corpus mlaad: cap share ({rec['why']}); runs fold0, fold2 "
                          "cite it but their run_meta.json cannot show it applied (no "
                          "stream_groups, from a trainer before them: retrain; or the corpus is "
                          "named by a column they do not break down: name it by source, "
                          "train_scope or corpus)")
    # a run that breaks it outweighs runs that cannot show it
    metas["fold1"]["stream_groups"] = stream_groups(0.5)
    assert cd.gate_check(path, metas)["outcome"] == "fail"


# ------------------------------------------------------------------------------ applied


def rec_of(decision_, corpus="mlaad", label="spoof", cap=0.1):
    return {"decision": decision_, "corpus": corpus, "label": label, "cap_share": cap}


@pytest.mark.parametrize("share,broken", [(0.1, False), (0.1 + 5e-10, False),
                                          (0.1 + 1e-9, False), (0.1 + 2e-9, True)])
def test_a_cap_is_broken_only_above_its_share_beyond_1e_9(share, broken):
    out, unread = cd.applied(rec_of("cap share"), run_metas("s", stream=stream_groups(share)))
    assert unread == [] and bool(out) is broken
    if broken:
        assert out == [f"run fold0 draws mlaad at {share:.3f} of its spoof clips, above the "
                       "cap 0.1"]


def test_a_caps_share_is_summed_over_the_corpus_groups_of_its_label_only():
    stream = stream_groups(0.06) + [{"label": "spoof", "source": "mlaad", "corpus": "mlaad",
                                     "rows": 2, "share": 0.06},
                                    {"label": "bonafide", "source": "mlaad", "corpus": "mlaad",
                                     "rows": 9, "share": 0.5}]
    out, _ = cd.applied(rec_of("cap share"), run_metas("s", stream=stream))
    assert out == ["run fold0 draws mlaad at 0.120 of its spoof clips, above the cap 0.1"]
    # a decision of no one label caps the corpus in each class
    out, _ = cd.applied(rec_of("cap share", label="any"), run_metas("s", stream=stream))
    assert out == ["run fold0 draws mlaad at 0.500 of its bonafide clips, above the cap 0.1",
                   "run fold0 draws mlaad at 0.120 of its spoof clips, above the cap 0.1"]


def test_a_drop_counts_the_corpus_rows_of_its_label_and_names_each_run():
    stream = stream_groups(0.05, rows=3) + [{"label": "bonafide", "source": "mlaad",
                                             "corpus": "mlaad", "rows": 7, "share": 0.1}]
    out, unread = cd.applied(rec_of("drop"), run_metas("s", "s", stream=stream))
    assert unread == [] and out == [
        f"run fold{i} trains 3 row(s) of mlaad, which the decision drops" for i in (0, 1)]
    assert cd.applied(rec_of("drop"), run_metas("s", stream=stream_groups(rows=0))) == ([], [])
    out, _ = cd.applied(rec_of("drop", label="any"), run_metas("s", stream=stream))
    assert out == ["run fold0 trains 10 row(s) of mlaad, which the decision drops"]


def test_a_corpus_named_by_a_column_is_read_from_that_column_as_text():
    stream = [{**g, "train_scope": 7 if g["source"] == "mlaad" else "core"}
              for g in stream_groups()]
    out, _ = cd.applied(rec_of("drop", corpus="train_scope=7"), run_metas("s", stream=stream))
    assert out == ["run fold0 trains 4 row(s) of train_scope=7, which the decision drops"]
    # a column one group lacks cannot be read: the run is named, not judged
    stream[0].pop("train_scope")
    assert cd.applied(rec_of("drop", corpus="train_scope=7"), run_metas("s", stream=stream)) == \
        ([], ["fold0"])


# ------------------------------------------------------------------------------ recipe_probe


def test_a_recipes_probe_from_its_runs_needs_the_labels_and_names_the_fix(tmp_path):
    with pytest.raises(cd.DecisionError) as err:
        cd.recipe_probe(tmp_path, None, None)
    assert str(err.value) == (f"{tmp_path}: its probe scores are read against the clips' "
                              "labels: give --bundle BUNDLE (or --key KEY.csv)")


def test_an_assembled_campaigns_probe_record_comes_back_whole_with_its_source(tmp_path):
    rec = {"false_alarm_rate": 0.0, "set_sha256": "s", "threshold": 1.0, "n": 3}
    (tmp_path / "meta.json").write_text(json.dumps({"probe": rec}))
    assert cd.recipe_probe(str(tmp_path), None, None) == {**rec, "from": "assembly",
                                                          "source": str(tmp_path)}
    (tmp_path / "meta.json").write_text(json.dumps({}))
    with pytest.raises(cd.DecisionError) as err:
        cd.recipe_probe(tmp_path, None, None)
    assert str(err.value) == (f"{tmp_path / 'meta.json'}: no probe false-alarm rate (assemble "
                              "it with --probe)")


def test_a_recipe_whose_scores_cannot_be_read_is_bad_input_naming_why(tmp_path):
    key = pd.DataFrame({"path": ["a.flac"], "label": ["bonafide"]})
    with pytest.raises(cd.DecisionError) as err:
        cd.recipe_probe(tmp_path / "nowhere", tmp_path / "p.csv", key)
    assert type(err.value) is cd.DecisionError and "nowhere" in str(err.value)


def test_a_probe_of_synthetic_clips_only_has_no_bona_fide_clip_to_read(tmp_path):
    key = pd.DataFrame({"path": ["b.flac", "s.flac"], "label": ["bonafide", "spoof"]})
    pd.DataFrame({"path": ["b.flac", "s.flac"], "logit": [-1.0, 1.0]}).to_csv(
        tmp_path / "inner.csv", index=False)
    pd.DataFrame({"path": ["s.flac"], "logit": [3.0]}).to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(cd.DecisionError) as err:
        cd.recipe_probe(tmp_path / "inner.csv", tmp_path / "p.csv", key)
    assert str(err.value) == f"{tmp_path / 'p.csv'}: no bona fide probe clip"


def test_runs_probe_files_names_the_inner_files_when_none_is_a_run_file(tmp_path):
    with pytest.raises(cd.DecisionError) as err:
        cd.runs_probe_files([tmp_path / "scores.csv"])
    assert str(err.value).startswith(f"no probe file of the recipe's runs: "
                                     f"['{tmp_path / 'scores.csv'}'] (each fold box")
    assert str(err.value).endswith("or give --probe-with / --probe-without)")


def two_fold_probe(tmp_path, bona_logits=(-9.0, -9.0), spoof_in_each=True):
    """Inner-fold scores whose threshold of record lies between -1 and 1, and two probe files
    (one a fold), each with a bona fide clip and (spoof_in_each) a clip the key labels spoof."""
    key = pd.DataFrame({"path": ["b.flac", "s.flac", "p0.wav", "p1.wav", "x0.wav", "x1.wav"],
                        "label": ["bonafide", "spoof", "bonafide", "bonafide", "spoof",
                                  "spoof"]})
    pd.DataFrame({"path": ["b.flac", "s.flac"], "logit": [-1.0, 1.0]}).to_csv(
        tmp_path / "inner.csv", index=False)
    files = []
    for k, logit in enumerate(bona_logits):
        rows = ([(f"p{k}.wav", logit)] if logit is not None else []) + \
            ([(f"x{k}.wav", 5.0)] if spoof_in_each else [])
        files.append(tmp_path / f"probe{k}.csv")
        pd.DataFrame(rows, columns=["path", "logit"]).to_csv(files[-1], index=False)
    return key, files


def test_one_probe_file_is_named_in_the_reading_and_several_are_not(tmp_path, monkeypatch):
    key, files = two_fold_probe(tmp_path, bona_logits=(3.0, -9.0))
    one = cd.recipe_probe(tmp_path / "inner.csv", files[0], key)
    assert one["file"] == str(files[0]) and one["probe_files"] == [str(files[0])]
    assert (one["n"], one["false_alarm_rate"], one["spoof_left_out"]) == (1, 1.0, 1)
    # the runs' probe files, pooled: the spoof clip of each left out, the reading of no one file
    monkeypatch.setattr(cd, "runs_probe_files", lambda inner: files)
    both = cd.recipe_probe(tmp_path / "inner.csv", None, key)
    assert both["file"] is None and both["probe_files"] == list(map(str, files))
    assert (both["n"], both["false_alarm_rate"], both["spoof_left_out"]) == (2, 0.5, 2)


def test_probe_files_with_no_bona_fide_clip_are_each_named(tmp_path, monkeypatch):
    key, files = two_fold_probe(tmp_path, bona_logits=(None, None))
    monkeypatch.setattr(cd, "runs_probe_files", lambda inner: files)
    with pytest.raises(cd.DecisionError) as err:
        cd.recipe_probe(tmp_path / "inner.csv", None, key)
    assert str(err.value) == f"{files[0]}, {files[1]}: no bona fide probe clip"


def test_a_recipe_refused_by_compare_is_named_by_its_source(tmp_path):
    key, files = two_fold_probe(tmp_path)
    pd.DataFrame({"path": ["b.flac"], "split": ["holdout"], "logit": [0.0]}).to_csv(
        tmp_path / "inner.csv", index=False)
    with pytest.raises(cd.DecisionError) as err:
        cd.recipe_probe(tmp_path / "inner.csv", files[0], key)
    assert str(err.value).startswith("inner.csv: 1 row(s) of split ['holdout']")


def test_every_run_that_breaks_a_cited_decision_is_named_in_one_line(tmp_path):
    path, sha, rec = decision(tmp_path)
    got = cd.gate_check(path, run_metas(sha, sha, stream=stream_groups(0.5)))
    assert got["why"] == (f"extra corpus mlaad: cap share ({rec['why']}); run fold0 draws mlaad "
                          "at 0.500 of its spoof clips, above the cap 0.1; run fold1 draws mlaad "
                          "at 0.500 of its spoof clips, above the cap 0.1")
