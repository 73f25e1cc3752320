"""`hearsay train`: fine-tune the detector for one fold, the full model or the pilot, on CUDA.

    hearsay train --bundle bundle/ --fold 3 --out runs/fold3 --store r2:runs/c7/fold3
    hearsay train --bundle bundle/ --fold 3 --out runs/fold3 --store r2:runs/c7/fold3 --resume
    hearsay train --bundle bundle/ --full --out runs/full
    hearsay train --bundle bundle/ --pilot --out runs/pilot --config pilot.json
    torchrun --nproc-per-node 4 -m hearsay.cli train --bundle bundle/ --fold 0 --out runs/fold0
    hearsay train --bundle demo_out/bundle --fold 0 --out /tmp/f0 --cpu-smoke   # tiny, on CPU

Jobs (hearsay.folds.train_ids, with the bundle's fold file config): `--fold K` trains on inner
folds != K plus extra rows (minus the extra families excluded for K) and validates on fold K;
`--full` trains on every inner fold + extra and has no validation split (the holdout is never
used for selection); `--pilot` is folds 0-3 -> validate fold 4. Holdout and test rows never train.

Per step: a label-balanced micro-batch with fixed per-source quotas (`Sampler`), one crop length
per batch (hearsay.crops), one augmentation per clip chosen before loading (hearsay.augment),
bf16 autocast on CUDA, BCE with label smoothing, gradient accumulation whose trailing group is
flushed at the epoch end, AdamW with layer-wise LR decay, warm-up + cosine counted in optimiser
steps (the LR reaches its floor on the last one). A validation readout every `val_every`
optimiser steps and at each epoch end; a checkpoint each epoch (hearsay.store), pushed to the
store. Config: `--config FILE.json` = {"train": {…}, "model": {…}, "crop": {…}, "augment": {…}};
unknown keys are errors; the resolved config is RUN_DIR/config.json and its sha256 (canonical
JSON) is the config hash that --resume must match.

Exit codes: 0 run complete; 1 unexpected error; 2 usage or config error; 3 device refused (no
CUDA and no --cpu-smoke); 4 non-finite loss or gradient norm; 5 AUC-direction tripwire
(validation AUC <= tripwire_auc); 6 store push/pull failed after retries; 7 resume refused
(different bundle tree-sha or config hash, no checkpoint, or a non-empty RUN_DIR without
--resume); 8 pretrained weights refused (missing or sha256 not the pin); 9 augmentation rates
diverge between the classes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from hearsay import audio, augment, augment_gpu, crops
from hearsay import store as stores
from hearsay.model import Detector, WeightsError, load_pretrained, save_detector
from hearsay.train_config import (
    EXIT,
    ConfigError,
    DeviceRefused,
    ResumeRefused,
    TrainError,
    Tripwire,
    config_hash,
    git_sha,
    resolve_config,
    sections,
    versions,
)
from hearsay.train_data import EpochBatches, Sampler, plan_job, validate
from hearsay.train_step import (
    check_pending,
    lr_multiplier,
    nonfinite_flag,
    optimizer_groups,
    rng_state,
    set_rng_state,
)

# --------------------------------------------------------------------------- the loop


def _identity(x):
    return x


def _dist(cpu: bool):
    """(world, rank, local_rank, ddp) from torchrun's environment; starts the process group."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return 1, 0, 0, False
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo" if cpu else "nccl")
    return dist.get_world_size(), dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0)), True


def _stream_records(iv: torch.Tensor, am: torch.Tensor, batch: dict) -> list[dict]:
    """Trivial features of the realised (rendered, finished) batch, computed on the CPU."""
    values, n_valid = iv.float().cpu().numpy(), am.sum(1).cpu().numpy()
    return [augment.stream_record(s, lab, values[i], int(n_valid[i]))
            for i, (s, lab) in enumerate(zip(batch["sources"], batch["label_names"],
                                             strict=True))]


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


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
    world, rank, local_rank, ddp = _dist(cpu)
    device = torch.device("cpu") if cpu else torch.device("cuda", local_rank)
    out = Path(out)
    t_start = time.time()
    threads = torch.get_num_threads()
    if tc.cpu_threads:
        torch.set_num_threads(tc.cpu_threads)
    try:
        return _run(resolved, bundle_dir, out, store_uri, resume, verify_bundle, model_hook,
                    stop_after_epoch, backoff_s, world, rank, local_rank, ddp, device, t_start)
    finally:
        torch.set_num_threads(threads)
        if ddp:
            import torch.distributed as dist

            dist.destroy_process_group()


def _run(resolved, bundle_dir, out, store_uri, resume, verify_bundle, model_hook,
         stop_after_epoch, backoff_s, world, rank, local_rank, ddp, device, t_start) -> dict:
    from hearsay.bundle import load_bundle

    tc, mc, cc, ac = sections(resolved)
    cpu = device.type == "cpu"

    # 1. identity and data
    bundle = load_bundle(bundle_dir, verify=verify_bundle)
    out.mkdir(parents=True, exist_ok=True)
    chash = config_hash(resolved)
    train, val = plan_job(bundle, resolved["job"], resolved["fold"])
    test_durations = bundle.manifest.loc[bundle.manifest["fold"] == "test", "duration"].to_numpy()
    if cc.p_test_dist > 0 and len(test_durations) == 0:
        raise ConfigError("the bundle has no test rows to draw crop lengths from: set "
                          '{"crop": {"p_test_dist": 0}} in --config')
    if val is not None and (val.empty or val["label"].nunique() < 2) and \
            tc.tripwire_auc is not None:
        raise ConfigError(f"validation rows need both labels for the AUC tripwire (fold "
                          f"{resolved['fold']} has {len(val)} rows, labels "
                          f"{sorted(val['label'].unique())}); fix the folds or set "
                          '{"train": {"tripwire_auc": null}}')
    sampler = Sampler(train, tc.batch_size, tc.source_mix, tc.seed)
    cap_s = crops.class_cap_s(train.loc[train["label"] == "bonafide", "duration"],
                              train.loc[train["label"] == "spoof", "duration"])
    cols = ["id", "flac", "label", "source", "codec_ids"]
    rows = train[cols].to_dict("records")
    val_rows = None if val is None or val.empty else val[cols].to_dict("records")
    n_batches = tc.batches_per_epoch or max(1, len(train) // tc.batch_size)
    n_batches = max(world, n_batches - n_batches % world)
    per_rank = n_batches // world
    steps_per_epoch = -(-per_rank // tc.grad_accum)
    total_steps = tc.epochs * steps_per_epoch
    ctx = {"seed": tc.seed, "world": world, "rank": rank, "test_durations": test_durations,
           "cap_s": cap_s, "crop": cc, "augment": ac, "max_crop_s": tc.max_crop_s,
           "gpu_augment": tc.gpu_augment}

    # 2. model and optimiser
    torch.manual_seed(tc.seed)
    det = Detector(mc)
    base_sha = load_pretrained(det) if mc.init == "xls-r-300m" else "random-init"
    if model_hook is not None:
        model_hook(det)
    det.to(device).train()
    det.generator = torch.Generator(device=device).manual_seed(tc.seed * 1000 + rank + 1)
    opt = torch.optim.AdamW(optimizer_groups(det, tc), betas=(0.9, 0.98), eps=1e-6)
    trainable = [p for g in opt.param_groups for p in g["params"]]
    model = det
    if ddp:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(det, device_ids=None if cpu else [local_rank])
    fwd = torch.compile(model) if tc.compile and not cpu else model
    use_amp = device.type == "cuda" and tc.bf16

    def amp():
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp) if \
            device.type == "cuda" else torch.autocast("cpu", enabled=False)

    # 3. store, resume
    store = stores.open_store(store_uri, out, backoff_s=backoff_s)
    latest = store.latest_checkpoint()
    identity = {"config_hash": chash, "bundle_tree_sha": bundle.tree_sha,
                "base_weights_sha": base_sha, "git_sha": git_sha()}
    hist = {"loss": [], "lr": [], "val": []}
    rate_log, records, step, start_epoch = augment.RateLog(), [], 0, 1
    if resume:
        if latest is None:
            raise ResumeRefused(f"--resume: no checkpoint under {store.uri}/checkpoints "
                                "(drop --resume to start this run fresh)")
        name = stores.ckpt_name(latest)
        local = out / stores.CKPT_DIR / name
        if rank == 0:  # one pull per box; the other ranks read the same folder after it
            store.pull_dir(f"{stores.CKPT_DIR}/{name}", local)
        if ddp:
            import torch.distributed as dist

            dist.barrier()
        ck = stores.read_checkpoint(local)
        for key, mine in (("bundle_tree_sha", bundle.tree_sha), ("config_hash", chash)):
            if ck.state[key] != mine:
                raise ResumeRefused(f"--resume: {name} has {key} {ck.state[key]}, this run has "
                                    f"{mine}: resume with the same bundle and config, or start "
                                    "a fresh --out")
        if ck.state["epoch"] != latest:
            raise ResumeRefused(f"{name}/state.json says epoch {ck.state['epoch']}")
        det.load_state_dict(ck.model)
        opt.load_state_dict(ck.optimizer)
        set_rng_state(ck.rng, device, det.generator)
        if rank > 0:  # only rank 0's RNG is checkpointed: other ranks get fresh, distinct seeds
            torch.manual_seed(tc.seed * 1000 + 100 * latest + rank)
            det.generator.manual_seed(tc.seed * 1000 + 100 * latest + rank + 1)
        step, start_epoch = ck.state["step"], latest + 1
        hist, records = ck.state["history"], ck.state["stream_records"]
        rate_log = augment.RateLog(ck.state["rate_log"])
    elif latest is not None or any((out / stores.CKPT_DIR).glob("epoch_*")):
        raise ResumeRefused(f"{store.uri} already holds checkpoints (latest epoch {latest}): "
                            "pass --resume to continue that run, or use a fresh --out/--store")
    if rank == 0:
        _write_json(out / "config.json", {**resolved, "config_hash": chash})

    meta = {"job": resolved["job"], "fold": resolved["fold"], **identity,
            "steps": step, "epochs": start_epoch - 1, "epochs_planned": tc.epochs,
            "total_steps": total_steps, "batches_per_epoch": n_batches,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "world_size": world, "versions": versions(), "complete": False,
            "budget_usd": os.environ.get("HEARSAY_BUDGET_USD"), "store": store.uri,
            "resumed_from_epoch": start_epoch - 1 if resume else None,
            "train_rows": len(train), "val_rows": 0 if val is None else len(val),
            "quotas": sampler.state(0)["quotas"], "crop_cap_s": cap_s,
            "tripwire": ("off (config)" if tc.tripwire_auc is None else
                         "not applicable: the full model has no validation split"
                         if val_rows is None else f"abort when AUC <= {tc.tripwire_auc}")}

    def readout():
        if val_rows is None:
            return
        res = validate(det, val_rows, bundle.root, tc, device, amp) if rank == 0 else {}
        hist["val"].append({"step": step, **res})
        tripped = torch.tensor([int(rank == 0 and tc.tripwire_auc is not None
                                    and res["auc"] <= tc.tripwire_auc)])
        if ddp:
            import torch.distributed as dist

            dist.broadcast(tripped, src=0)
        if tripped.item():
            raise Tripwire(f"validation AUC {res.get('auc', float('nan')):.4f} <= "
                           f"{tc.tripwire_auc} at optimiser step {step}: the model ranks spoof "
                           "at or below bona fide (flipped labels or a broken pipeline?)")

    def finish_meta(**extra) -> dict:
        meta.update(steps=step, history=hist, rates=rate_log.rates(), wall_s=time.time() - t_start,
                    stream_shortcuts=augment.stream_shortcut_aucs(records), **extra)
        if rank == 0:
            _write_json(out / "run_meta.json", meta)
        return meta

    # 4. train
    clips = audio_s = 0.0
    step_t: list[float] = []  # wall s since start at each optimiser step (benchmarks)
    pending: list = []  # non-finite flags not yet read on the host
    step_loss: list[torch.Tensor] = []  # this epoch's per-step losses, still on the device
    meta["step_t"] = step_t
    t_loop = 0.0
    try:
        for epoch in range(start_epoch, tc.epochs + 1):
            plan = sampler.epoch_plan(epoch, n_batches)
            loader = torch.utils.data.DataLoader(
                EpochBatches(bundle.root, rows, plan, epoch, ctx), batch_size=None,
                shuffle=False, num_workers=tc.workers, collate_fn=_identity,
                pin_memory=device.type == "cuda", persistent_workers=False)
            t0 = time.time()
            group_loss = torch.zeros((), device=device)
            for i, batch in enumerate(loader):
                group_n = min(tc.grad_accum, per_rank - (i - i % tc.grad_accum))
                last = i % tc.grad_accum == group_n - 1
                iv = batch["input_values"].to(device, non_blocking=True)
                am = batch["attention_mask"].to(device, non_blocking=True)
                y = batch["labels"].to(device, non_blocking=True)
                if tc.gpu_augment:  # augment_gpu: the numpy path's render + finish, batched
                    iv = augment_gpu.train_batch(iv, am, batch["names"], batch["params"])
                    if len(records) < tc.stream_records_max:
                        batch["records"] = _stream_records(iv, am, batch)
                sync = model.no_sync() if ddp and not last else contextlib.nullcontext()
                with sync:
                    with amp():
                        logits = fwd(iv, am)
                    target = y * (1 - tc.label_smoothing) + 0.5 * tc.label_smoothing
                    loss = F.binary_cross_entropy_with_logits(logits.float(), target)
                    (loss / group_n).backward()
                group_loss = group_loss + loss.detach()
                for src, lab, name in zip(batch["sources"], batch["label_names"],
                                          batch["names"], strict=True):
                    rate_log.record(src, lab, name)
                if len(records) < tc.stream_records_max:
                    records.extend(batch["records"][: tc.stream_records_max - len(records)])
                clips += len(batch["labels"])
                audio_s += float(batch["attention_mask"].sum()) / audio.SAMPLE_RATE  # CPU copy
                if not last:
                    continue
                norm = torch.nn.utils.clip_grad_norm_(trainable, tc.grad_clip)
                flag = nonfinite_flag(group_loss, norm, ddp)
                check_pending(pending)  # the previous step's flag: done on the GPU by now
                pending.append((flag, step, epoch, group_loss / group_n, norm))
                mult = lr_multiplier(step, total_steps, tc.warmup_frac, tc.lr_floor)
                for g in opt.param_groups:
                    g["lr"] = g["base_lr"] * mult
                opt.step()
                opt.zero_grad(set_to_none=True)
                step_loss.append(group_loss / group_n)  # read at the epoch end (no sync)
                hist["lr"].append(mult)
                step_t.append(round(time.time() - t_start, 4))
                group_loss = torch.zeros((), device=device)
                step += 1
                if tc.val_every and step % tc.val_every == 0:
                    t_loop += time.time() - t0
                    check_pending(pending)
                    readout()
                    t0 = time.time()
            check_pending(pending)
            hist["loss"].extend(round(v, 6) for v in
                                torch.stack(step_loss).float().cpu().tolist())
            step_loss.clear()
            t_loop += time.time() - t0
            readout()
            meta["rate_balance"] = rate_log.check_balanced(tc.rate_tol)
            meta["epochs"] = epoch
            if rank == 0:
                state = {**identity, "epoch": epoch, "step": step, "config": resolved,
                         "sampler": sampler.state(epoch), "rate_log": rate_log.state(),
                         "scheduler": {"kind": "warm-up + cosine (lr_multiplier)",
                                       "next_step": step, "total_steps": total_steps,
                                       "warmup_frac": tc.warmup_frac, "floor": tc.lr_floor},
                         "history": hist, "stream_records": records}
                name = stores.ckpt_name(epoch)
                local = stores.write_checkpoint(out / stores.CKPT_DIR / name, det.state_dict(),
                                                opt.state_dict(),
                                                rng_state(device, det.generator), state)
                store.push_dir(local, f"{stores.CKPT_DIR}/{name}")
                meta["throughput"] = {"clips_per_s": clips / max(t_loop, 1e-9),
                                      "audio_s_per_s": audio_s / max(t_loop, 1e-9)}
                finish_meta()
            if stop_after_epoch == epoch:
                return meta
        if rank == 0:
            save_detector(det, out / "final",
                          extra_config={k: v for k, v in resolved.items() if k != "model"})
            store.push_dir(out / "final", "final")
            finish_meta(complete=True)
            store.push_file(out / "run_meta.json", "run_meta.json")
            store.push_file(out / "config.json", "config.json")
    except (TrainError, stores.StoreError, augment.AugmentRateError) as err:
        finish_meta(aborted={"error": type(err).__name__, "reason": str(err)})
        raise
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, required=True, help="bundle dir (hearsay bundle)")
    job = ap.add_mutually_exclusive_group(required=True)
    job.add_argument("--fold", type=int, choices=range(5), help="train the fold-K model")
    job.add_argument("--full", action="store_true", help="train the full model")
    job.add_argument("--pilot", action="store_true", help="folds 0-3, validate on fold 4")
    ap.add_argument("--out", type=Path, required=True, help="run dir (docs/INTERFACES.md)")
    ap.add_argument("--store", help="checkpoint store: remote:path (rclone) or a folder; "
                                    "default the run dir")
    ap.add_argument("--resume", action="store_true",
                    help="continue from the store's latest checkpoint (same bundle and config)")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="tiny random-init model on the CPU (tests, demo): no CUDA needed")
    ap.add_argument("--config", type=Path, help="JSON overrides {train, model, crop, augment}")
    ap.add_argument("--no-verify-bundle", action="store_true",
                    help="trust bundle_meta.json's tree-sha instead of re-hashing every file")
    args = ap.parse_args(argv)
    name = "full" if args.full else "pilot" if args.pilot else "fold"
    from hearsay.bundle import BundleError
    try:
        overrides = json.loads(args.config.read_text()) if args.config else None
        resolved = resolve_config(name, args.fold, overrides=overrides,
                                  cpu_smoke=args.cpu_smoke)
        meta = run(resolved, args.bundle, args.out, store_uri=args.store, resume=args.resume,
                   verify_bundle=not args.no_verify_bundle)
    except TrainError as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return err.code
    except WeightsError as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT["weights"]
    except stores.StoreError as err:
        print(f"hearsay train: store: {err} (the run stopped: nothing trains on without a "
              "safe copy)", file=sys.stderr)
        return EXIT["store"]
    except augment.AugmentRateError as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT["rates"]
    except (json.JSONDecodeError, OSError, BundleError) as err:
        print(f"hearsay train: {err}", file=sys.stderr)
        return EXIT["error"]
    print(f"hearsay train: complete: {meta['steps']} optimiser steps, {meta['epochs']} epochs "
          f"-> {args.out}")
    return EXIT["ok"]


if __name__ == "__main__":
    sys.exit(main())

