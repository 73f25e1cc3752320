"""The `hearsay train` config, its hash, the run's identity (versions); the errors
are hearsay.train.errors.

    from hearsay.train.config import resolve_config, config_hash
    resolved = resolve_config("fold", 3, overrides=json.load(open("train.json")))
    config_hash(resolved)   # what RUN_DIR/config.json records and --resume must match

A resolved config is {"job", "fold", "cpu_smoke", "train", "model", "crop", "augment",
"selection"}, every section expanded to all its fields (code defaults <- --cpu-smoke preset <-
--config file); unknown sections or keys are errors (ConfigError, exit 2). "selection" is the
recipe's training-row rules (hearsay.train.selection), inside the hash like every section. The
loop is hearsay.train.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch
from annotated_types import Ge, Gt, Le, Lt

from hearsay.contracts.manifest import LABELS
from hearsay.detector import layer_weights, packing
from hearsay.detector.model import ModelConfig
from hearsay.sound import example
from hearsay.sound.augment import AugmentConfig
from hearsay.train.errors import ConfigError
from hearsay.train.selection import SelectionConfig
from hearsay.util import config


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and loop settings (units in the comments)."""

    # value ranges, checked with the types before any work (hearsay.util.config.from_dict)
    RANGES: ClassVar[dict] = {
        "epochs": (Ge(1),), "batch_size": (Ge(2),), "grad_accum": (Ge(1),),
        "batches_per_epoch": (Ge(0),), "lr_backbone": (Ge(0),), "layer_decay": (Gt(0), Le(1)),
        "lr_head": (Gt(0),), "weight_decay": (Ge(0),), "warmup_frac": (Ge(0), Le(1)),
        "lr_floor": (Ge(0), Le(1)), "label_smoothing": (Ge(0), Lt(1)), "max_crop_s": (Ge(0),),
        "val_every": (Ge(0),), "val_max_s": (Gt(0),), "val_batch": (Ge(1),),
        "workers": (Ge(0),), "cpu_threads": (Ge(0),), "seed": (Ge(0),),
        "stream_records_max": (Ge(0),), "rate_tol": (Gt(0),),
        "log_every": (Ge(0),), "log_every_s": (Ge(0),)}

    epochs: int = 4  # passes; the pilot fixes this for the fold and full models
    batch_size: int = 64  # clips per micro-batch per GPU; even: half bona fide, half spoof
    grad_accum: int = 1  # micro-batches per optimiser step (trailing group flushed per epoch)
    batches_per_epoch: int = 0  # micro-batches per epoch over all GPUs; 0 = train clips // batch
    lr_backbone: float = 1e-5  # peak LR of the top kept layer
    layer_decay: float = 0.85  # LR of layer depth d (0 = top) = lr_backbone * layer_decay**d
    lr_head: float = 5e-4  # peak LR of layer weights, pooling and linear head
    weight_decay: float = 0.01  # AdamW, on matrices only (not biases, norms, layer weights)
    warmup_frac: float = 0.08  # share of optimiser steps in linear warm-up
    lr_floor: float = 0.01  # LR at the last optimiser step, as a fraction of the peak
    label_smoothing: float = 0.05  # BCE targets 0.025 / 0.975
    grad_clip: float = 1.0  # max global grad norm; 0 = no clipping (the pre-clip norm is checked
    #                         for finiteness either way); negative is an error
    # per-class source quotas: "proportional", "equal", or a table of shares per class
    # {"bonafide": {source: share}, "spoof": {...}} (each class's shares sum to 1; 0 = never drawn)
    source_mix: str | dict = "proportional"
    share_tol: float = 0.02  # allowed |realised - table| share per class x source (table only)
    max_crop_s: float = 0.0  # extra cap on crop length, s (0 = none; the CPU smoke uses 1 s)
    val_every: int = 200  # optimiser steps between validation readouts (0 = epoch ends only)
    val_max_s: float = 8.0  # validation input: whole clip up to this, as at deploy time
    val_batch: int = 32  # clips per validation batch (length-sorted)
    tripwire_auc: float | None = 0.5  # abort when validation AUC <= this (None = off)
    bf16: bool = True  # bf16 autocast on CUDA (ignored on CPU)
    workers: int = 8  # data-loader processes (0 = in the training process)
    gpu_augment: bool = True  # draw augmentations in the workers, render them batched on device
    cpu_threads: int = 0  # torch intra-op threads for this run (0 = torch's default)
    # torch.compile the forward pass on CUDA (ignored on the CPU; off by itself where triton
    # cannot build, run_meta "compile" says why): 1.61x the eager trainer on one H200 at the
    # recipe's crop lengths, after ~140 s compiling its bucket shapes (docs/BENCHMARKS.md)
    compile: bool = True
    # speed levers (docs/BENCHMARKS.md, "Speed levers"): each off until its GPU figure is in
    # "off", "sdpa" or "flex": the kept transformer layers run packed, a batch's clips end to
    # end with a document mask, no padding frame (hearsay.detector.packing; logits as padded)
    pack: str = "off"
    # a batch whose clips all fill its cut length runs with no attention key mask, so SDPA may
    # take its flash kernel (the same logits); ignored when pack is on
    mask_free: bool = False
    # CUDA graphs per static batch shape: torch.compile mode "reduce-overhead" (needs compile)
    cuda_graphs: bool = False
    # float8 matmuls (torchao float8 training, recipe "tensorwise") for the kept transformer
    # layers' Linear layers (hearsay.train.fp8); refused before any work on a CUDA GPU below
    # compute capability 8.9 (H100/H200 are 9.0); on the CPU it runs, slowly (tests)
    fp8: bool = False
    seed: int = 0  # every random stream derives from this
    stream_records_max: int = 20000  # realised-stream clips kept for the shortcut AUCs
    rate_tol: float = 0.02  # allowed augmentation-rate gap between classes (+ 4 s.e.)
    # the layer-weight readout's "concentrated at the top" rule (hearsay.detector.layer_weights):
    # {"top_k", "min_share", "advise_keep"}; its verdict is in run_meta "layer_weights"
    layer_rule: dict = field(default_factory=lambda: dict(layer_weights.DEFAULT_RULE))
    # the per-step log (stdout + RUN_DIR/train_log.csv): a line every log_every optimiser steps
    # or log_every_s seconds, whichever comes first (0 = that trigger off; both 0 = no log)
    log_every: int = 50
    log_every_s: float = 60.0

    def __post_init__(self):
        if self.batch_size < 2 or self.batch_size % 2:
            raise ValueError(f"batch_size={self.batch_size}: must be even (half per class)")
        if self.grad_accum < 1 or self.epochs < 1:
            raise ValueError("grad_accum and epochs must be >= 1")
        if not self.grad_clip >= 0:  # also refuses NaN
            raise ValueError(f"grad_clip={self.grad_clip}: must be >= 0 (the max global grad "
                             "norm; 0 switches clipping off)")
        if isinstance(self.source_mix, dict):
            check_share_table(self.source_mix)
        elif self.source_mix not in ("proportional", "equal"):
            raise ValueError(f"source_mix={self.source_mix!r}: use proportional, equal or a "
                             'table of shares {"bonafide": {SOURCE: SHARE, ...}, "spoof": {...}}')
        layer_weights.LayerRule.from_dict(self.layer_rule)  # ValueError naming the key
        if self.pack not in packing.PACK_KINDS:
            raise ValueError(f"pack={self.pack!r}: use one of {', '.join(packing.PACK_KINDS)}")
        if self.cuda_graphs and not self.compile:
            raise ValueError("cuda_graphs=true needs compile=true (CUDA graphs are torch."
                             "compile's reduce-overhead mode): set both, or cuda_graphs false")
        if not 0 < self.share_tol < 1:
            raise ValueError(f"share_tol={self.share_tol}: a share gap in (0, 1), e.g. 0.02")


SHARE_SUM_TOL = 1e-6  # how far a class's shares may sum from 1 (float rounding of the JSON)


def check_share_table(table: dict) -> None:
    """ValueError unless `table` = {"bonafide": {source: share}, "spoof": {...}}: both classes,
    each a non-empty map of source names to shares >= 0 that sum to 1 (+- SHARE_SUM_TOL)."""
    labels = set(LABELS)
    if set(table) != labels:
        raise ValueError(f"source_mix table has classes {sorted(table)}: give exactly "
                         f"{sorted(labels)}, each {{SOURCE: SHARE, ...}}")
    for label in LABELS:
        shares = table[label]
        if not isinstance(shares, dict) or not shares:
            raise ValueError(f"source_mix[{label!r}] = {shares!r}: a non-empty "
                             '{SOURCE: SHARE, ...}, e.g. {"studio": 0.6, "phone": 0.4}')
        bad = {s: v for s, v in shares.items() if isinstance(v, bool)
               or not isinstance(v, int | float) or not v >= 0}
        if bad:
            raise ValueError(f"source_mix[{label!r}] shares {bad}: each a number >= 0 "
                             "(0 = that source is never drawn)")
        total = sum(shares.values())
        if abs(total - 1) > SHARE_SUM_TOL:
            raise ValueError(f"source_mix[{label!r}] shares sum to {total:.6g}: they must sum "
                             f"to 1 (+-{SHARE_SUM_TOL}) within each class; rescale them")


SECTIONS = {"train": TrainConfig, "model": ModelConfig, "crop": example.CropConfig,
            "augment": AugmentConfig, "selection": SelectionConfig}
STAGE_SECTIONS = ("train", "model", "crop", "augment")  # what sections() builds


def smoke_overrides() -> dict:
    """The --cpu-smoke preset: tiny random model, short crops, few steps, tripwire off."""
    return {"model": ModelConfig.tiny().to_dict(),
            "train": {"epochs": 2, "batch_size": 8, "batches_per_epoch": 4, "lr_backbone": 3e-3,
                      "lr_head": 1e-2, "max_crop_s": 1.0, "val_every": 0, "tripwire_auc": None,
                      "bf16": False, "workers": 0, "val_batch": 16,
                      "cpu_threads": 1}}  # a tiny model gains nothing from threads


def demo_overrides() -> dict:
    """The `hearsay demo` preset, layered on --cpu-smoke: the tiny random model (its frozen CNN
    32 channels wide instead of 16) trained long enough to separate the synthetic demo classes
    (docs/BENCHMARKS.md, "Demo")."""
    return {"train": {"epochs": 4, "batches_per_epoch": 32, "max_crop_s": 2.0,  # 128 steps of 8
                      "lr_head": 2e-2, "lr_backbone": 6e-3},  # twice --cpu-smoke's peak LRs
            "augment": {"p_aug": 0.2},  # fewer masked clips: 1,024 crops is all the model sees
            "model": {"conv_dim": (32,) * 7}}  # twice the tiny CNN's random channels


def _section(cls, d: dict, name: str = ""):
    """The section's dataclass; its keys, types and ranges judged by hearsay.util.config (messages
    name `name.key`), then the class's own from_dict where it has one."""
    cfg = config.from_dict(cls, d, what=name or None)
    return cls.from_dict(d) if hasattr(cls, "from_dict") else cfg


def resolve_config(job: str, fold: int | None, *, overrides: dict | None = None,
                   cpu_smoke: bool = False, sets: list[str] | None = None) -> dict:
    """{"job", "fold", "cpu_smoke", "train", "model", "crop", "augment", "selection"}, every
    section resolved to all its fields, each value checked for type and range (hearsay.util.config).
    Order: code defaults <- cpu-smoke preset <- `overrides` (config file) <- `sets`
    ("train.lr_head=5e-4", the command line's --set), so a --set value is in the resolved config
    and its hash."""
    layers = [smoke_overrides()] if cpu_smoke else []
    layers.append(overrides or {})
    try:
        layers.append(config.parse_sets(sets or [], SECTIONS))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    merged: dict = {name: {} for name in SECTIONS}
    for layer in layers:
        if not isinstance(layer, dict):
            raise ConfigError(f"config: a JSON object {{section: {{key: value}}}} is needed, "
                              f"not {layer!r}")
        unknown = sorted(set(layer) - set(SECTIONS))
        if unknown:
            raise ConfigError(f"unknown config sections {unknown}"
                              f"{config.did_you_mean(unknown, SECTIONS)} "
                              f"(known: {sorted(SECTIONS)})")
        for name, values in layer.items():
            if not isinstance(values, dict):
                raise ConfigError(f"config section {name!r} = {values!r}: a JSON object "
                                  "{KEY: VALUE, ...} is needed")
            merged[name].update(values)
    try:
        resolved = {name: dataclasses.asdict(_section(cls, merged[name], name))
                    for name, cls in SECTIONS.items()}
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config: {err}") from None
    return {"job": job, "fold": fold, "cpu_smoke": cpu_smoke, **resolved}


def config_hash(resolved: dict) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of the resolved config."""
    blob = json.dumps(resolved, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def sections(resolved: dict):
    """(TrainConfig, ModelConfig, CropConfig, AugmentConfig) of a resolved config; the
    selection section is read where the training rows are chosen (hearsay.train.selection)."""
    return tuple(_section(SECTIONS[name], resolved[name]) for name in STAGE_SECTIONS)


# --------------------------------------------------------------------------- identity


def versions() -> dict:
    import transformers

    from hearsay import __version__

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__,
            "hearsay": __version__, "cuda": torch.version.cuda}
