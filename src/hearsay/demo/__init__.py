"""`hearsay demo [--out demo_out]`: the main job, end to end, on the embedded synthetic corpus.

    hearsay demo --out demo_out

Stages, in order (each one is its module's own library call; see docs/INTERFACES.md):
  1. demo-data  -> demo_out/corpus/       (synthetic two-class corpus, made in code)
  2. splits     -> demo_out/splits/       (pinned fold file + SHA256SUMS)
  3. bundle     -> demo_out/bundle/       (trimmed 16 kHz FLAC + codec copies + diagnostics)
     extra      -> demo_out/extra/, models/demo/corpus_decision.json (the extra corpus's
                   probe, two fold-0 recipes, the drop rule from their runs: hearsay.demo.extra)
  4. train      -> demo_out/runs/         (tiny model per fold + full, the demo preset; the
                   recipe cites the extra corpus's decision by its sha256)
  5. assemble   -> demo_out/outputs/, models/demo/, reports/
  6. export     -> demo_out/export/       (ONNX + parity.json)
  7. deploy     -> demo_out/deploy_scores.csv (hearsay-score on a folder of clips)

It ends with a five-line summary: out-of-fold and holdout minDCF(0.3) / EER / AUC, parity A,
the deploy scorer's mean score per class, and where the report is.

Exit codes: 0 every stage ran, 1 a stage failed (its error is printed), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2  # module docstring

# The demo corpus holds 2 deliberately undecodable files among ~140 rows (~1.4 %), so that the
# bad-input path shows; the default failure gate is 0.5 %, so the demo raises it, knowingly, to 2 %.
DEMO_MAX_FAIL_FRAC = 0.02


def stage_data(out: Path, ctx: dict) -> None:
    """1-3: corpus (hearsay demo-data), splits (hearsay splits make), bundle (hearsay bundle)."""
    from hearsay.bundle.build import BundleConfig, build_bundle
    from hearsay.contracts.bundle import load_bundle
    from hearsay.contracts.folds import write_folds
    from hearsay.contracts.manifest import read_manifest
    from hearsay.demo.corpus import write_corpus

    ctx["corpus"] = write_corpus(out / "corpus")  # corpus/manifest.csv
    ctx["splits"] = write_folds(read_manifest(ctx["corpus"]), _demo_splits_config(),
                                out / "splits", "demo")  # splits/demo.folds.json + SHA256SUMS
    _check_pinned_splits(ctx["splits"])
    print(f"[demo] bundle: --max-fail-frac {DEMO_MAX_FAIL_FRAC} (the corpus plants 2 bad files)")
    meta = build_bundle(ctx["corpus"], out / "bundle", ctx["splits"],
                        BundleConfig(max_fail_frac=DEMO_MAX_FAIL_FRAC))
    for item in meta["failed"] + meta["dropped"]:
        print(f"[demo]   listed: {item['id']}: {item['reason']}")
    ctx["bundle"] = load_bundle(out / "bundle").root  # raises if the build failed
    ctx["bundle_tree_sha"] = meta["tree_sha"]


def _check_pinned_splits(fresh: Path) -> None:
    """In a source checkout, the fresh demo folds must equal the pinned splits/demo.folds.json."""
    from hearsay.contracts.folds import FoldError, verify_sha
    from hearsay.util.hashing import sha256_file

    pinned = Path(__file__).resolve().parents[3] / "splits" / "demo.folds.json"
    if not pinned.is_file():
        return  # an installed package has no splits/ folder
    if verify_sha(pinned) != sha256_file(fresh):
        cfg = json.dumps({"holdout_families": ["phq"], "family_exclusion": {"0": ["smear"]}})
        raise FoldError(f"{fresh} differs from the pinned {pinned}: the demo corpus layout changed;"
                        f" if that is intended, re-pin: echo '{cfg}' > /tmp/c.json && hearsay "
                        f"splits make {fresh.parent.parent}/corpus/manifest.csv --out splits "
                        "--name demo --config /tmp/c.json")
    print(f"[demo] splits: identical to the pinned {pinned.name} (sha256 {sha256_file(fresh)})")


def _train_one(job: str, fold: int | None, preset: dict, bundle: Path, run_dir: Path) -> dict:
    """One demo training run (a worker process's whole job): its run_meta.json as a dict."""
    from hearsay import train
    from hearsay.train import config as train_config

    return train.run(train_config.resolve_config(job, fold, cpu_smoke=True, overrides=preset),
                     bundle, run_dir)


def stage_train(out: Path, ctx: dict, preset: dict | None = None) -> None:
    """4: tiny models for the bundle's folds (0-4 with the demo's five) and full -> runs/<key>/
    (= hearsay train --cpu-smoke --config FILE with FILE holding train_config.demo_overrides()).

    The tiny random-init config of --cpu-smoke, trained for the demo preset's steps; the runs
    are re-made from scratch on every demo (an old run dir would hold checkpoints, which a fresh
    `hearsay train` refuses). `preset` replaces the demo preset (tests). The runs (six with the
    demo's five folds) go two at a time, one process each (every run is one-threaded, seeded and
    so deterministic: the same weights as one after another, in about half the wall time on two
    cores)."""
    import shutil
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from hearsay.contracts import protocol
    from hearsay.contracts.bundle import load_bundle
    from hearsay.engines.cpu_engine import allowed_cpus
    from hearsay.train import config as train_config

    preset = train_config.demo_overrides() if preset is None else preset
    if ctx.get("corpus_decision_sha"):  # the recipe cites the decision (and applies a drop)
        drop = json.loads(Path(ctx["corpus_decision"]).read_text())["decision"] == "drop"
        preset = {**preset, "selection": {
            "corpus_decision": ctx["corpus_decision_sha"],
            "rules": [{"action": "keep", "train_scope": ["core"]}] if drop else []}}
    runs, jobs = {}, {}
    for key in protocol.run_keys(load_bundle(ctx["bundle"]).n_folds):  # the fold file's count
        runs[key] = out / "runs" / key
        shutil.rmtree(runs[key], ignore_errors=True)
        jobs[key] = protocol.run_job(key)
    workers = min(2, allowed_cpus())
    # spawn, not fork: the parent has torch loaded, and a forked copy of its thread pools can hang
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = {key: pool.submit(_train_one, *jobs[key], preset, ctx["bundle"], runs[key])
                   for key in runs}
        for key, future in futures.items():
            meta = future.result()
            loss = meta["history"]["loss"]
            print(f"[demo] train {key}: {meta['steps']} steps, "
                  f"loss {loss[0]:.3f} -> {loss[-1]:.3f}", flush=True)
    ctx["runs"] = runs


DEMO_ABOUT = {  # the report's words for what the demo's clips and its bar are
    "corpus": "the SYNTHETIC demo corpus (`hearsay demo-data`: harmonic speech-like signals vs "
              "three families of made-up artefacts; no real speech, no real deepfake)",
    "bar": "a trivial detector that scores each clip by its length; the demo corpus draws "
           "lengths alike for both classes, so this bar sits at chance. The gate judges the "
           "holdout apart from the out-of-fold scores: a model that does not carry over to the "
           "unseen holdout family fails it even against this bar; passing it would not be "
           "evidence that a model is good either (read the AUC and the DET plot)"}


def _demo_splits_config():
    """The demo's fold config: phq is the holdout family; the model for fold 0 never
    sees the extra smear generator (an example of a per-fold family-exclusion table)."""
    from hearsay.contracts.folds import SplitsConfig

    return SplitsConfig(holdout_families=("phq",), family_exclusion={"0": ["smear"]})  # = above


def stage_assemble(out: Path, ctx: dict) -> None:
    """5: pin the trained runs, assemble their scores (F1-F6), write meta.json and the report.

    The demo is its own campaign lead: it writes models/demo/final_runs.json naming runs/fold0..4
    and runs/full by path, each with the config hash it was trained with and the sha256 of its
    final weights, and min_steps = the planned step count. The gate's bar is a trivial detector
    (clip duration as the score): its score file and meta.json (train "none: clip duration")
    under models/demo/earlier/duration/ become the bar folder models/demo/bar_duration/ the way
    `hearsay bar --pick train=...` makes one (rows checked, its own probe record): a model
    that detects beats it out-of-fold; on the holdout only one that carries over to the unseen
    family does. The probe set is fold probe's bona fide clips, scored by the full run as a
    box scores it (hearsay.evaluate.probe_set: models/demo/scores/full_probe.csv, with its
    set sha256), and the gate reads that file. There is no ledger in the demo, so the spend
    reads "unknown".
    """
    from hearsay.contracts import ledger, pin, protocol, run_dir
    from hearsay.contracts.bundle import load_bundle
    from hearsay.evaluate import assemble, corpus_decision, probe_set, report
    from hearsay.evaluate import bar as bars

    bundle = load_bundle(out / "bundle")
    stamp = out / "models" / "demo"
    stamp.mkdir(parents=True, exist_ok=True)
    runs = {key: out / "runs" / key for key in protocol.run_keys(bundle.n_folds)}  # by name
    metas = {k: run_dir.read_meta(d) for k, d in runs.items()}
    pin_path = stamp / pin.FINAL
    pin.write(pin_path, name="demo", bundle_tree_sha=bundle.tree_sha, runs=runs,
              min_steps=min(int(m.get("total_steps") or m["steps"]) for m in metas.values()),
              parity=None)  # the export stage runs after this one
    done = assemble.assemble(pin_path, bundle, out / "outputs")
    df = done["scores"]
    probe = done["files"]["full"][(probe_set.SPLIT, False)]  # scored as the full box scores it
    earlier = stamp / "earlier" / "duration"  # the earlier detector's own score file + meta
    write_length_detector(bundle.root, probe, earlier)
    bar_dir = stamp / "bar_duration"  # the bar folder hearsay.evaluate.gate reads (hearsay bar)
    bars.build([stamp / "earlier"], "train", LENGTH_TRAIN, bundle.manifest, bar_dir, probe=probe)
    extra = corpus_decision.gate_check(ctx.get("corpus_decision"), done["metas"])
    meta = report.write_all(done, bundle, bars=[bar_dir], probe=probe, ledger=out / ledger.FILE,
                            reports=out / "reports", about=DEMO_ABOUT, extra_corpus=extra)
    print(f"[demo] assemble: {len(df)} rows, F1-F5 passed; gate {meta['gate']['outcome']} "
          f"({meta['gate'].get('why', '')})")
    ctx["pin"] = pin_path
    ctx["scores_csv"] = done["scores_csv"]
    ctx["model_meta"] = stamp / "meta.json"
    ctx["report"] = Path(meta["report"])
    ctx["metrics"] = meta["metrics"]


LENGTH_TRAIN = "none: clip duration"  # the stand-in earlier detector's train field (--pick)


def write_length_detector(bundle_dir: Path, probe_csv: Path, out: Path) -> Path:
    """A stand-in earlier detector for the demo and the rehearsal (scripts/rehearsal.sh): each
    clip's length as its logit (z-scored over the bundle), on every inner and holdout row of the
    bundle and on the probe set's clips -> out/scores.csv (path, fold, split, score, logit) and
    out/meta.json {"name", "train": LENGTH_TRAIN}, the folder `hearsay bar --from` reads. The
    demo corpus draws lengths alike for both classes, so it sits near chance (the rehearsal
    calls it as `python -c ... BUNDLE PROBE_CSV OUT`)."""
    import pandas as pd

    from hearsay.contracts import score_file
    from hearsay.contracts.bundle import load_bundle
    from hearsay.contracts.protocol import split_rows
    from hearsay.detector.logits import sigmoid

    manifest = load_bundle(Path(bundle_dir)).manifest
    dur = manifest.set_index("path")["duration"].astype(float)
    probe = score_file.read(probe_csv)
    rows = pd.concat([split_rows(manifest, "inner_oof")[["path", "fold"]].assign(split="inner_oof"),
                      split_rows(manifest, "holdout")[["path", "fold"]].assign(split="holdout"),
                      probe[["path", "fold", "split"]]], ignore_index=True)
    rows["logit"] = (dur.loc[rows["path"]].to_numpy() - dur.mean()) / max(dur.std(), 1e-9)
    rows["score"] = sigmoid(rows["logit"].to_numpy())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    score_file.write_csv(rows[["path", "fold", "split", "score", "logit"]], out / "scores.csv")
    (out / "meta.json").write_text(json.dumps({"name": "clip-length bar",
                                               "train": LENGTH_TRAIN}) + "\n")
    return out


def stage_export(out: Path, ctx: dict) -> None:
    """6: export the full run to demo_out/export/ (hearsay export onnx): model.onnx, parity A,
    the int8 variant only if it passes its gate, front_end.json, SHA256SUMS, parity.json."""
    from hearsay.contracts import model_dir
    from hearsay.detector.model import load_detector
    from hearsay.export.onnx_export import ExportConfig, export_model
    from hearsay.export.probe import checkpoint_weights
    from hearsay.util.hashing import sha256_file

    model, _ = load_detector(out / "runs" / "full")
    weights_sha = sha256_file(checkpoint_weights(out / "runs" / "full"))  # parity --checkpoint
    cfg = ExportConfig(calibration=str(out / "bundle"),  # real clips for the int8 gate
                       meta=str(ctx["model_meta"]) if ctx.get("model_meta") else None)
    report = export_model(model, out / "export", cfg, checkpoint_sha256=weights_sha)
    a, q = report["parity_a"], report["int8"] or {}
    if not report["exporter"]:
        raise RuntimeError(f"export: parity A failed (max |dlogit| {a['max_abs_dlogit']:.2e} > "
                           f"{a['tolerance']:.0e}); see {out / 'export' / model_dir.PARITY}")
    print(f"[demo] export: {report['exporter']}, parity A max |dlogit| "
          f"{a['max_abs_dlogit']:.2e} over {a['clips']} clips; int8 spearman "
          f"{q.get('spearman', float('nan')):.4f} agreement {q.get('agreement', float('nan')):.3f}"
          f" -> {'shipped' if q.get('passed') else 'not shipped'}")
    ctx["export"] = out / "export"
    ctx["parity"] = out / "export" / model_dir.PARITY


def stage_deploy(out: Path, ctx: dict) -> None:
    """7: hearsay-score (the torch-free scorer, run as its own process) on the demo corpus's audio
    folder with the exported model -> demo_out/deploy_scores.csv; the planted bad files are
    listed with their errors and the batch goes on."""
    import csv
    import subprocess

    scores = out / "deploy_scores.csv"
    cmd = [sys.executable, "-m", "hearsay.deploy", str(out / "corpus" / "audio"),
           "-o", str(scores), "--model", str(out / "export")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"hearsay-score exit {proc.returncode}: {proc.stderr.strip()}")
    with open(scores, newline="") as fh:
        failed = [r for r in csv.DictReader(fh) if r["error"]]
    for r in failed:
        print(f"[demo]   listed: {r['path']}: {r['error']}")
    print(f"[demo] deploy: {proc.stderr.strip()}")
    ctx["deploy_scores"] = scores


def summary(ctx: dict) -> list[str]:
    """Five lines: OOF and holdout minDCF(0.3) / EER / AUC, parity A, the deploy scorer's mean
    score per class (test clips, which no model trained on), where the report is."""
    import pandas as pd

    def fig(m: dict) -> str:
        if m.get("undefined"):
            return f"undefined ({m['undefined']})"
        return (f"minDCF(0.3) {m['min_dcf']:.3f}  EER {m['eer']:.3f}  AUC {m['auc']:.3f}  "
                f"({m['n_bonafide']} bona fide + {m['n_spoof']} synthetic)")

    m = ctx["metrics"]
    a = json.loads(Path(ctx["parity"]).read_text())["parity_a"]
    rows = pd.read_csv(ctx["corpus"], dtype=str, keep_default_na=False)
    rows["file"] = rows["path"].str.rsplit("/", n=1).str[-1]
    dep = pd.read_csv(ctx["deploy_scores"], dtype={"path": str}, keep_default_na=False,
                      na_values=[""]).merge(rows, left_on="path", right_on="file")
    dep = dep[dep["score"].notna() & (dep["fold"] == "test")]
    mean = dep.groupby("label")["score"].mean()
    n = dep["label"].value_counts()
    return [f"out-of-fold  {fig(m['out-of-fold'])}",
            f"holdout phq  {fig(m['holdout clean'])}",
            f"parity A     max |dlogit| {a['max_abs_dlogit']:.1e} over {a['clips']} clips "
            f"(tolerance {a['tolerance']:.0e}): {'pass' if a['passed'] else 'FAIL'}",
            f"deploy       hearsay-score mean score on the test clips: bona fide "
            f"{mean.get('bonafide', float('nan')):.3f} (n={n.get('bonafide', 0)}), synthetic "
            f"{mean.get('spoof', float('nan')):.3f} (n={n.get('spoof', 0)})",
            f"report       {ctx['report']} (DET curves: {Path(ctx['report']).with_suffix('')}"
            "/det.png)"]


def stage_extra(out: Path, ctx: dict) -> None:
    from hearsay.demo import extra

    extra.stage_extra(out, ctx)


STAGES = [("data", stage_data), ("extra", stage_extra), ("train", stage_train),
          ("assemble", stage_assemble), ("export", stage_export),
          ("deploy", stage_deploy)]


def run_demo(out: Path) -> dict:
    """Run every stage into `out`; returns the context dict of produced paths."""
    out.mkdir(parents=True, exist_ok=True)
    ctx: dict = {"out": out}
    for name, fn in STAGES:
        t0 = time.monotonic()
        print(f"[demo] {name} …", flush=True)
        fn(out, ctx)
        print(f"[demo] {name} done in {time.monotonic() - t0:.1f} s", flush=True)
    return ctx


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("demo_out"), help="output folder")
    args = ap.parse_args(argv)
    try:
        ctx = run_demo(args.out)
        lines = summary(ctx)
    except Exception as err:  # noqa: BLE001 - the demo reports which stage failed, then exits 1
        print(f"hearsay demo: failed: {err}", file=sys.stderr)
        return EXIT_FAILED
    print("[demo] outputs:")
    for key, value in ctx.items():
        if key != "metrics":
            print(f"  {key}: {value}")
    print("[demo] summary:")
    for line in lines:
        print(f"  {line}")
    return EXIT_OK
