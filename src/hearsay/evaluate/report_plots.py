"""The campaign report's PNG plots (matplotlib, Agg): DET curves, score histograms, training
curves, the reliability diagram and the learned layer weights.

    report_plots.plot_det({"out-of-fold": (rank, is_spoof), ...}, reports / stamp / "det.png")

Every legend sits outside the axes (to the right), so no legend covers a curve; every figure is
saved with bbox_inches="tight" so that legend stays inside the PNG.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hearsay import metrics

LEGEND_OUTSIDE = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0,
                  "fontsize": 8}
SMOOTH_STEPS = 51  # widest centred moving-average window (optimiser steps) of the loss line


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    fig.savefig(path, bbox_inches="tight")
    _plt().close(fig)
    return path


def _probit_ticks():
    from scipy.stats import norm

    ticks = [0.001, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95]
    return norm.ppf(ticks), [f"{100 * t:g}%" for t in ticks]


def plot_det(curves: dict, path: Path) -> Path:
    """DET curves (probit axes) of {name: (rank, is_spoof)}; undefined sets are skipped."""
    from scipy.stats import norm

    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.0, 5.0), dpi=110)
    for name, (rank, is_spoof) in curves.items():
        if is_spoof.all() or not is_spoof.any():
            continue
        _, p_miss, p_fa = metrics.operating_points(rank, is_spoof)
        eer = metrics.eer_from_points(p_miss, p_fa)
        clip = (1e-3 / 2, 1 - 1e-3 / 2)
        ax.plot(norm.ppf(np.clip(p_fa, *clip)), norm.ppf(np.clip(p_miss, *clip)),
                drawstyle="steps-post", label=f"{name} (EER {100 * eer:.1f}%)")
    pos, labels = _probit_ticks()
    ax.set_xticks(pos, labels)
    ax.set_yticks(pos, labels)
    ax.set_xlim(pos[0], pos[-1])
    ax.set_ylim(pos[0], pos[-1])
    ax.plot([pos[0], pos[-1]], [pos[0], pos[-1]], ls=":", c="grey", lw=0.8)  # miss = fa (EER)
    edge = pos[-1]  # chance: miss = 1 - fa, in probit axes the line y = -x
    ax.plot([-edge, edge], [edge, -edge], ls="--", c="grey", lw=0.8, label="chance")
    ax.set_xlabel("false alarm rate (bona fide called synthetic)")
    ax.set_ylabel("miss rate (synthetic called bona fide)")
    ax.set_title("DET (score high = synthetic)")
    ax.grid(True, lw=0.3)
    ax.legend(**LEGEND_OUTSIDE)
    return _save(fig, path)


def plot_hist(sets: dict, path: Path, threshold: float | None = None) -> Path:
    """Logit histograms per class, one panel per set {name: (rank, is_spoof)}; `threshold`, the
    out-of-fold minDCF threshold (pi 0.3), drawn on every panel: the one operating point."""
    plt = _plt()
    fig, axes = plt.subplots(len(sets), 1, figsize=(6.5, 2.4 * len(sets)), dpi=110,
                             squeeze=False)
    for ax, (name, (rank, is_spoof)) in zip(axes[:, 0], sets.items(), strict=True):
        bins = np.histogram_bin_edges(rank, bins=min(40, max(5, len(rank) // 4)))
        ax.hist(rank[~is_spoof], bins=bins, alpha=0.6, label=f"bona fide (n={(~is_spoof).sum()})",
                color="tab:blue")
        ax.hist(rank[is_spoof], bins=bins, alpha=0.6, label=f"synthetic (n={is_spoof.sum()})",
                color="tab:red")
        if threshold is not None and np.isfinite(threshold):
            ax.axvline(threshold, c="k", ls="--", lw=1,
                       label=f"out-of-fold threshold {threshold:.3g}")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("logit (high = synthetic)")
        ax.legend(**{**LEGEND_OUTSIDE, "fontsize": 7})
    fig.tight_layout()
    return _save(fig, path)


def smooth_window(n_steps: int) -> int:
    """Odd window of the loss line: a tenth of the run, at most SMOOTH_STEPS, at least 1."""
    return max(1, min(SMOOTH_STEPS, n_steps // 10) // 2 * 2 + 1)


def smooth(y: np.ndarray, k: int) -> np.ndarray:
    """Centred moving average over k (odd) steps; near the ends the window shrinks to the steps
    there are, so the line neither lags nor runs short."""
    c = np.cumsum(np.r_[0.0, y])
    i = np.arange(len(y))
    lo, hi = np.maximum(0, i - k // 2), np.minimum(len(y), i + k // 2 + 1)
    return (c[hi] - c[lo]) / (hi - lo)


def plot_curves(histories: dict, path: Path) -> Path | None:
    """Training loss (moving average of SMOOTH_STEPS steps, raw behind it) and the validation
    readouts (AUC, minDCF pi 0.3) per run over optimiser steps, from run_meta "history"
    {run: {"loss": [float per step], "val": [{"step", "auc", "min_dcf", ...}]}}. None when no
    run recorded a loss."""
    runs = {k: h for k, h in histories.items() if h and h.get("loss")}
    if not runs:
        return None
    plt = _plt()
    fig, (ax_l, ax_a, ax_d) = plt.subplots(3, 1, figsize=(7.0, 8.0), dpi=110, sharex=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    k = smooth_window(min(len(h["loss"]) for h in runs.values()))
    for i, (name, h) in enumerate(runs.items()):
        c = colours[i % len(colours)]
        loss = np.asarray(h["loss"], np.float64)
        steps = np.arange(1, len(loss) + 1)
        ax_l.plot(steps, loss, c=c, lw=0.5, alpha=0.25)
        ax_l.plot(steps, smooth(loss, k), c=c, lw=1.3, label=name)
        val = [v for v in h.get("val") or [] if v.get("auc") is not None]
        if val:
            vs = [v["step"] for v in val]
            ax_a.plot(vs, [v["auc"] for v in val], c=c, marker="o", ms=3, label=name)
            ax_d.plot(vs, [v.get("min_dcf") for v in val], c=c, marker="o", ms=3, label=name)
    tops = [max(np.quantile(h["loss"], 0.98), smooth(np.asarray(h["loss"], float), k).max())
            for h in runs.values()]
    ax_l.set_ylim(top=1.05 * max(tops))  # a rare spike above the 98th percentile runs off the top
    ax_l.set_ylabel("training loss (BCE)")
    ax_l.set_title(f"training loss (faint: each step; line: centred mean of {k} steps)",
                   fontsize=9)
    ax_a.set_ylabel("validation AUC")
    ax_a.axhline(0.5, c="grey", ls="--", lw=0.8)
    ax_d.set_ylabel("validation minDCF 0.3")
    ax_d.set_xlabel("optimiser step")
    for ax in (ax_l, ax_a, ax_d):
        ax.grid(True, lw=0.3)
    ax_l.legend(**LEGEND_OUTSIDE)
    if ax_a.lines[1:]:  # beside the chance line, a run with readouts
        ax_a.legend(**LEGEND_OUTSIDE)
    else:
        for ax in (ax_a, ax_d):
            ax.text(0.5, 0.5, "no validation readouts recorded", ha="center",
                    transform=ax.transAxes, color="grey")
    fig.tight_layout()
    return _save(fig, path)


def plot_reliability(rel: dict, path: Path) -> Path | None:
    """Reliability diagram of {set: report_stats.reliability(...)}: observed synthetic fraction
    against mean sigmoid(logit) per bin, the diagonal = calibrated; bin counts below."""
    rel = {k: r for k, r in rel.items() if r and r.get("n")}
    if not rel:
        return None
    plt = _plt()
    fig, (ax, ax_n) = plt.subplots(2, 1, figsize=(5.5, 6.0), dpi=110, sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], ls="--", c="grey", lw=0.8, label="calibrated")
    width = 1.0 / len(next(iter(rel.values()))["bins"]) / (len(rel) + 1)
    for i, (name, r) in enumerate(rel.items()):
        used = [b for b in r["bins"] if b["n"]]
        ax.plot([b["mean_p"] for b in used], [b["observed"] for b in used], marker="o", ms=3,
                label=f"{name} (ECE {r['ece']:.3f})")
        ax_n.bar([b["lo"] + (i + 0.5) * width for b in r["bins"]], [b["n"] for b in r["bins"]],
                 width, label=name)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("observed synthetic fraction")
    ax.set_title("reliability: sigmoid(logit) as P(synthetic)", fontsize=9)
    ax.grid(True, lw=0.3)
    ax.legend(**LEGEND_OUTSIDE)
    ax_n.set_xlabel("sigmoid(logit), binned")
    ax_n.set_ylabel("clips")
    ax_n.grid(True, lw=0.3)
    fig.tight_layout()
    return _save(fig, path)


def plot_layer_weights(weights: dict, path: Path) -> Path | None:
    """The learned softmax weights of the weighted layer sum per run {run: [w per hidden state]}
    (index 0 = the stem's output, then each kept transformer layer); None when none recorded."""
    weights = {k: w for k, w in weights.items() if w}
    if not weights:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.2), dpi=110)
    for name, w in weights.items():
        ax.plot(np.arange(len(w)), w, marker="o", ms=3, label=name)
    n = max(len(w) for w in weights.values())
    ax.axhline(1.0 / n, c="grey", ls="--", lw=0.8, label="uniform")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # one tick per state, never 0.25
    ax.set_ylim(bottom=0)
    ax.set_xlabel("hidden state h_k (h_0 = input to layer 1, h_k = output of layer k)")
    ax.set_ylabel("softmax weight")
    ax.set_title("learned layer weights of the weighted layer sum", fontsize=9)
    ax.grid(True, lw=0.3)
    ax.legend(**LEGEND_OUTSIDE)
    return _save(fig, path)
