"""Operating thresholds and the logit -> LLR calibration of a set of scores (numpy only).

    rec = calibration.decision_record(logit, is_spoof, fa_rate=0.01, source="out-of-fold")
    rec["thresholds"]["min_dcf"]["value"]       # synthetic is called at logit >= value
    llr = calibration.apply(logit, rec["calibration"])

`hearsay assemble` fits both on the pooled out-of-fold scores (each clip scored by a model that
never trained on it) and keeps them in models/<stamp>/meta.json ("decision"); `hearsay export onnx
--meta` copies them into the model folder's thresholds.json, which hearsay-score reads.

Thresholds (all on the logit, the ranking value; the decision is logit >= threshold, as in
hearsay.metrics):
  min_dcf   the lowest threshold reaching minDCF at pi = 0.3 (the operating point of record)
  eer       the first operating point (ascending) where the miss rate reaches the false-alarm
            rate: the crossing of the two rates, on the side of fewer false alarms
  fa_rate   the lowest threshold whose false-alarm rate on the set is <= the target (default
            DEFAULT_FA_RATE): the most synthetic clips caught at that cost to bona fide speakers
Each carries the rates and counts it has on the set it came from, and that set's name and size.

Calibration: llr = a * logit + b, (a, b) minimising Cllr (the prior-0.5 weighted logistic loss,
in bits) on the set by Newton's method: the standard linear calibration of detection scores
(Brümmer's FoCal). A monotone map with a > 0 keeps every ranking metric (EER, minDCF, AUC) as it
is; it fixes what actDCF and Cllr read. Cllr before (logit as LLR) and after are recorded.
"""

from __future__ import annotations

import numpy as np

from hearsay import metrics
from hearsay.metrics import PI_OF_RECORD

DEFAULT_FA_RATE = 0.01  # false-alarm rate of the `fa_rate` threshold (1 bona fide clip in 100)
NEWTON_STEPS = 50  # the 2-parameter problem converges in < 10 on any separable-ish set
RIDGE = 1e-6  # added to the Hessian's diagonal: a perfectly separated set stays finite


def _counts(rank, is_spoof, thr: float) -> dict:
    called = rank >= thr
    fp, tp = int((called & ~is_spoof).sum()), int((called & is_spoof).sum())
    n_b, n_s = int((~is_spoof).sum()), int(is_spoof.sum())
    return {"value": float(thr), "p_miss": (n_s - tp) / n_s, "p_fa": fp / n_b,
            "synthetic_caught": tp, "synthetic_missed": n_s - tp,
            "bonafide_false_alarm": fp, "bonafide_passed": n_b - fp}


def threshold_at_fa_rate(rank, is_spoof, fa_rate: float) -> dict:
    """The lowest threshold whose false-alarm rate is <= fa_rate, with its counts."""
    if not 0 <= fa_rate <= 1:
        raise ValueError(f"false-alarm rate {fa_rate} must lie in [0, 1]")
    rank, is_spoof = np.asarray(rank, np.float64), np.asarray(is_spoof, bool)
    if is_spoof.all() or not is_spoof.any():
        raise ValueError("a threshold needs both classes (bona fide and synthetic clips)")
    thr, _, p_fa = metrics.operating_points(rank, is_spoof)
    n_b = int((~is_spoof).sum())
    false_alarms = np.rint(p_fa * n_b)  # counts: 1 - 99/100 is not 0.01 in floating point
    i = int(np.argmax(false_alarms <= fa_rate * n_b + 1e-9))  # falls with the threshold
    return {**_counts(rank, is_spoof, thr[i]), "target_fa_rate": fa_rate}


def thresholds(rank, is_spoof, fa_rate: float = DEFAULT_FA_RATE,
               pi: float = PI_OF_RECORD) -> dict:
    """{"min_dcf", "eer", "fa_rate"}: each {"value", rates, counts}; see the module docstring."""
    rank, is_spoof = np.asarray(rank, np.float64), np.asarray(is_spoof, bool)
    if is_spoof.all() or not is_spoof.any():
        raise ValueError("thresholds need both classes (bona fide and synthetic clips)")
    thr, p_miss, p_fa = metrics.operating_points(rank, is_spoof)
    dcf, t_dcf = metrics.min_dcf(p_miss, p_fa, thr, pi)
    i_eer = int(np.argmax(p_miss - p_fa >= 0))  # first point with miss >= false alarm
    return {"min_dcf": {**_counts(rank, is_spoof, t_dcf), "pi": pi, "min_dcf": dcf},
            "eer": {**_counts(rank, is_spoof, thr[i_eer]),
                    "eer": metrics.eer_from_points(p_miss, p_fa)},
            "fa_rate": threshold_at_fa_rate(rank, is_spoof, fa_rate)}


def fit_affine(logit, is_spoof) -> tuple[float, float]:
    """(a, b) minimising Cllr of a * logit + b (each class weighted 1/2, as Cllr weighs them)."""
    x, y = np.asarray(logit, np.float64), np.asarray(is_spoof, bool)
    n_s, n_b = int(y.sum()), int((~y).sum())
    if not n_s or not n_b:
        raise ValueError("calibration needs both classes (bona fide and synthetic clips)")
    w = np.where(y, 0.5 / n_s, 0.5 / n_b)  # (N,) prior-0.5 weights, summing to 1
    t = y.astype(np.float64)
    # fitted on the standardised logit z = (x - m) / s: logits far from 0 or on any scale (a
    # model whose logits sit near 3000, or spread 0.01) give the same well-conditioned problem
    m = float(w @ x)
    s = float(np.sqrt(w @ (x - m) ** 2)) or 1.0  # every logit equal: nothing to scale
    X = np.stack([(x - m) / s, np.ones_like(x)], axis=1)  # (N, 2): slope, offset on z
    sign = np.where(y, -1.0, 1.0)  # loss of a clip: log(1 + exp(sign * llr))

    def loss(th: np.ndarray) -> float:  # Cllr * ln 2 (nats)
        return float(w @ np.logaddexp(0.0, sign * (X @ th)))

    theta = np.array([s, m])  # start at the identity: the logit taken as LLR (s * z + m = x)
    for _ in range(NEWTON_STEPS):
        p = np.exp(-np.logaddexp(0.0, -(X @ theta)))  # sigmoid, no overflow: P(synthetic)
        grad = X.T @ (w * (p - t))
        hess = (X * (w * p * (1 - p))[:, None]).T @ X + RIDGE * np.eye(2)
        step, before = np.linalg.solve(hess, grad), loss(theta)
        while loss(theta - step) > before and np.abs(step).max() > 1e-12:
            step = step / 2  # damped Newton: a far start (a very overconfident logit) converges
        theta = theta - step
        if np.abs(step).max() < 1e-10:
            break
    a = theta[0] / s  # back to the logit: a * x + b = theta[0] * z + theta[1]
    return float(a), float(theta[1] - a * m)


def apply(logit, cal: dict) -> np.ndarray:
    """The calibrated LLR (natural log) of logits: cal["a"] * logit + cal["b"]."""
    return cal["a"] * np.asarray(logit, np.float64) + cal["b"]


def calibration(logit, is_spoof) -> dict:
    """The fitted map with Cllr (bits) before (logit as LLR) and after it, and minCllr (the
    best any monotone map reaches on this set)."""
    x, y = np.asarray(logit, np.float64), np.asarray(is_spoof, bool)
    a, b = fit_affine(x, y)
    return {"kind": "affine", "formula": "llr = a * logit + b (natural log)", "a": a, "b": b,
            "cllr_before": metrics.cllr(x, y), "cllr_after": metrics.cllr(a * x + b, y),
            "min_cllr": metrics.min_cllr(x, y)}


def decision_record(logit, is_spoof, fa_rate: float = DEFAULT_FA_RATE,
                    source: str = "out-of-fold") -> dict:
    """What meta.json's "decision" holds: the thresholds and the calibration of one set, the
    set named (`source`) with its class counts."""
    x, y = np.asarray(logit, np.float64), np.asarray(is_spoof, bool)
    if not (np.isfinite(x).all()):
        raise ValueError("non-finite logits: thresholds and calibration need finite scores")
    return {"set": {"name": source, "n_bonafide": int((~y).sum()), "n_spoof": int(y.sum())},
            "score": "logit", "rule": "synthetic when logit >= threshold",
            "thresholds": thresholds(x, y, fa_rate), "calibration": calibration(x, y)}


def decision_lines(rec: dict) -> list[str]:
    """The report's lines on the shipped thresholds and the calibration (markdown)."""
    t, c, s = rec["thresholds"], rec["calibration"], rec["set"]
    f = t["fa_rate"]
    return ["## Thresholds and calibration shipped with the model", "",
            f"Chosen on the {s['name']} scores ({s['n_bonafide']} bona fide + {s['n_spoof']} "
            "synthetic clips); synthetic is called at logit >= threshold.", "",
            "| threshold | logit | miss rate | false-alarm rate |", "|---|---|---|---|",
            f"| minDCF (pi {t['min_dcf']['pi']:g}) | {t['min_dcf']['value']:.4f} | "
            f"{t['min_dcf']['p_miss']:.4f} | {t['min_dcf']['p_fa']:.4f} |",
            f"| EER | {t['eer']['value']:.4f} | {t['eer']['p_miss']:.4f} | "
            f"{t['eer']['p_fa']:.4f} |",
            f"| false-alarm rate <= {f['target_fa_rate']:g} | {f['value']:.4f} | "
            f"{f['p_miss']:.4f} | {f['p_fa']:.4f} |", "",
            f"Calibration {c['formula']}, a = {c['a']:.4f}, b = {c['b']:.4f}: Cllr "
            f"{c['cllr_before']:.4f} bits with the logit taken as LLR, {c['cllr_after']:.4f} "
            f"after (minCllr {c['min_cllr']:.4f}).", ""]
