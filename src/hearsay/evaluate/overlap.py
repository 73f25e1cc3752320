"""Box scoring that keeps the GPU fed: the next batch's host-to-device copy runs while this
batch computes, and the logits come back to the host once per SYNC_EVERY batches.

    for logits in overlapped_logits(det, batches, "cuda", "bf16"):   # one (B,) array per batch
        ...

Per batch (values (B, T) float32, mask (B, T) int64, host tensors from the feeding workers):
  1. the model is launched on batch k (asynchronous on CUDA: the host goes on at once);
  2. batch k+1 is fetched, pinned and copied `non_blocking` on a side stream: the copy overlaps
     batch k's compute; the compute stream waits for it (an event) before batch k+1 runs;
  3. logits stay on the device; every SYNC_EVERY batches they are concatenated and read back
     with one `.cpu()` (one host wait per SYNC_EVERY batches, not one per batch).
On the CPU there is nothing to overlap: the same order, plain copies, the same logits (the test
compares them with hearsay.evaluate.score.run_padded's, bit for bit). `hearsay score-run --overlap`
and scripts/bench_score.py (its "fed scoring, overlapped" line) use it; it changes the speed,
never a score.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import torch

SYNC_EVERY = 8  # batches per host read-back of the logits (~128 clips at max_batch 16)


def _stage(values: torch.Tensor, mask: torch.Tensor, device: torch.device, stream):
    """(values, mask, copied event) on the device; on CUDA from pinned memory, non_blocking
    on `stream` (the event fires when the copy has landed); elsewhere plain copies, no event."""
    if device.type != "cuda":
        return values.to(device), mask.to(device), None
    with torch.cuda.stream(stream):
        v = values.pin_memory().to(device, non_blocking=True)
        m = mask.pin_memory().to(device, non_blocking=True)
        copied = torch.cuda.Event()
        copied.record(stream)
    return v, m, copied


def _read_back(pending: list[torch.Tensor]) -> list[np.ndarray]:
    """The device logits of several batches -> one (B,) float64 array each, one `.cpu()`."""
    flat = torch.cat(pending).cpu().numpy().astype(np.float64)
    cuts = np.cumsum([len(p) for p in pending])[:-1]
    return np.split(flat, cuts)


def overlapped_logits(det, batches: Iterable, device: str = "cpu",
                      precision: str = "fp32") -> Iterator[np.ndarray]:
    """Logits (B,) float64 per (values, mask) batch, in order (bf16: under autocast, as
    score.run_padded)."""
    dev = torch.device(device)
    stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16")
    batches = iter(batches)
    first = next(batches, None)
    staged = None if first is None else _stage(*first, dev, stream)
    pending: list[torch.Tensor] = []
    with torch.inference_mode():
        while staged is not None:
            values, mask, copied = staged
            if copied is not None:  # the compute stream waits for the side stream's copy
                compute = torch.cuda.current_stream(dev)
                compute.wait_event(copied)
                values.record_stream(compute)  # the allocator keeps them until compute is done
                mask.record_stream(compute)
            with amp:
                pending.append(det(values, mask).float().reshape(-1))  # 1. launched
            nxt = next(batches, None)  # 2. the next batch's copy overlaps this compute
            staged = None if nxt is None else _stage(*nxt, dev, stream)
            if len(pending) == SYNC_EVERY:  # 3. one host read per SYNC_EVERY batches
                yield from _read_back(pending)
                pending = []
    if pending:
        yield from _read_back(pending)
