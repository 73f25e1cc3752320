"""The optimiser-step mechanics of `hearsay train`: LR schedule, AdamW parameter groups, the
non-finite tripwire (read one step late, so the GPU never waits) and checkpointed RNG state.

    from hearsay.train_step import lr_multiplier, optimizer_groups
    opt = torch.optim.AdamW(optimizer_groups(det, TrainConfig()), betas=(0.9, 0.98), eps=1e-6)
    for g in opt.param_groups: g["lr"] = g["base_lr"] * lr_multiplier(step, total, 0.08, 0.01)
"""

from __future__ import annotations

import math

import torch

from hearsay.model import Detector
from hearsay.train_config import NonFinite, TrainConfig


def lr_multiplier(step: int, total: int, warmup_frac: float, floor: float) -> float:
    """LR factor of optimiser step `step` (0-based) of `total`: linear warm-up over
    ceil(warmup_frac * total) steps, then cosine from 1 to `floor`, reached at step total-1."""
    warm = min(max(1, math.ceil(warmup_frac * total)), total)
    if step < warm:
        return (step + 1) / warm
    span = total - 1 - (warm - 1)
    progress = (step - (warm - 1)) / span if span > 0 else 1.0
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def optimizer_groups(det: Detector, tc: TrainConfig) -> list[dict]:
    """AdamW groups: head, then backbone by depth (LR decays downwards); no decay on 1-D."""
    groups = []

    def add(params, lr, name):
        params = [p for p in params if p.requires_grad]
        for decay in (True, False):
            ps = [p for p in params if (p.ndim >= 2) == decay]
            if ps:
                groups.append({"params": ps, "lr": lr, "base_lr": lr, "name": name,
                               "weight_decay": tc.weight_decay if decay else 0.0})

    add(det.head_params(), tc.lr_head, "head")
    for depth, params in det.backbone_param_groups():
        add(params, tc.lr_backbone * tc.layer_decay ** depth, f"backbone_depth{depth}")
    return groups



def nonfinite_flag(loss_sum: torch.Tensor, grad_norm: torch.Tensor, ddp: bool) -> torch.Tensor:
    """(1,) int32 on the device: 1 when this step's loss or (all-reduced) grad norm is NaN/inf
    on ANY rank. Under DDP the gradients are already averaged across ranks by backward(), so
    every rank sees the same norm; the loss is local, so the flag is max-reduced: all ranks stop
    together. No host sync here: the loop reads the flag one step later (see `check_pending`)."""
    bad = (~torch.isfinite(loss_sum.detach().float()) | ~torch.isfinite(grad_norm.float()))
    bad = bad.to(torch.int32).reshape(1)
    if ddp:
        import torch.distributed as dist

        dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    return bad


def nonfinite(loss_sum: torch.Tensor, grad_norm: torch.Tensor, ddp: bool) -> bool:
    return bool(nonfinite_flag(loss_sum, grad_norm, ddp).item())


def check_pending(pending: list) -> None:
    """Read the queued non-finite flags (one host sync); raise NonFinite on the first bad one.

    The flag of step k is read while step k+1 runs, so the GPU never waits for the host; a bad
    step's update is then already applied, but the run aborts before any checkpoint is written,
    so nothing non-finite is ever saved."""
    while pending:
        flag, step, epoch, loss, norm = pending.pop(0)
        if flag.item():
            raise NonFinite(f"optimiser step {step} (epoch {epoch}): loss {loss.item()} grad "
                            f"norm {norm.item()}: aborting (lower the LR, check the inputs)")


def rng_state(device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    state = {"torch_cpu": torch.get_rng_state(), "spec_augment": gen.get_state()}
    if device.type == "cuda":
        state["torch_cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(rng: dict, device: torch.device, gen: torch.Generator) -> None:
    torch.set_rng_state(rng["torch_cpu"])
    gen.set_state(rng["spec_augment"])
    if device.type == "cuda" and "torch_cuda" in rng:
        torch.cuda.set_rng_state(rng["torch_cuda"], device)
