#!/usr/bin/env python3
"""Cost of the per-clip training pipeline (crop, augmentation, finish): numpy vs batched torch.

    .venv/bin/python scripts/bench_augment.py [--crop-s 4] [--batch 64] [--device cpu|cuda]

Prints one JSON object (CPU figures in process CPU time, GPU figures in wall time): ms per
clip for each wave type on the numpy reference path (draw + render, one 4 s crop), ms for
rates.stream_record, ms for example.finish, clips/s of example.training_example with the
default mix on one CPU core, and clips/s of hearsay.train.augment_gpu.train_batch on --device for a
batch planned with augment.plan_example. Synthetic signals only. What it means for the trainer:
at N clips/s the numpy path needs about N / (training_example clips/s) CPU cores.
Exit codes: 0 measured; 2 usage error (argparse); 3 --device cuda without a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

from hearsay.sound import audio, augment, example
from hearsay.train import rates

SR = audio.SAMPLE_RATE


def per_call_ms(fn, repeats: int, clock=time.process_time) -> float:
    """ms per call. CPU figures use this process's CPU time, not wall time: on a shared,
    oversubscribed machine that is the cost per clip, and the cores a trainer needs."""
    fn()  # warm-up (imports, FFT plans)
    t0 = clock()
    for _ in range(repeats):
        fn()
    return (clock() - t0) / repeats * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crop-s", type=float, default=4.0, help="crop length, s (default 4)")
    ap.add_argument("--batch", type=int, default=64, help="clips per torch batch (default 64)")
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per figure")
    ap.add_argument("--device", default="cpu", help="torch device for the batched path")
    args = ap.parse_args(argv)
    import torch  # after argparse: --help stays fast

    from hearsay.train import augment_gpu

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_augment: --device cuda but torch sees no CUDA device (run on the box, "
              "or use --device cpu)", file=sys.stderr)
        return 3

    rng = np.random.default_rng(0)
    cfg = augment.AugmentConfig()
    n = int(args.crop_s * SR)
    clip = (0.1 * rng.standard_normal(int(8 * SR))).astype(np.float32)  # 8 s source clip
    x = clip[:n].copy()
    out: dict = {"crop_s": args.crop_s, "machine": platform.processor() or platform.machine(),
                 "date": time.strftime("%Y-%m-%d", time.gmtime()), "numpy_ms_per_clip": {}}
    for name in augment.WAVE_TYPES:
        out["numpy_ms_per_clip"][name] = round(per_call_ms(
            lambda name=name: augment.apply(name, x, rng, cfg), args.repeats), 2)
    out["numpy_ms_per_clip"]["trim_jitter(8 s clip)"] = round(per_call_ms(
        lambda: augment.trim_jitter(clip, SR, rng, cfg), args.repeats), 2)
    out["numpy_ms_per_clip"]["finish"] = round(per_call_ms(
        lambda: example.finish(x, n), args.repeats), 2)
    out["numpy_ms_per_clip"]["stream_record"] = round(per_call_ms(
        lambda: rates.stream_record("s", "spoof", x, n), args.repeats), 2)

    names = [augment.choose(rng, cfg, augment.CODECS) for _ in range(args.batch)]
    t0 = time.process_time()
    for name in names:
        example.training_example(clip, name, n, rng, cfg)
    out["numpy_training_example_clips_per_s_one_core"] = round(
        len(names) / (time.process_time() - t0), 1)

    if args.device == "cpu":
        torch.set_num_threads(1)  # CPU time of one core, comparable with the numpy figures
    t0 = time.process_time()
    planned = [example.plan_example(clip, nm, n, rng, cfg) for nm in names]
    out["numpy_plan_example_clips_per_s_one_core"] = round(
        len(names) / (time.process_time() - t0), 1)
    values, mask = audio.pad_batch([p[0] for p in planned], [p[1] for p in planned])
    params = [p[2] for p in planned]
    v = torch.from_numpy(values).to(args.device)
    m = torch.from_numpy(mask).to(args.device)

    def step():
        augment_gpu.train_batch(v, m, names, params)
        if cuda:
            torch.cuda.synchronize()

    cuda = args.device.startswith("cuda")
    clock = time.perf_counter if cuda else time.process_time
    ms = per_call_ms(step, max(3, args.repeats // 4), clock)
    out["torch_device"] = args.device + (" (1 thread)" if args.device == "cpu" else "")
    out["torch_train_batch_clips_per_s"] = round(args.batch / ms * 1000, 1)
    out["mix"] = dict(sorted((k, names.count(k)) for k in set(names)))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
