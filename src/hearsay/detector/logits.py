"""The logit -> score map of the project: score = sigmoid(logit), high = synthetic.

    from hearsay.detector.logits import expit, sigmoid
    sigmoid(-800.0)                  # 0.0, no overflow warning (a float in, a float out)
    sigmoid(np.array([-3.0, 2.0]))   # float64 array, element-wise
    expit(logits)                    # the `score` column of the score CSVs
    (hearsay.contracts.score_file)

Two spellings of one function, each kept for the files already written with it:
  sigmoid  hearsay-score (both modes) and the demo's bar: numpy only (the deploy image imports
           it), stable at any logit: exp is only ever taken of -|z|, so it never overflows; both
           branches are the same function (1 / (1 + e^-z) = e^z / (1 + e^z)).
  expit    hearsay score / score-run / assemble's score CSVs: scipy.special.expit, 1 / (1 + e^-z)
           with libm's exp. The two differ by at most 2.2e-16 (one ulp of 1.0), yet in about
           a fifth of the bits (e^z / (1 + e^z) for z < 0; numpy's exp is not libm's), and one
           bit can change a %.9g cell: swapping one for the other would change written files
           (tests/test_logits.py measures it).
"""

from __future__ import annotations

import numpy as np


def sigmoid(z):
    """1 / (1 + e^-z) for a float or an array of logits, without overflow at any logit."""
    x = np.asarray(z, dtype=np.float64)
    e = np.exp(-np.abs(x))                      # in (0, 1]: never overflows
    out = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return float(out) if out.ndim == 0 else out


def expit(z):
    """scipy.special.expit(z), bit for bit: the `score` column of every training-side score CSV
    (scipy is imported here, so this module stays importable without it)."""
    from scipy.special import expit as scipy_expit

    return scipy_expit(z)
