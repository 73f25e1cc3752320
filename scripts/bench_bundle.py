#!/usr/bin/env python3
"""Bundle-build throughput: clips/s and codec copies/s with 1 vs N processes.

    .venv/bin/python scripts/bench_bundle.py [--groups 10] [--procs 1 2] [--keep DIR]

Writes a synthetic corpus (hearsay.demo.corpus, no bad files; --groups inner groups x 6 clips +
holdout/test/extra rows, 1-6 s each), then builds a fresh bundle from it once per process count,
all five codec copies on, and prints one Markdown table row per run plus the environment and
the load average (the 2-core machine is shared: wall time depends on it; "clip CPU s" - user +
system CPU of the per-clip work, ffmpeg included, summed in the workers - much less). Each build
starts from an empty folder (no resume). For reference: the seed run made 16,015 codec copies in
273 s on 32 cores (58.7 copies/s).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from hearsay.bundle.build import BundleConfig, build_bundle
from hearsay.contracts.folds import SplitsConfig, write_folds
from hearsay.contracts.manifest import read_manifest
from hearsay.demo.corpus import DemoDataConfig, write_corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10, help="inner speaker groups (6 clips each)")
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2], help="process counts to run")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="hearsay-bench-"))
    cfg = DemoDataConfig(inner_groups=args.groups, bad_files=False)
    manifest = write_corpus(work / "corpus", cfg)
    folds = write_folds(read_manifest(manifest), SplitsConfig(), work / "splits", "bench")
    print(f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{len(os.sched_getaffinity(0))} CPUs visible, corpus {manifest}")
    print(f"# load average before: {os.getloadavg()[0]:.1f}")
    print("| processes | clips | codec copies | audio s | wall s | clips/s | copies/s "
          "| clip CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.procs:
        out = work / f"bundle_{n}"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        meta = build_bundle(manifest, out, folds, BundleConfig(workers=n, max_fail_frac=0.0),
                            progress=False)
        wall = time.perf_counter() - t0
        cpu = meta["counts"]["cpu_s"]  # summed per clip inside the workers (incl. ffmpeg)
        c = meta["counts"]
        secs = _audio_seconds(out)
        print(f"| {n} | {c['ok']} | {c['codec_copies']} | {secs:.0f} | {wall:.1f} | "
              f"{c['ok'] / wall:.2f} | {c['codec_copies'] / wall:.2f} | {cpu:.1f} |", flush=True)
    print(f"# load average after: {os.getloadavg()[0]:.1f}")
    if not args.keep:
        shutil.rmtree(work)
    return 0


def _audio_seconds(out: Path) -> float:
    import pandas as pd

    return float(pd.read_csv(out / "manifest.csv")["duration"].sum())


if __name__ == "__main__":
    raise SystemExit(main())
