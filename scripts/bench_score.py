#!/usr/bin/env python3
"""Scoring throughput of `hearsay score` (clips/s, audio-s/s): end to end and model only.

    .venv/bin/python scripts/bench_score.py                          # CPU, tiny model
    .venv/bin/python scripts/bench_score.py --shape xlsr --device cuda --clips 512   # GPU

Builds a throw-away bundle-shaped folder of synthetic clips (uniform 3-8 s, 16 kHz FLAC) and a
random-init run of the chosen shape (tiny = ModelConfig.tiny(); xlsr = the XLS-R 300M shape with
12 kept layers, random init: no weights are downloaded), then times
  (a) score.score_split: FLAC decode + front end (example.test_input) + batching + model, and
  (b) the model alone on the same padded batches (inputs prepared beforehand),
and between them fed scoring (the model loaded, the workers feeding it; then again with the
device copies overlapped with compute: hearsay.evaluate.overlap) and the feed alone (the
workers' batches received, no model: with --workers N > 0 its process CPU is what the model's
process pays to receive them). Prints wall-clock rates and the process CPU time per clip (the
steadier figure on a shared, oversubscribed machine; it counts this process, not the workers).
Nothing is written outside a temp folder.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf
import torch

from hearsay.detector.model import Detector, ModelConfig, save_detector
from hearsay.evaluate import score
from hearsay.sound import audio
from hearsay.sound import bundle_inputs as inputs

SR = audio.SAMPLE_RATE


def fake_bundle(root: Path, n: int, rng: np.random.Generator):
    rows = []
    (root / "audio").mkdir(parents=True)
    for i in range(n):
        dur = rng.uniform(3.0, 8.0)
        t = np.arange(int(dur * SR)) / SR
        x = 0.3 * np.sin(2 * np.pi * rng.uniform(120, 400) * t) + 0.02 * rng.normal(size=len(t))
        sf.write(root / "audio" / f"b{i:05d}.flac", x.astype(np.float32), SR, subtype="PCM_16")
        rows.append({"id": f"b{i:05d}", "path": f"b{i:05d}.wav", "label": "bonafide",
                     "fold": "holdout", "train_scope": "core", "duration": dur,
                     "flac": f"audio/b{i:05d}.flac", "codec_ids": ""})
    return types.SimpleNamespace(root=root, manifest=pd.DataFrame(rows), meta={}, tree_sha="bench")


def fake_run(run: Path, cfg: ModelConfig, seed: int) -> Path:
    torch.manual_seed(seed)
    save_detector(Detector(cfg), run / "final")
    (run / "run_meta.json").write_text(json.dumps({"job": "full", "fold": None,
                                                   "bundle_tree_sha": "bench", "steps": 0}))
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=["tiny", "xlsr"], default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--clips", type=int, default=64)
    ap.add_argument("--max-s", type=float, default=8.0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--workers", type=int, default=None,
                    help="feeding processes for the end-to-end pass (default: score-run's, "
                         "min(8, cores - 1) on cuda, 0 on cpu)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default=None,
                    help="default: bf16 on cuda (score-run's, the trainer's), fp32 on cpu")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = ModelConfig.tiny() if args.shape == "tiny" else \
        ModelConfig(init="random", hidden_dropout=0.0, attention_dropout=0.0)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
        bundle = fake_bundle(Path(tmp) / "bundle", args.clips, rng)
        run = fake_run(Path(tmp) / "run", cfg, 0)
        from hearsay.evaluate.score_run import feeding_workers

        workers = feeding_workers(args.device) if args.workers is None else args.workers
        precision = args.precision or ("bf16" if args.device.startswith("cuda") else "fp32")
        scfg = score.ScoreConfig(max_s=args.max_s, device=args.device, precision=precision)
        audio_s = float(np.minimum(bundle.manifest["duration"], args.max_s).sum())
        score.score_split(bundle, run, "holdout", cfg=scfg)  # warm-up (lazy imports, kernels)
        t0, c0 = time.perf_counter(), time.process_time()
        df, _ = score.score_split(bundle, run, "holdout", cfg=scfg, workers=workers)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t_all, c_all = time.perf_counter() - t0, time.process_time() - c0
        from hearsay.detector.model import load_detector

        t0 = time.perf_counter()
        det, _ = load_detector(run, device=args.device)
        t_load = time.perf_counter() - t0
        # fed: score_split's scoring with the model already loaded (a split of a real bundle
        # is thousands of clips: the load above is paid once per split, not per batch)
        augs = ["none"] * len(bundle.manifest)
        t0, c0 = time.perf_counter(), time.process_time()
        score.score_rows(det, bundle.root, bundle.manifest, augs, scfg, workers)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t_fed, c_fed = time.perf_counter() - t0, time.process_time() - c0
        # the same, the device copies overlapped with compute (hearsay.evaluate.overlap): the
        # box-scoring lever, timed off (above) and on in one run
        t0, c0 = time.perf_counter(), time.process_time()
        score.score_rows(det, bundle.root, bundle.manifest, augs, scfg, workers, overlap=True)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t_ovl, c_ovl = time.perf_counter() - t0, time.process_time() - c0
        # feed only: the same feeding (its length pass and the workers' start untimed), no model:
        # what the model's process pays to receive the workers' batches (workers 0: the decode
        # and front end too)
        fed = score.feed_rows(bundle.root, bundle.manifest, augs, scfg, workers)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in fed.inputs:
            pass
        t_feed, c_feed = time.perf_counter() - t0, time.process_time() - c0
        # model only: the same batches, inputs prepared beforehand
        recs = bundle.manifest.to_dict("records")
        waves = [inputs.model_input(bundle.root, r, "none", scfg) for r in recs]
        batches = score.length_batches([len(w) for w in waves], scfg)
        t0, c0 = time.perf_counter(), time.process_time()
        for b in batches:
            score.run_model(det, [waves[i] for i in b], args.device, precision)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t_model, c_model = time.perf_counter() - t0, time.process_time() - c0
    n = len(df)
    print(f"shape={args.shape} device={args.device} precision={precision} workers={workers} "
          f"threads={torch.get_num_threads()} "
          f"clips={n} (3-8 s, max_s {args.max_s}) audio={audio_s:.0f} s "
          f"batches={len(batches)}")
    for name, t, c in (("end-to-end", t_all, c_all), ("fed scoring", t_fed, c_fed),
                       ("fed scoring, overlapped", t_ovl, c_ovl),
                       ("feed only", t_feed, c_feed), ("model only", t_model, c_model)):
        print(f"{name}: {n / t:.1f} clips/s wall, {audio_s / t:.1f} audio-s/s ({t:.2f} s wall); "
              f"process CPU {c:.2f} s = {1000 * c / n:.2f} CPU-ms/clip")
    print(f"model load (in end-to-end): {t_load:.2f} s")
    print(f"end-to-end / model only: {t_model / t_all:.2f}; fed scoring / model only: "
          f"{t_model / t_fed:.2f}; overlapped / model only: {t_model / t_ovl:.2f} "
          "(goal on a GPU: >= 0.8)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
