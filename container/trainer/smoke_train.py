#!/usr/bin/env python3
"""The box's proof that it can train, run by container/trainer/smoke_check.sh before the job.

    python3 smoke_train.py train --device cuda --store r2:bucket/runs/fold3/smoke   # on a box
    python3 smoke_train.py train --device cpu --store /tmp/smoke                    # make test
    python3 smoke_train.py codecs                                   # ffmpeg: $HEARSAY_FFMPEG

train — the real model code, one optimiser step per shape, exactly as `hearsay train` takes one
  (hearsay.model.Detector in train mode, AdamW over hearsay.train.step.optimizer_groups, BCE with
  the trainer's label smoothing, gradient clipping), under bf16 autocast (`--amp bf16`, the
  trainer's setting on CUDA; also used on the CPU so CI runs the bf16 forward too):
    tiny   ModelConfig.tiny(), random init: always
    xls-r  ModelConfig() (XLS-R 300M, 12 kept layers) loaded from $HEARSAY_WEIGHTS_DIR after its
           pytorch_model.bin matched $HEARSAY_WEIGHTS_SHA256 (default the pin): on CUDA when the
           file exists (smoke_check.sh's weights check fails a box without it)
  Each step must give finite float32 logits (B,), a finite loss, a finite gradient on every
  trainable parameter, and change at least one parameter of every optimiser group.
  Then the checkpoint: the tiny model's checkpoint (model, AdamW state, RNG; hearsay.store's
  format) is written locally, pushed to STORE/checkpoint, pulled into a fresh folder, read back
  with its sha256 checks, and must equal what is in memory and load into a fresh Detector (strict)
  and a fresh AdamW. (The XLS-R checkpoint is 1.9 GB: 164 M fp32 parameters + AdamW's two
  moments of the 160 M trainable ones; writing it to the store at every box start would cost
  minutes. The store path, its credentials and the format are what the tiny one proves.)
codecs — a 1 s 16 kHz two-tone signal through the five codec copies of hearsay.codecs (MP3, Opus,
  AAC, AMR-NB, mu-law) with one ffmpeg run; every copy decoded back must be finite, 0.9-1.25 s
  long and hold at least a tenth of the input's energy.

Prints `ok   CHECK: …` / `FAIL CHECK: …` lines on stdout. Exit codes (smoke_check.sh's): 0 ok,
12 codecs, 15 train (the step failed; the checkpoint was not tried), 16 checkpoint, 2 usage.
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

    from hearsay.model import Detector, load_pretrained
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
    opt = torch.optim.AdamW(optimizer_groups(det, tc), betas=(0.9, 0.98), eps=1e-6)
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


def checkpoint_round_trip(det, opt, cfg, store_uri: str, device) -> str:
    """Write the checkpoint, push it, pull it into a fresh folder, verify, reload."""
    import torch

    from hearsay import store as stores
    from hearsay.model import Detector
    from hearsay.train import checkpoint
    from hearsay.train.config import TrainConfig
    from hearsay.train.step import optimizer_groups, rng_state

    with tempfile.TemporaryDirectory(prefix="hearsay-smoke-") as tmp:
        tmp = Path(tmp)
        state = {"epoch": 0, "step": 1, "smoke": True, "model": cfg.to_dict()}
        local = checkpoint.write_checkpoint(tmp / "written", det.state_dict(), opt.state_dict(),
                                        rng_state(device, det.generator), state)
        # one retry, 1 s apart: a box that cannot reach its store should fail at once
        store = stores.open_store(store_uri, tmp / "run", retries=1, backoff_s=1.0)
        store.push_dir(local, "checkpoint")
        store.pull_dir("checkpoint", tmp / "pulled")
        ck = checkpoint.read_checkpoint(tmp / "pulled")  # sha256 of both tensor files vs state.json
        mem = {k: v.detach().cpu() for k, v in det.state_dict().items()}
        if set(ck.model) != set(mem) or any(not torch.equal(ck.model[k], mem[k]) for k in mem):
            raise SmokeFailure("the model read back differs from the one in memory")
        fresh = Detector(cfg)
        fresh.load_state_dict(ck.model, strict=True)
        fresh_opt = torch.optim.AdamW(optimizer_groups(fresh, TrainConfig()), betas=(0.9, 0.98))
        fresh_opt.load_state_dict(ck.optimizer)
        want = opt.state_dict()["state"]
        got = fresh_opt.state_dict()["state"]
        for idx, per in want.items():
            for key, value in per.items():
                if torch.is_tensor(value) and not torch.equal(got[idx][key].cpu(), value.cpu()):
                    raise SmokeFailure(f"AdamW state {idx}.{key} read back differs")
        if ck.state.get("step") != 1 or "spec_augment" not in ck.rng:
            raise SmokeFailure(f"state.json / RNG read back wrong: step {ck.state.get('step')}, "
                               f"rng {sorted(ck.rng)}")
        size = sum(f.stat().st_size for f in (tmp / "pulled").iterdir())
    return f"{store.uri}/checkpoint: {size} bytes written, read back, sha256-verified, reloaded"


def cmd_train(args) -> int:
    try:
        import torch

        from hearsay.model import XLSR_300M_SHA256, ModelConfig
    except Exception as err:  # noqa: BLE001 - any import failure is this check's failure
        say("FAIL", "train", f"cannot import the model code: {_why(err)}")
        return EXIT_TRAIN
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        say("FAIL", "train", "--device cuda but torch sees no CUDA device")
        return EXIT_TRAIN
    amp = args.amp == "bf16"
    weights = Path(os.environ.get("HEARSAY_WEIGHTS_DIR", "/opt/hearsay/weights/xls-r-300m"))
    sha = os.environ.get("HEARSAY_WEIGHTS_SHA256") or XLSR_300M_SHA256
    shapes = [("tiny", ModelConfig.tiny(), None)]
    if device.type == "cuda" and (weights / "pytorch_model.bin").is_file():
        shapes.append(("xls-r", ModelConfig(), weights))
    tiny = None
    for name, cfg, wdir in shapes:
        try:
            det, opt, msg = one_step(cfg, device, amp, wdir, sha)
        except Exception as err:  # noqa: BLE001 - report it, name the check
            say("FAIL", "train", f"{name}: {_why(err)}")
            return EXIT_TRAIN
        say("ok", "train", f"{name}: {msg}")
        if name == "tiny":
            tiny = (det, opt, cfg)
        else:
            del det, opt  # the XLS-R shape's 2 GB of weights + AdamW state
            torch.cuda.empty_cache()
    if len(shapes) == 1:
        say("ok", "train", "xls-r: not run (" + ("CPU" if device.type != "cuda"
                                                 else f"no {weights}/pytorch_model.bin") + ")")
    if args.store is None:
        return EXIT_OK  # no store given: the caller reports the checkpoint check itself
    try:
        msg = checkpoint_round_trip(*tiny, args.store, device)
    except Exception as err:  # noqa: BLE001
        say("FAIL", "checkpoint", _why(err))
        return EXIT_CHECKPOINT
    say("ok", "checkpoint", msg)
    return EXIT_OK


# --------------------------------------------------------------------------- codecs


def cmd_codecs(args) -> int:
    try:
        import numpy as np

        from hearsay.audio import ffmpeg_exe
        from hearsay.codecs import CODECS, available, roundtrip

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
    tr = sub.add_parser("train", help="one optimiser step per shape + the checkpoint round trip")
    tr.add_argument("--device", default="cuda", help="cuda (a box) or cpu (make test)")
    tr.add_argument("--amp", choices=["bf16", "off"], default="bf16", help="autocast dtype")
    tr.add_argument("--store", help="where the checkpoint goes: remote:path (rclone) or a local "
                    "folder; without it the checkpoint round trip is not run")
    sub.add_parser("codecs", help="the five-codec ffmpeg round trip")
    args = ap.parse_args(argv)
    return cmd_train(args) if args.command == "train" else cmd_codecs(args)


if __name__ == "__main__":
    sys.exit(main())
