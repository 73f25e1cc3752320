"""hearsay.train.checkpoint: a checkpoint round-trips the model, the optimiser and the RNG
states; a damaged one is refused; its completion marker reaches the store only after the whole
folder did (real rclone on a local remote)."""

from __future__ import annotations

import pytest
import torch

from hearsay import store as stores
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


def test_the_completion_marker_is_published_only_after_the_folder_arrived_whole(
        tmp_path, rclone_store, monkeypatch, capsys):
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 256)  # 256 KiB of weights: far over the cut-off below
    opt = torch.optim.AdamW(lin.parameters())
    lin(torch.randn(4, 256)).sum().backward()
    opt.step()
    store = stores.open_store(rclone_store, tmp_path / "run", backoff_s=0)

    def write(epoch):
        return ckpt.write_checkpoint(tmp_path / "run" / "checkpoints" / stores.ckpt_name(epoch),
                                     lin.state_dict(), opt.state_dict(), {}, {"epoch": epoch})

    store.publish_checkpoint(write(1), 1)
    # epoch 2's push dies mid-copy: real rclone stops after 4 KiB (exit 8) on every attempt;
    # the 65-byte marker would still fit, so only the order of the two steps keeps it out
    monkeypatch.setenv("RCLONE_MAX_TRANSFER", "4K")
    monkeypatch.setenv("RCLONE_CUTOFF_MODE", "hard")
    with pytest.raises(StoreError, match="failed after 4 attempts"):
        store.publish_checkpoint(write(2), 2)
    monkeypatch.delenv("RCLONE_MAX_TRANSFER")
    remote = tmp_path / "remote" / "campaign" / "fold0" / "checkpoints"
    assert store.latest_checkpoint() == 1  # resume never trusts the half-pushed epoch 2
    assert (remote / "epoch_0002").is_dir() and not (remote / "epoch_0002.complete").exists()
    assert "skipping epoch_0002" in capsys.readouterr().err
    store.pull_dir("checkpoints/epoch_0001", tmp_path / "pulled")
    assert ckpt.read_checkpoint(tmp_path / "pulled").state["epoch"] == 1
