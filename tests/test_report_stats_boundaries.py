"""hearsay.evaluate.report_stats at its edges: each record word for word, the bootstrap as its
docstring states it (the same seeded draws, every clip of a class drawable), labels given as
0/1, the carried threshold's counts at a class of one and at pi above 0.5, the fold spread of one
fold and in fold order, and the reliability bins' edges. (The main cases:
tests/test_report_stats.py.)"""

import numpy as np
import pandas as pd
import pytest

from hearsay import metrics
from hearsay.evaluate import report_stats as rs

RANK = np.array([2.0, 0.5, -1.0, 1.5, -0.5, 0.0, 3.0, -2.0])
Y = np.array([True, True, False, True, False, False, True, False])


def by_hand(rank, y, seed, n_boot, level, pi):
    """The stratified percentile bootstrap, step by step: per replicate the synthetic clips'
    indices, then the bona fide ones', each drawn with replacement from the seeded Generator."""
    spoof, bona = rank[y], rank[~y]
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(len(spoof), bool), np.zeros(len(bona), bool)]
    eers, dcfs = [], []
    for _ in range(n_boot):
        r = np.r_[spoof[rng.integers(0, len(spoof), len(spoof))],
                  bona[rng.integers(0, len(bona), len(bona))]]
        thr, p_miss, p_fa = metrics.operating_points(r, labels)
        eers.append(metrics.eer_from_points(p_miss, p_fa))
        dcfs.append(metrics.min_dcf(p_miss, p_fa, thr, pi)[0])
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    return list(np.quantile(dcfs, q)), list(np.quantile(eers, q))


def test_the_bootstrap_is_its_stated_procedure_and_names_its_settings():
    got = rs.bootstrap_ci(RANK, Y, seed=3, n_boot=40, level=0.8, pi=0.4)
    dcf, eer = by_hand(RANK, Y, 3, 40, 0.8, 0.4)
    assert got == {"n_boot": 40, "seed": 3, "level": 0.8, "pi": 0.4,
                   "method": "stratified percentile bootstrap (each class resampled apart)",
                   "min_dcf": dcf, "eer": eer}
    assert rs.bootstrap_ci(RANK, Y.astype(int), seed=3, n_boot=40, level=0.8, pi=0.4) == got


def test_a_bootstrap_of_one_class_says_so_in_its_record():
    assert rs.bootstrap_ci(RANK[Y], Y[Y], seed=1, n_boot=5) == {
        "n_boot": 5, "seed": 1, "level": rs.CI_LEVEL, "pi": metrics.PI_OF_RECORD,
        "method": "stratified percentile bootstrap (each class resampled apart)",
        "min_dcf": None, "eer": None, "undefined": "one class only"}


@pytest.mark.parametrize("spoof,bona", [([5.0, -5.0], [0.0]), ([5.0], [-4.0, 6.0])])
def test_every_clip_of_a_class_of_two_is_drawn(spoof, bona):
    """A class of two clips, one scored right and one wrong: replicates that drew only the first
    and replicates that drew only the second both occur, so the EER interval is wide."""
    rank = np.array(spoof + bona)
    y = np.array([True] * len(spoof) + [False] * len(bona))
    lo, hi = rs.bootstrap_ci(rank, y, n_boot=200)["eer"]
    assert lo == 0.0 and hi == 1.0


def test_the_paired_margin_names_its_settings_and_reads_labels_given_as_0_and_1():
    bar = RANK[::-1].copy()
    got = rs.paired_margin_ci(RANK, bar, Y, seed=5, n_boot=30, level=0.9, pi=0.3,
                              direction="as stated")
    assert {k: got[k] for k in ("n_boot", "seed", "level", "pi", "direction", "method")} == {
        "n_boot": 30, "seed": 5, "level": 0.9, "pi": 0.3, "direction": "as stated",
        "method": "paired stratified percentile bootstrap (the same clips for both)"}
    assert got["ours_minus_bar"] == (metrics.min_dcf_reading(RANK, Y, 0.3)[0]
                                     - metrics.min_dcf_reading(bar, Y, 0.3)[0])
    assert rs.paired_margin_ci(RANK, bar, Y.astype(int), seed=5, n_boot=30, level=0.9,
                               pi=0.3) == got
    one = rs.paired_margin_ci(RANK[Y], bar[Y], Y[Y], seed=5, n_boot=30)
    assert (one["ours_minus_bar"], one["interval"], one["undefined"]) == (None, None,
                                                                          "one class only")


def test_the_carried_threshold_counts_every_cell_and_normalises_dcf_by_the_smaller_prior():
    got = rs.at_threshold(RANK, Y.astype(int), 0.5, pi=0.7)
    assert got == {"threshold": 0.5, "n": 8, "called_synthetic": 4, "called_bonafide": 4,
                   "labelled": True, "synthetic_called_synthetic": 4, "synthetic_missed": 0,
                   "bonafide_false_alarm": 0, "bonafide_called_bonafide": 4, "p_miss": 0.0,
                   "p_fa": 0.0, "dcf": 0.0, "pi": 0.7}
    # one miss in two synthetic clips (caught = missed), no bona fide clip: no false-alarm rate
    got = rs.at_threshold([1.0, 0.0], [1, 1], 0.5, pi=0.7)
    assert (got["p_miss"], got["p_fa"], got["dcf"]) == (0.5, None, None)
    got = rs.at_threshold([1.0, 0.0, 0.9], [1, 1, 0], 0.5, pi=0.7)
    assert got["dcf"] == pytest.approx((0.7 * 0.5 + 0.3 * 1.0) / 0.3)


def joined(folds):
    return pd.DataFrame({"fold": folds, "rank": np.tile(RANK, len(folds) // len(RANK)),
                         "is_spoof": np.tile(Y, len(folds) // len(RANK))})


def test_the_fold_spread_is_in_fold_order_and_of_one_fold_has_no_sd():
    two = rs.per_fold(joined([2] * 8 + [10] * 8))
    assert list(two["folds"]) == ["fold 10", "fold 2"]  # the folds' names, sorted as text
    one = rs.per_fold(joined([3] * 8))
    f = one["folds"]["fold 3"]
    assert one["spread"]["min_dcf"] == {"n": 1, "mean": f["min_dcf"], "std": None,
                                        "min": f["min_dcf"], "max": f["min_dcf"]}
    none = rs.per_fold(pd.DataFrame({"fold": [0, 0], "rank": [1.0, 2.0],
                                     "is_spoof": [True, True]}))
    assert none["spread"]["eer"] == {"n": 0, "mean": None, "std": None, "min": None,
                                     "max": None}


def test_reliability_bins_are_equal_width_and_a_p_on_an_edge_opens_the_next_bin():
    got = rs.reliability([0.0, -1000.0, 1000.0, np.log(3.0)], [1, 0, 1, 1], n_bins=4)
    assert [(b["lo"], b["hi"], b["n"]) for b in got["bins"]] == [
        (0.0, 0.25, 1), (0.25, 0.5, 0), (0.5, 0.75, 1), (0.75, 1.0, 2)]
    assert got["bins"][3]["observed"] == 1.0 and got["bins"][0]["observed"] == 0.0
    assert got["n"] == 4 and got["ece"] == pytest.approx(
        (0.5 + abs(1 - (0.75 + 1.0) / 2) * 2) / 4)


def paired_by_hand(ours, bar, y, seed, n_boot, level, pi, direction):
    """The paired bootstrap, step by step: one draw of clip indices per replicate (synthetic
    then bona fide, each with replacement), both detectors read on it."""
    spoof, bona = np.flatnonzero(y), np.flatnonzero(~y)
    rng = np.random.default_rng(seed)

    def diff(idx):
        return (metrics.min_dcf_reading(ours[idx], y[idx], pi, direction)[0]
                - metrics.min_dcf_reading(bar[idx], y[idx], pi, direction)[0])

    diffs = [diff(np.r_[spoof[rng.integers(0, len(spoof), len(spoof))],
                        bona[rng.integers(0, len(bona), len(bona))]]) for _ in range(n_boot)]
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    return diff(np.arange(len(ours))), list(np.quantile(diffs, q))


@pytest.mark.parametrize("direction", metrics.DIRECTIONS)
def test_the_paired_margin_is_its_stated_procedure_in_either_cost_direction(direction):
    rng = np.random.default_rng(0)  # two overlapping detectors of 40 clips
    y = np.arange(40) % 3 == 0
    ours, bar = rng.normal(size=40) + 1.2 * y, rng.normal(size=40) + 0.8 * y
    got = rs.paired_margin_ci(ours, bar, y, seed=11, n_boot=60, level=0.8, pi=0.3,
                              direction=direction)
    point, interval = paired_by_hand(ours, bar, y, 11, 60, 0.8, 0.3, direction)
    assert (got["ours_minus_bar"], got["interval"]) == (point, interval)
    assert interval[0] < interval[1]


def test_a_carried_threshold_on_bona_fide_clips_only_has_no_miss_rate():
    got = rs.at_threshold([0.0, 1.0], [0, 0], 0.5)
    assert (got["p_miss"], got["p_fa"], got["dcf"]) == (None, 0.5, None)


def test_an_empty_reliability_bin_and_an_empty_set_have_no_means():
    got = rs.reliability([0.0, -1000.0, 1000.0, np.log(3.0)], [1, 0, 1, 1], n_bins=4)
    assert (got["bins"][1]["mean_p"], got["bins"][1]["observed"]) == (None, None)
    assert rs.reliability([], [], n_bins=2) == {
        "bins": [{"lo": 0.0, "hi": 0.5, "n": 0, "mean_p": None, "observed": None},
                 {"lo": 0.5, "hi": 1.0, "n": 0, "mean_p": None, "observed": None}],
        "ece": None, "n": 0}


def test_the_report_prints_an_infinite_threshold_and_each_interval_by_its_own_key():
    op = {"threshold": float("inf"), "sets": {}}
    assert "Synthetic is called at logit >= inf: " in rs.operating_lines(op)[2]
    u = {"bootstrap": {"test": {"value_min_dcf": 0.2, "min_dcf": None, "value_eer": 0.1,
                                "eer": [0.05, 0.15]}},
         "per_fold": {"folds": {"fold 0": {"n_bonafide": 1, "n_spoof": 1, "min_dcf": 0.5,
                                           "eer": 0.25, "auc": 0.5}},
                      "spread": {k: {"n": 0} for k in ("min_dcf", "eer", "auc")}}}
    lines = rs.uncertainty_lines(u)
    assert "| test | 0.2000 | undefined | 0.1000 | 0.0500 - 0.1500 |" in lines
    assert "| fold 0 | 1 | 1 | 0.5000 | 0.2500 | 0.5000 |" in lines
