"""hearsay.detector.logits.sigmoid: the one logit -> score map, stable at any logit, float or
array."""

import math
import warnings

import numpy as np
import pytest

from hearsay.detector.logits import sigmoid


@pytest.mark.parametrize("z", [-800.0, -40.0, -1.5, 0.0, 2.25, 40.0, 800.0])
def test_sigmoid_matches_the_textbook_form_without_overflow(z):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # an overflow in exp would raise here
        got = sigmoid(z)
    want = 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
    assert isinstance(got, float) and got == pytest.approx(want, rel=1e-12, abs=0.0)


def test_sigmoid_of_an_array_is_element_wise_and_in_unit_interval():
    z = np.array([-800.0, -3.0, 0.0, 3.0, 800.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = sigmoid(z)
    assert got.shape == (5,) and got[0] == 0.0 and got[2] == 0.5 and got[4] == 1.0
    assert np.allclose(got[1] + got[3], 1.0)


def many_logits() -> np.ndarray:
    """A million logits as models write them, plus the extremes (saturation, denormals, inf)."""
    rng = np.random.default_rng(0)
    edges = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 36.7, 37.0, -709.0, -745.0, -746.0, 709.0,
             710.0, 1e308, -1e308, np.inf, -np.inf]
    return np.concatenate([rng.normal(0.0, 4.0, 1_000_000), rng.uniform(-800, 800, 100_000),
                           edges])


def test_expit_is_scipys_bit_for_bit_the_score_csvs_map():
    from scipy.special import expit as scipy_expit

    from hearsay.detector.logits import expit

    z = many_logits()
    assert np.array_equal(expit(z), scipy_expit(z))  # bit for bit, inf and 0 included
    assert expit(0.0) == 0.5 and expit(-np.inf) == 0.0 and expit(np.inf) == 1.0


def test_sigmoid_and_expit_agree_to_the_last_bit_of_one_but_not_bit_for_bit():
    """Why both stay: each keeps the files written with it byte-identical."""
    from hearsay.detector.logits import expit

    z = many_logits()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = sigmoid(z)
    e = expit(z)
    assert np.max(np.abs(s - e)) <= np.spacing(1.0)  # one ulp of 1.0 at most, anywhere
    differ = s != e
    assert differ.mean() > 0.05  # yet not the same bits, nor the same %.9g cells:
    assert any(f"{a:.9g}" != f"{b:.9g}" for a, b in zip(s[differ], e[differ], strict=True))
