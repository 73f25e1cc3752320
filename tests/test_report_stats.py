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


def test_the_operating_point_section_line_by_line():
    op = {"threshold": 0.25, "sets": {
        "holdout": {"labelled": True, "n": 10, "synthetic_called_synthetic": 4,
                    "synthetic_missed": 1, "bonafide_false_alarm": 2,
                    "bonafide_called_bonafide": 3, "p_miss": 0.2, "p_fa": 0.4, "dcf": 0.12345,
                    "own_min_dcf": 0.0625},
        "test": {"labelled": True, "n": 2, "synthetic_called_synthetic": 1,
                 "synthetic_missed": 0, "bonafide_false_alarm": 0, "bonafide_called_bonafide": 1,
                 "p_miss": 0.0, "p_fa": 0.0, "dcf": 0.0, "min_dcf": 0.5},
        "wild": {"labelled": False, "n": 7, "called_synthetic": 5, "called_bonafide": 2},
        "probe": {"n": 1, "called_synthetic": 0, "called_bonafide": 1}}}
    assert report_stats.operating_lines(op) == [
        "## Operating point: the out-of-fold threshold on every set", "",
        "Synthetic is called at logit >= 0.2500: the out-of-fold minDCF threshold (pi 0.3), "
        "chosen on the fold models' scores of the inner clips only and carried unchanged to the "
        "full model's holdout and test scores (a set's own minDCF threshold would be chosen on "
        "the clips it is judged on). DCF is at this threshold, minDCF at the set's own.", "",
        "| set | clips | synthetic caught | synthetic missed | bona fide false alarms | "
        "bona fide passed | miss rate | false-alarm rate | DCF 0.3 | minDCF 0.3 |",
        "|---|---|---|---|---|---|---|---|---|---|",
        "| holdout | 10 | 4 | 1 | 2 | 3 | 0.2000 | 0.4000 | 0.1235 | 0.0625 |",
        "| test | 2 | 1 | 0 | 0 | 1 | 0.0000 | 0.0000 | 0.0000 | - |",
        "| wild | 7 | called synthetic 5 | called bona fide 2 | | | | | | |",
        "| probe | 1 | called synthetic 0 | called bona fide 1 | | | | | | |", ""]


def uncertainty(boot=None, spread_n=2, std=0.0):
    stat = {"mean": 0.1, "std": std, "min": 0.05, "max": 0.15, "n": spread_n}
    return {"bootstrap": boot if boot is not None else {
                "out-of-fold": {"level": 0.9, "method": "percentile", "n_boot": 200, "seed": 7,
                                "value_min_dcf": 0.2, "min_dcf": [0.1, 0.3],
                                "value_eer": 0.05, "eer": None}},
            "per_fold": {"folds": {"0": {"n_bonafide": 3, "n_spoof": 4, "min_dcf": 0.5,
                                         "eer": None, "auc": 0.75}},
                         "spread": {"min_dcf": stat, "eer": {**stat, "n": 0},
                                    "auc": {**stat, "std": None, "n": 1}}}}


def test_the_uncertainty_section_line_by_line():
    assert report_stats.uncertainty_lines(uncertainty()) == [
        "## Uncertainty", "",
        "90% intervals: percentile, 200 replicates, numpy Generator seed 7 (the clips' spread "
        "only; the folds below show the training's).", "",
        "| set | minDCF 0.3 | interval | EER | interval |", "|---|---|---|---|---|",
        "| out-of-fold | 0.2000 | 0.1000 - 0.3000 | 0.0500 | undefined |", "",
        "| fold | n bona fide | n synthetic | minDCF 0.3 | EER | AUC |",
        "|---|---|---|---|---|---|",
        "| 0 | 3 | 4 | 0.5000 | - | 0.7500 |",
        "| mean ± sd (min - max) over 2 folds | | | 0.1000 ± 0.0000 (0.0500 - 0.1500) | "
        "undefined | 0.1000 ± sd undefined (0.0500 - 0.1500) |", ""]


def test_an_uncertainty_section_without_bootstrap_names_the_default_level():
    lines = report_stats.uncertainty_lines(uncertainty(boot={}))
    assert lines[2] == ("95% intervals: None, None replicates, numpy Generator seed None (the "
                        "clips' spread only; the folds below show the training's).")
    assert lines[4:7] == ["| set | minDCF 0.3 | interval | EER | interval |",
                          "|---|---|---|---|---|", ""]
