"""hearsay.train.step: the LR schedule, the non-finite flag under DDP, and gradient clipping
(grad_clip 0 switches it off) in the loop's optimiser step."""

from __future__ import annotations

import time
import types

import pytest
import torch

from hearsay.train import config as tcfg
from hearsay.train import loop
from hearsay.train import step as tstep
from hearsay.train.errors import ConfigError


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


def _one_optimiser_step(grad_clip: float):
    """One real loop._optimiser_step on a linear model whose grad norm is far over 1:
    (gradients before the step, applied update / LR, the norm the step queued)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 1)
    params = list(lin.parameters())
    opt = torch.optim.SGD([{"params": params, "lr": 0.1, "base_lr": 0.1}])
    before = [p.detach().clone() for p in params]
    loss = (10 * lin(torch.randn(8, 4))).sum()
    loss.backward()
    grads = [p.grad.detach().clone() for p in params]
    ns = types.SimpleNamespace
    r = ns(plan=ns(tc=tcfg.TrainConfig(grad_clip=grad_clip), ddp=False, t_start=time.time()),
           nets=ns(trainable=params, opt=opt), data=ns(total_steps=10),
           progress=ns(pending=[], hist={"loss": [], "lr": []}, step=0, step_t=[]))
    loop._optimiser_step(r, 0, loss.detach(), 1)
    lr = r.progress.hist["lr"][0]  # the real LR of the step
    update = [(b - p.detach()) / lr for b, p in zip(before, params, strict=True)]
    return grads, update, r.progress.pending[0][0][2].item()


def test_grad_clip_zero_switches_clipping_off_and_still_measures_the_norm():
    grads, update, norm = _one_optimiser_step(0.0)
    full = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])).item()
    assert full > 10 and norm == pytest.approx(full, rel=1e-5)
    for g, u in zip(grads, update, strict=True):  # the whole gradient was applied, not 0
        torch.testing.assert_close(u, g, rtol=1e-4, atol=1e-5)
    _, clipped, norm1 = _one_optimiser_step(1.0)  # a positive value still clips
    assert norm1 == pytest.approx(full, rel=1e-5)
    got = torch.linalg.vector_norm(torch.cat([u.flatten() for u in clipped])).item()
    assert got == pytest.approx(1.0, rel=1e-3)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_a_negative_grad_clip_is_a_config_error_naming_the_fix(bad):
    with pytest.raises(ConfigError, match="grad_clip.*must be >= 0.*0 switches clipping off"):
        tcfg.resolve_config("fold", 0, overrides={"train": {"grad_clip": bad}})
    assert tcfg.resolve_config("fold", 0, overrides={"train": {"grad_clip": 0}})[
        "train"]["grad_clip"] == 0


def test_compile_is_blocked_without_a_c_compiler_and_says_how_to_fix_it(tmp_path):
    """Triton builds its CUDA launcher with a C compiler: none on PATH and no CC -> a reason."""
    env = {"PATH": str(tmp_path)}  # an empty folder: no cc, gcc or clang
    assert "no C compiler" in tstep.compile_blocker(env, ldconfig=str(tmp_path / "none"))
    cc = tmp_path / "cc"
    cc.write_text("#!/bin/sh\n")
    cc.chmod(0o755)
    assert tstep.compile_blocker(env, ldconfig="/bin/sh") is None  # cc found, ldconfig there


def test_compile_finds_libcuda_through_ld_library_path_where_ldconfig_is_missing(tmp_path):
    """Nix's image has no /sbin/ldconfig: triton is pointed at the folder holding libcuda.so.1."""
    driver = tmp_path / "driver"
    driver.mkdir()
    env = {"CC": "gcc", "LD_LIBRARY_PATH": f"{tmp_path / 'empty'}:{driver}"}
    no_ldconfig = str(tmp_path / "ldconfig")
    assert "no libcuda.so.1" in tstep.compile_blocker(dict(env), ldconfig=no_ldconfig)
    (driver / "libcuda.so.1").write_bytes(b"")
    assert tstep.compile_blocker(env, ldconfig=no_ldconfig) is None
    assert env["TRITON_LIBCUDA_PATH"] == str(driver)
