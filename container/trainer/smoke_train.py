#!/usr/bin/env python3
"""The box's proof that it can train, run by container/trainer/smoke_check.sh before the job.

    python3 smoke_train.py train --device cuda --store r2:bucket/runs/fold3/smoke   # on a box
    python3 smoke_train.py train --device cpu --store /tmp/smoke                    # make test
    python3 smoke_train.py codecs                                   # ffmpeg: $HEARSAY_FFMPEG

train — `hearsay train` itself (hearsay.train.main in this process, its exit codes), on a synthetic
  bundle made here in a few seconds (hearsay.demo.corpus: 5 inner groups x 2 clips per class,
  1-3 s; hearsay.contracts.folds; hearsay.bundle with one codec copy, mulaw), fold 0, one epoch of 4
  micro-batches of 8 in 2 optimiser steps (gradient accumulation), a validation readout at each
  step, the checkpoint published to STORE/<UTC time>-<pid> (a fresh folder per box start: the
  trainer refuses a store that holds checkpoints) and the final model pushed:
    cuda  the shipped config's code paths (code defaults <- $HEARSAY_SMOKE_CONFIG, the box's
          train.json, when set): bf16 autocast, fused AdamW, DataLoader workers (at most 2)
          with pinned memory, the augmentation rendered on the GPU, torch.compile when the
          config asks; only the sizes are the smoke's (tiny random-init model, 2 s crops)
    cpu   the trainer's --cpu-smoke preset with the same sizes and one loader worker
  Then the checkpoint comes back: STORE's latest complete checkpoint must be epoch 1; it is
  pulled into a fresh folder, sha256-verified (hearsay.train.checkpoint), and loaded into a
  fresh Detector (strict), a fresh AdamW (fused on CUDA) and the RNG state, as --resume does.
  On CUDA, when $HEARSAY_WEIGHTS_DIR/pytorch_model.bin exists (smoke_check.sh's weights check
  fails a box without it), one forward/backward/AdamW step of the real XLS-R 300M shape
  (ModelConfig(), 12 kept layers) from those sha-checked weights, B=2 x 4 s in bf16: finite
  float32 logits (B,), a finite loss, a gradient on every trainable parameter, a change in
  every optimiser group. (Its checkpoint would be 1.9 GB, minutes through the store at every
  box start; the store path, its credentials and the format are what the tiny one proves.)
codecs — a 1 s 16 kHz two-tone signal through the five codec copies of hearsay.sound.codecs
  (MP3, Opus, AAC, AMR-NB, mu-law) with one ffmpeg run; every copy decoded back must be finite,
  0.9-1.25 s long and hold at least a tenth of the input's energy.

Prints `ok   CHECK: …` / `FAIL CHECK: …` lines on stdout. Exit codes (smoke_check.sh's): 0 ok,
12 codecs, 15 train (the trainer or the XLS-R step failed: the trainer's exit code and its last
error line are in the FAIL line), 16 checkpoint (the trainer could not push it, exit 6, or it did
not come back whole), 2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

EXIT_OK, EXIT_USAGE, EXIT_CODECS, EXIT_TRAIN, EXIT_CHECKPOINT = 0, 2, 12, 15, 16
SR = 16_000


class SmokeFailure(Exception):
    """One check failed; the message says what was seen."""


def say(status: str, check: str, message: str) -> None:
    print(f"{status:<4} {check}: {message}", flush=True)


def _why(err: BaseException) -> str:
    """The exception and where in the code it was raised (last frame), on one line."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(err).__name__}: {err}{where}"


# --------------------------------------------------------------------------- train


def batch(n_samples: int, device):
    """2 clips (B=2, one bona fide, one spoof), the second padded to 3/4: (B, T) float32
    normalised input, (B, T) int64 mask, (B,) float32 labels."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, n_samples, generator=gen)
    mask = torch.ones(2, n_samples, dtype=torch.int64)
    mask[1, n_samples * 3 // 4:] = 0
    x = x * mask  # padding is zeros, as the trainer's collate makes it
    return x.to(device), mask.to(device), torch.tensor([0.0, 1.0], device=device)


def one_step(cfg, device, amp: bool, weights: Path | None = None, weights_sha: str | None = None):
    """Build the Detector, take one optimiser step, check it. Returns (det, opt, message)."""
    import torch
    import torch.nn.functional as F

    from hearsay.detector.model import Detector, load_pretrained
    from hearsay.train.config import TrainConfig
    from hearsay.train.step import optimizer_groups

    tc = TrainConfig()
    torch.manual_seed(0)
    det = Detector(cfg)
    note = "random init"
    if weights is not None:
        note = f"weights sha256 {load_pretrained(det, weights, expected_sha=weights_sha)[:12]}…"
    det = det.to(device).train()
    det.generator = torch.Generator(device=device).manual_seed(0)  # SpecAugment's stream
    opt = torch.optim.AdamW(optimizer_groups(det, tc), betas=(0.9, 0.98), eps=1e-6,
                            fused=device.type == "cuda")  # as hearsay.train.prepare builds it
    trainable = [p for g in opt.param_groups for p in g["params"]]
    before = [p.detach().clone() for p in trainable]

    seconds = 4.0 if cfg.hidden_size >= 1024 else 1.0
    iv, am, y = batch(int(seconds * SR), device)
    t0 = time.time()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
        logits = det(iv, am)
    if not (isinstance(logits, torch.Tensor) and logits.shape == (2,)
            and logits.dtype == torch.float32 and torch.isfinite(logits).all()):
        raise SmokeFailure(f"logits are not finite float32 (B,)=(2,): {logits!r}")
    target = y * (1 - tc.label_smoothing) + 0.5 * tc.label_smoothing
    loss = F.binary_cross_entropy_with_logits(logits.float(), target)
    loss.backward()
    no_grad = [i for i, p in enumerate(trainable) if p.grad is None]
    if no_grad:
        raise SmokeFailure(f"{len(no_grad)} of {len(trainable)} trainable parameters got no "
                           "gradient (a layer's output does not reach the logit)")
    norm = torch.nn.utils.clip_grad_norm_(trainable, tc.grad_clip)
    if not (torch.isfinite(loss) and torch.isfinite(norm)):
        raise SmokeFailure(f"loss {loss.item()} / grad norm {norm.item()} not finite")
    opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    step_s = time.time() - t0
    changed = {id(p) for p, b in zip(trainable, before, strict=True) if not torch.equal(p, b)}
    still = [g["name"] for g in opt.param_groups if not any(id(p) in changed for p in g["params"])]
    if still:
        raise SmokeFailure(f"the step changed no parameter of group(s) {sorted(set(still))}")
    msg = (f"{note}, B=2 x {seconds:g} s, {'bf16' if amp else 'fp32'} on {device.type}: "
           f"loss {loss.item():.4f}, grad norm {norm.item():.3g}, {len(trainable)} tensors "
           f"stepped in {step_s:.2f} s")
    return det, opt, msg


# the smoke's sizes, layered over the config's code paths (the ModelConfig is the tiny one)
SIZES = {"epochs": 1, "batch_size": 8, "grad_accum": 2, "batches_per_epoch": 4,
         "max_crop_s": 2.0, "val_every": 1, "val_batch": 8, "tripwire_auc": None}
SMOKE_DEMO = {"inner_groups": 5, "per_group": 2, "holdout_groups": 1, "test_groups": 1,
              "extra_rows": 4, "min_s": 1.0, "max_s": 3.0, "bad_files": False}


def make_bundle(tmp: Path) -> Path:
    """The synthetic bundle: demo corpus -> fold file -> bundle (one codec copy): ~2 s."""
    from hearsay.bundle.build import BundleConfig, build_bundle
    from hearsay.contracts.folds import SplitsConfig, write_folds
    from hearsay.contracts.manifest import read_manifest
    from hearsay.demo.corpus import DemoDataConfig, write_corpus

    manifest = write_corpus(tmp / "corpus", DemoDataConfig(**SMOKE_DEMO))
    folds = write_folds(read_manifest(manifest), SplitsConfig.from_dict(
        {"holdout_families": ["phq"]}), tmp / "splits", "smoke")
    build_bundle(manifest, tmp / "bundle", folds, BundleConfig(workers=1, codecs=("mulaw",)),
                 progress=False)
    return tmp / "bundle"


def train_config(device) -> tuple[dict, list[str]]:
    """(--config JSON, extra CLI flags) of the trainer run: see the module docstring."""
    import json

    from hearsay.detector.model import ModelConfig

    if device.type != "cuda":
        return {"train": {**SIZES, "workers": 1}}, ["--cpu-smoke"]
    shipped = os.environ.get("HEARSAY_SMOKE_CONFIG")
    base = json.loads(Path(shipped).read_text()) if shipped else {}
    train = {**base.get("train", {}), **SIZES}
    train["workers"] = min(2, train.get("workers", 8))
    return {**base, "train": train, "model": ModelConfig.tiny().to_dict()}, []


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def run_trainer(device, store_uri: str | None, tmp: Path) -> tuple[int, str, dict]:
    """`hearsay train` (hearsay.train.main, what `hearsay train` and `python -m hearsay.cli
    train` run; in this process: one torch import, not two) on the synthetic bundle:
    (exit code, its last stderr line, run_meta). An exception it does not map to an exit code
    propagates (the FAIL line then names it and where it was raised)."""
    import contextlib
    import io
    import json

    from hearsay import train

    cfg, flags = train_config(device)
    (tmp / "smoke.json").write_text(json.dumps(cfg))
    argv = ["--bundle", str(make_bundle(tmp)), "--fold", "0", "--out", str(tmp / "run"),
            "--config", str(tmp / "smoke.json"), *flags,
            *(["--store", store_uri] if store_uri else [])]
    err = io.StringIO()
    os.environ["HEARSAY_STORE_BACKOFF_S"] = "1"  # a box that cannot push: fail in seconds
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = train.main(argv)
    try:
        meta = json.loads((tmp / "run" / "run_meta.json").read_text())
    except (OSError, ValueError):
        meta = {}
    return rc, _last_error(err.getvalue()), meta


def trained(meta: dict, seconds: float) -> str:
    """What the trainer's run_meta says it did, on one line."""
    hist = meta["history"]
    if meta.get("steps") != 2 or len(hist.get("val", [])) != 2 or len(hist.get("loss", [])) != 2:
        raise SmokeFailure(f"run_meta says {meta.get('steps')} optimiser steps, "
                           f"{len(hist.get('val', []))} readouts (want 2 and 2)")
    aucs = ", ".join(f"{v['auc']:.2f}" for v in hist["val"])
    return (f"hearsay train on {meta['device']}: {meta['steps']} optimiser steps, loss "
            f"{hist['loss'][0]:.4f} -> {hist['loss'][-1]:.4f}, readouts AUC {aucs}, "
            f"in {seconds:.1f} s")


def checkpoint_back(store_uri: str, run_dir: Path, device) -> str:
    """The trainer's checkpoint from the store into a fresh folder, verified and reloaded."""
    import torch

    from hearsay import store as stores
    from hearsay.detector.model import Detector
    from hearsay.train import checkpoint
    from hearsay.train.config import sections
    from hearsay.train.step import optimizer_groups, rank_rng, set_rng_state

    store = stores.open_store(store_uri, run_dir, retries=1, backoff_s=1.0)
    latest = store.latest_checkpoint()
    if latest != 1:
        raise SmokeFailure(f"{store.uri}: latest complete checkpoint is {latest}, not epoch 1")
    if "model.safetensors" not in store.list_entries("final"):
        raise SmokeFailure(f"{store.uri}/final lacks the trainer's model.safetensors")
    pulled = run_dir.parent / "pulled"
    store.pull_dir(f"{stores.CKPT_DIR}/{stores.ckpt_name(1)}", pulled)
    ck = checkpoint.read_checkpoint(pulled)  # sha256 of both tensor files vs state.json
    tc, mc, _, _ = sections(ck.state["config"])  # the resolved config the trainer ran
    det = Detector(mc)
    det.load_state_dict(ck.model, strict=True)
    det.to(device)
    det.generator = torch.Generator(device=device)
    opt = torch.optim.AdamW(optimizer_groups(det, tc), fused=device.type == "cuda")
    opt.load_state_dict(ck.optimizer)
    set_rng_state(rank_rng(ck.rng, 0), device, det.generator)
    size = sum(f.stat().st_size for f in pulled.iterdir())
    return (f"{store.uri}/{stores.CKPT_DIR}/{stores.ckpt_name(1)}: {size} bytes pulled back, "
            f"sha256-verified, loaded into a fresh Detector, AdamW"
            f"{' (fused)' if device.type == 'cuda' else ''} and RNG")


def cmd_train(args) -> int:
    try:
        import torch

        from hearsay.detector.model import XLSR_300M_SHA256, ModelConfig
    except Exception as err:  # noqa: BLE001 - any import failure is this check's failure
        say("FAIL", "train", f"cannot import the model code: {_why(err)}")
        return EXIT_TRAIN
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        say("FAIL", "train", "--device cuda but torch sees no CUDA device")
        return EXIT_TRAIN
    store_uri = None
    if args.store:  # a fresh folder per box start: the trainer refuses a store with checkpoints
        store_uri = f"{args.store.rstrip('/')}/{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}" \
                    f"-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="hearsay-smoke-") as tmp:
        tmp = Path(tmp)
        t0 = time.time()
        try:
            rc, last, meta = run_trainer(device, store_uri, tmp)
            if rc in (0, 6):  # 6: trained, then the store push failed: the checkpoint's fault
                say("ok", "train", trained(meta, time.time() - t0))
            else:
                raise SmokeFailure(f"hearsay train exited {rc}: {last}")
        except Exception as err:  # noqa: BLE001 - report it, name the check
            say("FAIL", "train", _why(err) if not isinstance(err, SmokeFailure) else str(err))
            return EXIT_TRAIN
        weights = Path(os.environ.get("HEARSAY_WEIGHTS_DIR", "/opt/hearsay/weights/xls-r-300m"))
        if device.type != "cuda" or not (weights / "pytorch_model.bin").is_file():
            say("ok", "train", "xls-r: not run (" + ("CPU" if device.type != "cuda"
                                                     else f"no {weights}/pytorch_model.bin") + ")")
        else:
            sha = os.environ.get("HEARSAY_WEIGHTS_SHA256") or XLSR_300M_SHA256
            try:
                det, opt, msg = one_step(ModelConfig(), device, args.amp == "bf16", weights, sha)
                del det, opt  # the XLS-R shape's 2 GB of weights + AdamW state
                torch.cuda.empty_cache()
            except Exception as err:  # noqa: BLE001
                say("FAIL", "train", f"xls-r: {_why(err)}")
                return EXIT_TRAIN
            say("ok", "train", f"xls-r: {msg}")
        if store_uri is None:
            return EXIT_OK  # no store given: the caller reports the checkpoint check itself
        if rc == 6:
            say("FAIL", "checkpoint", f"hearsay train could not push to the store: {last}")
            return EXIT_CHECKPOINT
        try:
            msg = checkpoint_back(store_uri, tmp / "run", device)
        except Exception as err:  # noqa: BLE001
            say("FAIL", "checkpoint", _why(err))
            return EXIT_CHECKPOINT
        say("ok", "checkpoint", msg)
    return EXIT_OK


# --------------------------------------------------------------------------- codecs


def cmd_codecs(args) -> int:
    try:
        import numpy as np

        from hearsay.sound.codecs import CODECS, available, roundtrip
        from hearsay.sound.decoder import ffmpeg_exe

        ff = ffmpeg_exe()
        have, missing = available(ffmpeg=ff)
        if missing:
            raise SmokeFailure(f"{ff} lacks the encoder(s) of {missing}")
        t = np.arange(SR) / SR
        x = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 1250 * t))
        x = x.astype(np.float32)
        with tempfile.TemporaryDirectory(prefix="hearsay-smoke-codecs-") as tmp:
            copies = roundtrip(x, list(CODECS), Path(tmp))
        energy = float(np.mean(x ** 2))
        bad = []
        for name, y in copies.items():
            seconds = len(y) / SR
            if not (np.all(np.isfinite(y)) and 0.9 <= seconds <= 1.25
                    and float(np.mean(y ** 2)) >= 0.1 * energy):
                bad.append(f"{name} ({seconds:.3f} s, energy {float(np.mean(y ** 2)):.2g} vs "
                           f"{energy:.2g})")
        if bad or set(copies) != set(CODECS):
            raise SmokeFailure(f"decoded copies wrong: {bad or sorted(set(CODECS) - set(copies))}")
    except Exception as err:  # noqa: BLE001
        say("FAIL", "codecs", _why(err))
        return EXIT_CODECS
    say("ok", "codecs", f"{', '.join(CODECS)} encoded and decoded back by {ff}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    sub = ap.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="hearsay train on a synthetic bundle, its checkpoint back "
                        "from the store, one XLS-R step on CUDA")
    tr.add_argument("--device", default="cuda", help="cuda (a box) or cpu (make test)")
    tr.add_argument("--amp", choices=["bf16", "off"], default="bf16", help="autocast dtype")
    tr.add_argument("--store", help="where the checkpoint goes: remote:path (rclone) or a local "
                    "folder; without it the checkpoint round trip is not run")
    sub.add_parser("codecs", help="the five-codec ffmpeg round trip")
    args = ap.parse_args(argv)
    return cmd_train(args) if args.command == "train" else cmd_codecs(args)


if __name__ == "__main__":
    sys.exit(main())
