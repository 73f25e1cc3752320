"""hearsay.train.step: the LR schedule and the non-finite flag under DDP."""

from __future__ import annotations

import pytest
import torch

from hearsay.train import step as tstep


def test_lr_multiplier_warms_up_then_reaches_the_floor_on_the_last_step():
    total = 25
    m = [tstep.lr_multiplier(s, total, 0.08, 0.01) for s in range(total)]
    assert m[0] == 0.5 and m[1] == 1.0  # ceil(0.08 * 25) = 2 warm-up steps
    assert m[-1] == pytest.approx(0.01) and min(m) == pytest.approx(0.01)
    assert all(a >= b for a, b in zip(m[1:], m[2:], strict=False))


def test_nonfinite_flag_is_all_reduced_under_ddp(tmp_path):
    """Unit-level DDP check (one gloo process; multi-GPU cannot be tested on this machine)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        assert tstep.nonfinite(torch.tensor(float("nan")), torch.tensor(1.0), ddp=True)
        assert tstep.nonfinite(torch.tensor(0.3), torch.tensor(float("inf")), ddp=True)
        assert not tstep.nonfinite(torch.tensor(0.3), torch.tensor(1.0), ddp=True)
    finally:
        dist.destroy_process_group()
