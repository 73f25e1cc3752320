"""hearsay.evaluate.report_stats: bootstrap intervals, the carried threshold, fold spread,
calibration."""

import numpy as np
import pandas as pd
import pytest

from hearsay import metrics
from hearsay.evaluate import report_stats


def scores(n=300, sep=1.5, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2 == 1
    return rng.normal(size=n) + sep * y, y


def test_bootstrap_interval_is_seeded_and_brackets_the_pooled_value():
    rank, y = scores()
    a = report_stats.bootstrap_ci(rank, y, n_boot=200)
    assert a == report_stats.bootstrap_ci(rank, y, n_boot=200)  # same seed: same interval
    other = report_stats.bootstrap_ci(rank, y, seed=1, n_boot=200)
    assert other["min_dcf"] != a["min_dcf"] and other["seed"] == 1
    m = metrics.compute(rank, y)
    assert a["min_dcf"][0] < m["min_dcf"] < a["min_dcf"][1]
    assert a["eer"][0] < m["eer"] < a["eer"][1]
    wide = report_stats.bootstrap_ci(rank, y, n_boot=200, level=0.99)
    assert wide["min_dcf"][0] <= a["min_dcf"][0] and wide["min_dcf"][1] >= a["min_dcf"][1]


def test_bootstrap_interval_narrows_with_more_clips():
    small = report_stats.bootstrap_ci(*scores(60), n_boot=200)
    big = report_stats.bootstrap_ci(*scores(2000), n_boot=200)
    assert np.diff(big["min_dcf"])[0] < np.diff(small["min_dcf"])[0]


def test_bootstrap_of_one_class_is_undefined_not_zero():
    got = report_stats.bootstrap_ci(np.arange(5.0), np.ones(5, bool))
    assert got["min_dcf"] is None and got["eer"] is None and got["undefined"]


def test_a_clip_at_the_threshold_is_called_synthetic_one_below_is_not():
    rank = np.array([0.9999, 1.0, 1.0001, 0.5, 2.0])
    y = np.array([True, True, False, False, True])
    c = report_stats.at_threshold(rank, y, 1.0)
    assert (c["synthetic_called_synthetic"], c["synthetic_missed"]) == (2, 1)
    assert (c["bonafide_false_alarm"], c["bonafide_called_bonafide"]) == (1, 1)
    assert c["p_miss"] == pytest.approx(1 / 3) and c["p_fa"] == pytest.approx(0.5)
    assert c["dcf"] == pytest.approx((0.3 / 3 + 0.7 * 0.5) / 0.3)
    unl = report_stats.at_threshold(rank, None, 1.0)
    assert unl == {"threshold": 1.0, "n": 5, "called_synthetic": 3, "called_bonafide": 2,
                   "labelled": False}


def test_an_infinite_threshold_calls_nothing_synthetic():
    rank, y = scores(20)
    c = report_stats.at_threshold(rank, y, np.inf)
    assert c["called_synthetic"] == 0 and c["p_miss"] == 1.0 and c["p_fa"] == 0.0
    assert c["dcf"] == pytest.approx(1.0)  # = always answering bona fide at pi 0.3


def test_the_carried_out_of_fold_threshold_gives_the_out_of_fold_min_dcf_there():
    rank, y = scores()
    m = metrics.compute(rank, y)
    assert report_stats.at_threshold(rank, y, m["min_dcf_threshold"])["dcf"] == \
        pytest.approx(m["min_dcf"])


def test_per_fold_spread_is_over_the_folds_with_both_classes():
    frames = []
    for fold, sep in (("0", 0.5), ("1", 3.0)):
        rank, y = scores(100, sep, seed=int(fold))
        frames.append(pd.DataFrame({"fold": fold, "rank": rank, "is_spoof": y}))
    frames.append(pd.DataFrame({"fold": "2", "rank": [0.1, 0.2], "is_spoof": [True, True]}))
    got = report_stats.per_fold(pd.concat(frames, ignore_index=True))
    assert list(got["folds"]) == ["fold 0", "fold 1", "fold 2"]
    assert got["folds"]["fold 2"]["min_dcf"] is None  # one class: undefined, left out below
    d = [got["folds"][f"fold {k}"]["min_dcf"] for k in "01"]
    sp = got["spread"]["min_dcf"]
    assert sp["n"] == 2 and sp["mean"] == pytest.approx(np.mean(d))
    assert sp["std"] == pytest.approx(np.std(d, ddof=1)) and sp["min"] == min(d)


def test_reliability_bins_count_every_clip_and_a_calibrated_model_has_small_ece():
    rng = np.random.default_rng(3)
    logit = rng.normal(scale=2.0, size=20000)
    y = rng.random(20000) < 1 / (1 + np.exp(-logit))  # drawn from the stated probability
    rel = report_stats.reliability(logit, y)
    assert sum(b["n"] for b in rel["bins"]) == 20000 and len(rel["bins"]) == 10
    assert rel["ece"] < 0.02
    over = report_stats.reliability(3 * logit, y)  # over-confident: far from the diagonal
    assert over["ece"] > 0.05
    edge = report_stats.reliability(np.array([50.0, -50.0]), np.array([True, False]))
    assert edge["bins"][-1]["n"] == 1 and edge["bins"][0]["n"] == 1  # p = 1.0 is in the last bin


@pytest.mark.parametrize("level, lo, hi", [(0.95, 24.975, 974.025), (0.90, 49.95, 949.05),
                                           (0.99, 4.995, 994.005)])
def test_the_interval_bounds_are_the_two_tail_percentiles_of_the_replicates(monkeypatch, level,
                                                                            lo, hi):
    """Replicate b reads (EER, minDCF) = (b, b) (b = 0..999): the 95% interval must be the
    2.5th and 97.5th percentiles of 0..999, np.quantile's linear reading."""
    calls = iter(range(10_000))
    monkeypatch.setattr(report_stats, "_eer_dcf", lambda *_: (float(next(calls)),) * 2)
    got = report_stats.bootstrap_ci(*scores(40), n_boot=1000, level=level)
    assert got["eer"] == pytest.approx([lo, hi], abs=1e-9)
    assert got["min_dcf"] == pytest.approx([lo, hi], abs=1e-9)
