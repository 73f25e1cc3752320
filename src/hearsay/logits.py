"""The one logit -> score map of the project: score = sigmoid(logit), high = synthetic.

    from hearsay.logits import sigmoid
    sigmoid(-800.0)                  # 0.0, no overflow warning (a float in, a float out)
    sigmoid(np.array([-3.0, 2.0]))   # float64 array, element-wise

numpy only (the deploy image imports it). Stable at any logit: exp is only ever taken of -|z|,
so it never overflows; both branches are the same function (1 / (1 + e^-z) = e^z / (1 + e^z)).
"""

from __future__ import annotations

import numpy as np


def sigmoid(z):
    """1 / (1 + e^-z) for a float or an array of logits, without overflow at any logit."""
    x = np.asarray(z, dtype=np.float64)
    e = np.exp(-np.abs(x))                      # in (0, 1]: never overflows
    out = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return float(out) if out.ndim == 0 else out
