"""hearsay.metrics.calibration: the out-of-fold thresholds (minDCF, EER, a false-alarm rate) and the
affine logit -> LLR calibration that the model folder ships."""

from __future__ import annotations

import numpy as np
import pytest

from hearsay import metrics
from hearsay.metrics import calibration


def gaussian_scores(seed: int = 0, n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Two unit-variance Gaussians 2 apart: the true LLR is 2 * x - 2 for x = N(0|1) vs N(2|1)."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.4
    x = rng.normal(0.0, 1.0, n) + 2.0 * y
    return x, y


def test_calibration_lowers_cllr_on_miscalibrated_scores():
    x, y = gaussian_scores()
    logit = 6.0 * (2 * x - 2) + 4.0  # overconfident and shifted: a bad LLR, a perfect ranking
    cal = calibration.calibration(logit, y)
    assert cal["cllr_after"] < 0.5 * cal["cllr_before"]
    assert cal["cllr_after"] == pytest.approx(metrics.cllr(calibration.apply(logit, cal), y))
    assert cal["cllr_after"] >= cal["min_cllr"] - 1e-9  # no monotone map beats PAV on its set
    assert cal["cllr_after"] - cal["min_cllr"] < 0.05  # the true map is affine (PAV overfits)
    assert cal["a"] == pytest.approx(1 / 6, rel=0.1)  # undoes the scale
    assert cal["a"] * 4.0 + cal["b"] == pytest.approx(0.0, abs=0.15)  # and the shift


def test_a_calibrated_logit_is_left_almost_as_it_is():
    x, y = gaussian_scores(1)
    cal = calibration.calibration(2 * x - 2, y)  # the true LLR
    assert cal["a"] == pytest.approx(1.0, abs=0.1) and cal["b"] == pytest.approx(0.0, abs=0.15)
    assert cal["cllr_after"] <= cal["cllr_before"] + 1e-12


def test_separated_scores_give_a_finite_map():
    logit = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    y = logit > 0
    a, b = calibration.fit_affine(logit, y)
    assert np.isfinite([a, b]).all() and a > 0


def test_min_dcf_threshold_is_the_metrics_threshold_and_eer_sits_at_the_crossing():
    x, y = gaussian_scores(2, 500)
    t = calibration.thresholds(x, y)
    m = metrics.compute(x, y)
    assert t["min_dcf"]["value"] == m["min_dcf_threshold"]
    assert t["min_dcf"]["min_dcf"] == pytest.approx(m["min_dcf"])
    e = t["eer"]
    assert e["p_miss"] >= e["p_fa"]  # at the threshold: misses reached false alarms ...
    below = x[x < e["value"]].max()  # ... one operating point lower they had not
    p_miss = np.mean(x[y] < below)
    p_fa = np.mean(x[~y] >= below)
    assert p_miss < p_fa
    assert e["eer"] == pytest.approx(m["eer"])


@pytest.mark.parametrize(("target", "want_thr", "want_fa"), [
    (0.01, 99.0, 1),     # exactly 1 of 100: allowed (<=)
    (0.0099, 99.5, 0),   # just under: the next operating point, no false alarm
    (0.02, 98.0, 2),     # two allowed
])
def test_fa_rate_threshold_on_both_sides_of_its_boundary(target, want_thr, want_fa):
    bona = np.arange(100, dtype=float)  # 0 .. 99
    spoof = np.array([99.5, 120.0, 50.0])
    x = np.r_[bona, spoof]
    y = np.r_[np.zeros(100, bool), np.ones(3, bool)]
    r = calibration.threshold_at_fa_rate(x, y, target)
    assert r["value"] == want_thr
    assert r["bonafide_false_alarm"] == want_fa and r["p_fa"] == want_fa / 100
    assert r["synthetic_caught"] + r["synthetic_missed"] == 3
    assert r["bonafide_false_alarm"] + r["bonafide_passed"] == 100


def test_thresholds_need_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        calibration.thresholds(np.array([1.0, 2.0]), np.array([True, True]))
    with pytest.raises(ValueError, match="both classes"):
        calibration.threshold_at_fa_rate(np.array([1.0]), np.array([False]), 0.1)


def test_decision_record_names_its_set_and_the_report_prints_cllr_before_and_after():
    x, y = gaussian_scores(3, 300)
    rec = calibration.decision_record(5 * x, y, 0.05, "out-of-fold")
    assert rec["set"] == {"name": "out-of-fold", "n_bonafide": int((~y).sum()),
                          "n_spoof": int(y.sum())}
    assert set(rec["thresholds"]) == {"min_dcf", "eer", "fa_rate"}
    assert rec["thresholds"]["fa_rate"]["target_fa_rate"] == 0.05
    text = "\n".join(calibration.decision_lines(rec))
    c = rec["calibration"]
    assert f"{c['cllr_before']:.4f}" in text and f"{c['cllr_after']:.4f}" in text
    with pytest.raises(ValueError, match="non-finite"):
        calibration.decision_record(np.r_[x[:-1], np.inf], y)


@pytest.mark.parametrize("bona, spoof, want_thr, want_miss, want_fa", [
    # at logit 4 the rates are equal (1 of 4 synthetic missed, 1 of 4 bona fide alarmed): the
    # EER threshold is that point, not the next one up (5: miss 0.5, false alarm 0.25)
    ([0, 1, 2, 5], [3, 4, 6, 7], 4.0, 0.25, 0.25),
    # no point of equality: the first point whose miss rate passes the false-alarm rate (4:
    # miss 0.25 > 0.2), not the one before it (3: miss 0.25 < 0.4)
    ([0, 1, 2, 3, 5], [2.5, 4, 6, 7], 4.0, 0.25, 0.2),
    # equality at the lowest synthetic score: nothing missed, nothing alarmed
    ([0, 1, 2, 3], [4, 5, 6, 7], 4.0, 0.0, 0.0),
])
def test_the_eer_threshold_is_the_first_point_whose_miss_rate_reaches_the_false_alarms(
        bona, spoof, want_thr, want_miss, want_fa):
    rank = np.array(bona + spoof, dtype=float)
    is_spoof = np.r_[np.zeros(len(bona), bool), np.ones(len(spoof), bool)]
    eer = calibration.thresholds(rank, is_spoof)["eer"]
    assert (eer["value"], eer["p_miss"], eer["p_fa"]) == (want_thr, want_miss, want_fa)


def test_labels_given_as_0_and_1_read_as_the_classes_they_name():
    x, y = gaussian_scores(5, 200)
    as_ints = y.astype(int).tolist()
    want = calibration.decision_record(x, y, 0.05)
    assert calibration.decision_record(x, as_ints, 0.05) == want
    assert calibration.thresholds(x, as_ints, 0.05) == want["thresholds"]
    assert calibration.threshold_at_fa_rate(x, as_ints, 0.05) == want["thresholds"]["fa_rate"]
    assert calibration.fit_affine(x, as_ints) == (want["calibration"]["a"],
                                                  want["calibration"]["b"])
    assert calibration.calibration(x, as_ints) == want["calibration"]


def test_the_record_names_its_score_its_rule_and_its_map():
    x, y = gaussian_scores(6, 200)
    rec = calibration.decision_record(x, y)
    assert rec["set"]["name"] == "out-of-fold"
    assert rec["score"] == "logit" and rec["rule"] == "synthetic when logit >= threshold"
    assert (rec["calibration"]["kind"], rec["calibration"]["formula"]) == (
        "affine", "llr = a * logit + b (natural log)")
    with pytest.raises(ValueError) as err:
        calibration.decision_record(np.r_[x[:-1], np.nan], y)
    assert str(err.value) == "non-finite logits: thresholds and calibration need finite scores"


def test_the_report_section_line_by_line():
    x, y = gaussian_scores(7, 200)
    rec = calibration.decision_record(x, y, 0.05, "out-of-fold")
    lines = calibration.decision_lines(rec)
    s, c = rec["set"], rec["calibration"]
    assert lines[:6] == [
        "## Thresholds and calibration shipped with the model", "",
        f"Chosen on the out-of-fold scores ({s['n_bonafide']} bona fide + {s['n_spoof']} "
        "synthetic clips); synthetic is called at logit >= threshold.", "",
        "| threshold | logit | miss rate | false-alarm rate |", "|---|---|---|---|"]
    assert lines[6].startswith("| minDCF (pi 0.3) | ") and lines[7].startswith("| EER | ")
    assert lines[8].startswith("| false-alarm rate <= 0.05 | ") and lines[9] == ""
    assert lines[10:] == [f"Calibration llr = a * logit + b (natural log), a = {c['a']:.4f}, "
                          f"b = {c['b']:.4f}: Cllr {c['cllr_before']:.4f} bits with the logit "
                          f"taken as LLR, {c['cllr_after']:.4f} after (minCllr "
                          f"{c['min_cllr']:.4f}).", ""]


@pytest.mark.parametrize("fa_rate", [0.0, 1.0])
def test_a_false_alarm_target_of_0_or_1_is_taken(fa_rate):
    x, y = gaussian_scores(8, 200)
    assert calibration.threshold_at_fa_rate(x, y, fa_rate)["target_fa_rate"] == fa_rate


@pytest.mark.parametrize("fa_rate", [-0.01, 1.01])
def test_a_false_alarm_target_outside_0_to_1_is_refused(fa_rate):
    x, y = gaussian_scores(8, 200)
    with pytest.raises(ValueError) as err:
        calibration.threshold_at_fa_rate(x, y, fa_rate)
    assert str(err.value) == f"false-alarm rate {fa_rate} must lie in [0, 1]"


def test_each_fit_refuses_one_class_in_its_own_words():
    x = np.linspace(-1, 1, 10)
    for y in (np.zeros(10, bool), np.ones(10, bool)):
        with pytest.raises(ValueError) as err:
            calibration.threshold_at_fa_rate(x, y, 0.1)
        assert str(err.value) == "a threshold needs both classes (bona fide and synthetic clips)"
        with pytest.raises(ValueError) as err:
            calibration.thresholds(x, y)
        assert str(err.value) == "thresholds need both classes (bona fide and synthetic clips)"
        with pytest.raises(ValueError) as err:
            calibration.fit_affine(x, y)
        assert str(err.value) == "calibration needs both classes (bona fide and synthetic clips)"


def weighted_loss_and_gradient(a_b, x, y):
    """Cllr * ln 2 of a * x + b and its gradient, written out here apart from the module's."""
    a, b = a_b
    w = np.where(y, 0.5 / y.sum(), 0.5 / (~y).sum())
    z = np.where(y, -1.0, 1.0) * (a * x + b)
    d = w * np.where(y, -1.0, 1.0) * np.exp(-np.logaddexp(0.0, -z))  # d loss / d (a x + b)
    return float(w @ np.logaddexp(0.0, z)), np.array([d @ x, d.sum()])


@pytest.mark.parametrize("scale,shift", [(6.0, 4.0), (300.0, -50.0), (0.02, 0.5), (1.0, 300.0),
                                         (1.0, 5000.0), (0.01, 3000.0), (1.0, -5000.0)])
def test_the_fit_is_the_minimum_of_cllr_from_any_start(scale, shift):
    """Overconfident by 300 (an undamped Newton step from the identity overshoots there),
    underconfident by 50, shifted by 300 (a step halved to any size but the smallest still
    overshoots), or logits near ±5000 or 3000 spread 0.01 (the logit's column then dwarfs the
    offset's: unstandardised, 50 steps end far from the minimum): the fit lands where the
    loss's gradient is zero, on the minimum a general optimiser finds."""
    from scipy.optimize import minimize

    x, y = gaussian_scores(2)
    logit = scale * (2 * x - 2) + shift
    a, b = calibration.fit_affine(logit, y)
    loss, grad = weighted_loss_and_gradient((a, b), logit, y)
    # d loss / d a sums d_i * logit_i: next to `shift` it carries the rounding of the sum of
    # the d_i (about 1e-12) times the shift, so that one is read per unit of the shift
    assert abs(grad[1]) < 1e-9 and abs(grad[0]) < 1e-9 * max(1.0, abs(shift))
    ref = minimize(weighted_loss_and_gradient, [1.0 / scale, 0.0], args=(logit, y), jac=True,
                   method="BFGS", options={"gtol": 1e-12})
    assert loss <= ref.fun + 1e-12
    # the map undoes the scale and the shift: a * logit + b is near the true LLR 2 x - 2
    assert (a * scale, b + a * shift) == (pytest.approx(1.0, abs=0.1), pytest.approx(0.0,
                                                                                     abs=0.15))


@pytest.mark.parametrize("scale,shift", [(1.0, 5000.0), (0.01, 3000.0), (1000.0, -20.0)])
def test_a_shifted_or_scaled_logit_gets_the_same_calibrated_llrs(scale, shift):
    """The fit reads the logit through a standardisation, so a model whose logits sit near
    5000, or spread 0.01 or 1000, gets the same LLRs, and the same Cllr after, as the same
    scores near 0 on a unit scale."""
    x, y = gaussian_scores(4)
    base = calibration.calibration(2 * x - 1, y)
    moved = calibration.calibration(scale * (2 * x - 1) + shift, y)
    llr = calibration.apply(scale * (2 * x - 1) + shift, moved)
    assert np.abs(llr - calibration.apply(2 * x - 1, base)).max() < 1e-6
    assert moved["cllr_after"] == pytest.approx(base["cllr_after"], abs=1e-9)


def test_logits_of_any_float_width_fit_the_same_map():
    """float32 logits (an ONNX run's) are read as float64 in every step, so their map, its
    Cllr, the thresholds and the calibrated LLRs are those of the same numbers in float64."""
    x, y = gaussian_scores(3)
    logit32 = (4 * x - 1).astype(np.float32)
    logit64 = logit32.astype(np.float64)
    assert calibration.fit_affine(logit32, y) == calibration.fit_affine(logit64, y)
    cal = calibration.calibration(logit32, y)
    assert cal == calibration.calibration(logit64, y)
    llr = calibration.apply(logit32, cal)
    assert llr.dtype == np.float64 and (llr == cal["a"] * logit64 + cal["b"]).all()
    assert calibration.thresholds(logit32, y) == calibration.thresholds(logit64, y)
    assert calibration.decision_record(logit32, y) == calibration.decision_record(logit64, y)
    assert calibration.fit_affine(list(map(int, np.round(logit32))), y) == \
        calibration.fit_affine(np.round(logit32).astype(np.float64), y)
