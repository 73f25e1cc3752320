"""The shortcut bound, once: a trivial feature (duration, peak, leading silence, ...) that separates
the classes with max(AUC, 1 - AUC) at or above SHORTCUT_BOUND is a shortcut. The bundle's
diagnostics warn on it, the training stream's probe and the campaign gate refuse it, and the corpus
probe calls a corpus separable from its peers at it. Stdlib only.

    from hearsay.shortcuts import SHORTCUT_BOUND, strength
    strength(0.1) >= SHORTCUT_BOUND      # True: AUC 0.1 separates as well as 0.9
"""

SHORTCUT_BOUND = 0.85


def strength(auc: float) -> float:
    """max(AUC, 1 - AUC): how well a feature separates the classes, whichever way round."""
    return max(auc, 1.0 - auc)
