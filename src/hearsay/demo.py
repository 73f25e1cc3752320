"""`hearsay demo [--out demo_out]`: the main job, end to end, on the embedded synthetic corpus.

    hearsay demo --out demo_out

Stages, in order (each one is its module's own library call; see docs/INTERFACES.md):
  1. demo-data  -> demo_out/corpus/       (synthetic two-class corpus, made in code)
  2. splits     -> demo_out/splits/       (pinned fold file + SHA256SUMS)
  3. bundle     -> demo_out/bundle/       (trimmed 16 kHz FLAC + codec copies + diagnostics)
  4. train      -> demo_out/runs/         (CPU-smoke model per fold + full)
  5. assemble   -> demo_out/outputs/, models/demo/, reports/
  6. export     -> demo_out/export/       (ONNX + parity.json)
  7. deploy     -> demo_out/deploy_scores.csv (hearsay-score on a folder of clips)

Exit codes: 0 every stage ran, 1 a stage failed (its error is printed), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def stage_data(out: Path, ctx: dict) -> None:
    """1-3: corpus, splits, bundle."""
    raise NotImplementedError("data stages arrive with issue 2")


STAGES = [("data", stage_data)]


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
    except Exception as err:  # noqa: BLE001 - the demo reports which stage failed, then exits 1
        print(f"hearsay demo: failed: {err}", file=sys.stderr)
        return 1
    print("[demo] outputs:")
    for key, value in ctx.items():
        print(f"  {key}: {value}")
    return 0
