"""Everything one `hearsay train` process builds before its first optimiser step: a `TrainRun`.

    from hearsay.train.prepare import build_run
    r = build_run(resolved, bundle_dir, out, store_uri=None, resume=False, verify_bundle=True,
                  model_hook=None, backoff_s=5.0, world=1, rank=0, local_rank=0, ddp=False,
                  device=torch.device("cpu"), t_start=time.time())

In this order (the order fixes the RNG streams, so resume equals an uninterrupted run):

    1. identity and data: bundle, job rows, sampler, crop cap, batches per epoch, worker context
    2. model and optimiser: seeded Detector (+ pretrained weights), AdamW groups, DDP, compile;
       the training and validation loaders (built once: their workers persist)
    3. store and resume: refuse a mismatched checkpoint (or another world size), else restore
       model, optimiser, this rank's RNG and the checkpointed progress; write config.json
    4. run_meta: what the run is (written out by hearsay.train at each epoch end and the finish)

The loop that consumes a TrainRun is hearsay.train.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from hearsay import augment, layer_weights
from hearsay import store as stores
from hearsay.contracts import run_dir
from hearsay.contracts.bundle import Bundle
from hearsay.files import write_json
from hearsay.hashing import git_sha
from hearsay.model import Detector, load_pretrained
from hearsay.sound import crops
from hearsay.train import checkpoint
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
from hearsay.train.step import compile_forward, optimizer_groups, rank_rng, set_rng_state

ROW_COLUMNS = ["id", "flac", "label", "source", "codec_ids", "duration"]  # what workers read


@dataclass
class TrainRun:
    """One process's run: fixed parts (set by build_run) and progress (the loop updates it)."""

    resolved: dict  # the resolved config (hearsay.train.config.resolve_config)
    tc: TrainConfig
    out: Path  # RUN_DIR
    device: torch.device
    world: int  # processes (GPUs) in the job
    rank: int  # this process; rank 0 writes the run dir and pushes to the store
    ddp: bool
    t_start: float  # time.time() at the start: step timestamps and wall_s count from here
    # 1. data
    bundle: Bundle
    sampler: Sampler
    rows: list[dict]  # training rows (ROW_COLUMNS), indexed by the sampler's plan
    val_rows: list[dict] | None  # None: no validation (the full model)
    ctx: BatchContext  # what EpochBatches needs besides the rows
    loader: object  # the run's training DataLoader (persistent workers), keyed by `keys`
    keys: EpochKeys  # set_epoch(e) before iterating `loader`
    val_loader: object  # the validation DataLoader (this rank's share), None without val rows
    n_batches: int  # micro-batches per epoch over all ranks
    per_rank: int  # micro-batches per epoch on this rank
    total_steps: int  # optimiser steps in the whole run (the LR schedule's length)
    # 2. model
    det: Detector
    model: torch.nn.Module  # det, or det wrapped in DistributedDataParallel
    fwd: torch.nn.Module  # what the forward pass calls (model, or torch.compile of it)
    opt: torch.optim.Optimizer
    trainable: list  # the optimiser's parameters (gradient clipping)
    use_amp: bool  # bf16 autocast (CUDA only)
    # 3. store and identity
    store: stores.Store  # hearsay.store.open_store(...): local folder or rclone remote
    identity: dict  # config_hash, bundle_tree_sha, base_weights_sha, git_sha
    meta: dict = field(default_factory=dict)  # run_meta.json
    # progress, checkpointed each epoch
    step: int = 0  # optimiser steps done
    start_epoch: int = 1
    hist: dict = field(default_factory=lambda: {"loss": [], "lr": [], "val": []})
    rate_log: augment.RateLog = field(default_factory=augment.RateLog)
    records: list[dict] = field(default_factory=list)  # realised-stream trivial features
    # progress, not checkpointed (throughput figures, host reads deferred by one step)
    clips: float = 0.0  # clips seen by this rank
    audio_s: float = 0.0  # valid audio seconds seen by this rank
    t_loop: float = 0.0  # s spent in the batch loops (readouts and checkpoints excluded)
    step_t: list[float] = field(default_factory=list)  # wall s since start at each step
    pending: list = field(default_factory=list)  # steps queued, not yet read (train_step)
    stream: object = None  # hearsay.train.records.StreamRecords over `records` (the loop's)
    steplog: object = None  # hearsay.train.steplog.StepLog (the loop's)

    def amp(self):
        """The forward pass's autocast context: bf16 on CUDA when configured, off on CPU."""
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.use_amp) if \
            self.device.type == "cuda" else torch.autocast("cpu", enabled=False)


def _data(resolved: dict, tc: TrainConfig, cc, ac, bundle: Bundle, world: int,
          rank: int) -> JobData:
    """1. The job's rows, sampler and per-epoch sizes; ConfigError when the bundle can't serve."""
    train, val, exclusion = plan_job(bundle, resolved["job"], resolved["fold"])
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
    cap_s = crops.class_cap_s(train.loc[train["label"] == "bonafide", "duration"],
                              train.loc[train["label"] == "spoof", "duration"])
    n_batches = tc.batches_per_epoch or max(1, len(train) // tc.batch_size)
    n_batches = max(world, n_batches - n_batches % world)
    per_rank = n_batches // world
    steps_per_epoch = -(-per_rank // tc.grad_accum)
    return JobData(
        train=train, val=val, sampler=sampler, cap_s=cap_s, family_exclusion=exclusion,
        rows=train[ROW_COLUMNS].to_dict("records"),
        val_rows=None if val is None or val.empty else val[ROW_COLUMNS].to_dict("records"),
        n_batches=n_batches, per_rank=per_rank, total_steps=tc.epochs * steps_per_epoch,
        ctx=BatchContext(seed=tc.seed, world=world, rank=rank, test_durations=test_durations,
                         cap_s=cap_s, crop=cc, augment=ac, max_crop_s=tc.max_crop_s,
                         gpu_augment=tc.gpu_augment))


def _loaders(root, tc: TrainConfig, data: JobData, device: torch.device, world: int,
             rank: int):
    """The run's two loaders, built once: workers persist across epochs and readouts.
    Validation gets a quarter of the training workers (at least 1 when workers > 0)."""
    pin = device.type == "cuda"
    keys = EpochKeys(data.per_rank)
    train = torch.utils.data.DataLoader(
        EpochBatches(root, data.rows, data.sampler, data.n_batches, data.ctx),
        batch_size=None, sampler=keys, num_workers=tc.workers, collate_fn=_identity,
        pin_memory=pin, persistent_workers=tc.workers > 0)
    val = None
    if data.val_rows is not None:
        n = max(1, tc.workers // 4) if tc.workers else 0
        val = torch.utils.data.DataLoader(
            ValBatches(root, data.val_rows, tc, world, rank), batch_size=None,
            num_workers=n, pin_memory=pin, persistent_workers=n > 0)
    return train, keys, val


@dataclass(frozen=True)
class JobData:
    """1. What _data derives from the bundle for this job and world size."""

    train: pd.DataFrame  # training rows of the bundle manifest
    val: pd.DataFrame | None  # validation rows (None: the full model)
    sampler: Sampler
    cap_s: float  # s, the longest crop both classes reach
    family_exclusion: dict  # the extra families kept from this model (plan_job)
    rows: list[dict]  # train[ROW_COLUMNS] as records: what the loader workers read
    val_rows: list[dict] | None
    n_batches: int  # micro-batches per epoch over all ranks
    per_rank: int  # micro-batches per epoch on this rank
    total_steps: int  # optimiser steps in the whole run
    ctx: BatchContext


@dataclass(frozen=True)
class ModelParts:
    """2. What _model builds: the Detector, its optimiser and the wrappers the loop calls."""

    det: Detector
    base_sha: str  # sha256 of the pretrained weights, or "random-init"
    opt: torch.optim.Optimizer
    trainable: list  # the optimiser's parameters (gradient clipping)
    model: torch.nn.Module  # det, or det wrapped in DistributedDataParallel
    fwd: torch.nn.Module  # model, or torch.compile of it
    use_amp: bool  # bf16 autocast (CUDA only)


def _identity(x):
    return x


def _model(tc: TrainConfig, mc, device: torch.device, rank: int, local_rank: int, ddp: bool,
           model_hook) -> ModelParts:
    """2. The seeded Detector on the device, its AdamW, the DDP wrapper and the compiled fwd."""
    cpu = device.type == "cpu"
    torch.manual_seed(tc.seed)
    det = Detector(mc)
    base_sha = load_pretrained(det) if mc.init == "xls-r-300m" else "random-init"
    if model_hook is not None:
        model_hook(det)
    det.to(device).train()
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
    return ModelParts(det=det, base_sha=base_sha, opt=opt, trainable=trainable, model=model,
                      fwd=compile_forward(model) if tc.compile and not cpu else model,
                      use_amp=device.type == "cuda" and tc.bf16)


def _resume(r: TrainRun, latest: int | None) -> None:
    """3. Restore r from the store's latest checkpoint, refusing another bundle or config."""
    if latest is None:
        raise ResumeRefused(f"--resume: no checkpoint under {r.store.uri}/checkpoints "
                            "(drop --resume to start this run fresh)")
    name = stores.ckpt_name(latest)
    local = r.out / stores.CKPT_DIR / name
    if r.rank == 0:  # one pull per box; the other ranks read the same folder after it
        r.store.pull_dir(f"{stores.CKPT_DIR}/{name}", local)
    if r.ddp:
        import torch.distributed as dist

        dist.barrier()
    ck = checkpoint.read_checkpoint(local)
    for key in ("bundle_tree_sha", "config_hash"):
        if ck.state[key] != r.identity[key]:
            raise ResumeRefused(f"--resume: {name} has {key} {ck.state[key]}, this run has "
                                f"{r.identity[key]}: resume with the same bundle and config, "
                                "or start a fresh --out")
    if ck.state["epoch"] != latest:
        raise ResumeRefused(f"--resume: {name}/state.json says epoch {ck.state['epoch']}: the "
                            "folder was renamed or its state replaced; remove it from the store "
                            "(an earlier checkpoint is resumed) or start a fresh --out")
    if ck.state.get("world_size", 1) != r.world:
        raise ResumeRefused(f"--resume: {name} was written by {ck.state.get('world_size', 1)} "
                            f"processes, this run has {r.world}: every rank's RNG state is in "
                            "the checkpoint, so resume with the same number of GPUs")
    r.det.load_state_dict(ck.model)
    r.opt.load_state_dict(ck.optimizer)
    set_rng_state(rank_rng(ck.rng, r.rank), r.device, r.det.generator)
    r.step, r.start_epoch = ck.state["step"], latest + 1
    r.hist, r.records = ck.state["history"], ck.state["stream_records"]
    # this rank's own logs (rank_logs: one entry per rank; older checkpoints hold rank 0's)
    mine = (ck.state.get("rank_logs") or [None] * r.world)[r.rank]
    r.rate_log = augment.RateLog(mine["rate_log"] if mine else ck.state["rate_log"])
    if mine:
        r.hist = {**r.hist, "loss": mine["loss"]}


def _run_meta(r: TrainRun, data: JobData, resume: bool) -> dict:
    """4. run_meta.json's fixed part (hearsay.train adds progress, history and rates)."""
    tc, val = r.tc, data.val
    device = r.device
    return {"job": r.resolved["job"], "fold": r.resolved["fold"], **r.identity,
            "steps": r.step, "epochs": r.start_epoch - 1, "epochs_planned": tc.epochs,
            "total_steps": r.total_steps, "batches_per_epoch": r.n_batches,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "world_size": r.world, "versions": versions(), "complete": False,
            "budget_usd": os.environ.get("HEARSAY_BUDGET_USD"), "store": r.store.uri,
            "resumed_from_epoch": r.start_epoch - 1 if resume else None,
            "train_rows": len(data.train), "val_rows": 0 if val is None else len(val),
            "quotas": r.sampler.state(0)["quotas"], "crop_cap_s": data.cap_s,
            "sources_without_quota": r.sampler.without_quota,
            "family_exclusion": data.family_exclusion,
            "trainable_backbone_params": layer_weights.trainable_backbone_params(r.det),
            "tripwire": ("off (config)" if tc.tripwire_auc is None else
                         "not applicable: the full model has no validation split"
                         if r.val_rows is None else f"abort when AUC <= {tc.tripwire_auc}"),
            "step_t": r.step_t}


def build_run(resolved: dict, bundle_dir, out: Path, *, store_uri: str | None, resume: bool,
              verify_bundle: bool, model_hook, backoff_s: float, world: int, rank: int,
              local_rank: int, ddp: bool, device: torch.device, t_start: float) -> TrainRun:
    """Steps 1-4 above; raises ConfigError / ResumeRefused (exit 2 / 7) before any training."""
    from hearsay.contracts.bundle import load_bundle

    tc, mc, cc, ac = sections(resolved)
    bundle = load_bundle(bundle_dir, verify=verify_bundle)
    out.mkdir(parents=True, exist_ok=True)
    chash = config_hash(resolved)
    data = _data(resolved, tc, cc, ac, bundle, world, rank)
    m = _model(tc, mc, device, rank, local_rank, ddp, model_hook)
    loader, keys, val_loader = _loaders(bundle.root, tc, data, device, world, rank)
    store = stores.open_store(store_uri, out, backoff_s=backoff_s)
    latest = store.latest_checkpoint()
    r = TrainRun(resolved=resolved, tc=tc, out=out, device=device, world=world, rank=rank,
                 ddp=ddp, t_start=t_start, bundle=bundle, sampler=data.sampler,
                 rows=data.rows, val_rows=data.val_rows, ctx=data.ctx,
                 loader=loader, keys=keys, val_loader=val_loader,
                 n_batches=data.n_batches, per_rank=data.per_rank,
                 total_steps=data.total_steps, det=m.det, model=m.model, fwd=m.fwd,
                 opt=m.opt, trainable=m.trainable, use_amp=m.use_amp, store=store,
                 identity={"config_hash": chash, "bundle_tree_sha": bundle.tree_sha,
                           "base_weights_sha": m.base_sha, "git_sha": git_sha()})
    if resume:
        _resume(r, latest)
    elif latest is not None or any((out / stores.CKPT_DIR).glob("epoch_*")):
        raise ResumeRefused(f"{store.uri} already holds checkpoints (latest epoch {latest}): "
                            "pass --resume to continue that run, or use a fresh --out/--store")
    if rank == 0:
        write_json(run_dir.config_path(out), {**resolved, "config_hash": chash})
    r.meta = _run_meta(r, data, resume)
    return r
