"""The optimiser-step mechanics of `hearsay train`: LR schedule, AdamW parameter groups, the
non-finite tripwire (read one step late, so the GPU never waits) and checkpointed RNG state.

    from hearsay.train.step import lr_multiplier, optimizer_groups
    opt = torch.optim.AdamW(optimizer_groups(det, TrainConfig()), betas=(0.9, 0.98), eps=1e-6)
    for g in opt.param_groups: g["lr"] = g["base_lr"] * lr_multiplier(step, total, 0.08, 0.01)
"""

from __future__ import annotations

import math
import os
import shutil
import sys

import torch

from hearsay.detector.model import Detector
from hearsay.train.config import TrainConfig
from hearsay.train.errors import NonFinite


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


# graphs torch.compile may keep per compiled function: the crop buckets (9) x batch sizes (a
# trailing short batch) fit well under it; past it dynamo falls back to eager, silently slow
COMPILE_GRAPH_LIMIT = 64


def compile_blocker(environ=os.environ, ldconfig: str = "/sbin/ldconfig") -> str | None:
    """Why inductor cannot build its CUDA kernels here, or None. Triton compiles a small C
    launcher with the machine's C compiler ($CC, else cc / gcc / clang on PATH) and finds
    libcuda with `ldconfig -p` unless TRITON_LIBCUDA_PATH names its folder; an image without
    ldconfig (Nix's) gets TRITON_LIBCUDA_PATH set here from the LD_LIBRARY_PATH folder that
    holds libcuda.so.1."""
    cc = environ.get("CC") or next((c for c in ("cc", "gcc", "clang")
                                    if shutil.which(c, path=environ.get("PATH"))), None)
    if not cc:
        return "no C compiler on PATH (triton builds its CUDA launcher with one; set CC)"
    if environ.get("TRITON_LIBCUDA_PATH") or os.path.exists(ldconfig):
        return None
    for folder in environ.get("LD_LIBRARY_PATH", "").split(":"):
        if folder and os.path.exists(os.path.join(folder, "libcuda.so.1")):
            environ["TRITON_LIBCUDA_PATH"] = folder
            return None
    return (f"no {ldconfig} and no libcuda.so.1 in LD_LIBRARY_PATH (set TRITON_LIBCUDA_PATH to "
            "its folder)")


def compile_forward(model: torch.nn.Module, cuda_graphs: bool = False,
                    ) -> tuple[torch.nn.Module, str | None]:
    """(torch.compile of model with static shapes, None), or (model, why) when this machine
    cannot compile (compile_blocker): the run then trains eager, the same numbers a little
    slower, and says so on stderr and in run_meta. Static shapes: one graph per (B, T) the crop
    buckets make (run_meta's throughput.batch_shapes). Dynamic sizes are not used: on CUDA,
    inductor's code for the 12-layer model under symbolic sizes failed at run time (a reshape
    in a workspace reduction), while the buckets bound the static graphs to a handful."""
    import torch._dynamo

    if (why := compile_blocker()) is not None:
        print(f"hearsay train: torch.compile off, training eager: {why}", file=sys.stderr)
        return model, why
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                               COMPILE_GRAPH_LIMIT)
    mode = "reduce-overhead" if cuda_graphs else None
    return torch.compile(model, dynamic=False, mode=mode), None


def clip_gradients(params: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """The global grad norm before clipping (a 0-dim tensor on the device, checked for
    finiteness by the caller); the gradients are scaled down to `max_norm` when over it.
    max_norm 0 = clipping off: the norm is only measured (torch's clip_grad_norm_(..., 0) would
    scale every gradient to 0 and the run would train nothing)."""
    if max_norm == 0:
        return torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    return torch.nn.utils.clip_grad_norm_(params, max_norm)


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


def queue_step(flag: torch.Tensor, loss: torch.Tensor, norm: torch.Tensor, step: int,
               epoch: int) -> tuple:
    """Start the copy of (flag, loss, grad norm) to a pinned host buffer without waiting;
    returns what `check_pending` reads a step later (the event says when the copy landed)."""
    vals = torch.stack([flag.reshape(()).float(), loss.detach().float().reshape(()),
                        norm.detach().float().reshape(())])  # (3,) on the device
    cuda = vals.device.type == "cuda"
    host = torch.empty(3, dtype=torch.float32, pin_memory=cuda)
    host.copy_(vals, non_blocking=True)
    event = None
    if cuda:
        event = torch.cuda.Event()
        event.record()
    return host, event, step, epoch


def check_pending(pending: list, losses: list | None = None, wait: bool = False,
                  norms: list | None = None) -> None:
    """Read the queued steps whose copies have landed (host buffers), in order; append each
    loss to `losses` and each pre-clip grad norm to `norms`; raise NonFinite on the first bad
    step. `wait=True` (readouts, the epoch end) reads them all, waiting for the device; without
    it a step whose event has not fired stays queued (event.query(): the loop never waits for
    the device).

    A bad step's flag is read a step or more later, its update already applied, but the run
    aborts before any checkpoint is written (the epoch end reads every step with wait=True),
    so nothing non-finite is ever saved."""
    while pending:
        host, event, step, epoch = pending[0]
        if event is not None:
            if not wait and not event.query():
                return  # the device is behind: read it at the next step
            event.synchronize()
        pending.pop(0)
        flag, loss, norm = host.tolist()  # a host tensor: no device read
        if flag:
            raise NonFinite(f"optimiser step {step} (epoch {epoch}): loss {loss} grad "
                            f"norm {norm}: aborting (lower the LR, check the inputs)")
        if losses is not None:
            losses.append(round(loss, 6))
        if norms is not None:
            norms.append(round(norm, 6))


def rng_state(device: torch.device, gen: torch.Generator) -> dict[str, torch.Tensor]:
    state = {"torch_cpu": torch.get_rng_state(), "spec_augment": gen.get_state()}
    if device.type == "cuda":
        state["torch_cuda"] = torch.cuda.get_rng_state(device)
    return state


def all_rank_rng(device: torch.device, gen: torch.Generator, ddp: bool,
                 world: int) -> dict[str, torch.Tensor]:
    """Every rank's RNG state as {"rank<r>.<name>": uint8 tensor} (a collective under DDP:
    every rank calls it; rank 0 writes the result into the checkpoint)."""
    mine = rng_state(device, gen)
    states = [mine]
    if ddp:
        import torch.distributed as dist

        states = [None] * world
        dist.all_gather_object(states, {k: v.cpu() for k, v in mine.items()})
    return {f"rank{r}.{k}": v for r, st in enumerate(states) for k, v in st.items()}


def rank_rng(rng: dict[str, torch.Tensor], rank: int) -> dict[str, torch.Tensor]:
    """This rank's part of an `all_rank_rng` dict."""
    prefix = f"rank{rank}."
    return {k[len(prefix):]: v for k, v in rng.items() if k.startswith(prefix)}


def set_rng_state(rng: dict, device: torch.device, gen: torch.Generator) -> None:
    torch.set_rng_state(rng["torch_cpu"])
    gen.set_state(rng["spec_augment"])
    if device.type == "cuda" and "torch_cuda" in rng:
        torch.cuda.set_rng_state(rng["torch_cuda"], device)
