"""Inputs prepared ahead of the model by worker processes (hearsay score-run; `hearsay score` and
assemble call it with workers 0, in-process).

    for values, mask in feed.prepared(score.batch_inputs, jobs, workers=8):  # fn(*job), in order
        logits = run_padded(det, values, mask, ...)

On a GPU the model outruns one decoding core (box scoring measured 73% of its wall in decoding
and the front end), so `workers` processes of a torch DataLoader compute fn(*job) for the next
jobs while the model runs this one. workers 0 computes them here, one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence


def prepared(fn: Callable, jobs: Sequence[tuple], workers: int) -> Iterator:
    """fn(*job) for each job, in order; workers > 0: the workers start now (not at the first
    next()) and stay 2 jobs ahead each (memory bounded)."""
    if workers <= 0:
        return (fn(*job) for job in jobs)
    from torch.utils.data import DataLoader

    return iter(DataLoader(_Jobs(fn, jobs), batch_size=None, num_workers=workers,
                           prefetch_factor=2, collate_fn=_as_is))


class _Jobs:
    """A map-style dataset: item i is fn(*jobs[i])."""

    def __init__(self, fn: Callable, jobs: Sequence[tuple]):
        self.fn, self.jobs = fn, jobs

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, i: int):
        return self.fn(*self.jobs[i])


def _as_is(item):
    return item  # as fn returned it: torch tensors travel through shared memory, numpy by pipe
