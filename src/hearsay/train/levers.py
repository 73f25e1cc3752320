"""The trainer's speed levers: their switches in the train config and what each gives the
forward of one batch. The loop and scripts/bench_train_gpu.py (each lever timed off and on,
raw step and trainer, the same shapes) both ask `forward_args`, so they run the same thing.

    from hearsay.train import levers
    tc = TrainConfig(**levers.SWITCHES["pack"])
    logits = det(iv, am, **levers.forward_args(tc, lengths, iv.shape[1], det.cfg, device))

Levers (docs/BENCHMARKS.md, "Speed levers"; every one off by default):
  pack       train.pack "sdpa": the kept layers run packed, no padding frame
             (hearsay.detector.packing)
  flex       train.pack "flex": the same with FlexAttention's block mask (no attention dropout)
  mask-free  train.mask_free: a batch whose clips all fill it runs without a key mask (flash)
  graphs     train.cuda_graphs: torch.compile's reduce-overhead mode, a CUDA graph per shape
  fp8        train.fp8: the kept layers' Linear layers in float8 (torchao; hearsay.train.fp8),
             applied to the model once, before the optimiser: no forward argument
"""

from __future__ import annotations

import numpy as np
import torch

from hearsay.detector.packing import pack_plan

# lever name -> its train config switches (what bench_train_gpu sets for "+<name>")
SWITCHES = {"pack": {"pack": "sdpa"}, "flex": {"pack": "flex"},
            "mask-free": {"mask_free": True},
            "graphs": {"compile": True, "cuda_graphs": True}, "fp8": {"fp8": True}}


def forward_args(tc, lengths: np.ndarray, n: int, mc, device: torch.device | str) -> dict:
    """The Detector's keyword arguments for one batch cut to n samples whose clips have
    `lengths` valid samples ((B,) host ints: no device wait): a packing plan (tc.pack), or
    mask_free when every clip fills n (tc.mask_free); {} = the padded forward."""
    if tc.pack != "off":
        return {"packed": pack_plan(lengths, n, mc, tc.pack, device)}
    if tc.mask_free and int(np.min(lengths)) >= n:
        return {"mask_free": True}
    return {}
