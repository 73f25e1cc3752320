"""Everything one `hearsay train` process builds before its first optimiser step: a `TrainRun`
of plain named parts (hearsay.train.state), each built once here.

    from hearsay.train.prepare import build_run
    r = build_run(resolved, bundle_dir, out, store_uri=None, resume=False, verify_bundle=True,
                  model_hook=None, backoff_s=5.0, world=1, rank=0, local_rank=0, ddp=False,
                  device=torch.device("cpu"), t_start=time.time())

In this order (the order fixes the RNG streams, so resume equals an uninterrupted run):

    1. Data: bundle, job rows, sampler, crop cap, batches per epoch, worker context, and the
       training and validation loaders (built once: their workers persist)
    2. Nets: seeded Detector (+ pretrained weights), fp8 (train.fp8), AdamW groups, DDP, compile
    3. RunPlan (with the run's identity), the store, and resume: refuse a mismatched
       checkpoint (or another world size), else restore the Nets, this rank's RNG and the
       checkpointed Progress; write config.json
    4. run_meta (Progress.meta): what the run is (written out by hearsay.train at each epoch
       end and the finish)

The loop that consumes a TrainRun is hearsay.train.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from hearsay import store as stores
from hearsay.contracts import run_dir
from hearsay.contracts.bundle import Bundle
from hearsay.detector import layer_weights
from hearsay.detector.model import Detector, load_pretrained
from hearsay.sound import example
from hearsay.train import checkpoint, fp8, rates
from hearsay.train.config import TrainConfig, config_hash, sections, versions
from hearsay.train.data import (
    BatchContext,
    EpochBatches,
    EpochKeys,
    Sampler,
    ValBatches,
    plan_job,
)
from hearsay.train.errors import ConfigError, ResumeRefused
from hearsay.train.selection import select_training_rows, stream_groups
from hearsay.train.state import Data, Nets, Progress, RunPlan, TrainRun
from hearsay.train.step import (
    compile_forward,
    optimizer_groups,
    rank_rng,
    set_rng_state,
)
from hearsay.util.files import write_json
from hearsay.util.hashing import git_sha

ROW_COLUMNS = ["id", "flac", "label", "source", "codec_ids", "duration"]  # what workers read


def _data(resolved: dict, tc: TrainConfig, cc, ac, bundle: Bundle, device: torch.device,
          world: int, rank: int) -> Data:
    """1. The job's rows, sampler, per-epoch sizes and loaders; ConfigError when the bundle
    can't serve."""
    train, val, exclusion = plan_job(bundle, resolved["job"], resolved["fold"])
    train, chosen = select_training_rows(train, bundle, resolved.get("selection"))
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
    sampler = Sampler(train, tc.batch_size, tc.source_mix, tc.seed, share_tol=tc.share_tol)
    cap_s = example.class_cap_s(train.loc[train["label"] == "bonafide", "duration"],
                              train.loc[train["label"] == "spoof", "duration"])
    n_batches = tc.batches_per_epoch or max(1, len(train) // tc.batch_size)
    n_batches = max(world, n_batches - n_batches % world)
    per_rank = n_batches // world
    steps_per_epoch = -(-per_rank // tc.grad_accum)
    rows = train[ROW_COLUMNS].to_dict("records")
    val_rows = None if val is None or val.empty else val[ROW_COLUMNS].to_dict("records")
    ctx = BatchContext(seed=tc.seed, world=world, rank=rank, test_durations=test_durations,
                       cap_s=cap_s, crop=cc, augment=ac, max_crop_s=tc.max_crop_s,
                       gpu_augment=tc.gpu_augment)
    # the run's two loaders, built once: workers persist across epochs and readouts;
    # validation gets a quarter of the training workers (at least 1 when workers > 0)
    pin = device.type == "cuda"
    keys = EpochKeys(per_rank)
    loader = torch.utils.data.DataLoader(
        EpochBatches(bundle.root, rows, sampler, n_batches, ctx),
        batch_size=None, sampler=keys, num_workers=tc.workers, collate_fn=_identity,
        pin_memory=pin, persistent_workers=tc.workers > 0)
    val_loader = None
    if val_rows is not None:
        n = max(1, tc.workers // 4) if tc.workers else 0
        val_loader = torch.utils.data.DataLoader(
            ValBatches(bundle.root, val_rows, tc, world, rank), batch_size=None,
            num_workers=n, pin_memory=pin, persistent_workers=n > 0)
    return Data(bundle=bundle, train=train, val=val, sampler=sampler, cap_s=cap_s,
                family_exclusion=exclusion, selection=chosen, rows=rows, val_rows=val_rows,
                n_batches=n_batches,
                per_rank=per_rank, total_steps=tc.epochs * steps_per_epoch, ctx=ctx,
                loader=loader, keys=keys, val_loader=val_loader)


def _identity(x):
    return x


def _nets(tc: TrainConfig, mc, device: torch.device, rank: int, local_rank: int, ddp: bool,
          model_hook) -> Nets:
    """2. The seeded Detector on the device (its kept layers' Linear layers float8 with
    train.fp8), its AdamW, the DDP wrapper and the compiled fwd."""
    cpu = device.type == "cpu"
    torch.manual_seed(tc.seed)
    det = Detector(mc)
    base_sha = load_pretrained(det) if mc.init == "xls-r-300m" else "random-init"
    if model_hook is not None:
        model_hook(det)
    det.to(device).train()
    # float8 swaps modules (the same Parameters): before the optimiser, DDP and compile see them
    fp8_state = fp8.convert(det, device) if tc.fp8 else "off (train.fp8 false)"
    det.generator = torch.Generator(device=device).manual_seed(tc.seed * 1000 + rank + 1)
    # the global stream (dropout, on every device) per rank: one init, then seed + rank, so no
    # two ranks draw the same masks (DDP still starts every rank from rank 0's weights)
    torch.manual_seed(tc.seed + rank)
    opt = torch.optim.AdamW(optimizer_groups(det, tc), betas=(0.9, 0.98), eps=1e-6,
                            fused=not cpu)  # one kernel per group on CUDA
    trainable = [p for g in opt.param_groups for p in g["params"]]
    model = det
    if ddp:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(det, device_ids=None if cpu else [local_rank])
    fwd = model
    if not tc.compile:
        state = "off (train.compile false)"
    elif cpu:
        state = "off (compiles on CUDA only)"
    else:
        fwd, why = compile_forward(model, tc.cuda_graphs)
        state = f"off: {why}" if why else "on (static shapes, a graph per batch shape" + (
            ", CUDA graphs)" if tc.cuda_graphs else ")")
    return Nets(det=det, base_sha=base_sha, opt=opt, trainable=trainable, model=model, fwd=fwd,
                compile=state, fp8=fp8_state)


def _resume(r: TrainRun, latest: int | None) -> None:
    """3. Restore r from the store's latest checkpoint, refusing another bundle or config."""
    if latest is None:
        raise ResumeRefused(f"--resume: no checkpoint under {r.store.uri}/checkpoints "
                            "(drop --resume to start this run fresh)")
    name = stores.ckpt_name(latest)
    local = r.plan.out / stores.CKPT_DIR / name
    if r.plan.rank == 0:  # one pull per box; the other ranks read the same folder after it
        r.store.pull_dir(f"{stores.CKPT_DIR}/{name}", local)
    if r.plan.ddp:
        import torch.distributed as dist

        dist.barrier()
    ck = checkpoint.read_checkpoint(local)
    for key in ("bundle_tree_sha", "config_hash"):
        if ck.state[key] != r.plan.identity[key]:
            raise ResumeRefused(f"--resume: {name} has {key} {ck.state[key]}, this run has "
                                f"{r.plan.identity[key]}: resume with the same bundle and config, "
                                "or start a fresh --out")
    if ck.state["epoch"] != latest:
        raise ResumeRefused(f"--resume: {name}/state.json says epoch {ck.state['epoch']}: the "
                            "folder was renamed or its state replaced; remove it from the store "
                            "(an earlier checkpoint is resumed) or start a fresh --out")
    if ck.state.get("world_size", 1) != r.plan.world:
        raise ResumeRefused(f"--resume: {name} was written by {ck.state.get('world_size', 1)} "
                            f"processes, this run has {r.plan.world}: every rank's RNG state is in "
                            "the checkpoint, so resume with the same number of GPUs")
    r.nets.det.load_state_dict(ck.model)
    r.nets.opt.load_state_dict(ck.optimizer)
    set_rng_state(rank_rng(ck.rng, r.plan.rank), r.plan.device, r.nets.det.generator)
    r.progress.step, r.progress.start_epoch = ck.state["step"], latest + 1
    r.progress.hist, r.progress.records = ck.state["history"], ck.state["stream_records"]
    # this rank's own logs (rank_logs: one entry per rank; older checkpoints hold rank 0's)
    mine = (ck.state.get("rank_logs") or [None] * r.plan.world)[r.plan.rank]
    r.progress.rate_log = rates.RateLog(mine["rate_log"] if mine else ck.state["rate_log"])
    if mine:
        r.progress.hist = {**r.progress.hist, "loss": mine["loss"]}


def _run_meta(r: TrainRun, resume: bool) -> dict:
    """4. run_meta.json's fixed part (hearsay.train adds progress, history and rates)."""
    tc, data = r.plan.tc, r.data
    val = data.val
    device = r.plan.device
    return {"job": r.plan.resolved["job"], "fold": r.plan.resolved["fold"], **r.plan.identity,
            "steps": r.progress.step, "epochs": r.progress.start_epoch - 1,
            "epochs_planned": tc.epochs,
            "total_steps": r.data.total_steps, "batches_per_epoch": r.data.n_batches,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "world_size": r.plan.world, "versions": versions(), "complete": False,
            "budget_usd": os.environ.get("HEARSAY_BUDGET_USD"), "store": r.store.uri,
            "resumed_from_epoch": r.progress.start_epoch - 1 if resume else None,
            "train_rows": len(data.train), "val_rows": 0 if val is None else len(val),
            "quotas": r.data.sampler.state(0)["quotas"], "crop_cap_s": data.cap_s,
            "sources_without_quota": r.data.sampler.without_quota,
            "family_exclusion": data.family_exclusion, "selection": data.selection,
            "stream_groups": stream_groups(data.train, r.data.sampler.quotas),
            "trainable_backbone_params": layer_weights.trainable_backbone_params(r.nets.det),
            "tripwire": ("off (config)" if tc.tripwire_auc is None else
                         "not applicable: the full model has no validation split"
                         if r.data.val_rows is None else f"abort when AUC <= {tc.tripwire_auc}"),
            "compile": r.nets.compile, "fp8": r.nets.fp8,
            "step_t": r.progress.step_t}


def build_run(resolved: dict, bundle_dir, out: Path, *, store_uri: str | None, resume: bool,
              verify_bundle: bool, model_hook, backoff_s: float, world: int, rank: int,
              local_rank: int, ddp: bool, device: torch.device, t_start: float) -> TrainRun:
    """Steps 1-4 above; raises ConfigError / ResumeRefused (exit 2 / 7) before any training."""
    from hearsay.contracts.bundle import load_bundle, require_copies

    tc, mc, cc, ac = sections(resolved)
    if tc.fp8 and (why := fp8.fp8_problem(device)) is not None:
        raise ConfigError(why)  # before the bundle is read: nothing is spent on a run that fails
    bundle = load_bundle(bundle_dir, verify=verify_bundle)  # judges codec copies against a recipe
    require_copies(bundle)  # a recipe bundle trains only once its copies are made
    out.mkdir(parents=True, exist_ok=True)
    chash = config_hash(resolved)
    data = _data(resolved, tc, cc, ac, bundle, device, world, rank)
    nets = _nets(tc, mc, device, rank, local_rank, ddp, model_hook)
    store = stores.open_store(store_uri, out, backoff_s=backoff_s)
    latest = store.latest_checkpoint()
    plan = RunPlan(resolved=resolved, tc=tc, out=out, device=device, world=world, rank=rank,
                   ddp=ddp, t_start=t_start, use_amp=device.type == "cuda" and tc.bf16,
                   identity={"config_hash": chash, "bundle_tree_sha": bundle.tree_sha,
                             "base_weights_sha": nets.base_sha, "git_sha": git_sha()})
    r = TrainRun(plan=plan, data=data, nets=nets, store=store, progress=Progress())
    if resume:
        _resume(r, latest)
    elif latest is not None or any((out / stores.CKPT_DIR).glob("epoch_*")):
        raise ResumeRefused(f"{store.uri} already holds checkpoints (latest epoch {latest}): "
                            "pass --resume to continue that run, or use a fresh --out/--store")
    if rank == 0:
        write_json(run_dir.config_path(out), {**resolved, "config_hash": chash})
    r.progress.meta = _run_meta(r, resume)
    return r
