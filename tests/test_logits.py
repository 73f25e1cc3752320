"""hearsay.logits.sigmoid: the one logit -> score map, stable at any logit, float or array."""

import math
import warnings

import numpy as np
import pytest

from hearsay.logits import sigmoid


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
