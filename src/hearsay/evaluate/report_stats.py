"""Statistics of the campaign report beside the metrics of record (numpy only).

    ci = report_stats.bootstrap_ci(rank, is_spoof, seed=BOOTSTRAP_SEED)   # minDCF + EER, 95 %
    folds = report_stats.per_fold(oof_joined)            # metrics per inner fold + their spread
    op = report_stats.at_threshold(rank, is_spoof, thr)  # confusion counts at a carried threshold
    rel = report_stats.reliability(logit, is_spoof)      # calibration bins of sigmoid(logit)

The operating threshold of a campaign is the out-of-fold minDCF threshold (pi 0.3): it is chosen
on the inner clips, and carried unchanged to the holdout and the test split, where its confusion
counts say what a user of that threshold would see. A set's own minDCF threshold is an oracle
(chosen on the clips it is judged on) and is never the operating point.

The bootstrap resamples each class apart (stratified: every replicate keeps both classes and
their counts) with an explicit, seeded numpy Generator, so the interval is the same on every
run of the same scores. It is the spread of the clips only: it does not cover the training's
own randomness (that is what the per-fold spread shows) nor clips unlike these.
"""

from __future__ import annotations

import numpy as np

from hearsay import metrics
from hearsay.detector.logits import sigmoid
from hearsay.metrics import PI_OF_RECORD

BOOTSTRAP_SEED = 20261204  # fixed: the same interval on every run of the same scores
BOOTSTRAP_N = 1000  # replicates
CI_LEVEL = 0.95  # two-sided, percentile interval
RELIABILITY_BINS = 10  # equal-width bins of the predicted probability sigmoid(logit)


def _eer_dcf(rank: np.ndarray, is_spoof: np.ndarray, pi: float) -> tuple[float, float]:
    thr, p_miss, p_fa = metrics.operating_points(rank, is_spoof)
    return metrics.eer_from_points(p_miss, p_fa), metrics.min_dcf(p_miss, p_fa, thr, pi)[0]


def bootstrap_ci(rank, is_spoof, seed: int = BOOTSTRAP_SEED, n_boot: int = BOOTSTRAP_N,
                 level: float = CI_LEVEL, pi: float = PI_OF_RECORD) -> dict:
    """{"min_dcf": [lo, hi], "eer": [lo, hi], "n_boot", "seed", "level", "method"}; both
    intervals None (with "undefined") when a class is missing."""
    rank, is_spoof = np.asarray(rank, np.float64), np.asarray(is_spoof, bool)
    out = {"n_boot": n_boot, "seed": seed, "level": level, "pi": pi,
           "method": "stratified percentile bootstrap (each class resampled apart)"}
    spoof, bona = rank[is_spoof], rank[~is_spoof]
    if not len(spoof) or not len(bona):
        return {**out, "min_dcf": None, "eer": None, "undefined": "one class only"}
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(len(spoof), bool), np.zeros(len(bona), bool)]
    eers, dcfs = np.empty(n_boot), np.empty(n_boot)
    for b in range(n_boot):
        r = np.r_[spoof[rng.integers(0, len(spoof), len(spoof))],
                  bona[rng.integers(0, len(bona), len(bona))]]
        eers[b], dcfs[b] = _eer_dcf(r, labels, pi)
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    return {**out, "min_dcf": [float(v) for v in np.quantile(dcfs, q)],
            "eer": [float(v) for v in np.quantile(eers, q)]}


def paired_margin_ci(ours, bar, is_spoof, seed: int = BOOTSTRAP_SEED, n_boot: int = BOOTSTRAP_N,
                     level: float = CI_LEVEL, pi: float = PI_OF_RECORD,
                     direction: str = "as stated") -> dict:
    """The paired bootstrap of minDCF(ours) - minDCF(bar) on the same clips: `ours` and `bar` are
    the two detectors' ranking values of the same clips in the same order, (n,) float64;
    each replicate draws one set of clip indices (each class apart) and reads both detectors
    on it, so the clips' own difficulty cancels. {"ours_minus_bar": point, "interval": [lo, hi]
    (None with one class only), "n_boot", "seed", "level", "pi", "direction", "method"}.
    Negative = ours lower = ours better."""
    ours, bar = np.asarray(ours, np.float64), np.asarray(bar, np.float64)
    is_spoof = np.asarray(is_spoof, bool)
    out = {"n_boot": n_boot, "seed": seed, "level": level, "pi": pi, "direction": direction,
           "method": "paired stratified percentile bootstrap (the same clips for both)"}
    spoof, bona = np.flatnonzero(is_spoof), np.flatnonzero(~is_spoof)
    if not len(spoof) or not len(bona):
        return {**out, "ours_minus_bar": None, "interval": None, "undefined": "one class only"}

    def diff(idx):
        lab = is_spoof[idx]
        return (metrics.min_dcf_reading(ours[idx], lab, pi, direction)[0]
                - metrics.min_dcf_reading(bar[idx], lab, pi, direction)[0])

    rng = np.random.default_rng(seed)
    diffs = np.empty(n_boot)
    for b in range(n_boot):
        diffs[b] = diff(np.r_[spoof[rng.integers(0, len(spoof), len(spoof))],
                              bona[rng.integers(0, len(bona), len(bona))]])
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    return {**out, "ours_minus_bar": float(diff(np.arange(len(ours)))),
            "interval": [float(v) for v in np.quantile(diffs, q)]}


def per_fold(joined) -> dict:
    """{"folds": {fold: {n_bonafide, n_spoof, min_dcf, eer, auc}}, "spread": {metric: {mean,
    std, min, max}}} of metrics.join()ed out-of-fold rows (a `fold` column). std: ddof 1 (None
    with fewer than two defined folds)."""
    folds = {}
    for fold, sub in joined.groupby(joined["fold"].astype(str), sort=True):
        m = metrics.compute(sub["rank"].to_numpy(), sub["is_spoof"].to_numpy(), None,
                            PI_OF_RECORD)
        folds[f"fold {fold}"] = {k: m[k] for k in ("n_bonafide", "n_spoof", "min_dcf", "eer",
                                                   "auc")}
    spread = {}
    for k in ("min_dcf", "eer", "auc"):
        v = np.array([f[k] for f in folds.values() if f[k] is not None], np.float64)
        spread[k] = {"n": len(v), "mean": float(v.mean()) if len(v) else None,
                     "std": float(v.std(ddof=1)) if len(v) > 1 else None,
                     "min": float(v.min()) if len(v) else None,
                     "max": float(v.max()) if len(v) else None}
    return {"folds": folds, "spread": spread}


def at_threshold(rank, is_spoof, threshold: float, pi: float = PI_OF_RECORD) -> dict:
    """Confusion counts of the decisions rank >= threshold (synthetic called): true/false
    positives and negatives, miss and false-alarm rates and the normalised DCF at pi. `is_spoof`
    None (an unlabelled split): only the calls are counted."""
    rank = np.asarray(rank, np.float64)
    called = rank >= threshold
    out = {"threshold": float(threshold), "n": len(rank),
           "called_synthetic": int(called.sum()), "called_bonafide": int((~called).sum())}
    if is_spoof is None:
        return {**out, "labelled": False}
    y = np.asarray(is_spoof, bool)
    tp, fn = int((called & y).sum()), int((~called & y).sum())
    fp, tn = int((called & ~y).sum()), int((~called & ~y).sum())
    p_miss = fn / (tp + fn) if tp + fn else None
    p_fa = fp / (fp + tn) if fp + tn else None
    dcf = None if p_miss is None or p_fa is None else \
        (pi * p_miss + (1 - pi) * p_fa) / min(pi, 1 - pi)
    return {**out, "labelled": True, "synthetic_called_synthetic": tp, "synthetic_missed": fn,
            "bonafide_false_alarm": fp, "bonafide_called_bonafide": tn, "p_miss": p_miss,
            "p_fa": p_fa, "dcf": dcf, "pi": pi}


def reliability(logit, is_spoof, n_bins: int = RELIABILITY_BINS) -> dict:
    """Calibration of p = sigmoid(logit) as P(synthetic): equal-width bins of p with their clip
    count, mean p and observed synthetic fraction; "ece" = the count-weighted mean |observed -
    mean p| over non-empty bins. Training batches are label-balanced, so p is read at prior 0.5."""
    p = sigmoid(np.asarray(logit, np.float64))
    y = np.asarray(is_spoof, bool)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, n_bins - 1)
    bins = []
    for b in range(n_bins):
        sel = idx == b
        n = int(sel.sum())
        bins.append({"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": n,
                     "mean_p": float(p[sel].mean()) if n else None,
                     "observed": float(y[sel].mean()) if n else None})
    used = [b for b in bins if b["n"]]
    ece = (sum(b["n"] * abs(b["observed"] - b["mean_p"]) for b in used) / len(p)) if len(p) \
        else None
    return {"bins": bins, "ece": ece, "n": len(p)}


# --------------------------------------------------------------------------- report lines


def _f(v, spec=".4f") -> str:
    return "-" if v is None else format(v, spec)


def operating_lines(op: dict) -> list[str]:
    lines = ["## Operating point: the out-of-fold threshold on every set", "",
             f"Synthetic is called at logit >= {_f(op['threshold'])}: the out-of-fold minDCF "
             f"threshold (pi {PI_OF_RECORD}), chosen on the fold models' scores of the inner "
             "clips only and carried unchanged to the full model's holdout and test scores (a "
             "set's own minDCF threshold would be chosen on the clips it is judged on). DCF is at "
             "this threshold, minDCF at the set's own.", "",
             "| set | clips | synthetic caught | synthetic missed | bona fide false alarms | "
             "bona fide passed | miss rate | false-alarm rate | DCF 0.3 | minDCF 0.3 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, c in op["sets"].items():
        if not c.get("labelled"):
            lines.append(f"| {name} | {c['n']} | called synthetic {c['called_synthetic']} | "
                         f"called bona fide {c['called_bonafide']} | | | | | | |")
            continue
        lines.append(f"| {name} | {c['n']} | {c['synthetic_called_synthetic']} | "
                     f"{c['synthetic_missed']} | {c['bonafide_false_alarm']} | "
                     f"{c['bonafide_called_bonafide']} | {_f(c['p_miss'])} | {_f(c['p_fa'])} | "
                     f"{_f(c['dcf'])} | {_f(c.get('own_min_dcf'))} |")
    return lines + [""]


def uncertainty_lines(u: dict) -> list[str]:
    boot = next(iter(u["bootstrap"].values()), {})
    lines = ["## Uncertainty", "",
             f"{100 * boot.get('level', CI_LEVEL):g}% intervals: "
             f"{boot.get('method')}, {boot.get('n_boot')} replicates, numpy Generator seed "
             f"{boot.get('seed')} (the clips' spread only; the folds below show the training's).",
             "", "| set | minDCF 0.3 | interval | EER | interval |", "|---|---|---|---|---|"]
    for name, b in u["bootstrap"].items():
        ci = [f"{_f(b[k][0])} - {_f(b[k][1])}" if b.get(k) else "undefined"
              for k in ("min_dcf", "eer")]
        lines.append(f"| {name} | {_f(b.get('value_min_dcf'))} | {ci[0]} | "
                     f"{_f(b.get('value_eer'))} | {ci[1]} |")
    pf = u["per_fold"]
    lines += ["", "| fold | n bona fide | n synthetic | minDCF 0.3 | EER | AUC |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {k} | {f['n_bonafide']} | {f['n_spoof']} | {_f(f['min_dcf'])} | "
              f"{_f(f['eer'])} | {_f(f['auc'])} |" for k, f in pf["folds"].items()]
    sp = pf["spread"]
    cell = {k: (f"{_f(v['mean'])} ± {_f(v['std']) if v['std'] is not None else 'sd undefined'}"
                f" ({_f(v['min'])} - {_f(v['max'])})" if v["n"] else "undefined")
            for k, v in sp.items()}
    lines.append(f"| mean ± sd (min - max) over {sp['min_dcf']['n']} folds | | | "
                 f"{cell['min_dcf']} | {cell['eer']} | {cell['auc']} |")
    return lines + [""]
