"""hearsay.metrics against independent computations (scikit-learn, brute force over thresholds)."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import roc_auc_score, roc_curve

from hearsay import metrics
from hearsay.evaluate import metrics_cli

TOL = 1e-9


def random_set(seed, n=300, ties=True):
    """(rank, is_spoof): two overlapping classes; `ties` rounds values so many collide."""
    rng = np.random.default_rng(seed)
    is_spoof = rng.random(n) < rng.uniform(0.2, 0.8)
    is_spoof[:2] = [True, False]  # both classes always present
    rank = rng.normal(size=n) + 1.2 * is_spoof
    if ties:
        rank = np.round(rank, 1)
    return rank, is_spoof


def brute_points(rank, is_spoof):
    """(p_miss, p_fa) at every distinct value and +inf, counted clip by clip."""
    ts = np.append(np.unique(rank), np.inf)
    s, b = rank[is_spoof], rank[~is_spoof]
    return (np.array([np.mean(s < t) for t in ts]), np.array([np.mean(b >= t) for t in ts]), ts)


def sklearn_eer(rank, is_spoof):
    """EER on scikit-learn's ROC: root of fnr - fpr along the linearly interpolated curve."""
    fpr, tpr, _ = roc_curve(is_spoof, rank, drop_intermediate=False)
    fnr = 1 - tpr
    idx = np.arange(len(fpr), dtype=float)
    root = brentq(lambda u: np.interp(u, idx, fnr - fpr), 0, idx[-1], xtol=1e-15, rtol=1e-15)
    return float(np.interp(root, idx, fpr))


def sklearn_min_cllr(rank, is_spoof):
    p = IsotonicRegression(increasing=True).fit(rank, is_spoof.astype(float)).predict(rank)
    prior = is_spoof.mean()
    with np.errstate(divide="ignore"):
        llr = np.log(p) - np.log(1 - p) - math.log(prior / (1 - prior))
    cs = np.mean([math.log2(1 + math.exp(-v)) if v != np.inf else 0.0 for v in llr[is_spoof]])
    cb = np.mean([math.log2(1 + math.exp(v)) if v != -np.inf else 0.0 for v in llr[~is_spoof]])
    return (cs + cb) / 2


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ties", [True, False])
def test_metrics_match_independent_computation(seed, ties):
    rank, is_spoof = random_set(seed, ties=ties)
    m = metrics.compute(rank, is_spoof, pi=0.3)
    assert m["eer"] == pytest.approx(sklearn_eer(rank, is_spoof), abs=TOL)
    assert m["auc"] == pytest.approx(roc_auc_score(is_spoof, rank), abs=TOL)
    p_miss, p_fa, ts = brute_points(rank, is_spoof)
    for pi, key in ((0.3, "min_dcf"), (0.5, "min_dcf_pi05")):
        brute = np.min(pi * p_miss + (1 - pi) * p_fa) / min(pi, 1 - pi)
        assert m[key] == pytest.approx(brute, abs=TOL)
    i = int(np.argmin(0.3 * p_miss + 0.7 * p_fa))
    assert m["min_dcf_threshold"] == ts[i]
    for pi, key in ((0.3, "act_dcf"), (0.5, "act_dcf_pi05")):
        thr = -math.log(pi / (1 - pi))
        pm = sum(v < thr for v in rank[is_spoof]) / is_spoof.sum()
        pf = sum(v >= thr for v in rank[~is_spoof]) / (~is_spoof).sum()
        assert m[key] == pytest.approx((pi * pm + (1 - pi) * pf) / min(pi, 1 - pi), abs=TOL)
    cs = np.mean([math.log2(1 + math.exp(-v)) for v in rank[is_spoof]])
    cb = np.mean([math.log2(1 + math.exp(v)) for v in rank[~is_spoof]])
    assert m["cllr"] == pytest.approx((cs + cb) / 2, abs=TOL)
    assert m["min_cllr"] == pytest.approx(sklearn_min_cllr(rank, is_spoof), abs=TOL)
    assert m["min_cllr"] <= m["cllr"] + TOL


def test_perfect_separation_and_full_tie():
    is_spoof = np.array([False] * 5 + [True] * 5)
    perfect = metrics.compute(np.arange(10.0), is_spoof)
    assert (perfect["eer"], perfect["min_dcf"], perfect["auc"], perfect["min_cllr"]) == (0, 0, 1, 0)
    tied = metrics.compute(np.zeros(10), is_spoof)
    assert (tied["eer"], tied["min_dcf"], tied["auc"]) == (0.5, 1.0, 0.5)
    assert tied["min_cllr"] == pytest.approx(1.0, abs=TOL)


def test_a_tie_at_the_threshold_counts_as_synthetic():
    # one bona fide and one synthetic share the value 1.0: at t = 1.0 both are called synthetic
    rank = np.array([0.0, 1.0, 1.0, 2.0])
    is_spoof = np.array([False, False, True, True])
    ts, p_miss, p_fa = metrics.operating_points(rank, is_spoof)
    assert list(ts) == [0.0, 1.0, 2.0, np.inf]
    assert list(p_miss) == [0.0, 0.0, 0.5, 1.0]
    assert list(p_fa) == [1.0, 0.5, 0.0, 0.0]


@pytest.mark.parametrize("labels", [[True] * 4, [False] * 4, []])
def test_single_class_group_is_undefined_not_zero_or_one(labels):
    m = metrics.compute(np.arange(float(len(labels))), np.array(labels, dtype=bool))
    for k in ("eer", "min_dcf", "act_dcf", "auc", "cllr", "min_cllr"):
        assert m[k] is None
    assert "no " in m["undefined"]


def test_min_dcf_is_normalised_by_the_smaller_prior():
    # always-reject costs pi: normalised it is 1 for any pi <= 0.5
    is_spoof = np.array([False, True])
    m = metrics.compute(np.array([1.0, 0.0]), is_spoof, pi=0.3)  # inverted: best is trivial
    assert m["min_dcf"] == pytest.approx(1.0, abs=TOL)


def test_opposite_reading_flags_flipped_decisions_and_inversion():
    rank, is_spoof = random_set(3, ties=False)
    good = metrics.with_opposite(rank, is_spoof)
    assert good["suspect_inverted"] is False
    assert "better_than_chance" in good["flips"]
    assert good["opposite"]["auc"] == pytest.approx(1 - good["auc"], abs=TOL)
    bad = metrics.with_opposite(-rank, is_spoof)
    assert bad["suspect_inverted"] is True


def frames(seed=0, n=400):
    rng = np.random.default_rng(seed)
    label = np.where(rng.random(n) < 0.5, "spoof", "bonafide")
    gen = np.where(label == "spoof", rng.choice(["g1", "g2"], n), "bonafide")
    logit = rng.normal(size=n) + 1.5 * (label == "spoof")
    logit[gen == "g2"] -= 1.0  # g2 is harder
    dur = rng.uniform(1, 9, n)
    dur[label == "spoof"] = np.minimum(dur[label == "spoof"], 3.9)  # > 4 s: bona fide only
    key = pd.DataFrame({"path": [f"c{i}.wav" for i in range(n)], "label": label,
                        "generator": gen, "source": rng.choice(["A", "B"], n), "duration": dur})
    codec = rng.choice(["", "mp3", "opus"], n)
    scores = pd.DataFrame({"path": key["path"], "score": 1 / (1 + np.exp(-logit)),
                           "logit": logit, "codec": codec,
                           "augmentation": np.where(codec == "", "none", "codec")})
    return scores, key


def test_breakdowns_use_all_of_the_other_class_and_mark_single_class_buckets():
    scores, key = frames()
    m = metrics.evaluate(scores, key)
    b = m["breakdowns"]
    n_b = int((key["label"] == "bonafide").sum())
    assert b["generator"]["g1"]["n_bonafide"] == n_b
    assert b["generator"]["g2"]["eer"] > b["generator"]["g1"]["eer"]
    df = scores.merge(key, on="path")
    g1 = df[(df["generator"] == "g1") | (df["label"] == "bonafide")]
    assert b["generator"]["g1"]["eer"] == pytest.approx(
        sklearn_eer(g1["logit"].to_numpy(), (g1["label"] == "spoof").to_numpy()), abs=TOL)
    assert b["length"]["4-6s"]["eer"] is None and "synthetic" in b["length"]["4-6s"]["undefined"]
    assert set(b["codec"]) == {"none", "mp3", "opus"}
    clean = b["transcoded"]["clean"]
    assert clean["n_bonafide"] + clean["n_spoof"] == int((scores["codec"] == "").sum())
    assert set(b["source"]) == {"A", "B"}


def test_length_buckets_have_inclusive_upper_edges():
    assert [metrics.length_bucket(s) for s in (0.5, 4.0, 4.01, 6.0, 6.5)] == \
        ["<=4s", "<=4s", "4-6s", "4-6s", ">6s"]


def test_cli_json_carries_the_required_fields(tmp_path, capsys):
    scores, key = frames(1)
    scores.to_csv(tmp_path / "s.csv", index=False)
    key.to_csv(tmp_path / "k.csv", index=False)
    rc = metrics_cli.main([str(tmp_path / "s.csv"), "--key", str(tmp_path / "k.csv"), "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    for k in ("eer", "min_dcf", "act_dcf", "auc", "cllr", "min_cllr", "n_bonafide", "n_spoof",
              "breakdowns", "convention", "opposite", "flips"):
        assert k in doc
    assert doc["pi"] == 0.3


def test_cli_refuses_a_scored_path_missing_from_the_key(tmp_path, capsys):
    scores, key = frames(2)
    scores.to_csv(tmp_path / "s.csv", index=False)
    key.iloc[1:].to_csv(tmp_path / "k.csv", index=False)
    assert metrics_cli.main([str(tmp_path / "s.csv"), "--key", str(tmp_path / "k.csv")]) == 3
    assert "not in the key" in capsys.readouterr().err


def test_help_states_the_convention(capsys):
    with pytest.raises(SystemExit):
        metrics_cli.main(["--help"])
    text = capsys.readouterr().out
    assert "score high = synthetic" in text and "prior of the synthetic class" in text
    assert "false alarm" in text and "Exit codes" in text


def test_auc_matches_the_mann_whitney_definition_with_ties():
    rng = np.random.default_rng(26)
    pos, neg = rng.integers(0, 5, 40), rng.integers(1, 6, 50)
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    is_spoof = np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)]
    assert metrics.auc(np.r_[pos, neg], is_spoof) == pytest.approx(brute, abs=1e-12)


def test_the_four_readings_and_the_swapped_cost_direction():
    rng = np.random.default_rng(3)
    y = np.arange(300) % 2 == 1
    z = rng.normal(size=300) + 1.2 * y
    thr, p_miss, p_fa = metrics.operating_points(z, y)
    assert [metrics.reading_name(*r) for r in metrics.READINGS] == [
        "pi 0.3, as stated", "pi 0.3, swapped", "pi 0.5, as stated", "pi 0.5, swapped"]
    stated = metrics.min_dcf_reading(z, y, 0.3, "as stated")
    assert stated == metrics.min_dcf(p_miss, p_fa, thr, 0.3)
    # swapped: misses weighed 0.7, false alarms 0.3 (C_miss/C_fa exchanged), by brute force
    brute = min((0.7 * m + 0.3 * f) / 0.3 for m, f in zip(p_miss, p_fa, strict=True))
    assert metrics.min_dcf_reading(z, y, 0.3, "swapped")[0] == pytest.approx(brute)
    assert metrics.min_dcf_reading(z, y, 0.3, "swapped")[0] != pytest.approx(stated[0])
    assert metrics.min_dcf_reading(z, y, 0.5, "swapped") == metrics.min_dcf_reading(z, y, 0.5)
    assert metrics.min_dcf_reading(z, np.zeros(300, bool), 0.3) == (None, None)
    with pytest.raises(metrics.MetricsError, match="cost direction"):
        metrics.min_dcf_reading(z, y, 0.3, "sideways")


def scorer_csv(path, logits: dict[str, float | None]) -> None:
    """A CSV as hearsay-score writes it (its columns): None = a file it could not read."""
    from hearsay.deploy.io import COLUMNS

    rows = [{"path": p, "model_sums_sha256": "f" * 64,
             **({"logit": f"{v:.6f}", "score": f"{1 / (1 + math.exp(-v)):.6f}"} if v is not None
                else {"logit": "", "score": "", "error": "undecodable"})}
            for p, v in logits.items()]
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)


def test_cli_reads_the_scorers_csv_and_skips_its_failed_rows(tmp_path, capsys):
    logits = {"b0.wav": -2.0, "b1.wav": -1.0, "b2.wav": 0.5, "bad.wav": None, "s0.wav": 1.0,
              "s1.wav": 3.0}
    scorer_csv(tmp_path / "s.csv", logits)
    pd.DataFrame({"path": list(logits), "label": ["bonafide"] * 4 + ["spoof"] * 2}).to_csv(
        tmp_path / "k.csv", index=False)
    args = [str(tmp_path / "s.csv"), "--key", str(tmp_path / "k.csv")]
    assert metrics_cli.main(args + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed_rows_skipped"] == 1
    assert (doc["n_bonafide"], doc["n_spoof"]) == (3, 2)  # the failed clip is not a score
    assert metrics_cli.main(args) == 0
    assert "skipped 1 row(s) with an error" in capsys.readouterr().out


def test_a_row_without_a_score_and_without_an_error_is_still_refused(tmp_path, capsys):
    pd.DataFrame({"path": ["a", "b"], "logit": [1.0, None]}).to_csv(tmp_path / "s.csv",
                                                                    index=False)
    pd.DataFrame({"path": ["a", "b"], "label": ["spoof", "bonafide"]}).to_csv(
        tmp_path / "k.csv", index=False)
    assert metrics_cli.main([str(tmp_path / "s.csv"), "--key", str(tmp_path / "k.csv")]) == 3
    assert "non-finite" in capsys.readouterr().err


def test_fa_rate_prints_the_threshold_and_its_confusion_counts(tmp_path, capsys):
    # 10 bona fide at logits 0..9, 4 synthetic at 5.5, 8.5, 9.5, 12
    logits = {f"b{i}": float(i) for i in range(10)} | {"s0": 5.5, "s1": 8.5, "s2": 9.5,
                                                          "s3": 12.0}
    scorer_csv(tmp_path / "s.csv", logits)
    pd.DataFrame({"path": list(logits), "label": ["bonafide"] * 10 + ["spoof"] * 4}).to_csv(
        tmp_path / "k.csv", index=False)
    args = [str(tmp_path / "s.csv"), "--key", str(tmp_path / "k.csv"), "--fa-rate", "0.1"]
    assert metrics_cli.main(args) == 0
    out = capsys.readouterr().out
    assert "synthetic when logit >= 8.500000" in out  # one false alarm (b9) of ten: 0.1
    assert ("synthetic caught 3  synthetic missed 1  bona fide false alarms 1  bona fide "
            "passed 9") in out
    assert metrics_cli.main(args[:-1] + ["0.09", "--json"]) == 0  # under 1 in 10: none allowed
    r = json.loads(capsys.readouterr().out)["at_fa_rate"]
    assert (r["value"], r["bonafide_false_alarm"], r["synthetic_caught"]) == (9.5, 0, 2)


@pytest.mark.parametrize("min_dcf, below", [(1.0, False), (1.0000001, False), (0.9999999, True)])
def test_a_min_dcf_of_exactly_one_is_not_reported_as_better_than_the_trivial_detector(min_dcf,
                                                                                        below):
    d = metrics.decisions({"auc": 0.6, "min_dcf": min_dcf, "act_dcf": min_dcf})
    assert d["min_dcf_below_1"] is below and d["act_dcf_below_1"] is below


def test_an_inverted_detector_reads_min_dcf_one_and_is_no_better_than_trivial():
    is_spoof = np.array([False] * 5 + [True] * 5)
    m = metrics.with_opposite(-np.arange(10.0), is_spoof)  # every synthetic clip ranked lowest
    assert m["min_dcf"] == 1.0 and m["opposite"]["min_dcf"] == 0.0
    assert metrics.decisions(m)["min_dcf_below_1"] is False
    assert "min_dcf_below_1" in m["flips"] and m["suspect_inverted"] is True


@pytest.mark.parametrize("labels, why", [
    ([], "no clips in this group (n_bonafide=0, n_spoof=0)"),
    ([False, False], "no synthetic (spoof) clips in this group (n_bonafide=2, n_spoof=0)"),
    ([True, True, True], "no bona fide clips in this group (n_bonafide=0, n_spoof=3)")])
def test_an_undefined_group_names_the_class_it_lacks_and_both_counts(labels, why):
    m = metrics.compute(np.arange(float(len(labels))), np.array(labels, bool), pi=0.5)
    assert m == {"n_bonafide": labels.count(False), "n_spoof": labels.count(True), "pi": 0.5,
                 **dict.fromkeys(("eer", "min_dcf", "min_dcf_threshold", "act_dcf",
                                  "min_dcf_pi05", "act_dcf_pi05", "auc", "cllr", "min_cllr")),
                 "undefined": why}


def test_compute_reads_minDCF_and_actDCF_at_its_pi_and_at_05_beside():
    rank, is_spoof = random_set(5)
    m = metrics.compute(rank, is_spoof, rank + 0.3, pi=0.2)
    thr, p_miss, p_fa = metrics.operating_points(rank, is_spoof)
    assert (m["min_dcf"], m["min_dcf_threshold"]) == metrics.min_dcf(p_miss, p_fa, thr, 0.2)
    assert m["min_dcf_pi05"] == metrics.min_dcf(p_miss, p_fa, thr, 0.5)[0]
    assert m["act_dcf"] == metrics.act_dcf(rank + 0.3, is_spoof, 0.2)
    assert m["act_dcf_pi05"] == metrics.act_dcf(rank + 0.3, is_spoof, 0.5)
    assert m["cllr"] == metrics.cllr(rank + 0.3, is_spoof)  # the llr given, not the rank
    assert m["min_cllr"] == metrics.min_cllr(rank, is_spoof) and m["pi"] == 0.2
    assert (m["n_bonafide"], m["n_spoof"]) == (int((~is_spoof).sum()), int(is_spoof.sum()))
    with pytest.raises(metrics.MetricsError, match="non-finite"):
        metrics.compute(rank, is_spoof, np.where(is_spoof, np.inf, 0.0))


def test_the_opposite_reading_holds_the_six_figures_of_the_negated_scores():
    rank, is_spoof = random_set(4, ties=False)
    m = metrics.with_opposite(rank, is_spoof, rank * 2, pi=0.2)
    opp = metrics.compute(-rank, is_spoof, -rank * 2, pi=0.2)
    assert m["opposite"] == {k: opp[k] for k in ("eer", "min_dcf", "act_dcf", "auc", "cllr",
                                                   "min_cllr")}
    assert m["flips"] == sorted(m["flips"]) and m["pi"] == 0.2
    assert m["cllr"] == metrics.cllr(rank * 2, is_spoof)  # the llr given, not the rank
    one = metrics.with_opposite(np.arange(3.0), np.ones(3, bool))
    assert (one["flips"], one["suspect_inverted"]) == ([], None)  # undefined: nothing flips


def test_the_summary_names_every_figure_the_flips_the_inversion_and_each_group():
    m = {"n_bonafide": 3, "n_spoof": 2, "pi": 0.3, "eer": 0.25, "min_dcf": 0.5, "act_dcf": None,
         "min_dcf_pi05": 0.125, "auc": 0.4, "cllr": 1.0, "min_cllr": 0.75,
         "flips": ["better_than_chance", "min_dcf_below_1"], "suspect_inverted": True,
         "breakdowns": {"codec": {"mp3": {"n_bonafide": 1, "n_spoof": 2, "eer": 0.5,
                                          "min_dcf": 0.75},
                                  "none": {"n_bonafide": 0, "n_spoof": 1,
                                           "undefined": "no bona fide clips"}}}}
    assert metrics.summary_lines(m) == [
        "n_bonafide=3 n_spoof=2 pi=0.3",
        "eer=0.2500  min_dcf=0.5000  act_dcf=undefined  min_dcf_pi05=0.1250  auc=0.4000  "
        "cllr=1.0000  min_cllr=0.7500",
        "opposite convention flips: better_than_chance, min_dcf_below_1",
        "WARNING: AUC < 0.5, the scores look inverted (high = bona fide?)",
        "  codec/mp3: n_b=1 n_s=2 eer=0.5000 min_dcf=0.7500",
        "  codec/none: n_b=0 n_s=1 no bona fide clips"]
    quiet = {k: v for k, v in m.items() if k != "breakdowns"} | {"flips": [],
                                                                  "suspect_inverted": False}
    assert len(metrics.summary_lines(quiet)) == 2
    assert metrics.summary_lines({"n_bonafide": 0, "n_spoof": 1, "pi": 0.3,
                                  "undefined": "no bona fide clips"}) == [
        "n_bonafide=0 n_spoof=1 pi=0.3", "undefined: no bona fide clips"]


def test_codec_groups_read_a_missing_codec_as_none_and_split_clean_from_other_augmentation():
    labels = ["bonafide", "spoof"] * 4
    key = pd.DataFrame({"path": list("abcdefgh"), "label": labels})
    scores = pd.DataFrame({"path": list("abcdefgh"), "logit": np.arange(8.0),
                           "codec": [None, None, "", "mp3", "mp3", "mp3", "clean", ""],
                           "augmentation": [None, "", "noise", "codec", "codec", "codec", "none",
                                            None]})
    b = metrics.breakdowns(metrics.join(scores, key))
    counts = {k: {g: (v["n_bonafide"], v["n_spoof"]) for g, v in b[k].items()}
              for k in ("codec", "augmentation", "transcoded")}
    assert counts == {
        "codec": {"none": (2, 2), "clean": (1, 0), "mp3": (1, 2)},
        "augmentation": {"": (0, 1), "codec": (1, 2), "noise": (1, 0), "none": (2, 1)},
        "transcoded": {"clean": (2, 2), "other augmentation": (1, 0), "transcoded": (1, 2)}}
    no_aug = metrics.breakdowns(metrics.join(scores.drop(columns="augmentation"), key))
    assert "augmentation" not in no_aug  # absent columns are skipped; clean = no codec
    assert {g: (v["n_bonafide"], v["n_spoof"]) for g, v in no_aug["transcoded"].items()} == {
        "clean": (3, 2), "other augmentation": (0, 0), "transcoded": (1, 2)}


def test_no_codec_written_empty_or_none_is_one_group_holding_every_such_clip():
    key = pd.DataFrame({"path": list("abcdef"), "label": ["bonafide", "spoof"] * 3})
    scores = pd.DataFrame({"path": list("abcdef"), "logit": np.arange(6.0),
                           "codec": ["", "none", "none", "", "mp3", "mp3"]})
    b = metrics.breakdowns(metrics.join(scores, key))["codec"]
    assert {g: (v["n_bonafide"], v["n_spoof"]) for g, v in b.items()} == {
        "none": (2, 2), "mp3": (1, 1)}


def test_breakdown_groups_are_read_at_the_pi_asked_for():
    scores, key = frames(3)
    b = metrics.evaluate(scores, key, pi=0.2)["breakdowns"]
    assert {g["pi"] for groups in b.values() for g in groups.values()} == {0.2}
    assert list(b) == ["generator", "source", "length", "augmentation", "codec", "transcoded"]
    assert list(b["length"]) == ["<=4s", "4-6s", ">6s"]
    n_s = int((key["label"] == "spoof").sum())
    assert all(g["n_spoof"] == n_s for g in b["source"].values())  # all synthetic clips each
    bona = key[key["label"] == "bonafide"]
    assert {s: g["n_bonafide"] for s, g in b["source"].items()} == {
        s: int((bona["source"] == s).sum()) for s in ("A", "B")}  # and that source's bona fide


def test_evaluate_states_its_convention_and_takes_the_logit_as_llr():
    scores, key = frames(4)
    m = metrics.evaluate(scores, key, pi=0.2)
    assert m["convention"] == metrics.CONVENTION and m["pi"] == 0.2
    assert m["convention"].startswith("score high = synthetic; pi = prior of synthetic; miss")
    y = (scores.merge(key, on="path")["label"] == "spoof").to_numpy()
    assert m["act_dcf"] == metrics.act_dcf(scores["logit"].to_numpy(), y, 0.2)
    only_score = metrics.evaluate(scores.drop(columns="logit"), key)  # logit = log(s / (1 - s))
    assert only_score["auc"] == pytest.approx(metrics.evaluate(scores, key)["auc"], abs=1e-12)


def test_the_ranking_value_of_a_saturated_score_is_clipped_not_infinite():
    frame = pd.DataFrame({"score": [0.0, 0.5, 1.0]})
    r = metrics.rank_values(frame)
    assert r[1] == 0.0 and np.isfinite(r).all()
    assert r[0] == pytest.approx(math.log(1e-15)) and r[2] == pytest.approx(-r[0], rel=1e-4)


@pytest.mark.parametrize("seconds", [-0.1, float("nan"), float("inf")])
def test_a_duration_that_is_not_seconds_is_refused(seconds):
    with pytest.raises(metrics.MetricsError, match="bad duration"):
        metrics.length_bucket(seconds)
    assert metrics.length_bucket(0.0) == "<=4s"


def test_join_refuses_what_it_cannot_read_and_names_the_fix():
    key = pd.DataFrame({"path": ["a", "b"], "label": ["spoof", "bonafide"]})
    one = pd.DataFrame({"path": ["a"], "logit": [1.0]})
    bad_labels = pd.DataFrame({"path": list("abcdefg"), "label": list("gfedcba")})
    cases = [(pd.DataFrame({"logit": [1.0]}), key,
              "scores file lacks column(s) ['path']; it has ['logit']"),
             (pd.DataFrame({"path": ["a"]}), key,
              "scores file needs a `logit` or a `score` column"),
             (one, key.drop(columns="label"),
              "key file lacks column(s) ['label']; it has ['path']"),
             (one, bad_labels, "key labels must be bonafide/spoof; found "
                               "['a', 'b', 'c', 'd', 'e']"),  # the first five named
             (one, pd.concat([key, key.iloc[:1]]),
              "key has duplicate paths, e.g. 'a' (one row per clip)"),
             (pd.DataFrame({"path": ["a", "z"], "logit": [1.0, 2.0]}), key,
              "1 scored path(s) are not in the key, e.g. 'z' (the key must label every row)"),
             ]
    for scores, k, why in cases:
        with pytest.raises(metrics.MetricsError) as err:
            metrics.join(scores, k)
        assert str(err.value) == why
    j = metrics.join(pd.DataFrame({"path": ["b", "a"], "logit": [1.0, 2.0]}), key)
    assert j["is_spoof"].tolist() == [False, True] and j["rank"].tolist() == [1.0, 2.0]


def test_a_column_in_both_files_is_the_scores_and_the_keys_copy_is_suffixed():
    key = pd.DataFrame({"path": ["a", "b"], "label": ["spoof", "bonafide"], "codec": ["x", "y"]})
    scores = pd.DataFrame({"path": ["a", "b"], "logit": [1.0, 0.0], "codec": ["mp3", "opus"]})
    j = metrics.join(scores, key)
    assert j["codec"].tolist() == ["mp3", "opus"] and j["codec_key"].tolist() == ["x", "y"]
    assert j["label"].tolist() == ["spoof", "bonafide"]


@pytest.mark.parametrize("auc, better", [(0.5, False), (0.5000001, True), (0.4999999, False)])
def test_an_auc_of_exactly_half_is_not_better_than_chance(auc, better):
    assert metrics.decisions({"auc": auc, "min_dcf": 0.9, "act_dcf": 0.9})[
        "better_than_chance"] is better


def test_an_undefined_group_takes_no_decision():
    assert metrics.decisions({"auc": None}) == {"better_than_chance": None,
                                               "min_dcf_below_1": None, "act_dcf_below_1": None}


def test_scores_that_tell_nothing_flip_nothing_and_are_not_suspected_inverted():
    y = np.arange(10) % 2 == 1
    m = metrics.with_opposite(np.zeros(10), y)  # AUC exactly 0.5, minDCF and actDCF 1
    assert (m["auc"], m["min_dcf"], m["act_dcf"]) == (0.5, 1.0, 1.0)
    assert m["flips"] == [] and m["suspect_inverted"] is False


def test_act_dcf_is_normalised_by_the_smaller_prior_above_one_half_too():
    y = np.array([True, True, False, False])
    llr = np.array([5.0, -5.0, 5.0, -5.0])  # one miss in two, one false alarm in two
    for pi in (0.3, 0.7):
        assert metrics.act_dcf(llr, y, pi) == pytest.approx(0.5 / min(pi, 1 - pi))


def test_labels_given_as_zeros_and_ones_read_as_synthetic_and_bona_fide():
    rank, is_spoof = random_set(6)
    assert metrics.compute(rank, is_spoof.astype(int)) == metrics.compute(rank, is_spoof)
    assert metrics.auc(rank, is_spoof.astype(int)) == metrics.auc(rank, is_spoof)
    assert metrics.min_dcf_reading(rank, is_spoof.astype(int), 0.3, "swapped") == \
        metrics.min_dcf_reading(rank, is_spoof, 0.3, "swapped")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_score_is_refused_where_metrics_are_computed_naming_the_fix(bad):
    key = pd.DataFrame({"path": ["a", "b"], "label": ["spoof", "bonafide"]})
    j = metrics.join(pd.DataFrame({"path": ["a", "b"], "logit": [1.0, bad]}), key)
    with pytest.raises(metrics.MetricsError) as err:
        metrics.compute(j["rank"], j["is_spoof"])
    assert str(err.value) == "non-finite score or logit (fix the scorer; metrics refuse NaN/inf)"


def test_min_cllr_of_pure_blocks_is_computed_without_a_divide_warning():
    import warnings

    is_spoof = np.array([False] * 5 + [True] * 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log(0) at a pure block is the infinite LLR it means
        assert metrics.min_cllr(np.arange(10.0), is_spoof) == 0.0
