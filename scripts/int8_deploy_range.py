#!/usr/bin/env python3
"""The int8 gate on the deploy range, for an exported model folder, per input kind: whole clips
up to max_s, and the windows hearsay-score cuts from long recordings.

    .venv/bin/python scripts/int8_deploy_range.py MODEL_DIR --bundle BUNDLE
    .venv/bin/python scripts/int8_deploy_range.py MODEL_DIR --bundle B --long-files 4 --long-s 300
    .venv/bin/python scripts/int8_deploy_range.py XLSR_DIR --gate-clips 24 --gate-long-s 120

(1) re-runs the export's int8 gate (hearsay.export.quantize.quantize_int8, QuantGate defaults:
100 clips, and the windows of one 5-minute recording of clips joined with pauses; --bundle
calibrates and gives real clips) into a temporary file: every recipe's figures per kind, and
(2) when MODEL_DIR has model.int8.onnx, measures that shipped int8 against model.onnx on the
windows of --long-files other recordings of --long-s s (quantize.long_file_windows: the
bundle's clips, synthetic without --bundle). (3) With --per-conv: the gate per kind of each
encoder conv but the first quantised row-wise (two digits) alone, the layers' MatMuls int8 too
(which conv drifts). Prints one JSON object; record it in docs/BENCHMARKS.md with the command
and the date. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np

from hearsay.contracts.model_dir import INT8, ONNX, read_front_end
from hearsay.engines.cpu_engine import make_session, run_logits
from hearsay.export import quantize_conv
from hearsay.export.quantize import QuantGate, long_file_windows, quantize_int8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="exported model folder (model.onnx, front_end.json)")
    ap.add_argument("--bundle", type=Path, help="bundle folder: calibration and real clips")
    ap.add_argument("--long-files", type=int, default=4, help="recordings for (2) (default 4)")
    ap.add_argument("--long-s", type=float, default=300.0, help="their seconds (default 300)")
    ap.add_argument("--gate-clips", type=int, default=QuantGate.clips,
                    help=f"(1): the gate's clips (default {QuantGate.clips}, as the export)")
    ap.add_argument("--gate-long-s", type=float, default=QuantGate.long_s,
                    help=f"(1): its long recording's seconds (default {QuantGate.long_s:g})")
    ap.add_argument("--per-conv", action="store_true", help="(3): each conv's own drift")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    front = read_front_end(args.model)
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        gate = QuantGate(clips=args.gate_clips, long_s=args.gate_long_s)
        report = quantize_int8(args.model / ONNX, Path(tmp) / "int8.onnx", gate, front,
                               np.random.default_rng(args.seed), calibration=args.bundle)
    keys = ("max_abs_dlogit", "rms_dlogit", "spearman", "agreement", "clips", "passed")
    out["gate"] = {"recipe": report.get("recipe"), "passed": report.get("passed"),
                   "gate_windows_long": report.get("gate_windows_long"),
                   "attempts": [{"recipe": a["recipe"], "passed": a["passed"],
                                 "error": a.get("error"),
                                 "kinds": {kind: {k: r.get(k) for k in keys}
                                           for kind, r in a.get("kinds", {}).items()}}
                                for a in report["attempts"]]}
    if (args.model / INT8).is_file():
        rng = np.random.default_rng(args.seed + 1)
        real = (quantize_conv.bundle_clips(args.bundle, front, 24, 100, rng)[1]
                if args.bundle else None)
        gate = dataclasses.replace(QuantGate(), long_files=args.long_files, long_s=args.long_s)
        wins = long_file_windows(gate, front, rng, real)
        d = np.abs(run_logits(make_session(args.model / ONNX), wins)
                   - run_logits(make_session(args.model / INT8), wins))
        out["shipped_int8_on_long_windows"] = {
            "windows": len(wins), "max_abs_dlogit": float(d.max()),
            "rms_dlogit": float(np.sqrt(np.mean(d**2))), "over_0.05": int((d > 0.05).sum()),
            "recordings": args.long_files, "recording_s": args.long_s}
    if args.per_conv:
        out["per_conv"] = per_conv(args, front)
    print(json.dumps(out, indent=1))


def per_conv(args, front: dict) -> dict:
    """(3): {conv label: {kind: max |delta logit|, "passed": bool}} on the gate's inputs."""
    import onnx

    from hearsay.export import quantize, quantize_rows

    src = args.model / ONNX
    graph = onnx.load(str(src), load_external_data=False)
    nodes, convs = quantize.layer_matmuls(graph), quantize_conv.encoder_convs(graph)
    rng, gate = np.random.default_rng(args.seed), QuantGate()
    real = (quantize_conv.bundle_clips(args.bundle, front, gate.calibration_clips, gate.clips,
                                       rng)[1] if args.bundle else [])
    waves = real + long_file_windows(gate, front, rng, real)
    kinds = {"clips": slice(0, len(real)), "long_windows": slice(len(real), len(waves))}
    fp32, out = run_logits(make_session(src), waves), {}
    with tempfile.TemporaryDirectory() as tmp:
        layers, dst = Path(tmp) / "layers.onnx", Path(tmp) / "conv.onnx"
        quantize.quantize_file(src, layers, nodes)
        for k in range(1, len(convs)):
            quantize_rows.quantize_convs_rowwise(layers, dst, [convs[k]], None)
            r = quantize.kinds_report(fp32, run_logits(make_session(dst), waves), kinds, gate)
            out[f"conv {k}"] = {**{kind: v["max_abs_dlogit"] for kind, v in r["kinds"].items()},
                                "passed": r["passed"]}
    return out


if __name__ == "__main__":
    main()
