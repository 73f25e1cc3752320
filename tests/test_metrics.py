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
