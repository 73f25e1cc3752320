"""One `hearsay train` process's state, in plain named parts (hearsay.train.prepare builds each
once; hearsay.train.loop reads them and moves only `Progress` on):

    RunPlan    what to train, where and how: the resolved config, the run dir, the device and
               the process's place in the job, the run's identity (frozen)
    Data       the job's rows, the batch plan and the two loaders (frozen; built once: the
               loaders' workers persist)
    Nets       the Detector, its optimiser and the wrappers the forward pass calls
    Progress   what the loop moves on: steps, history, rate log, stream records, throughput
               counts, run_meta (checkpointed or restored on --resume where the loop says so)
    TrainRun   the four parts and the checkpoint store

    r = build_run(...)                        # hearsay.train.prepare
    r.plan.tc.epochs, r.data.loader, r.nets.opt, r.progress.step, r.store.uri
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from hearsay import store as stores
from hearsay.contracts.bundle import Bundle
from hearsay.detector.model import Detector
from hearsay.train.config import TrainConfig
from hearsay.train.data import BatchContext, EpochKeys, Sampler
from hearsay.train.rates import RateLog


@dataclass(frozen=True)
class RunPlan:
    """What this process trains, where and how; fixed for the run."""

    resolved: dict  # the resolved config (hearsay.train.config.resolve_config)
    tc: TrainConfig
    out: Path  # RUN_DIR
    device: torch.device
    world: int  # processes (GPUs) in the job
    rank: int  # this process; rank 0 writes the run dir and pushes to the store
    ddp: bool
    t_start: float  # time.time() at the start: step timestamps and wall_s count from here
    use_amp: bool  # bf16 autocast (CUDA only)
    identity: dict  # config_hash, bundle_tree_sha, base_weights_sha, git_sha

    def amp(self):
        """The forward pass's autocast context: bf16 on CUDA when configured, off on CPU."""
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.use_amp) if \
            self.device.type == "cuda" else torch.autocast("cpu", enabled=False)


@dataclass(frozen=True)
class Data:
    """The job's rows, its batch plan and its loaders, derived from the bundle and world size."""

    bundle: Bundle
    train: pd.DataFrame  # training rows of the bundle manifest
    val: pd.DataFrame | None  # validation rows (None: the full model)
    sampler: Sampler
    cap_s: float  # s, the longest crop both classes reach
    family_exclusion: dict  # the extra families kept from this model (plan_job)
    selection: dict  # the recipe's training-row rules and their counts (select_training_rows)
    rows: list[dict]  # train[ROW_COLUMNS] as records: what the loader workers read
    val_rows: list[dict] | None  # None: no validation (the full model)
    n_batches: int  # micro-batches per epoch over all ranks
    per_rank: int  # micro-batches per epoch on this rank
    total_steps: int  # optimiser steps in the whole run (the LR schedule's length)
    ctx: BatchContext  # what EpochBatches needs besides the rows
    loader: object  # the run's training DataLoader (persistent workers), keyed by `keys`
    keys: EpochKeys  # set_epoch(e) before iterating `loader`
    val_loader: object  # the validation DataLoader (this rank's share), None without val rows


@dataclass(frozen=True)
class Nets:
    """The Detector, its optimiser and the wrappers the loop calls."""

    det: Detector
    base_sha: str  # sha256 of the pretrained weights, or "random-init"
    opt: torch.optim.Optimizer
    trainable: list  # the optimiser's parameters (gradient clipping)
    model: torch.nn.Module  # det, or det wrapped in DistributedDataParallel
    fwd: torch.nn.Module  # model, or torch.compile of it
    compile: str  # run_meta's "compile": whether fwd is compiled, and if not, why
    fp8: str  # run_meta's "fp8": off, or the float8 recipe and how many Linear layers it took


@dataclass
class Progress:
    """What the loop moves on (a resumed run starts from its checkpoint's)."""

    meta: dict = field(default_factory=dict)  # run_meta.json
    # checkpointed each epoch
    step: int = 0  # optimiser steps done
    start_epoch: int = 1
    hist: dict = field(default_factory=lambda: {"loss": [], "lr": [], "val": []})
    rate_log: RateLog = field(default_factory=RateLog)
    records: list[dict] = field(default_factory=list)  # realised-stream trivial features
    # not checkpointed (throughput figures, host reads deferred by one step)
    clips: float = 0.0  # clips seen by this rank
    audio_s: float = 0.0  # valid audio seconds seen by this rank
    t_loop: float = 0.0  # s spent in the batch loops (readouts and checkpoints excluded)
    step_t: list[float] = field(default_factory=list)  # wall s since start at each step
    pending: list = field(default_factory=list)  # steps queued, not yet read (train_step)
    stream: object = None  # hearsay.train.records.StreamRecords over `records` (the loop's)
    steplog: object = None  # hearsay.train.steplog.StepLog (the loop's)


@dataclass(frozen=True)
class TrainRun:
    """One process's run: the four parts and the checkpoint store."""

    plan: RunPlan
    data: Data
    nets: Nets
    store: stores.Store  # hearsay.store.open_store(...): local folder or rclone remote
    progress: Progress
