"""`hearsay export onnx CHECKPOINT --out DIR`: checkpoint -> model.onnx (+ int8) + parity.json.

    hearsay export onnx demo_out/runs/full --out demo_out/export \
        --meta demo_out/models/demo/meta.json
    hearsay-score clips/ --model demo_out/export

CHECKPOINT is a run directory or checkpoint folder that `hearsay.detector.model.load_detector`
reads (the model is rebuilt from the checkpoint's saved config). Steps:

  1. export fp32 in eval mode on CPU: inputs input_values (B, T) float32 and attention_mask (B, T)
     int64 with dynamic batch and sample axes, output logits (B,). The TorchScript exporter
     (dynamo=False) is tried first; when it fails parity A the dynamo exporter is tried, and the
     first that passes is kept (`--exporter` forces one). Every attempt is in parity.json.
  2. parity A: PyTorch fp32 CPU vs onnxruntime fp32 on clips of mixed lengths, one by one and as
     one padded batch: max |delta logit| <= 1e-4 (export/parity.py).
  2b. attention fusion (TorchScript export only; `--no-fuse` skips it): the same weights exported
     in the form onnxruntime's transformer optimiser recognises and fused into MultiHeadAttention
     per layer (export/fuse.py). The fused graph becomes model.onnx only when it holds parity A
     too, and the plain export then ships beside it as model.portable.onnx (standard ONNX
     operators only, for runtimes other than onnxruntime; its parity A in parity.json
     "portable"); otherwise the plain export stays model.onnx. parity.json's "fusion" says why.
  3. int8: onnxruntime dynamic quantisation of the transformer layers' MatMuls, per channel
     (projection, pooling and head stay fp32: export/quantize.py says why), and the conv
     feature encoder but its first conv as integer GEMMs quantised per frame row at run time
     (export/quantize_rows.py): with `--calibration BUNDLE` first with one weight digit and the
     bias corrected by the calibration clips' mean frame, then with two digits. When those fail
     their gate: with a bundle static int8 of the encoder, calibrated on the bundle's clips
     (export/quantize_conv.py; with the first conv, then without it), then the layers alone;
     the first recipe whose gate holds.
     Shipped as model.int8.onnx only when it passes its gate against fp32 (bundle clips not
     used for calibration, topped up with synthetic clips spread over the deploy range min_s ..
     max_s, 0.5-8 s): Spearman >= 0.995, the decision at the threshold agrees on >= 99% of
     clips, and max |delta logit| <= 0.05.
  4. front_end.json (what hearsay.sound.audio.prepare is called with), parity.json (with the
     checkpoint's weights sha256, "checkpoint_sha256"); with `--meta models/<stamp>/meta.json`
     thresholds.json (its out-of-fold thresholds and calibration; a meta.json whose full run is
     another checkpoint is refused); front_end.onnx (the front end's arithmetic as a graph
     for other runtimes: export/raw_graph.py); format.json (the format) and README.md (the model
     card: export/model_card.py); SHA256SUMS over the files that make a score or a decision and
     describe them (model.onnx, model.portable.onnx, model.int8.onnx -- each carrying these
     facts as ONNX metadata_props, export/onnx_meta.py --, front_end.json, front_end.onnx,
     thresholds.json, format.json, README.md). Its own sha256 is the folder's
     identity: what the deploy image pins and every hearsay-score row names. parity.json is the
     folder's record beside it, not listed, so `hearsay parity` adding parity B to it later
     leaves the identity (and a pin taken now) as it is.

Exit codes: 0 exported and parity A passed, 1 parity A failed for every exporter tried (nothing
is listed in SHA256SUMS, so hearsay-score refuses the folder), 2 usage (and a --meta that is
unreadable, of another checkpoint or without thresholds, or an --out that cannot be made),
3 checkpoint missing or unloadable.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hearsay.contracts import model_dir
from hearsay.export import probe
from hearsay.export.quantize import QuantGate, quantize_int8
from hearsay.sound.audio import BAND_LIMIT_HZ, SAMPLE_RATE, TRIM_TOP_DB
from hearsay.util.hashing import sha256_file
from hearsay.util.progress import Progress

EXIT_OK, EXIT_PARITY, EXIT_USAGE, EXIT_CHECKPOINT = 0, 1, 2, 3
EXPORTERS = ("torchscript", "dynamo")


@dataclass(frozen=True)
class ExportConfig:
    exporter: str = "auto"  # "auto" (torchscript, then dynamo if it fails parity) | EXPORTERS
    opset: int = 17  # ONNX opset for the TorchScript exporter (dynamo picks its own >= 18)
    max_s: float = 8.0  # test-time cap written to front_end.json (seconds)
    cutoff_hz: float = BAND_LIMIT_HZ  # band-limit written to front_end.json
    top_db: float = TRIM_TOP_DB  # trim threshold written to front_end.json
    min_s: float = 0.5  # shortest clip scored after trimming (the bundle drops shorter ones)
    parity_clips: int = 8  # parity A clips (PyTorch vs ORT), lengths spread over the range below
    parity_min_s: float = 0.6  # shortest parity clip (seconds)
    parity_max_s: float = 3.0  # longest parity clip (seconds); keep small for CI
    parity_tol: float = 1e-4  # parity A gate: max |delta logit|
    parity_window_s: float = 10.0  # s; a recording cut as hearsay-score cuts it, in parity A
    #                                too (8 s windows every 4 s: one full, one short); 0 = off
    int8: bool = True  # try the int8 variant
    gate: QuantGate = QuantGate()  # int8 gate (clips, lengths, Spearman, agreement, max |dlogit|)
    seed: int = 0  # RNG seed of the synthetic parity clips
    fuse: bool = True  # fuse attention (MultiHeadAttention) when the fused graph holds parity A
    calibration: str | None = None  # bundle folder whose clips calibrate the int8 conv encoder
    meta: str | None = None  # models/<stamp>/meta.json: thresholds.json + the model card's facts


def export_onnx(model, path: Path, exporter: str, opset: int = 17) -> None:
    """Write `model` (a Detector in eval mode, fp32, CPU) to `path` with dynamic axes."""
    import torch

    model = model.eval().float().cpu()
    x = torch.zeros(2, SAMPLE_RATE, dtype=torch.float32)  # (B, T): two 1 s dummies
    x.normal_(generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, SAMPLE_RATE, dtype=torch.int64)
    mask[1, SAMPLE_RATE * 3 // 4 :] = 0  # a padded row, so the mask path is traced
    names = {"input_names": ["input_values", "attention_mask"], "output_names": ["logits"]}
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings / deprecation chatter; parity decides
        if exporter == "torchscript":
            axes = {"input_values": {0: "batch", 1: "samples"},
                    "attention_mask": {0: "batch", 1: "samples"}, "logits": {0: "batch"}}
            torch.onnx.export(model, (x, mask), str(path), dynamo=False, opset_version=opset,
                              dynamic_axes=axes, do_constant_folding=True, **names)
        elif exporter == "dynamo":
            dim = torch.export.Dim.AUTO
            shapes = {"input_values": {0: dim, 1: dim}, "attention_mask": {0: dim, 1: dim}}
            torch.onnx.export(model, (x, mask), str(path), dynamo=True, external_data=False,
                              dynamic_shapes=shapes, optimize=True, **names)
        else:
            raise ValueError(f"exporter {exporter!r} unknown (one of {EXPORTERS})")


def fuse_export(model, out: Path, waves: list, windows: list | None, tol: float) -> dict:
    """Step 2b: export `model`'s fusable copy, fuse attention, check parity A against `model`;
    on a pass the fused graph becomes out/model.onnx. -> {"used", "ops", "parity_a" | "error"}."""
    from hearsay.export import fuse

    plain, fused = out / "model.fusable.onnx", out / "model.fused.onnx"  # scratch, removed
    try:
        export_onnx(fuse.fusable_copy(model), plain, "torchscript")
        ops = fuse.fuse_file(plain, fused, model.cfg.num_heads, model.cfg.hidden_size,
                             multi_head=True)  # q/k/v MatMuls stay: the int8 recipe finds them
        report_a = probe.parity_a(model, fused, waves, tol, windows)
    except Exception as err:  # noqa: BLE001 - a fuser that fails leaves the plain export
        return {"used": False, "error": f"{type(err).__name__}: {str(err)[:500]}"}
    finally:
        plain.unlink(missing_ok=True)
    used = bool(report_a["passed"] and ops.get("MultiHeadAttention", 0) > 0)
    if used:  # the plain export stays beside it: standard operators, any ONNX runtime
        (out / model_dir.ONNX).replace(out / model_dir.PORTABLE)
        fused.replace(out / model_dir.ONNX)
    fused.unlink(missing_ok=True)
    return {"used": used, "ops": ops, "parity_a": report_a}


def export_model(model, out: Path, cfg: ExportConfig = ExportConfig(),
                 checkpoint_sha256: str | None = None) -> dict:
    """Export + parity A + int8 gate into `out`; returns the parity report (also parity.json).

    `checkpoint_sha256` (the weights file's, see probe.checkpoint_weights) is recorded so that
    `hearsay parity --checkpoint` can refuse any other checkpoint; None for a model built in code.
    SHA256SUMS is written only when parity A passed: a folder without it is refused by
    hearsay-score (fail closed).
    """
    import torch

    from hearsay.export import model_card

    meta = None if cfg.meta is None else model_card.read_meta(Path(cfg.meta), checkpoint_sha256)
    out.mkdir(parents=True, exist_ok=True)
    model_dir.clear(out)
    model = model.eval().float().cpu()
    front = model_dir.front_end(cfg.max_s, cfg.cutoff_hz, cfg.top_db, cfg.min_s)
    model_dir.write_front_end(out, front)
    rng = np.random.default_rng(cfg.seed)
    waves = probe.synthetic_clips(rng, cfg.parity_clips, cfg.parity_min_s, cfg.parity_max_s,
                                   front)
    windows = (probe.window_clips(rng, cfg.parity_window_s, front)
               if cfg.parity_window_s > 0 else None)

    # 1-2. export, then parity A; keep the first exporter that passes.
    order = EXPORTERS if cfg.exporter == "auto" else (cfg.exporter,)
    attempts, chosen, report_a = [], None, None
    bar = Progress(None, desc="hearsay export", unit="stage")  # a line as each stage starts
    for exporter in order:
        try:
            bar.stage(f"export ({exporter})")
            export_onnx(model, out / model_dir.ONNX, exporter, cfg.opset)
            bar.stage(f"parity A ({exporter}, {len(waves)} clips)")
            report_a = probe.parity_a(model, out / model_dir.ONNX, waves, cfg.parity_tol,
                                       windows)
        except Exception as err:  # noqa: BLE001 - an exporter that crashes is a failed attempt
            attempts.append({"exporter": exporter, "passed": False,
                             "error": f"{type(err).__name__}: {str(err)[:500]}"})
            continue
        attempts.append({"exporter": exporter, "passed": report_a["passed"],
                         "max_abs_dlogit": report_a["max_abs_dlogit"]})
        if report_a["passed"]:
            chosen = exporter
            break
    fusion, portable = None, None
    if chosen == "torchscript" and cfg.fuse:  # 2b. the fusable export follows TorchScript's
        bar.stage("fused export + parity A")
        fusion = fuse_export(model, out, waves, windows, cfg.parity_tol)
        if fusion["used"]:
            portable = {"file": model_dir.PORTABLE, "parity_a": report_a}
            report_a = fusion["parity_a"]
    report: dict = {"checkpoint_sha256": checkpoint_sha256,
                    "exporter": chosen, "attempts": attempts, "parity_a": report_a,
                    "fusion": fusion, "portable": portable,
                    "int8": None, "parity_b": None, "config": asdict(cfg),
                    "versions": probe.versions(torch)}
    shipped = [model_dir.ONNX, model_dir.FRONT_END]  # what makes a score: the identity
    if portable:
        shipped.append(model_dir.PORTABLE)
    # 3. int8, gated against ORT fp32 (no torch needed: both sides are onnxruntime).
    if chosen and cfg.int8:
        bar.stage("int8 recipes + gate")
        try:
            int8 = quantize_int8(out / model_dir.ONNX, out / model_dir.INT8, cfg.gate, front,
                                 np.random.default_rng(cfg.seed + 1),
                                 None if cfg.calibration is None else Path(cfg.calibration))
        except Exception as err:  # noqa: BLE001 - e.g. ORT's shape inference on a dynamo graph
            int8 = {"passed": False, "error": f"{type(err).__name__}: {str(err)[:500]}"}
        report["int8"] = int8
        if int8["passed"]:
            shipped.append(model_dir.INT8)
        else:
            (out / model_dir.INT8).unlink(missing_ok=True)
    # 4. parity.json (the record, not listed); thresholds, config and card; the manifest over
    #    every shipped file.
    bar.close()
    model_dir.write_parity(out, report)
    if chosen:
        shipped += describe(out, meta, front, report_a, shipped, checkpoint_sha256)
        model_dir.write_sums(out, shipped)
    return report


def describe(out: Path, meta: dict | None, front: dict, report_a: dict, graphs: list[str],
             checkpoint_sha256: str | None = None) -> list[str]:
    """4b. thresholds.json (with a meta.json), format.json and README.md, and the graphs'
    metadata_props (export/onnx_meta.py); the names of the files written."""
    import json

    from hearsay.export import model_card, onnx_meta, raw_graph

    written, thresholds = [], None
    if meta is not None:
        thresholds = model_card.thresholds_file(meta)
        model_dir.write_thresholds(out, thresholds)
        written.append(model_dir.THRESHOLDS)
    onnx_graphs = [g for g in graphs if g.endswith(".onnx")]
    values = onnx_meta.props(model_card.FORMAT, model_card.FORMAT_VERSION, front,
                             checkpoint_sha256, thresholds)
    for name in onnx_graphs:
        onnx_meta.stamp(out / name, values)
    raw_graph.write_front_graph(out / model_dir.FRONT_END_GRAPH, out / onnx_graphs[-1], front)
    config = model_card.config_file(out, onnx_graphs, front, meta is not None)
    (out / model_dir.CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    (out / model_dir.CARD).write_text(model_card.card(meta, config, report_a))
    return written + [model_dir.FRONT_END_GRAPH, model_dir.CONFIG, model_dir.CARD]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="hearsay export onnx", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    if argv and argv[0] == "onnx":  # `hearsay export onnx …`: the format word is required
        argv = argv[1:]
    elif argv and argv[0] not in ("-h", "--help"):
        print("hearsay export: the only format is onnx (`hearsay export onnx CHECKPOINT --out "
              "DIR`)", file=sys.stderr)
        return EXIT_USAGE
    d = ExportConfig()
    ap.add_argument("checkpoint", type=Path, help="run dir or checkpoint dir (load_detector)")
    ap.add_argument("--out", type=Path, required=True, help="model folder to write")
    ap.add_argument("--exporter", choices=("auto", *EXPORTERS), default=d.exporter,
                    help="auto: torchscript, then dynamo if it fails parity A")
    ap.add_argument("--max-s", type=float, default=d.max_s, help="test-time cap (seconds)")
    ap.add_argument("--parity-clips", type=int, default=d.parity_clips,
                    help="synthetic clips for parity A")
    ap.add_argument("--parity-max-s", type=float, default=d.parity_max_s,
                    help="longest parity clip (seconds)")
    ap.add_argument("--no-int8", action="store_true", help="skip the int8 variant")
    ap.add_argument("--int8-clips", type=int, default=d.gate.clips,
                    help="clips for the int8 gate")
    ap.add_argument("--no-fuse", action="store_true",
                    help="ship the plain export (no attention fusion)")
    ap.add_argument("--calibration", type=Path, default=None, metavar="BUNDLE",
                    help="bundle folder (hearsay bundle): its clips join the int8 gate, give "
                    "the one-digit row-wise conv recipe its mean frames (tried first) and "
                    "calibrate the static conv recipes, tried when the row-wise ones fail")
    ap.add_argument("--threshold", type=float, default=None,
                    help="decision threshold (logit) for the int8 agreement gate; default: the "
                    "median fp32 logit over the gate clips (the strictest place)")
    ap.add_argument("--meta", type=Path, default=None, metavar="META_JSON",
                    help="models/<stamp>/meta.json of the campaign that pinned this checkpoint "
                    "(hearsay assemble): its out-of-fold thresholds and calibration go into "
                    f"{model_dir.THRESHOLDS} and its facts into the model card ({model_dir.CARD})")
    args = ap.parse_args(argv)
    gate = QuantGate(clips=args.int8_clips, threshold=args.threshold)
    cfg = ExportConfig(exporter=args.exporter, max_s=args.max_s, parity_clips=args.parity_clips,
                       parity_max_s=args.parity_max_s, int8=not args.no_int8, gate=gate,
                       fuse=not args.no_fuse,
                       calibration=None if args.calibration is None else str(args.calibration),
                       meta=None if args.meta is None else str(args.meta))
    try:
        from hearsay.detector.model import load_detector

        model, _ = load_detector(args.checkpoint)
        weights_sha = sha256_file(probe.checkpoint_weights(args.checkpoint))
    except Exception as err:  # noqa: BLE001 - any load failure is "checkpoint unusable"
        print(f"hearsay export: cannot load {args.checkpoint}: {err} (pass a run dir with "
              "final/model.safetensors + config.json)", file=sys.stderr)
        return EXIT_CHECKPOINT
    try:  # before the (slow) export: an --out that cannot be a folder is the caller's to fix
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        print(f"hearsay export: cannot make --out {args.out}: {err}", file=sys.stderr)
        return EXIT_USAGE
    from hearsay.export.model_card import MetaError

    try:
        report = export_model(model, args.out, cfg, checkpoint_sha256=weights_sha)
    except MetaError as err:
        print(f"hearsay export: {err}", file=sys.stderr)
        return EXIT_USAGE
    a = report["parity_a"] or {}
    print(f"hearsay export: exporter={report['exporter']} parity A max|dlogit|="
          f"{a.get('max_abs_dlogit')} passed={a.get('passed')} "
          f"fused={bool((report['fusion'] or {}).get('used'))}")
    if report["int8"]:
        q = report["int8"]
        print(f"hearsay export: int8 recipe={q.get('recipe')} spearman={q.get('spearman')} "
              f"agreement={q.get('agreement')} shipped={q['passed']} {q.get('error', '')}")
    if not report["exporter"]:
        print(f"hearsay export: parity A failed for every exporter (see "
              f"{args.out}/{model_dir.PARITY})", file=sys.stderr)
        return EXIT_PARITY
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
