"""One clip through hearsay's three legs, counted: how many of hearsay's source files each leg
enters, and how many calls arrive in hearsay code from another file.

    PYTHONPATH=src python scripts/clip_legs.py [--work DIR] [--seconds 3.0] [--seed 0]

The legs (one 16 kHz speech-like WAV made in code; no network, no GPU: the "GPU" side runs on
the CPU, as the trainer's CPU smoke does; about half a minute):

  1 file -> bundle FLAC    hearsay.bundle.build.build_bundle on a one-clip manifest (one process)
  2 FLAC -> GPU batch      load_bundle, then the trainer's batch path: EpochBatches item (choose,
                           load, crop, augment draw, finish, pad) -> hearsay.train.data.device_batch
                           (to the device, the mask, hearsay.train.augment_gpu's render); the
                           recipe's defaults (TrainConfig, CropConfig, AugmentConfig, made before
                           the trace), the draw seeded by --seed
  3 file -> score row      hearsay-score (hearsay.deploy.main) on the original file, with a tiny
                           random-init detector exported beforehand (the export is not counted)

Counting (sys.setprofile, every thread of this process): a *file* is a .py under src/hearsay
whose code runs during the leg; an *arrival* is a call event (a generator resumed included)
whose callee lies in a hearsay file and whose caller is not that same file (the script, a
library calling back, or another hearsay file), counted every time. Each leg runs once untraced
first, so module bodies run by a first import are not counted. Prints per leg
"files N, arrivals M" and the files with their arrivals, then the union over the three legs.
Exit codes: 0 measured, 2 usage.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


@dataclass
class Trace:
    """What one traced call saw: arrivals per file (relative to the traced root)."""

    arrivals: Counter = field(default_factory=Counter)

    @property
    def files(self) -> list[str]:
        return sorted(self.arrivals)

    @property
    def total(self) -> int:
        return sum(self.arrivals.values())


def traced(fn, root: Path, *args, **kwargs) -> tuple[object, Trace]:
    """(fn(*args, **kwargs), Trace of the calls arriving in .py files under root)."""
    prefix = str(root.resolve()) + "/"
    inside: dict[str, str | None] = {}  # co_filename -> path relative to root, or None

    def rel(filename: str) -> str | None:
        if filename not in inside:
            p = str(Path(filename).resolve()) if filename.endswith(".py") else ""
            inside[filename] = p[len(prefix):] if p.startswith(prefix) else None
        return inside[filename]

    trace = Trace()

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = rel(frame.f_code.co_filename)
        if callee is None:
            return
        back = frame.f_back
        if back is None or back.f_code.co_filename != frame.f_code.co_filename:
            trace.arrivals[callee] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        out = fn(*args, **kwargs)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return out, trace


def speech_like(seconds: float, seed: int):
    """(N,) float32 @ 16 kHz: a voiced buzz under a moving formant, with noise and pauses."""
    import numpy as np

    rate, rng = 16000, np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = 120 + 20 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 12))
    x *= 0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)  # syllable rate
    x += 0.02 * rng.standard_normal(len(t))
    x[: rate // 4] *= 0.01  # leading and trailing near-silence: the trim has work to do
    x[-rate // 4:] *= 0.01
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


def make_clip(work: Path, seconds: float, seed: int) -> tuple[Path, Path]:
    """(clips folder holding the one WAV, one-clip manifest.csv)."""
    import soundfile as sf

    clips = work / "clips"
    clips.mkdir(parents=True, exist_ok=True)
    sf.write(clips / "clip.wav", speech_like(seconds, seed), 16000, subtype="PCM_16")
    manifest = work / "manifest.csv"
    with open(manifest, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "path", "label", "generator", "source", "group", "fold",
                    "train_scope"])
        w.writerow(["clip", "clips/clip.wav", "spoof", "gen-a", "studio", "g0", "0", "core"])
    return clips, manifest


def leg_bundle(manifest: Path, out: Path):
    from hearsay.bundle.build import BundleConfig, build_bundle

    return build_bundle(manifest, out, cfg=BundleConfig(workers=1), progress=False)


class _OneClipPlan:
    """The sampler's one method EpochBatches calls: every batch is the bundle's row 0."""

    def epoch_plan(self, epoch: int, n_batches: int):
        import numpy as np

        return np.zeros((n_batches, 1), dtype=np.int64)


def batch_configs(seed: int):
    """The recipe's defaults (TrainConfig, CropConfig, AugmentConfig): built outside the trace,
    as the bundle is (inputs of the leg, not its path)."""
    from hearsay.sound import example
    from hearsay.sound.augment import AugmentConfig
    from hearsay.train.config import TrainConfig

    return TrainConfig(seed=seed), example.CropConfig(), AugmentConfig()


def leg_batch(bundle_dir: Path, tc, cc, ac):
    import torch

    from hearsay.contracts.bundle import load_bundle
    from hearsay.sound import example
    from hearsay.train.data import BatchContext, EpochBatches, device_batch
    from hearsay.train.prepare import ROW_COLUMNS

    bundle = load_bundle(bundle_dir)
    durations = bundle.manifest["duration"].astype(float).to_numpy()
    ctx = BatchContext(seed=tc.seed, world=1, rank=0, test_durations=durations,
                       cap_s=example.class_cap_s(durations, durations), crop=cc, augment=ac,
                       max_crop_s=tc.max_crop_s, gpu_augment=tc.gpu_augment)
    rows = bundle.manifest[ROW_COLUMNS].to_dict("records")
    batch = EpochBatches(bundle.root, rows, _OneClipPlan(), 1, ctx)[(1, 0)]
    iv, _, _ = device_batch(batch, torch.device("cpu"), tc.gpu_augment)  # (1, T) float32
    return iv, batch["names"]


def export_tiny_model(out: Path) -> Path:
    import torch

    from hearsay.detector.model import Detector, ModelConfig
    from hearsay.export.onnx_export import ExportConfig, export_model

    torch.manual_seed(1)
    export_model(Detector(ModelConfig.tiny()).eval(), out, ExportConfig(int8=False,
                                                                        parity_clips=4))
    return out


def leg_score(clips: Path, model: Path, out_csv: Path) -> int:
    from hearsay import deploy

    return deploy.main([str(clips), "-o", str(out_csv), "--model", str(model),
                        "--progress", "0"])


def report(name: str, t: Trace) -> None:
    print(f"{name}: files {len(t.files)}, arrivals {t.total}")
    for f in t.files:
        print(f"    {t.arrivals[f]:4d}  {f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, help="folder for the clip, bundles and model "
                    "(default: a temporary one, removed)")
    ap.add_argument("--seconds", type=float, default=3.0, help="clip length (s)")
    ap.add_argument("--seed", type=int, default=0, help="the clip's noise and the batch draw")
    args = ap.parse_args(argv)
    if args.seconds <= 1.0:
        ap.error("--seconds must be > 1 (the clip must survive trimming)")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        clips, manifest = make_clip(work, args.seconds, args.seed)
        root = SRC / "hearsay"
        leg_bundle(manifest, work / "bundle_warm")  # untraced: first imports
        _, t1 = traced(leg_bundle, root, manifest, work / "bundle")
        configs = batch_configs(args.seed)
        leg_batch(work / "bundle", *configs)
        (_, names), t2 = traced(leg_batch, root, work / "bundle", *configs)
        model = export_tiny_model(work / "model")
        leg_score(clips, model, work / "warm.csv")
        code, t3 = traced(leg_score, root, clips, model, work / "scores.csv")
        if code != 0:
            print(f"clip_legs: hearsay-score exited {code}", file=sys.stderr)
            return 1
        report("leg 1 file -> bundle FLAC", t1)
        report(f"leg 2 bundle FLAC -> GPU batch (augmentation drawn: {', '.join(names)})", t2)
        report("leg 3 file -> score row (hearsay-score)", t3)
        union = t1.arrivals + t2.arrivals + t3.arrivals
        print(f"all three legs: files {len(union)} (distinct), arrivals {sum(union.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
