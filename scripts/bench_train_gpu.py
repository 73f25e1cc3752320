#!/usr/bin/env python3
"""Trainer GPU throughput: the raw model step vs the real trainer, in clips/s and audio-s/s.

    .venv/bin/python scripts/bench_train_gpu.py                   # on a CUDA box (one GPU)
    .venv/bin/python scripts/bench_train_gpu.py --compile         # + torch.compile variants
    .venv/bin/python scripts/bench_train_gpu.py --levers          # + cudnn.benchmark, frozen B x 2
    .venv/bin/python scripts/bench_train_gpu.py --json out.json   # also write the figures
    .venv/bin/python scripts/bench_train_gpu.py --freeze-cpu      # CPU: step time, CNN frozen
                                                                  # as transformers intends vs
                                                                  # its input-grad left on
    .venv/bin/python scripts/bench_train_gpu.py --dry-run         # CPU, tiny config: checks the
                                                                  # script's logic, no figures
                                                                  # (tests/test_bench_train_gpu.py)

(a) raw step: a Detector of the XLS-R 300M shape (12 kept layers, random init: no weights are
    read), synthetic batches made on the GPU (B clips x the recipe's crop lengths), bf16
    autocast, BCE, backward, AdamW step (the CNN frozen as the trainer freezes it); fine-tune
    (train_top 12) and frozen (train_top 0); no data loading. The dry run keeps bf16 autocast
    (on the CPU), so that path runs in the tests.
(b) the real trainer: hearsay.train.run (job full, no validation) on a synthetic bundle written
    to a temp folder (clips 4-10 s, two sources, both labels, the five codec copies as FLAC),
    augmentation on (AugmentConfig defaults, p_aug 0.65; gpu_augment as configured), the
    recipe's crop lengths (test-duration draws + uniform, bucketed; --crop-s fixes one),
    the same model shapes, bf16, the shipped config's data-loader workers and stream records
    (configs/train.json over the code defaults: 8 workers, 20,000 records made on their own
    thread; --workers / --stream-records override, the JSON says which ran and what ships,
    and stream_records_skipped_batches says whether that thread fell behind); the steady
    rate is taken from the trainer's per-step timestamps after --warmup optimiser steps (its
    audio-s/s: valid audio over the whole loop, from run_meta's throughput).
(c) --compile: at one fixed crop (--compile-crop-s, 4 s: one static graph per variant, as the
    trainer compiles one per bucket), the raw step eager and compiled (compiled_over_eager,
    warmup_s holds the compilation) and the compiled trainer.
(d) --levers: the raw step with cudnn.benchmark on (the CNN's convolutions) and the frozen
    recipe at twice the batch: levers that are not on by default, each with its own figure;
    then the trainer's speed levers (hearsay.train.levers: pack, flex, mask-free, graphs, fp8),
    each a row with the raw step and the trainer timed off and on over the same shapes
    (raw_on_over_off, trainer_on_over_off), and loss_max_abs_diff: the largest per-step gap
    between the two trainers' losses (the same seed, bundle and draws: what the lever does to
    the loss curve; fp8's is float8 against bf16 on the same steps); fp8's row is skipped,
    saying why, on a GPU below compute capability 8.9 (hearsay.train.fp8.fp8_problem).
The trainer's rows also carry valid_share (valid / computed audio: what the padding cut leaves
on zeros) and batch_shapes (distinct (B, T) fed to the model: compiled graphs).
The goal: (b) >= 0.9 x (a) at the same shapes, and >= 1,200 clips/s fine-tune.
The synthetic bundle sits in the page cache: a real bundle on a slow disk can be slower.
--json writes {"figures": [{"variant", "raw": {...}, "trainer": {...}, "trainer_over_raw"}, ...]}
with clips_per_s, audio_s_per_s, steps, seconds and autocast in each of raw and trainer.
Each raw figure also carries flops_per_step (the analytic forward + backward FLOPs of the step,
hearsay.train.flops: per clip at its valid length, padding not counted), model_tflops (those
over the timed wall) and matmul_share (model_tflops over bf16_matmul_tflops, the card's 8192^3
bf16 product rate measured at the start of the same run; null in the dry run).

Exit codes: 0 measured (or dry run done), 3 no CUDA device and no --dry-run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf
import torch
import torch.nn.functional as F

from hearsay import train
from hearsay.detector import packing
from hearsay.detector.model import Detector, ModelConfig
from hearsay.sound import audio, example
from hearsay.train import config as train_config
from hearsay.train import flops, fp8, levers
from hearsay.train import step as train_step
from hearsay.util.files import write_atomic

SR = audio.SAMPLE_RATE
CODECS = ("mp3", "opus", "aac", "amrnb", "mulaw")


def synthetic_bundle(root: Path, n: int, seed: int = 0) -> Path:
    """A bundle folder in the docs/INTERFACES.md layout: n clips 4-10 s, codec copies as FLAC
    (filtered copies: the file layout and decode cost of a real bundle, not real codecs)."""
    from hearsay.contracts.bundle import tree_sha, write_identity

    rng = np.random.default_rng(seed)
    for d in ["audio", *[f"codecs/{c}" for c in CODECS]]:
        (root / d).mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        rid, label = f"b{i:05d}", ("bonafide", "spoof")[i % 2]
        dur = rng.uniform(4.0, 10.0)
        t = np.arange(int(dur * SR)) / SR
        x = 0.2 * np.sin(2 * np.pi * rng.uniform(100, 300) * t) + 0.05 * rng.standard_normal(len(t))
        sf.write(root / "audio" / f"{rid}.flac", x.astype(np.float32), SR, subtype="PCM_16")
        for k, c in enumerate(CODECS):
            y = np.convolve(x, np.ones(k + 2) / (k + 2), mode="same").astype(np.float32)
            sf.write(root / "codecs" / c / f"{rid}.flac", y, SR, subtype="PCM_16")
        rows.append({"id": rid, "path": f"{rid}.wav", "label": label,
                     "generator": "bonafide" if label == "bonafide" else "voc-a",
                     "source": ("s1", "s2")[(i // 2) % 2], "group": f"g{i % 50}",
                     "fold": "test" if i % 10 == 9 else str(i % 5), "train_scope": "core",
                     "duration": round(dur, 4),
                     "codec_ids": ";".join(CODECS), "flac": f"audio/{rid}.flac"})
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    meta = {"status": "ok", "codecs": list(CODECS), "counts": {}, "folds": {"config": {}}}
    write_identity(root, meta)  # the fold config is part of the bundle's identity
    meta["tree_sha"] = tree_sha(root)
    (root / "bundle_meta.json").write_text(json.dumps(meta))
    return root


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast_in_force(device_type: str) -> str:
    """The autocast dtype active here, read off torch ("off" outside autocast)."""
    if not torch.is_autocast_enabled(device_type):
        return "off"
    return str(torch.get_autocast_dtype(device_type)).removeprefix("torch.")


def recipe_lengths(bundle: Path | None, crop_s: float | None, k: int) -> list[float]:
    """k crop lengths, s: `crop_s` fixed, else the trainer's recipe (hearsay.sound.example with the
    CropConfig defaults: test-duration draws + uniform, bucketed, capped at the class cap) on
    the synthetic bundle's durations, seeded: raw and trainer see the same distribution."""
    if crop_s is not None:
        return [crop_s] * k
    df = pd.read_csv(bundle / "manifest.csv")
    train_rows, test = df[df["fold"] != "test"], df.loc[df["fold"] == "test", "duration"]
    cap = example.class_cap_s(train_rows.loc[train_rows["label"] == "bonafide", "duration"],
                            train_rows.loc[train_rows["label"] == "spoof", "duration"])
    rng = np.random.default_rng(0)
    return [example.crop_length_s(rng, test.to_numpy(), cap) for _ in range(k)]


def raw_step(mc: ModelConfig, batch: int, lengths: list[float], steps: int, warmup: int,
             device: torch.device, compile_: bool, cudnn_benchmark: bool = False,
             switches: dict | None = None, mixed: bool = False) -> dict:
    """(a): fwd + bwd + AdamW on synthetic on-device tensors, step i cropped to lengths[i];
    steady rate after `warmup` (warmup_s: the warm-up steps' wall, compilation included).
    The Detector freezes its CNN as the trainer's does. compile_: the trainer's
    torch.compile (static shapes, one graph per length: hearsay.train.step.compile_forward;
    on the CPU the aot_eager backend, the dry run's plumbing check); cudnn_benchmark: cuDNN
    picks its convolution algorithms per shape (the CNN's lever). switches: a trainer lever's
    train config switches (hearsay.train.levers; the forward gets what the trainer's would);
    mixed: each clip its own length, lengths[i * batch + j] (clip j of step i), the batch padded
    to its longest, as the trainer's batches are (the packing lever's baseline)."""
    tc = train_config.TrainConfig(**(switches or {}))
    torch.manual_seed(0)
    det = Detector(mc).to(device).train()
    fp8_layers = 0  # the trainer's conversion (hearsay.train.fp8), before optimiser and compile
    if tc.fp8:
        fp8.convert(det, device)
        fp8_layers = len(fp8.float8_layers(det))
    opt = torch.optim.AdamW(train_step.optimizer_groups(det, train_config.TrainConfig()))
    fwd = det
    if compile_:
        fwd = (train_step.compile_forward(det, tc.cuda_graphs)[0] if device.type == "cuda"
               else torch.compile(det, dynamic=False, backend="aot_eager"))
    cudnn_was = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = cudnn_benchmark
    y = (torch.arange(batch, device=device) % 2).float()
    # bf16 on either device: on the CPU (--dry-run) this runs the autocast path, not for speed
    amp = torch.autocast(device.type, dtype=torch.bfloat16)
    t0 = t_start = time.perf_counter()
    valid = 0  # valid samples in the timed steps
    timed_lens = []  # (B,) valid samples of each timed step: its analytic FLOPs, after timing
    given: set[str] = set()  # the forward's lever arguments seen (the JSON's forward_args)
    for i in range(warmup + steps):
        if i == warmup:
            sync(device)
            t0 = time.perf_counter()
        clips = lengths[i * batch: (i + 1) * batch] if mixed else [lengths[i]] * batch
        lens = np.array([int(round(c * SR)) for c in clips])  # (B,) valid samples
        n = int(lens.max())
        valid += int(lens.sum()) if i >= warmup else 0
        if i >= warmup:
            timed_lens.append(lens)
        m = (torch.arange(n, device=device)[None, :] <
             torch.as_tensor(lens, device=device)[:, None]).long()
        x = torch.randn(batch, n, device=device) * m
        kw = levers.forward_args(tc, lens, n, mc, device)
        given.update(kw)
        with amp:
            logits = fwd(x, m, **kw)
            autocast = autocast_in_force(device.type)
        F.binary_cross_entropy_with_logits(logits.float(), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    sync(device)
    dt = time.perf_counter() - t0
    torch.backends.cudnn.benchmark = cudnn_was
    audio_s = valid / SR
    flop = sum(flops.step_flops(mc, lens)["total"] for lens in timed_lens)  # fwd + bwd
    return {"clips_per_s": batch * steps / dt, "audio_s_per_s": audio_s / dt,
            "flops_per_step": flop / steps, "model_tflops": flop / dt / 1e12,
            "steps": steps, "seconds": dt, "warmup_s": round(t0 - t_start, 2),
            "autocast": autocast, "batch": batch, "compiled": compile_,
            "cudnn_benchmark": cudnn_benchmark, "switches": switches or {}, "mixed": mixed,
            "forward_args": sorted(given), "fp8_layers": fp8_layers}


def freeze_step_s(mc: ModelConfig, seconds: float, library_input_grad: bool) -> float:
    """One fwd + bwd (fp32, batch 1 x `seconds`) in s. `library_input_grad` re-enables what
    transformers does when the CNN is frozen by hand (parameters only): it marks the CNN's
    input as requiring grad in training mode, so backward runs through every conv layer."""
    torch.manual_seed(0)
    det = Detector(mc).train()
    det.backbone.feature_extractor._requires_grad = library_input_grad
    n = int(round(seconds * SR))
    x, m = torch.randn(1, n), torch.ones(1, n, dtype=torch.long)
    t0 = time.perf_counter()
    det(x, m).sum().backward()
    return time.perf_counter() - t0


def freeze_cpu(args) -> int:
    """--freeze-cpu: XLS-R shape (random init), interleaved reps of each case, in s."""
    rows = []
    for rep in range(args.reps):
        for top in (args.layers, 0):
            mc = ModelConfig(init="random", keep_layers=args.layers, train_top=top)
            for grad in (True, False):
                dt = freeze_step_s(mc, args.freeze_s, grad)
                rows.append({"rep": rep, "train_top": top, "cnn_input_grad": grad, "s": dt})
                print(f"rep {rep} train_top {top:2d} "
                      f"{'CNN in autograd (library default)' if grad else 'frozen as intended':<34}"
                      f" {dt:6.2f} s", flush=True)
    if args.json:
        write_json(args.json, {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "threads": torch.get_num_threads(), "layers": args.layers,
                               "clip_s": args.freeze_s, "rows": rows})
    return 0


def trainer(bundle: Path, model: dict, args, compile_: bool, cpu: bool, tmp: Path,
            crop_s: float | None = None, switches: dict | None = None) -> dict:
    """(b): hearsay.train.run on the synthetic bundle; steady rate from its step timestamps.
    crop_s: a fixed crop length instead of args.crop_s (the compiled variants' one shape);
    switches: a lever's train config switches (hearsay.train.levers)."""
    crop_s = args.crop_s if crop_s is None else crop_s
    overrides = {
        "model": model,
        "train": {"batch_size": args.batch, "epochs": 1,
                  "batches_per_epoch": args.warmup + args.steps, "workers": args.workers,
                  "compile": compile_, "val_every": 0, "tripwire_auc": None,
                  "gpu_augment": not args.numpy_augment,
                  # the shipped value: the realised-stream records are made on their own
                  # thread (hearsay.train.records), inside the timed steps as in a real run
                  "stream_records_max": args.stream_records,
                  "cpu_threads": 0, **(switches or {})},
    }
    if crop_s is not None:  # a fixed length instead of the recipe's distribution
        overrides["crop"] = {"p_test_dist": 0.0, "uniform_min_s": crop_s,
                             "uniform_max_s": crop_s, "buckets_s": []}
    cfg = train_config.resolve_config("full", None, overrides=overrides, cpu_smoke=cpu)
    out = tmp / f"run-{len(list(tmp.iterdir()))}"
    meta = train.run(cfg, bundle, out, verify_bundle=False)
    tp = meta["throughput"]
    t = meta["step_t"]
    steps = len(t) - args.warmup
    dt = t[-1] - t[args.warmup - 1]
    shutil.rmtree(out, ignore_errors=True)
    step_s = np.diff(np.asarray(t[args.warmup - 1:], dtype=float))  # the timed steps' walls
    return {"clips_per_s": args.batch * steps / dt,
            # the rate of the median timed step: a bucket compiled late (its first batch came
            # after the warm-up) stalls one step, which this leaves out and clips_per_s keeps
            "clips_per_s_median_step": args.batch / float(np.median(step_s)),
            "warmup_s": t[args.warmup - 1] - t[0],  # from the first step's end
            "audio_s_per_s": tp["audio_s_per_s"],  # valid audio, whole run
            # valid / computed audio (the padding cut's figure) and the shapes fed (graphs)
            "valid_share": tp.get("valid_share"), "batch_shapes": tp.get("batch_shapes"),
            "compiled": compile_ and not cpu, "crop_s": crop_s,
            "steps": steps, "seconds": dt, "workers": args.workers,
            "stream_records_max": args.stream_records,
            "stream_records_skipped_batches": meta.get("stream_records_skipped_batches"),
            # the lever switches as the trainer resolved them (what it ran with)
            "switches": {k: cfg["train"][k] for k in (switches or {})},
            "fp8": meta.get("fp8"),  # run_meta's: off, or the recipe and the layers converted
            "loss": meta["history"]["loss"],  # per optimiser step: a lever's loss-curve check
            "gpu_augment": not args.numpy_augment,
            # hearsay.train's rule: bf16 autocast on CUDA when configured, none on the CPU
            "autocast": "bfloat16" if not cpu and cfg["train"]["bf16"] else "off"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=64, help="clips per step")
    ap.add_argument("--crop-s", type=float, default=None,
                    help="a fixed crop length, s (default: the recipe's distribution, "
                         "hearsay.sound.example, on the synthetic bundle)")
    ap.add_argument("--layers", type=int, default=12, help="kept transformer layers")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per figure")
    ap.add_argument("--warmup", type=int, default=8, help="untimed steps first")
    shipped = shipped_train()
    ap.add_argument("--workers", type=int, default=shipped.workers,
                    help="trainer data-loader processes (default the shipped config's, "
                    f"{SHIPPED}: {shipped.workers})")
    ap.add_argument("--stream-records", type=int, default=shipped.stream_records_max,
                    help="the trainer's stream_records_max (default the shipped config's: "
                    f"{shipped.stream_records_max})")
    ap.add_argument("--clips", type=int, default=1024, help="clips in the synthetic bundle")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile variants")
    ap.add_argument("--compile-crop-s", type=float, default=4.0,
                    help="the compiled variants' fixed crop length, s (one static graph); 0: "
                         "the recipe's lengths, one graph per bucket (each compiles the first "
                         "time its shape comes: give --warmup steps enough to meet them)")
    ap.add_argument("--levers", action="store_true",
                    help="also the raw-only levers (" + ", ".join(LEVERS) + ") and the "
                         "trainer's, each off and on: " + ", ".join(TRAIN_LEVERS))
    ap.add_argument("--variants", type=parse_variants, default=None,
                    help="only these, comma-separated, from " + ", ".join(VARIANTS) +
                         " (a rerun of what a timeout cut off; overrides --compile)")
    ap.add_argument("--numpy-augment", action="store_true",
                    help="trainer renders augmentation in the workers (numpy) instead of batched")
    ap.add_argument("--skip-trainer", action="store_true", help="only (a)")
    ap.add_argument("--trainer-only", action="store_true",
                    help="only (b): the real trainer, no raw step (a compiled variant at the "
                         "recipe's lengths then compiles its graphs once, not twice)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--freeze-cpu", action="store_true",
                    help="CPU only: fwd+bwd time (batch 1) with the CNN frozen as transformers "
                         "intends vs its input-grad on, train_top = --layers and 0")
    ap.add_argument("--freeze-s", type=float, default=2.0, help="--freeze-cpu clip length, s")
    ap.add_argument("--reps", type=int, default=2, help="--freeze-cpu interleaved repetitions")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU, tiny config, a few steps: checks the script, measures nothing")
    args = ap.parse_args(argv)
    if args.freeze_cpu:
        return freeze_cpu(args)
    if not args.dry_run and not torch.cuda.is_available():
        print("bench_train_gpu: no CUDA device (torch.cuda.is_available() is False): run it on "
              "a GPU box; --dry-run checks the script on the CPU with the tiny config",
              file=sys.stderr)
        return 3
    threads = torch.get_num_threads()
    try:
        return _bench(args)
    finally:
        torch.set_num_threads(threads)


# name+lever: "" raw and trainer at the recipe's lengths; "compile" raw eager vs compiled and
# the compiled trainer, all at --compile-crop-s (one static graph); "cudnn" raw with
# cudnn.benchmark; "b128" raw at twice --batch (the frozen recipe's larger batch)
VARIANTS = ("fine-tune", "frozen", "fine-tune+compile", "frozen+compile", "fine-tune+cudnn",
            "frozen+b128", *(f"fine-tune+{name}" for name in levers.SWITCHES))
LEVERS = ("fine-tune+cudnn", "frozen+b128")
# the trainer's speed levers (hearsay.train.levers), each a row timed off and on in one run:
# raw step and trainer, the same shapes (pack, flex: the recipe's lengths per clip, padded to
# each batch's longest; mask-free: one full length per step; graphs: compiled, at
# --compile-crop-s; flex: attention dropout 0 in both, FlexAttention has none; fp8: compiled
# on both sides at --compile-crop-s, as graphs)
TRAIN_LEVERS = tuple(f"fine-tune+{name}" for name in levers.SWITCHES)


SHIPPED = Path(__file__).resolve().parents[1] / "configs" / "train.json"


def shipped_train() -> train_config.TrainConfig:
    """The train section of the shipped config (code defaults <- configs/train.json)."""
    overrides = json.loads(SHIPPED.read_text()) if SHIPPED.is_file() else {}
    return train_config.sections(train_config.resolve_config("full", None,
                                                             overrides=overrides))[0]


def parse_variants(text: str) -> list[tuple[str, str]]:
    """'frozen,fine-tune+compile' -> [('frozen', ''), ('fine-tune', 'compile')]."""
    out = []
    for v in (t.strip() for t in text.split(",") if t.strip()):
        if v not in VARIANTS:
            raise argparse.ArgumentTypeError(
                f"unknown variant {v!r} (one of {', '.join(VARIANTS)})")
        name, _, lever = v.partition("+")
        out.append((name, lever))
    if not out:
        raise argparse.ArgumentTypeError("no variant named")
    return out


def _variant(args, tmp: Path, bundle: Path, shape: dict, name: str, lever: str,
             device: torch.device) -> dict:
    """One row: {"variant", "raw", ["raw_eager", "compiled_over_eager"], ["trainer",
    "trainer_over_raw"]}; the levers other than compile time the raw step only."""
    if lever in levers.SWITCHES:
        return _lever_row(args, tmp, bundle, shape, f"{name} + {lever}", lever, device)
    mc = ModelConfig.from_dict(shape)
    label = name + (f" + {lever}" if lever else "")
    crop_s = args.crop_s
    if lever == "compile":  # 0: the recipe's lengths, as the trainer would run compiled
        crop_s = args.compile_crop_s or None
    n = args.warmup + args.steps
    lengths = recipe_lengths(bundle, crop_s, n)
    batch = 2 * args.batch if lever == "b128" else args.batch
    row: dict = {"variant": label, "crop_s": crop_s}
    if args.trainer_only:
        row["trainer"] = trainer(bundle, shape, args, lever == "compile", args.dry_run,
                                 tmp / "runs", crop_s=crop_s)
        return row
    if lever == "compile":  # eager at the same fixed length: the compiled step's baseline
        row["raw_eager"] = raw_step(mc, batch, lengths, args.steps, args.warmup, device, False)
    row["raw"] = raw_step(mc, batch, lengths, args.steps, args.warmup, device,
                          lever == "compile", cudnn_benchmark=lever == "cudnn")
    if "raw_eager" in row:
        row["compiled_over_eager"] = row["raw"]["clips_per_s"] / row["raw_eager"]["clips_per_s"]
    if not args.skip_trainer and lever in ("", "compile"):
        row["trainer"] = trainer(bundle, shape, args, lever == "compile", args.dry_run,
                                 tmp / "runs", crop_s=crop_s)
        row["trainer_over_raw"] = row["trainer"]["clips_per_s"] / row["raw"]["clips_per_s"]
    return row


def _lever_row(args, tmp: Path, bundle: Path, shape: dict, label: str, lever: str,
               device: torch.device) -> dict:
    """One trainer lever off and on: {"variant", "switches", "raw_off", "raw",
    "raw_on_over_off", "trainer_off", "trainer", "trainer_on_over_off", "trainer_over_raw",
    "loss_max_abs_diff"},
    or {"variant", "refused"} when the config refuses the lever, {"variant", "skipped"}
    where this device cannot train it (flex off CUDA, fp8 below compute capability 8.9)."""
    switches = levers.SWITCHES[lever]
    try:
        train_config.TrainConfig(**switches)
    except ValueError as err:
        return {"variant": label, "switches": switches, "refused": str(err)}
    if lever == "flex" and (why := packing.flex_training_problem(device)):
        return {"variant": label, "switches": switches, "skipped": why}  # the dry run's CPU
    if lever == "fp8" and (why := fp8.fp8_problem(device)):
        return {"variant": label, "switches": switches, "skipped": why}  # an A100, say
    if lever == "flex":  # FlexAttention has no attention dropout: both sides without it
        shape = {**shape, "attention_dropout": 0.0}
    mc = ModelConfig.from_dict(shape)
    # graphs and fp8 are timed compiled on both sides, at --compile-crop-s (one static graph):
    # torchao's float8 casts are built to fuse under torch.compile; eager would time them unfused
    compiled = lever in ("graphs", "fp8")
    crop_s = (args.compile_crop_s or None) if compiled else args.crop_s
    mixed = lever in ("pack", "flex")
    n = args.warmup + args.steps
    lengths = recipe_lengths(bundle, crop_s, n * args.batch if mixed else n)
    row: dict = {"variant": label, "crop_s": crop_s, "switches": switches}
    for side, sw in (("_off", None), ("", switches)):
        row["raw" + side] = raw_step(mc, args.batch, lengths, args.steps, args.warmup, device,
                                     compiled, switches=sw, mixed=mixed)
    row["raw_on_over_off"] = row["raw"]["clips_per_s"] / row["raw_off"]["clips_per_s"]
    if args.skip_trainer:
        return row
    for side, sw in (("_off", None), ("", switches)):
        row["trainer" + side] = trainer(bundle, shape, args, compiled, args.dry_run,
                                        tmp / "runs", crop_s=crop_s, switches=sw)
    row["trainer_on_over_off"] = (row["trainer"]["clips_per_s"] /
                                  row["trainer_off"]["clips_per_s"])
    # the same seed, bundle and draws on both sides: the loss curves differ by the lever only
    # (fp8: float8 against bf16 on the same steps)
    row["loss_max_abs_diff"] = max(abs(a - b) for a, b in zip(
        row["trainer"]["loss"], row["trainer_off"]["loss"], strict=True))
    row["trainer_over_raw"] = row["trainer"]["clips_per_s"] / row["raw"]["clips_per_s"]
    return row


def row_line(row: dict) -> str:
    """The variant's printed line (gpu_check.sh's log keeps it if the JSON never comes)."""
    raw, tr = row.get("raw"), row.get("trainer", {})
    line = f"{row['variant']:<20}"
    if "refused" in row or "skipped" in row:
        return f"{line} {'refused' if 'refused' in row else 'skipped'}: " + \
            row.get("refused", row.get("skipped"))
    if raw:
        share = raw.get("matmul_share")
        line += (f" raw {raw['clips_per_s']:8.1f} clips/s "
                 f"{raw['audio_s_per_s']:8.1f} audio-s/s (B {raw['batch']}, warm-up "
                 f"{raw['warmup_s']:.0f} s; {raw['flops_per_step'] / 1e12:.2f} TFLOP a step, "
                 f"{raw['model_tflops']:.1f} TFLOP/s = "
                 f"{'?' if share is None else f'{100 * share:.0f}%'} of bf16 matmul)")
    if "raw_eager" in row:
        line += f" = {row['compiled_over_eager']:.2f} x eager at {row['crop_s']} s"
    if "raw_off" in row:
        line += f" = {row['raw_on_over_off']:.2f} x lever off"
    if tr:
        share = tr.get("valid_share")
        line += (f" | trainer {tr['clips_per_s']:8.1f} clips/s (median step "
                 f"{tr['clips_per_s_median_step']:.1f}, warm-up {tr['warmup_s']:.0f} s), "
                 + (f"{row['trainer_over_raw']:.2f} of raw, " if "trainer_over_raw" in row
                    else "")
                 + "valid audio "
                 f"{'?' if share is None else f'{100 * share:.0f}%'} of computed, "
                 f"{tr.get('batch_shapes')} shapes")
    if "trainer_off" in row:
        line += (f", {row['trainer_on_over_off']:.2f} x lever off, loss within "
                 f"{row['loss_max_abs_diff']:.4f} of it")
    return line


def add_matmul_shares(row: dict, matmul_tflops: float | None) -> dict:
    """Each raw figure's model_tflops as a share of the run's bf16 matmul rate (None when the
    rate was not measured: the dry run's CPU)."""
    for key in ("raw", "raw_off", "raw_eager"):
        if key in row:
            row[key]["matmul_share"] = (None if not matmul_tflops
                                        else row[key]["model_tflops"] / matmul_tflops)
    return row


def write_json(path: Path, results: dict) -> None:
    """Atomically (hearsay.util.files.write_atomic): a run killed mid-write leaves the previous
    file."""
    write_atomic(path, json.dumps(results, indent=1) + "\n")


def _bench(args) -> int:
    """Both parts for each variant; prints a line and rewrites --json after each variant, so a
    timeout keeps every variant already finished."""
    if args.dry_run:
        args.batch, args.crop_s, args.steps, args.warmup = 4, 1.0, 2, 1
        args.compile_crop_s = 1.0
        args.workers, args.clips = 0, 16
        torch.set_num_threads(1)  # a tiny model gains nothing from threads (as --cpu-smoke)
        shapes = {"fine-tune": ModelConfig.tiny().to_dict(),
                  "frozen": ModelConfig.tiny(train_top=0).to_dict()}
        device = torch.device("cpu")
    else:
        base = dict(init="random", keep_layers=args.layers)
        shapes = {"fine-tune": ModelConfig(train_top=args.layers, **base).to_dict(),
                  "frozen": ModelConfig(train_top=0, **base).to_dict()}
        device = torch.device("cuda")
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
               "dry_run": args.dry_run, "batch": args.batch, "crop_s": args.crop_s,
               "layers": args.layers,
               # the card's bf16 matmul rate in this run: the model's FLOP rate is read
               # against it (hearsay.train.flops: the analytic count, fwd + bwd, per clip)
               "bf16_matmul_tflops": (flops.bf16_matmul_tflops() if device.type == "cuda"
                                      else None),
               "config": {"workers": args.workers, "stream_records_max": args.stream_records,
                          "shipped": {"file": "configs/train.json",
                                      "workers": shipped_train().workers,
                                      "stream_records_max": shipped_train().stream_records_max}},
               "figures": []}
    print(f"bench_train_gpu: trainer with workers {args.workers}, stream_records_max "
          f"{args.stream_records} (the shipped configs/train.json: {shipped_train().workers}, "
          f"{shipped_train().stream_records_max})", flush=True)
    variants = [("fine-tune", "")]
    if args.compile:
        variants.append(("fine-tune", "compile"))
    variants.append(("frozen", ""))
    if args.levers:
        variants += [parse_variants(v)[0] for v in (*LEVERS, *TRAIN_LEVERS)]
    if args.compile:
        variants.append(("frozen", "compile"))
    if args.variants is not None:
        variants = args.variants
    with tempfile.TemporaryDirectory(prefix="hearsay-bench-train-") as tmp:
        tmp = Path(tmp)
        bundle = synthetic_bundle(tmp / "bundle", args.clips)
        (tmp / "runs").mkdir()
        for name, lever in variants:
            row = add_matmul_shares(_variant(args, tmp, bundle, shapes[name], name, lever,
                                             device), results["bf16_matmul_tflops"])
            results["figures"].append(row)
            print(row_line(row), flush=True)
            if args.json:
                write_json(args.json, results)
    if args.dry_run:
        print("bench_train_gpu: dry run on CPU with the tiny config: the figures above check "
              "the script only, they are not GPU throughput")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
