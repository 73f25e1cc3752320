"""models/<stamp>/meta.json and <reports>/<stamp>.md (+ DET curves and score histograms as PNG).

Called by `hearsay assemble` after F1-F6 passed (see hearsay.assemble for the command):

    meta = report.write_all(assembled, bundle, bars=[BAR_DIR], probe=PROBE_CSV, ledger=LEDGER,
                            reports=Path("docs/reports"))

What meta.json holds: metrics (hearsay.metrics, pi = 0.3 of record, 0.5 beside) of the pooled
out-of-fold scores, the clean holdout and the augmented holdout, each with its breakdowns
(generator, source, length <= 4 s / 4-6 s / > 6 s, augmentation, codec); clips per class per
fold ("counts"); the codec readout when the assembly scored one ("codec_readout": the clean
holdout rows that have every codec copy, each codec scored on exactly those rows); our own probe
record ("probe": false-alarm rate at our out-of-fold threshold, with its clips' set_sha256, so
that a later campaign can take this folder as its bar); the gate (hearsay.gate: holdout and
out-of-fold judged apart, probe against the bar's own rate, stream shortcuts, four readings);
the identities (config hash per run, bundle tree-sha, base-weights sha, git sha of each run and
of this checkout); the spend read from the ledger.

Spend: the sum of `cost` over the rentals of docs/ledger.csv (runner format: id,job,generation,
offer,dph,created,destroyed_confirmed,hours,cost; append-only: a creation row per rental, then a
closing row with its cost). No ledger -> "unknown" (never 0); rentals still open (no closing row)
-> "incomplete", the sum is then a lower bound.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hearsay import gate as gating
from hearsay import metrics, readouts, score_file
from hearsay import run_dir as run_dirs
from hearsay.files import jsonable
from hearsay.hashing import git_sha
from hearsay.metrics import PI_OF_RECORD

KEY_COLUMNS = ["path", "label", "generator", "source", "duration"]
HOLDOUT_CARRIES = 0.8  # holdout AUC from which the opening says the model carries over to it


# --------------------------------------------------------------------------- inputs


def key_frame(manifest):
    """The metrics key of a bundle manifest: path, label + breakdown columns."""
    return manifest[[c for c in KEY_COLUMNS if c in manifest.columns]].astype(
        {"path": str}).drop_duplicates("path")


def spend(ledger: Path | None) -> dict:
    """Spend from the runner's ledger; unknown when it cannot be read, never 0 by default."""
    import pandas as pd

    if ledger is None or not Path(ledger).is_file():
        return {"status": "unknown", "total_usd": None, "source": str(ledger),
                "note": "no ledger file: spend unknown"}
    try:
        df = pd.read_csv(ledger, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, OSError) as err:
        return {"status": "unknown", "total_usd": None, "source": str(ledger),
                "note": f"ledger unreadable: {err}"}
    need = {"id", "job", "cost"}
    if not need <= set(df.columns):
        return {"status": "unknown", "total_usd": None, "source": str(ledger),
                "note": f"ledger lacks columns {sorted(need - set(df.columns))}"}
    # Append-only ledger: a rental's creation row, then its closing row (cost set) once its
    # destruction is confirmed. A rental is its id; it is open while no row of it has a cost.
    cost = pd.to_numeric(df["cost"].replace("", np.nan), errors="coerce")
    closing = df.assign(cost=cost).dropna(subset=["cost"]).drop_duplicates("id")
    ids = df["id"].drop_duplicates()
    open_rows = int((~ids.isin(closing["id"])).sum())
    by_job = {j: float(c) for j, c in closing.groupby("job")["cost"].sum().items()}
    return {"status": "incomplete" if open_rows else "complete",
            "total_usd": float(closing["cost"].sum()), "rows": len(ids),
            "open_rows": open_rows, "by_job": by_job, "source": str(ledger),
            "note": (f"{open_rows} rental(s) without confirmed destruction: the total is a "
                     "lower bound") if open_rows else "every rental closed"}


# --------------------------------------------------------------------------- plots


def _probit_ticks():
    from scipy.stats import norm

    ticks = [0.001, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95]
    return norm.ppf(ticks), [f"{100 * t:g}%" for t in ticks]


def plot_det(curves: dict, path: Path) -> Path:
    """DET curves (probit axes) of {name: (rank, is_spoof)}; undefined sets are skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import norm

    fig, ax = plt.subplots(figsize=(5.5, 5.5), dpi=110)
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
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_hist(sets: dict, path: Path, thresholds: dict | None = None) -> Path:
    """Logit histograms per class, one panel per set {name: (rank, is_spoof)}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(sets), 1, figsize=(6.5, 2.4 * len(sets)), dpi=110,
                             squeeze=False)
    for ax, (name, (rank, is_spoof)) in zip(axes[:, 0], sets.items(), strict=True):
        bins = np.histogram_bin_edges(rank, bins=min(40, max(5, len(rank) // 4)))
        ax.hist(rank[~is_spoof], bins=bins, alpha=0.6, label=f"bona fide (n={(~is_spoof).sum()})",
                color="tab:blue")
        ax.hist(rank[is_spoof], bins=bins, alpha=0.6, label=f"synthetic (n={is_spoof.sum()})",
                color="tab:red")
        thr = (thresholds or {}).get(name)
        if thr is not None and np.isfinite(thr):
            ax.axvline(thr, c="k", ls="--", lw=1, label="minDCF threshold (pi 0.3)")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("logit (high = synthetic)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- meta + markdown


def _row(name: str, m: dict) -> str:
    if m.get("undefined"):
        return f"| {name} | {m['n_bonafide']} | {m['n_spoof']} | undefined: {m['undefined']} |" \
               + " |" * 7
    cells = [m[k] for k in ("eer", "min_dcf", "min_dcf_pi05", "act_dcf", "auc", "cllr",
                            "min_cllr")]
    return f"| {name} | {m['n_bonafide']} | {m['n_spoof']} | " + \
        " | ".join(f"{c:.4f}" for c in cells) + " |"


HEAD = ("| set | n bona fide | n synthetic | EER | minDCF 0.3 | minDCF 0.5 | actDCF 0.3 | AUC | "
        "Cllr | minCllr |\n|---|---|---|---|---|---|---|---|---|---|")


def _param_count(weights: Path) -> int | None:
    """Number of values in a safetensors file, read from its JSON header (no torch)."""
    try:
        with open(weights, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")  # header length, bytes
            header = json.loads(fh.read(n))
    except (OSError, ValueError):
        return None
    return sum(int(np.prod(t["shape"])) for k, t in header.items() if k != "__metadata__")


def what_was_run(done: dict, bundle, results: dict, about: dict) -> list[str]:
    """The opening lines: corpus, model size, steps, metric of record, what to look at, and one
    sentence on whether the model carries over to the holdout family (never seen in training)."""
    pin, metas = done["pin"], done["metas"]
    run_dir = Path(pin["runs"].get("full", {}).get("dir", "") or ".")
    try:
        cfg = json.loads(run_dirs.config_path(run_dir).read_text())
    except (OSError, ValueError):
        cfg = {}
    mc, tc = cfg.get("model") or {}, cfg.get("train") or {}
    n_par = _param_count(run_dirs.weights(run_dir))
    oof, hold = results["out-of-fold"], results["holdout clean"]
    lines = ["## What was run", ""]
    lines.append(f"- Corpus: {about.get('corpus') or 'the bundle named under Identity'}; "
                 f"{oof['n_bonafide']} bona fide + {oof['n_spoof']} synthetic clips scored "
                 f"out-of-fold, {hold['n_bonafide']} + {hold['n_spoof']} in the holdout.")
    if mc:
        size = f"{n_par:,} parameters" if n_par is not None else "parameter count unknown"
        lines.append(f"- Model: {'random-init' if mc.get('init') == 'random' else mc.get('init')}"
                     f" wav2vec2 shape, {mc.get('keep_layers')} transformer layers of width "
                     f"{mc.get('hidden_size')}, frozen CNN of {len(mc.get('conv_dim', []))} "
                     f"layers x {max(mc.get('conv_dim') or [0])} channels ({size}).")
    steps = sorted({m.get("steps") for m in metas.values()}, key=str)
    lines.append(f"- Training: {len(metas)} runs ({', '.join(metas)}), "
                 f"{'/'.join(str(s) for s in steps)} optimiser steps each"
                 + (f" of {tc.get('batch_size')} clips x {tc.get('grad_accum')}, crops <= "
                    f"{tc.get('max_crop_s') or 'the class cap'} s" if tc else "") + ".")
    lines.append(f"- Metric of record: minDCF at pi = {PI_OF_RECORD} (lower is better, 1 = no "
                 "better than always answering one class), read on the pooled out-of-fold "
                 "scores and on the clean holdout apart; EER and AUC beside it (AUC 0.5 = "
                 "chance, 1 = every synthetic clip above every bona fide one).")
    lines.append("- What to look at: the out-of-fold row of Metrics (each clip scored by the model "
                 "that never trained on it), the DET plot (chance is the dashed line from top left "
                 "to bottom right; the nearer a curve runs to the bottom-left corner, the better "
                 "it separates the classes; it meets the dotted diagonal at its EER) and the "
                 "holdout rows.")
    fams = ", ".join(((getattr(bundle, "meta", None) or {}).get("folds") or {})
                     .get("config", {}).get("holdout_families", [])) or "the holdout family"
    if hold.get("undefined") or oof.get("undefined"):
        lines.append(f"- Holdout ({fams}): undefined ({hold.get('undefined')}).")
    else:
        verdict = ("the model carries over to it" if hold["auc"] >= HOLDOUT_CARRIES else
                   "the model does not generalise to this unseen family: out-of-fold numbers say "
                   "nothing about generators it never trained on")
        lines.append(f"- Holdout ({fams}, a generator family never in training): AUC "
                     f"{hold['auc']:.3f} against {oof['auc']:.3f} out-of-fold; {verdict}.")
    return lines + [""]


def markdown(meta: dict, plots: dict, ablation_md: str | None = None) -> str:
    lines = [f"# Campaign report: {meta['name']}", "", *meta.get("opening", []),
             f"Conventions: {metrics.CONVENTION}.", "",
             *gating.markdown(meta["gate"], meta.get("bar_note"))]
    if ablation_md:  # the recipe decision that chose what these runs trained
        lines += [ablation_md, ""]
    lines += ["## Metrics", "", HEAD]
    lines += [_row(name, m) for name, m in meta["metrics"].items()]
    for name, m in meta["metrics"].items():
        if m.get("flips") or m.get("suspect_inverted"):
            inverted = "YES: check labels and sign" if m["suspect_inverted"] else "no"
            lines += ["", f"{name}: read as if high meant bona fide, these decisions reverse: "
                      f"{', '.join(m['flips']) or 'none'}; scores look inverted (AUC < 0.5): "
                      f"{inverted}."]
    lines += ["", "## Plots", ""] + [f"![{k}]({v})" for k, v in plots.items()]
    lines += readouts.counts_lines(meta.get("counts") or {})
    lines += readouts.codec_lines(meta.get("codec_readout"))
    lines += ["", "## Breakdowns", ""]
    for name, m in meta["metrics"].items():
        for kind, groups in m["breakdowns"].items():
            lines += [f"### {name}: per {kind}", "", HEAD]
            lines += [_row(g_name, gm) for g_name, gm in groups.items()] + [""]
    ids = meta["identity"]
    lines += ["## Identity", "", f"- bundle tree-sha: `{ids['bundle_tree_sha']}`",
              f"- base weights sha256: {', '.join(f'`{s}`' for s in ids['base_weights_sha'])}",
              f"- git sha of the runs: {', '.join(f'`{s}`' for s in ids['run_git_sha'])}; "
              f"of this assembly: `{ids['assemble_git_sha']}`"]
    lines += [f"- {k}: config `{r['config_hash']}`, weights `{r['weights_sha256']}`, "
              f"steps {r['steps']}" for k, r in ids["runs"].items()]
    s = meta["spend"]
    total = "unknown" if s["total_usd"] is None else f"${s['total_usd']:.2f}"
    lines += ["", "## Spend", "", f"{total} ({s['status']}; {s['note']}; from {s['source']})", ""]
    return "\n".join(lines)


def write_all(done: dict, bundle, bars: list[Path] = (), probe: Path | None = None,
              ledger: Path | None = None,
              reports: Path = Path("docs/reports"), about: dict | None = None,
              ablation: dict | None = None, ablation_md: str | None = None) -> dict:
    """meta.json + the markdown report + plots for an assembled campaign; returns meta.
    `ablation`: the recipe decision (hearsay compare's JSON), recorded as meta "ablation";
    `ablation_md`: its report section (hearsay.compare.markdown).

    `about` (optional): {"corpus": what the clips are, "bar": what the bar detector is and, for a
    bar that any model passes, that it is one} - words for the report's opening and gate line."""
    pin, files = done["pin"], done["files"]
    stamp = pin["stamp_dir"].name
    key = key_frame(bundle.manifest)
    df = done["scores"]
    oof = df[df["split"] == "inner_oof"]
    holdout = df[df["split"] == "holdout"]
    aug = score_file.read(files["full"][("holdout", True)])
    sets = {"out-of-fold": oof, "holdout clean": holdout, "holdout augmented": aug}
    for variant, name in (("test_length", "holdout test-length crops"),
                          ("whole", "holdout whole clips <= 14 s")):
        if ("holdout", variant) in files["full"]:
            sets[name] = score_file.read(files["full"][("holdout", variant)])
    results = {name: metrics.evaluate(frame, key, PI_OF_RECORD) for name, frame in sets.items()}
    probe_frame = None if probe is None else score_file.read(probe)
    g = gating.judge(oof, holdout, key, [gating.load_bar(b) for b in bars], probe_frame, probe,
                     done["metas"])
    codec = None
    if ("holdout", "codecs") in files["full"]:
        panel = score_file.read(files["full"][("holdout", "codecs")])
        codec = readouts.codec_readout(holdout, panel, key)
    metas = done["metas"]
    identity = {
        "bundle_tree_sha": bundle.tree_sha,
        "base_weights_sha": sorted({str(m.get("base_weights_sha")) for m in metas.values()}),
        "run_git_sha": sorted({str(m.get("git_sha")) for m in metas.values()}),
        "assemble_git_sha": git_sha(),
        "runs": {k: {"dir": str(pin["runs"][k]["dir"]), "config_hash": m.get("config_hash"),
                     "weights_sha256": pin["runs"][k]["weights_sha256"], "steps": m.get("steps")}
                 for k, m in metas.items()}}
    reports = Path(reports)
    plot_dir = reports / stamp
    plot_dir.mkdir(parents=True, exist_ok=True)
    curves = {}
    for name, frame in sets.items():
        j = metrics.join(frame, key)
        curves[name] = (j["rank"].to_numpy(float), j["is_spoof"].to_numpy(bool))
    thresholds = {n: r["min_dcf_threshold"] for n, r in results.items()}
    plots = {"DET curves": plot_det(curves, plot_dir / "det.png"),
             "score histograms": plot_hist(curves, plot_dir / "hist.png", thresholds)}
    if readouts.plot_codecs(codec, plot_dir / "codecs.png"):
        plots["codec readout"] = plot_dir / "codecs.png"
    report_md = reports / f"{stamp}.md"
    meta = {"name": pin["name"], "stamp": stamp,
            "scores_csv": str(Path(done["scores_csv"]).resolve()),
            "score_config": {"max_s": done["score_config"].max_s,
                             "aug_seed": done["score_config"].aug_seed},
            "convention": metrics.CONVENTION, "metrics": results, "gate": g, "probe": g["probe"],
            "counts": readouts.class_counts(df, key), "codec_readout": codec,
            "identity": identity, "parity": done.get("parity"), "spend": spend(ledger),
            "rescored_here": (done.get("scoring") or {}).get("rescored_here"),
            "scoring": done.get("scoring"),
            "checks": ["F1", "F2", "F3", "F4", "F5"]
            + (["F6"] if pin["parity"] and not pin["parity"].get("waived") else []),
            "report": str(report_md), "bar_note": (about or {}).get("bar"),
            "ablation": ablation,
            "layer_weights": {k: m.get("layer_weights") for k, m in metas.items()},
            "opening": what_was_run(done, bundle, results, about or {}),
            "plots": {k: str(v) for k, v in plots.items()}}
    rel = {k: str(Path(v).relative_to(reports)) for k, v in plots.items()}
    report_md.write_text(markdown(meta, rel, ablation_md))
    (pin["stamp_dir"] / "meta.json").write_text(
        json.dumps(jsonable(meta), indent=2, allow_nan=False, default=str) + "\n")
    return meta
