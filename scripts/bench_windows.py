#!/usr/bin/env python3
"""Windowed scoring of long recordings: audio-seconds per second (fp32, int8) and peak memory.

    .venv/bin/python scripts/bench_windows.py                         # XLS-R shape, 60 s, 30 min
    .venv/bin/python scripts/bench_windows.py --shape tiny --seconds 30 --long-s 60   # quick look

Builds a random-init detector of the chosen shape (xlsr = XLS-R 300M with 12 kept layers, no
weights downloaded; tiny = ModelConfig.tiny()), exports it (export_onnx, torchscript) and its
int8 variant (export.quantize.quantize_file: the layers' MatMuls; the int8 *gate* is not applied
here, only its speed is measured) into a model folder that hearsay-score accepts. Then runs the
real `hearsay-score` command in a fresh process per measurement:

  (a) throughput: one --seconds recording (synthetic voice-like signal, 16 kHz FLAC), windowed
      (8 s every 4 s), fp32 and int8 interleaved for --rounds rounds; audio-s/s = recording
      seconds / wall seconds of the whole command (start-up, model load and decode included);
  (b) memory: one --long-s recording (default 30 min), windowed and --first-window, each with the
      --long-variant model; peak RSS of the scorer process (its own /proc VmHWM at exit: a
      fork's rusage would count this bigger parent's pages).

Prints one JSON object. Nothing here is a test: record results in docs/BENCHMARKS.md
("Windowed scoring of long recordings") with the command, the date and how loaded the machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from hearsay.export import probe
from hearsay.util.hashing import format_sums, sha256_file

SR = 16_000
FRONT = {"sample_rate": SR, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0, "min_s": 0.5}


def model_folder(folder: Path, shape: str) -> Path:
    """model.onnx + model.int8.onnx + front_end.json + SHA256SUMS of a random-init detector."""
    import torch

    from hearsay.detector.model import Detector, ModelConfig
    from hearsay.export.onnx_export import export_onnx
    from hearsay.export.quantize import quantize_file

    cfg = (ModelConfig.tiny() if shape == "tiny" else
           ModelConfig(init="random", keep_layers=12, hidden_dropout=0.0, attention_dropout=0.0))
    torch.manual_seed(0)
    folder.mkdir(parents=True)
    export_onnx(Detector(cfg).eval(), folder / "model.onnx", "torchscript")
    quantize_file(folder / "model.onnx", folder / "model.int8.onnx")
    (folder / "front_end.json").write_text(json.dumps(FRONT))
    names = ("model.onnx", "model.int8.onnx", "front_end.json")
    (folder / "SHA256SUMS").write_text(format_sums({n: sha256_file(folder / n) for n in names}))
    return folder


def recording(path: Path, seconds: float, seed: int) -> Path:
    """A voice-like 16 kHz FLAC written in 60 s pieces (this process never holds all of it)."""
    rng = np.random.default_rng(seed)
    with sf.SoundFile(path, "w", SR, 1, subtype="PCM_16") as f:
        left = seconds
        while left > 0:
            piece = probe.voice_like(rng, min(60.0, left))
            f.write(0.5 * piece / max(1e-6, float(np.max(np.abs(piece)))))
            left -= 60.0
    return path


# hearsay-score's main, then its peak RSS (VmHWM, kB) as the last stderr line
RUN = ("import atexit, runpy, sys\n"
       "def hwm():\n"
       "    line = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0]\n"
       "    print(line.strip(), file=sys.stderr)\n"
       "atexit.register(hwm)\n"
       "sys.argv = ['hearsay-score'] + sys.argv[1:]\n"
       "runpy.run_module('hearsay.deploy', run_name='__main__')\n")


def score(clips: Path, model: Path, *extra: str) -> dict:
    """Run hearsay-score once; wall seconds and the process's peak RSS (MiB)."""
    cmd = [sys.executable, "-c", RUN, str(clips), "--model", str(model), "--progress", "0",
           *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("VmHWM"):
        raise SystemExit(f"hearsay-score failed: {proc.stderr}")
    return {"wall_s": round(wall, 2), "peak_rss_mib": round(int(lines[-1].split()[1]) / 1024, 1),
            "summary": lines[-2]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=["xlsr", "tiny"], default="xlsr")
    ap.add_argument("--seconds", type=float, default=60.0, help="throughput recording (s)")
    ap.add_argument("--rounds", type=int, default=1, help="fp32/int8 rounds, interleaved")
    ap.add_argument("--long-s", type=float, default=1800.0, help="memory recording (s); 0 = skip")
    ap.add_argument("--long-variant", choices=["fp32", "int8"], default="int8")
    ap.add_argument("--threads", type=int, default=0, help="hearsay-score --threads")
    args = ap.parse_args(argv)
    out: dict = {"shape": args.shape, "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-windows-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        model = model_folder(tmp / "model", args.shape)
        out["export_s"] = round(time.perf_counter() - t0, 1)
        (tmp / "short").mkdir()
        recording(tmp / "short" / "rec.flac", args.seconds, 0)
        threads = ["--threads", str(args.threads)]
        runs: dict = {"fp32": [], "int8": []}
        for _ in range(args.rounds):
            for variant in runs:
                runs[variant].append(score(tmp / "short", model, "--variant", variant, *threads))
        out["throughput"] = {v: {"runs": r, "best_audio_s_per_s": round(
            args.seconds / min(x["wall_s"] for x in r), 3)} for v, r in runs.items()}
        out["throughput"]["int8_over_fp32"] = round(
            out["throughput"]["int8"]["best_audio_s_per_s"] /
            out["throughput"]["fp32"]["best_audio_s_per_s"], 3)
        if args.long_s > 0:
            (tmp / "long").mkdir()
            recording(tmp / "long" / "long.flac", args.long_s, 1)
            var = ["--variant", args.long_variant, *threads]
            out["memory"] = {"seconds": args.long_s, "variant": args.long_variant,
                             "windowed": score(tmp / "long", model, *var),
                             "first_window": score(tmp / "long", model, *var, "--first-window")}
    out["load_avg_end"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
