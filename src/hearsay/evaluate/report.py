"""models/<stamp>/meta.json and <reports>/<stamp>.md (+ PNG plots: DET curves, score
histograms, training curves, reliability diagram, codec readout, learned layer weights).

Called by `hearsay assemble` after F1-F6 passed (see hearsay.evaluate.assemble for the command):

    meta = report.write_all(assembled, bundle, bars=[BAR_DIR], probe=PROBE_CSV, ledger=LEDGER,
                            reports=Path("docs/reports"))

What meta.json holds: metrics (hearsay.metrics, pi = 0.3 of record, 0.5 beside) of the pooled
out-of-fold scores, the clean holdout and the augmented holdout, each with its breakdowns
(generator, source, length <= 4 s / 4-6 s / > 6 s, augmentation, codec); clips per class per
fold ("counts"); the codec readout when the assembly scored one ("codec_readout": the clean
holdout rows that have every codec copy, each codec scored on exactly those rows); our own probe
record ("probe": false-alarm rate at our out-of-fold threshold, with its clips' set_sha256, so
that a later campaign can take this folder as its bar); the gate (hearsay.evaluate.gate: holdout and
out-of-fold judged apart, probe against the bar's own rate, stream shortcuts, four readings);
the identities (config hash per run, bundle tree-sha, base-weights sha, git sha of each run and
of this checkout); the spend read from the ledger; "operating_point": the out-of-fold minDCF
threshold carried unchanged to every holdout set and the test split, with confusion counts;
"uncertainty": per-fold metrics with their spread and a seeded bootstrap interval of pooled
out-of-fold and clean-holdout minDCF / EER (hearsay.evaluate.report_stats); "reliability";
"decision":
the out-of-fold thresholds (minDCF, EER, a false-alarm rate) and logit -> LLR calibration that
`hearsay export onnx --meta` ships in the model folder (hearsay.metrics.calibration); "training":
what each run recorded (hearsay.evaluate.report_record). The markdown names no absolute path, and
folds
breakdown rows with fewer than MIN_GROUP_CLIPS clips of a class into one line that says so.

Spend: the sum of `cost` over the rentals of docs/ledger.csv, read by hearsay.contracts.ledger
(its rules: a rental is closed by its closing row; an empty cost there is unknown, never $0).
No ledger -> "unknown" (never 0); rentals still open, or closed with an unknown cost ->
"incomplete", the sum is then a lower bound and names them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hearsay import metrics
from hearsay.contracts import ledger as ledgers
from hearsay.contracts import run_dir as run_dirs
from hearsay.contracts import score_file
from hearsay.evaluate import gate as gating
from hearsay.evaluate import (
    probe_set,
    readouts,
    report_plots,
    report_record,
    report_stats,
    runtime_checks,
)
from hearsay.metrics import PI_OF_RECORD, calibration
from hearsay.util.files import jsonable
from hearsay.util.hashing import git_sha

KEY_COLUMNS = ["path", "label", "generator", "source", "duration"]
HOLDOUT_CARRIES = 0.8  # holdout AUC from which the opening says the model carries over to it
MIN_GROUP_CLIPS = 20  # per class: a breakdown row with fewer is folded (one clip moves its
#                       minDCF by >= 0.05 at pi 0.3), its figures kept in meta.json


# --------------------------------------------------------------------------- inputs


def key_frame(manifest):
    """The metrics key of a bundle manifest: path, label + breakdown columns."""
    return manifest[[c for c in KEY_COLUMNS if c in manifest.columns]].astype(
        {"path": str}).drop_duplicates("path")


def spend(ledger: Path | None) -> dict:
    """Spend from the runner's ledger (hearsay.contracts.ledger.summary: its one reader);
    unknown when it cannot be read, never 0 by default."""
    return ledgers.summary(ledger)


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


def breakdown_lines(name: str, breakdowns: dict) -> list[str]:
    """One table per breakdown kind of a set, its rows with at least MIN_GROUP_CLIPS clips of
    each class; the rest (and undefined rows) folded into one line naming them."""
    lines, folded_all = [], True
    for kind, groups in breakdowns.items():
        big = {g: m for g, m in groups.items() if not m.get("undefined")
               and min(m["n_bonafide"], m["n_spoof"]) >= MIN_GROUP_CLIPS}
        small = [f"{g} ({m['n_bonafide']}+{m['n_spoof']})" for g, m in groups.items()
                 if g not in big]
        folded_all &= not big
        if big:
            lines += [f"### {name}: per {kind}", "", HEAD]
            lines += [_row(g, m) for g, m in big.items()] + [""]
        if small and big:
            lines += [f"Folded: {len(small)} row(s) with fewer than {MIN_GROUP_CLIPS} clips of a "
                      f"class or undefined (bona fide + synthetic): {', '.join(small)}.", ""]
    if folded_all and breakdowns:
        n = sum(len(g) for g in breakdowns.values())
        lines = [f"- {name}: all {n} rows ({', '.join(breakdowns)}) have fewer than "
                 f"{MIN_GROUP_CLIPS} clips of a class or are undefined: folded (meta.json "
                 "holds them).", ""]
    return lines


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
    if meta.get("operating_point"):
        lines += [""] + report_stats.operating_lines(meta["operating_point"])
    if meta.get("uncertainty"):
        lines += report_stats.uncertainty_lines(meta["uncertainty"])
    if meta.get("decision"):
        lines += calibration.decision_lines(meta["decision"])
    lines += ["", "## Plots", ""] + [f"![{k}]({v})" for k, v in plots.items()]
    lines += readouts.counts_lines(meta.get("counts") or {})
    lines += readouts.codec_lines(meta.get("codec_readout"))
    lines += ["", "## Breakdowns", ""]
    for name, m in meta["metrics"].items():
        lines += breakdown_lines(name, m["breakdowns"])
    if meta.get("training"):
        lines += report_record.markdown(meta["training"])
    lines += report_record.caveat_lines(meta.get("training") or {}, meta.get("ablation"))
    ids = meta["identity"]
    lines += ["## Identity", "", f"- bundle tree-sha: `{ids['bundle_tree_sha']}`",
              f"- base weights sha256: {', '.join(f'`{s}`' for s in ids['base_weights_sha'])}",
              f"- git sha of the runs: {', '.join(f'`{s}`' for s in ids['run_git_sha'])}; "
              f"of this assembly: `{ids['assemble_git_sha']}`"]
    lines += [f"- {k}: config `{r['config_hash']}`, weights `{r['weights_sha256']}`, "
              f"steps {r['steps']}" for k, r in ids["runs"].items()]
    lines += [""] + report_record.spend_lines(meta["spend"])
    if meta.get("runtime"):
        lines += runtime_checks.markdown(meta["runtime"])
    return "\n".join(lines) + "\n"


def readings(joined: dict, results: dict, test,
             fa_rate: float = calibration.DEFAULT_FA_RATE) -> dict:
    """The statistics beside the metrics (hearsay.evaluate.report_stats) of {set: metrics.join()ed
    frame}: the out-of-fold threshold carried to every set and to `test` (joined test rows or
    None), per-fold spread, bootstrap intervals, reliability bins."""
    thr = results["out-of-fold"]["min_dcf_threshold"]
    op = {"threshold": thr, "from": "out-of-fold minDCF threshold", "pi": PI_OF_RECORD,
          "sets": {}}
    for name, j in {**joined, **({"test": test} if test is not None else {})}.items():
        if thr is None or not len(j):
            continue
        op["sets"][name] = {**report_stats.at_threshold(j["rank"].to_numpy(float),
                                                        j["is_spoof"].to_numpy(bool), thr),
                            "own_min_dcf": (results.get(name) or {}).get("min_dcf")}
    boot = {}
    for name in ("out-of-fold", "holdout clean"):
        j = joined[name]
        boot[name] = {**report_stats.bootstrap_ci(j["rank"].to_numpy(float),
                                                  j["is_spoof"].to_numpy(bool)),
                      "value_min_dcf": results[name]["min_dcf"],
                      "value_eer": results[name]["eer"]}
    rel = {name: report_stats.reliability(joined[name]["logit"].to_numpy(float),
                                          joined[name]["is_spoof"].to_numpy(bool))
           for name in ("out-of-fold", "holdout clean") if "logit" in joined[name].columns}
    j = joined["out-of-fold"]  # the thresholds and calibration the model folder ships
    decision = None if results["out-of-fold"].get("undefined") else \
        calibration.decision_record(j["rank"].to_numpy(float), j["is_spoof"].to_numpy(bool),
                                    fa_rate, "out-of-fold")
    return {"operating_point": op, "reliability": rel, "decision": decision,
            "uncertainty": {"bootstrap": boot,
                            "per_fold": report_stats.per_fold(joined["out-of-fold"])}}


def write_all(done: dict, bundle, bars: list[Path] = (), probe: Path | None = None,
              ledger: Path | None = None,
              reports: Path = Path("docs/reports"), about: dict | None = None,
              ablation: dict | None = None, ablation_md: str | None = None,
              fa_rate: float = calibration.DEFAULT_FA_RATE,
              extra_corpus: dict | None = None, runner_log: Path | None = None,
              cap_usd: float | None = None) -> dict:
    """meta.json + the markdown report + plots for an assembled campaign; returns meta.
    `ablation`: the recipe decision (hearsay compare's JSON), recorded as meta "ablation";
    `ablation_md`: its report section (hearsay.evaluate.compare.markdown);
    `extra_corpus`: the gate's extra-corpus line (hearsay.evaluate.corpus_decision.gate_check)
    or None; `runner_log`, `cap_usd`: the runtime checks' event log and spending cap
    (hearsay.evaluate.runtime_checks, meta "runtime").

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
    probe_frame = None if probe is None else probe_set.read(probe)  # its set sha checked
    g = gating.judge(oof, holdout, key, [gating.load_bar(b) for b in bars], probe_frame, probe,
                     done["metas"], extra_corpus)
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
    joined = {name: metrics.join(frame, key) for name, frame in sets.items()}
    test = df[df["split"] == "test"]
    stats = readings(joined, results, metrics.join(test, key) if len(test) else None, fa_rate)
    training = report_record.training_record(pin, metas)
    curves = {n: (j["rank"].to_numpy(float), j["is_spoof"].to_numpy(bool))
              for n, j in joined.items()}
    rp = report_plots
    plots = {"DET curves": rp.plot_det(curves, plot_dir / "det.png"),
             "score histograms": rp.plot_hist(curves, plot_dir / "hist.png",
                                              stats["operating_point"]["threshold"])}
    weights = {k: r["layer_weights"] for k, r in training.items()
               if isinstance(r["layer_weights"], list)}
    for title, made in (
            ("codec readout", readouts.plot_codecs(codec, plot_dir / "codecs.png")),
            ("training curves", rp.plot_curves({k: m.get("history") for k, m in metas.items()},
                                               plot_dir / "training.png")),
            ("reliability", rp.plot_reliability(stats["reliability"],
                                                plot_dir / "reliability.png")),
            ("learned layer weights", rp.plot_layer_weights(weights,
                                                            plot_dir / "layer_weights.png"))):
        if made:
            plots[title] = made
    report_md = reports / f"{stamp}.md"
    meta = {"name": pin["name"], "stamp": stamp,
            "scores_csv": str(Path(done["scores_csv"]).resolve()),
            "score_config": {"max_s": done["score_config"].max_s,
                             "aug_seed": done["score_config"].aug_seed},
            "convention": metrics.CONVENTION, "metrics": results, "gate": g, "probe": g["probe"],
            "counts": readouts.class_counts(df, key), "codec_readout": codec,
            "identity": identity, "parity": done.get("parity"), "spend": spend(ledger),
            "runtime": runtime_checks.record(ledger, runner_log, cap_usd),
            "rescored_here": (done.get("scoring") or {}).get("rescored_here"),
            "scoring": done.get("scoring"),
            "checks": ["F1", "F2", "F3", "F4", "F5"]
            + (["F6"] if pin["parity"] and not pin["parity"].get("waived") else []),
            "report": str(report_md), "bar_note": (about or {}).get("bar"),
            "ablation": ablation, **stats, "training": training,
            "layer_weights": {k: m.get("layer_weights") for k, m in metas.items()},
            "opening": what_was_run(done, bundle, results, about or {}),
            "plots": {k: str(v) for k, v in plots.items()}}
    rel = {k: str(Path(v).relative_to(reports)) for k, v in plots.items()}
    report_md.write_text(markdown(meta, rel, ablation_md))
    (pin["stamp_dir"] / "meta.json").write_text(
        json.dumps(jsonable(meta), indent=2, allow_nan=False, default=str) + "\n")
    return meta
