"""`hearsay train`: fine-tune the detector for one fold, the full model or the pilot, on CUDA.

    hearsay train --bundle bundle/ --fold 3 --out runs/fold3 --store r2:runs/c7/fold3
    hearsay train --bundle bundle/ --fold 3 --out runs/fold3 --store r2:runs/c7/fold3 --resume
    hearsay train --bundle bundle/ --fold 3 --out runs/fold3 --store r2:runs/c7/fold3 --resume auto
    hearsay train --bundle bundle/ --full --out runs/full
    hearsay train --bundle bundle/ --pilot --out runs/pilot --config pilot.json
    torchrun --nproc-per-node 4 -m hearsay.cli train --bundle bundle/ --fold 0 --out runs/fold0
    hearsay train --bundle demo_out/bundle --fold 0 --out /tmp/f0 --cpu-smoke   # tiny, on CPU
    hearsay train --check-config --config train.json --fold 3   # what runner/launch.sh runs first
    hearsay train --print-config --fold 3 --set train.lr_head=1e-3   # value, type, default

Jobs (hearsay.contracts.folds.train_ids, with the bundle's fold file config): `--fold K` trains on
inner folds != K plus extra rows (minus the extra families excluded for K) and validates on fold
K, K one of the bundle's folds 0..n_folds-1 (its fold file's n_folds: 2..5); `--full` trains on
every inner fold + extra and has no validation split (the holdout is never used for selection);
`--pilot` is folds 0..n_folds-2 -> validate fold n_folds-1 (0-3 -> 4 with five
folds). Holdout and test rows never train.

Per step: a label-balanced micro-batch with fixed per-source quotas (`Sampler`), one crop length
per batch, one augmentation per clip chosen before loading (one example built in
hearsay.sound.example), bf16 autocast on CUDA, BCE with label smoothing, gradient accumulation
whose trailing group is flushed at the epoch end, AdamW with layer-wise LR decay, warm-up + cosine
counted in optimiser steps (the LR reaches its floor on the last one). A validation readout every
`val_every` optimiser steps and at each epoch end (once when both fall on one step), each rank
scoring a share on the loader's workers; a checkpoint each epoch (hearsay.train.checkpoint, every
rank's RNG state in it), pushed to the store (hearsay.store). The loaders are built once
(persistent workers); the loop never waits for the device (the non-finite check reads a pinned copy
once its event has fired; the stream records are made on their own thread, hearsay.train.records).
Each rank seeds its dropout with seed + rank and resumes with its own rate log and losses. Under
torchrun each rank binds its GPU (LOCAL_RANK) and every collective runs on it (NCCL).

Progress: rank 0 prints a line every `train.log_every` optimiser steps or `train.log_every_s`
seconds (and at the first and last step), named by the run (fold3, full, pilot): step/total,
epoch, loss (mean since the last line), the learning rates of the top backbone layer and the
head, grad norm, clips/s and valid audio-s/s over every GPU, padded share, GPU memory, ETA; and
a line per validation readout (AUC, EER, minDCF). The same rows go to RUN_DIR/train_log.csv, the
same figures to TensorBoard event files in RUN_DIR (`tensorboard --logdir` the runs' parent
folder), and the latest step line to RUN_DIR/progress.json, pushed to the store at each line
(hearsay.train.steplog).

Config: `--config FILE.json` = {"train": {…}, "model": {…}, "crop": {…}, "augment": {…},
"selection": {"rules": […]}} (selection: which training rows of the bundle this recipe keeps,
hearsay.train.selection; validation and scored rows never change), then each
`--set SECTION.KEY=VALUE` over it (VALUE read as JSON: 5e-4, false, null, [1, 2]); every value
is checked for its type and range before any work (a string is not a number, "false" is not a
boolean: exit 2 naming the key), unknown keys are errors with the nearest known key; the
resolved config is RUN_DIR/config.json and its sha256 (canonical JSON) is the config hash
that --resume must match. `--resume` continues from the store's latest
complete checkpoint and refuses when there is none; `--resume auto` (what a rented box runs)
starts fresh when the store holds no complete checkpoint and continues otherwise.
`--check-config` only loads, type-checks and resolves the config exactly as a run would (same
flags, same code), prints its config hash and exits 0, or 2 with the run's own message; no
bundle, device or store is touched (runner/launch.sh runs it on the laptop before renting a box).
`--print-config` does the same and prints every key of the resolved config with its value, type,
code default and help ('*' marks a value that is not the default); docs/CONFIG.md is the same
reference generated from the code (python -m hearsay.train.config_doc).

Source mix: `train.source_mix` "proportional" (default), "equal", or a table of shares per class
{"bonafide": {SOURCE: SHARE, ...}, "spoof": {...}} naming every training source of that class,
shares summing to 1 (0 = never drawn; configs/train.shares.example.json). The realised shares
per class are in run_meta "source_mix" at each epoch end; a table's are held within
`train.share_tol` (exit 11).

Store retries: 3, the n-th after n x $HEARSAY_STORE_BACKOFF_S seconds (default 5).

Exit codes: 0 run complete; 1 unexpected error; 2 usage, config or input error (a config file
missing, not JSON or with a bad value; a --bundle that is not a built, intact bundle; a --fold K
the bundle's fold file has no model for, K >= its n_folds; an --out that cannot be made); 3 device
refused (no CUDA and no --cpu-smoke); 4 non-finite loss or gradient norm; 5 AUC-direction tripwire
(validation AUC <= tripwire_auc); 6 store push/pull failed after retries; 7 resume refused
(different bundle tree-sha, config hash or world size, no checkpoint, or a non-empty RUN_DIR
without --resume); 8 pretrained weights refused (missing or sha256 not the pin); 9 augmentation
rates diverge between the classes; 10 fold leak (a holdout, test or validation row among the
training rows: re-make the fold file and bundle); 11 source shares off the `source_mix` table by
more than `share_tol` (before step 1: the batch is too small to realise the table, the message
names the batch_size that fits; at an epoch end: the realised shares drifted).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from hearsay import store as stores
from hearsay.detector.model import WeightsError
from hearsay.train.config import config_hash, resolve_config, sections
from hearsay.train.errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_RATES,
    EXIT_STORE,
    EXIT_USAGE,
    EXIT_WEIGHTS,
    ConfigError,
    DeviceRefused,
    TrainError,
)
from hearsay.train.loop import train_epochs
from hearsay.train.prepare import build_run
from hearsay.train.rates import AugmentRateError

# --------------------------------------------------------------------------- the run
#
# The parts: hearsay.train.config (config, hash), hearsay.train.errors (exit-code errors),
# hearsay.train.state (a run's parts: RunPlan, Data, Nets, Progress), hearsay.train.prepare
# (builds them before the first step), hearsay.train.data (rows, sampler, batches, validation),
# hearsay.train.step (LR, optimiser groups, non-finite flag, RNG state), hearsay.train.loop (the
# epochs and their steps), hearsay.train.checkpoint (the checkpoint format). Here: run ->
# loop.train_epochs.


def run(resolved: dict, bundle_dir: str | os.PathLike, out: str | os.PathLike, *,
        store_uri: str | None = None, resume: bool = False, verify_bundle: bool = True,
        model_hook=None, stop_after_epoch: int | None = None, backoff_s: float = 5.0) -> dict:
    """Train one job; returns run_meta. `model_hook(det)` and `stop_after_epoch` (return after
    that epoch's checkpoint, as if killed) are test seams; neither is part of the config."""
    tc = sections(resolved)[0]
    cpu = bool(resolved["cpu_smoke"])
    if not cpu and not torch.cuda.is_available():
        raise DeviceRefused("CUDA is required and none is visible (torch.cuda.is_available() "
                            "is False): run on a GPU box, or pass --cpu-smoke for the tiny "
                            "CPU test run")
    world, rank, local_rank, ddp, owned = _dist(cpu)
    device = torch.device("cpu") if cpu else torch.device("cuda", local_rank)
    t_start = time.time()
    threads = torch.get_num_threads()
    if tc.cpu_threads:
        torch.set_num_threads(tc.cpu_threads)
    try:
        r = build_run(resolved, bundle_dir, Path(out), store_uri=store_uri, resume=resume,
                      verify_bundle=verify_bundle, model_hook=model_hook, backoff_s=backoff_s,
                      world=world, rank=rank, local_rank=local_rank, ddp=ddp, device=device,
                      t_start=t_start)
        return train_epochs(r, stop_after_epoch)
    finally:
        torch.set_num_threads(threads)
        if owned:
            import torch.distributed as dist

            dist.destroy_process_group()


def _dist(cpu: bool):
    """(world, rank, local_rank, ddp, owned) from torchrun's environment. On CUDA each rank
    first binds its own GPU (`set_device`: pinned memory, NCCL and default-device work of every
    rank would otherwise land on GPU 0), then starts the process group (`owned`: this run
    started it and ends it; a caller's group is left alone)."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return 1, 0, 0, False, False
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if not cpu:
        torch.cuda.set_device(local_rank)
    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("gloo" if cpu else "nccl")
    return dist.get_world_size(), dist.get_rank(), local_rank, True, owned


# --------------------------------------------------------------------------- CLI


def _backoff_s() -> float:
    """s between store retries (n-th retry waits n x this): $HEARSAY_STORE_BACKOFF_S, default
    5; the box preflight (container/trainer/smoke_train.py) sets 1 to fail fast."""
    raw = os.environ.get("HEARSAY_STORE_BACKOFF_S", "5")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(f"HEARSAY_STORE_BACKOFF_S={raw!r}: give seconds >= 0")
    return value


def _fold(text: str) -> int:
    """--fold K: a whole number >= 0; whether the bundle has fold K is judged once it is loaded
    (hearsay.contracts.protocol.check_fold against its fold file's n_folds)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a fold number (0, 1, ...)")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, help="bundle dir (hearsay bundle); required to train")
    job = ap.add_mutually_exclusive_group(required=True)
    job.add_argument("--fold", type=_fold, metavar="K",
                     help="train the fold-K model: K one of the bundle's folds, 0..n_folds-1 "
                          "(`hearsay bundle info BUNDLE --n-folds`; another K: exit 2)")
    job.add_argument("--full", action="store_true", help="train the full model")
    job.add_argument("--pilot", action="store_true",
                     help="every inner fold but the last; validate on the last")
    ap.add_argument("--out", type=Path, help="run dir (docs/INTERFACES.md); required to train")
    ap.add_argument("--store", help="checkpoint store: remote:path (rclone) or a folder; "
                                    "default the run dir")
    ap.add_argument("--resume", nargs="?", const="yes", choices=("yes", "auto"),
                    help="continue from the store's latest complete checkpoint (same bundle and "
                         "config); `--resume auto`: start fresh when the store holds none")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="tiny random-init model on the CPU (tests, demo): no CUDA needed")
    ap.add_argument("--config", type=Path,
                    help="JSON overrides {train, model, crop, augment, selection}")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="override one config key over --config (repeatable; VALUE as JSON, "
                         "e.g. --set train.lr_head=5e-4 --set train.bf16=false); recorded in "
                         "the resolved config and its hash")
    ap.add_argument("--no-verify-bundle", action="store_true",
                    help="trust bundle_meta.json's tree-sha instead of re-hashing every file")
    ap.add_argument("--check-config", action="store_true",
                    help="only load and resolve the config as this run would; exit 0 or 2")
    ap.add_argument("--print-config", action="store_true",
                    help="print the resolved config as this run would use it, every key with "
                         "its value, type, default and help (docs/CONFIG.md); exit 0 or 2")
    args = ap.parse_args(argv)
    name = "full" if args.full else "pilot" if args.pilot else "fold"
    if args.check_config or args.print_config:
        return _check_config(args, name)
    if args.bundle is None or args.out is None:
        ap.error("--bundle and --out are required to train (only --check-config goes without)")
    from hearsay.contracts.bundle import BundleError
    try:  # the config first: a bad one is refused before any bundle, device or store work
        resolved = _load_config(args, name)
    except (TrainError, json.JSONDecodeError, OSError) as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT_USAGE
    if (why := out_problem(args.out)) is not None:
        print(f"hearsay train: --out {args.out}: {why} (pass a run dir this user can write)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        resume = args.resume == "yes" or (args.resume == "auto" and stores.open_store(
            args.store, args.out).latest_checkpoint() is not None)
        meta = run(resolved, args.bundle, args.out, store_uri=args.store, resume=resume,
                   verify_bundle=not args.no_verify_bundle, backoff_s=_backoff_s())
    except TrainError as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return err.code
    except WeightsError as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT_WEIGHTS
    except stores.StoreError as err:
        print(f"hearsay train: store: {err} (the run stopped: nothing trains on without a "
              "safe copy)", file=sys.stderr)
        return EXIT_STORE
    except AugmentRateError as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT_RATES
    except BundleError as err:  # not a (built) bundle: the message names the command to build it
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        raise  # stdout closed by its reader (`| head`): hearsay.cli ends quietly with 141
    except (json.JSONDecodeError, OSError) as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT_ERROR
    print(f"hearsay train: complete: {meta['steps']} optimiser steps, {meta['epochs']} epochs "
          f"-> {args.out}")
    return EXIT_OK


def out_problem(out: Path) -> str | None:
    """Why the run dir cannot be made (a file in its way, a folder this user cannot write), or
    None; nothing is created."""
    there = out
    while not there.exists() and there != there.parent:
        there = there.parent
    if not there.is_dir():
        return f"{there} is not a folder"
    if not os.access(there, os.W_OK | os.X_OK):
        return f"{there} is not writable"
    return None


def _load_config(args: argparse.Namespace, name: str) -> dict:
    """The resolved config of this command line: --config's JSON over the presets (ConfigError,
    json.JSONDecodeError, OSError)."""
    overrides = json.loads(args.config.read_text()) if args.config else None
    return resolve_config(name, args.fold, overrides=overrides, cpu_smoke=args.cpu_smoke,
                          sets=args.set)


def _check_config(args: argparse.Namespace, name: str) -> int:
    """--check-config / --print-config: the run's own config loading, nothing else; its
    message on a refusal."""
    try:
        resolved = _load_config(args, name)
    except (TrainError, json.JSONDecodeError, OSError) as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.print_config:
        from hearsay.train.config_doc import printed

        print(printed(resolved), end="")
        return EXIT_OK
    job = name if args.fold is None else f"{name} {args.fold}"
    print(f"hearsay train: config {args.config or '(defaults)'} ok for {job}: "
          f"config hash {config_hash(resolved)}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

