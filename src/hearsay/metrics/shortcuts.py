"""The shortcut bound, once: a trivial feature (duration, peak, leading silence, ...) that separates
the classes with max(AUC, 1 - AUC) at or above SHORTCUT_BOUND is a shortcut. The bundle's
diagnostics warn on it, the training stream's probe and the campaign gate refuse it, and the corpus
probe calls a corpus separable from its peers at it. Stdlib only.

    from hearsay.metrics.shortcuts import SHORTCUT_BOUND, single_class, strength
    strength(0.1) >= SHORTCUT_BOUND      # True: AUC 0.1 separates as well as 0.9
    single_class(18, 0)                  # True: a bona fide-only stream has no AUC to read
"""

SHORTCUT_BOUND = 0.85


def strength(auc: float) -> float:
    """max(AUC, 1 - AUC): how well a feature separates the classes, whichever way round."""
    return max(auc, 1.0 - auc)


def single_class(n_bonafide: int, n_spoof: int) -> bool:
    """A stream holding clips of one class only (a bona fide-only corpus, e.g. audiobooks): no
    within-stream contrast exists, so no AUC can ever be read there, however many clips it has.
    What such a stream's features give away across streams is the pooled ("all") AUC's to judge."""
    return (n_bonafide == 0) != (n_spoof == 0)
