"""hearsay.train.checkpoint: a checkpoint round-trips the model, the optimiser and the RNG
states; a damaged one is refused."""

from __future__ import annotations

import pytest
import torch

from hearsay.store import StoreError
from hearsay.train import checkpoint as ckpt


def _optimizer():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW([{"params": [lin.weight], "lr": 1e-3},
                             {"params": [lin.bias], "lr": 5e-4, "weight_decay": 0.0}])
    lin(torch.randn(4, 3)).sum().backward()
    opt.step()
    return lin, opt


def test_checkpoint_round_trip_restores_optimizer_and_rng(tmp_path):
    lin, opt = _optimizer()
    rng = {"cpu": torch.get_rng_state()}
    d = ckpt.write_checkpoint(tmp_path / "epoch_0001", lin.state_dict(), opt.state_dict(), rng,
                              {"epoch": 1, "step": 1})
    assert sorted(p.name for p in d.iterdir()) == ["model.safetensors", "optimizer.safetensors",
                                                   "state.json"]
    ck = ckpt.read_checkpoint(d)
    assert ck.state["epoch"] == 1 and torch.equal(ck.rng["cpu"], rng["cpu"])
    lin2 = torch.nn.Linear(3, 2)
    lin2.load_state_dict(ck.model)
    opt2 = torch.optim.AdamW([{"params": [lin2.weight]}, {"params": [lin2.bias]}])
    opt2.load_state_dict(ck.optimizer)
    for a, b in zip(opt.state.values(), opt2.state.values(), strict=True):
        for k in a:
            assert torch.equal(a[k], b[k])
    assert opt2.param_groups[1]["lr"] == 5e-4 and opt2.param_groups[1]["weight_decay"] == 0.0


def test_damaged_checkpoint_is_refused(tmp_path):
    lin, opt = _optimizer()
    d = ckpt.write_checkpoint(tmp_path / "epoch_0001", lin.state_dict(), opt.state_dict(), {}, {})
    data = bytearray((d / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (d / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged"):
        ckpt.read_checkpoint(d)
