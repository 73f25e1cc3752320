"""hearsay.train (run, main) and hearsay.train.loop: accumulation, aborts with their own exit
codes, DDP, the CPU smoke run, no blocking device-host conversion."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from train_world import make_easy_bundle, smoke

from hearsay import store as stores
from hearsay import train as tr
from hearsay.detector import layer_weights
from hearsay.detector.model import load_detector
from hearsay.train import config as tcfg
from hearsay.train import data as tdata
from hearsay.train import errors as terrors
from hearsay.train import loop, rates


def test_a_config_file_with_an_unknown_key_is_a_usage_error(bundle_dir, tmp_path, capsys):
    bad = tmp_path / "train.json"
    bad.write_text(json.dumps({"train": {"lr_hed": 1.0}}))
    code = tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "r"),
                    "--cpu-smoke", "--config", str(bad)])
    assert code == 2
    assert "lr_hed" in capsys.readouterr().err
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_accumulation_flushes_the_trailing_group_and_lr_ends_at_floor(bundle_dir, tmp_path):
    # 5 micro-batches per epoch, accumulation 2 -> groups 2+2+1: 3 optimiser steps per epoch
    cfg = smoke(batches_per_epoch=5, grad_accum=2, epochs=2, lr_floor=0.05, val_every=2)
    meta = tr.run(cfg, bundle_dir, tmp_path / "run")
    # readouts every 2 optimiser steps and at each epoch end (steps 3 and 6), once per step
    assert [v["step"] for v in meta["history"]["val"]] == [2, 3, 4, 6]
    assert meta["steps"] == meta["total_steps"] == 6 and meta["complete"]
    # the real LRs (--cpu-smoke peaks: head 1e-2, backbone top 3e-3), not the schedule's factor
    assert meta["history"]["lr"][-1] == pytest.approx(1e-2 * 0.05)
    assert meta["history"]["lr"][0] == pytest.approx(1e-2)  # ceil(0.08 * 6) = 1 warm-up step
    assert meta["history"]["lr_backbone"][0] == pytest.approx(3e-3)
    # run dir per docs/INTERFACES.md
    run = tmp_path / "run"
    on_disk = json.loads((run / "run_meta.json").read_text())
    for key in ("job", "fold", "config_hash", "bundle_tree_sha", "base_weights_sha", "git_sha",
                "steps", "epochs", "device", "versions", "complete", "stream_shortcuts",
                "rates", "rate_balance"):
        assert key in on_disk, key
    assert on_disk["config_hash"] == tcfg.config_hash(cfg)
    assert json.loads((run / "config.json").read_text())["config_hash"] == tcfg.config_hash(cfg)
    # each checkpoint folder with the marker that publishes it (written after the folder is whole)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "epoch_0001", "epoch_0001.complete", "epoch_0002", "epoch_0002.complete"]
    assert on_disk["rate_balance"]["compared"]  # both classes of each source were compared
    det, mcfg = load_detector(run)
    assert mcfg.hidden_size == 32 and not det.training
    # the learned layer weights (epoch end) and the trainable backbone size are in run_meta
    assert on_disk["layer_weights"]["weights"] == pytest.approx(
        torch.softmax(det.layer_logits.float(), 0).tolist())
    assert on_disk["layer_weights"]["verdict"].startswith("not applicable")  # 3 states, top 3
    assert on_disk["trainable_backbone_params"] == layer_weights.trainable_backbone_params(det) > 0
    # train.compile is on by default, and compiles on CUDA only: the CPU run says it ran eager
    assert cfg["train"]["compile"] and on_disk["compile"] == "off (compiles on CUDA only)"
    ck, _ = load_detector(run / "checkpoints" / "epoch_0002")  # config found above it
    for (k, a), b in zip(det.state_dict().items(), ck.state_dict().values(), strict=True):
        assert torch.equal(a, b), k  # the last checkpoint is the final model


def test_cuda_is_required_without_cpu_smoke(bundle_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "r")])
    assert code == 3
    assert "--cpu-smoke" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_planted_nan_gradient_aborts_with_its_own_code(bundle_dir, tmp_path):
    def plant(det):
        det.head.weight.register_hook(lambda g: g * float("nan"))

    # one step per epoch: its flag is read at the epoch end, before the checkpoint
    with pytest.raises(terrors.NonFinite, match="grad norm nan") as err:
        tr.run(smoke(batches_per_epoch=1), bundle_dir, tmp_path / "run", model_hook=plant)
    assert err.value.code == 4
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["aborted"]["error"] == "NonFinite" and not meta["complete"]
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_auc_tripwire_aborts(bundle_dir, tmp_path):
    # AUC <= 1.0 always holds: the readout must abort the run with exit code 5
    with pytest.raises(terrors.Tripwire, match="validation AUC") as err:
        tr.run(smoke(tripwire_auc=1.0), bundle_dir, tmp_path / "run")
    assert err.value.code == 5


def test_store_push_failure_aborts_the_run(bundle_dir, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the store should be")
    with pytest.raises(stores.StoreError, match="after 4 attempts"):
        tr.run(smoke(), bundle_dir, tmp_path / "run", store_uri=str(blocker / "s"), backoff_s=0)
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["aborted"]["error"] == "StoreError" and meta["epochs"] == 1


def test_cpu_smoke_loss_falls(easy_bundle_dir, tmp_path):
    cfg = smoke(job="full", fold=None, epochs=3, batches_per_epoch=8)
    meta = tr.run(cfg, easy_bundle_dir, tmp_path / "run")
    loss = meta["history"]["loss"]
    assert len(loss) == 24 and meta["complete"]
    assert np.mean(loss[-6:]) < 0.9 * np.mean(loss[:6]), loss


def test_ddp_run_completes_and_a_planted_nan_aborts_it(bundle_dir, tmp_path, torchrun_env):
    """The DDP code path (DistributedDataParallel, no_sync over accumulation, the all-reduced
    non-finite flag) in one gloo process; several GPUs cannot be tested on this machine."""
    meta = tr.run(smoke(grad_accum=2, batches_per_epoch=3), bundle_dir, tmp_path / "ok")
    assert meta["world_size"] == 1 and meta["complete"] and meta["steps"] == 4

    def plant(det):
        det.head.weight.register_hook(lambda g: g * float("nan"))

    with pytest.raises(terrors.NonFinite):
        tr.run(smoke(), bundle_dir, tmp_path / "nan", model_hook=plant)


def test_unpinned_weights_abort_with_their_own_code(bundle_dir, tmp_path, monkeypatch, capsys):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "pytorch_model.bin").write_bytes(b"some other checkpoint")
    monkeypatch.setenv("HEARSAY_WEIGHTS_DIR", str(tmp_path / "w"))
    (tmp_path / "cfg.json").write_text(json.dumps({"model": {"init": "xls-r-300m"}}))
    code = tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "r"),
                    "--cpu-smoke", "--config", str(tmp_path / "cfg.json")])
    assert code == 8
    assert "expected the pin" in capsys.readouterr().err


def test_augmentation_rates_that_diverge_between_classes_abort(tmp_path):
    """Codec copies only for spoof clips: the realised codec rate differs by class -> exit 9."""
    root = make_easy_bundle(tmp_path / "b", copies_for=("spoof",))
    cfg = tcfg.resolve_config("full", None, cpu_smoke=True, overrides={
        "train": {"epochs": 1, "batches_per_epoch": 16},
        "augment": {"p_aug": 1.0, "w_codec": 20.0}})
    with pytest.raises(rates.AugmentRateError, match="codec"):
        tr.run(cfg, root, tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["aborted"]["error"] == "AugmentRateError"
    assert meta["rates"]["all"]["bonafide"]["types"]["codec"] == 0.0


def test_a_training_step_makes_no_blocking_device_host_conversion(bundle_dir, tmp_path):
    """Counted as a GPU profiler would (tests/device_audit.py patches the conversions): in the
    steps of epoch 2 (one-time uploads such as FIR taps are done by then), with every clip
    augmented on the device, at most 2 blocking device<->host conversions in 4 steps (0 now)."""
    import functools

    from device_audit import DeviceAudit

    audit, epoch_now = DeviceAudit(), [0]

    def counted(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            audit.counting = epoch_now[0] >= 2
            try:
                return fn(*a, **k)
            finally:
                audit.counting = False
        return wrapper

    def epoch(fn):
        def wrapper(r, e):
            epoch_now[0] = e
            return fn(r, e)
        return wrapper

    mp = pytest.MonkeyPatch()
    mp.setattr(loop, "_micro_batch", counted(loop._micro_batch))
    mp.setattr(loop, "_optimiser_step", counted(loop._optimiser_step))
    mp.setattr(loop, "_train_epoch", epoch(loop._train_epoch))
    cfg = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {"epochs": 2, "batches_per_epoch": 4}, "augment": {"p_aug": 1.0}})
    try:
        with audit:
            meta = tr.run(cfg, bundle_dir, tmp_path / "run")
    finally:
        mp.undo()
    assert meta["steps"] == 8
    blocking = audit.counts["d2h"] + audit.counts["h2d"]
    assert blocking <= 2, f"{blocking} blocking conversions in 4 steps: {dict(audit.where)}"
    assert audit.counts["sync"] == 0, dict(audit.where)  # the loop waits on no CUDA event


def test_a_share_table_run_logs_its_mix_and_a_drift_stops_it_with_its_own_code(
        tmp_path, monkeypatch, capsys):
    """configs/train.shares.example.json on a three-source bundle: batches of 64 realise the
    table (run_meta "source_mix"); a sampler that draws studio for phone drifts -> exit 11; a
    batch of 8 cannot realise it -> exit 11 before anything trains, naming the batch that fits."""
    root = make_easy_bundle(tmp_path / "b", sources=("studio", "phone", "field"))
    example = Path(__file__).resolve().parents[2] / "configs" / "train.shares.example.json"
    shares = json.loads(example.read_text())
    cfg = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {**shares["train"], "batch_size": 64, "epochs": 1, "batches_per_epoch": 2,
                  "max_crop_s": 0.5}})
    meta = tr.run(cfg, root, tmp_path / "run")
    mix = meta["source_mix"]
    assert mix["status"] == "within" and mix["clips"] == {"bonafide": 64, "spoof": 64}
    assert mix["realised"]["spoof"]["studio"] == pytest.approx(20 / 32)  # 0.62 of 32 slots
    assert mix["max_drift"] <= shares["train"]["share_tol"]

    real_plan = tdata.Sampler.epoch_plan

    def studio_for_phone(self, epoch, n_batches):
        plan = real_plan(self, epoch, n_batches)
        plan[np.isin(plan, self.pools[("spoof", "phone")])] = self.pools[("spoof", "studio")][0]
        return plan

    monkeypatch.setattr(tdata.Sampler, "epoch_plan", studio_for_phone)
    with pytest.raises(terrors.ShareDrift, match="spoof/") as err:
        tr.run(cfg, root, tmp_path / "drift")
    assert err.value.code == 11
    aborted = json.loads((tmp_path / "drift" / "run_meta.json").read_text())
    assert aborted["aborted"]["error"] == "ShareDrift"
    assert aborted["source_mix"]["realised"]["spoof"].get("phone", 0) == 0
    monkeypatch.setattr(tdata.Sampler, "epoch_plan", real_plan)

    code = tr.main(["--bundle", str(root), "--fold", "0", "--out", str(tmp_path / "small"),
                    "--cpu-smoke", "--config", str(example)])  # the smoke's batch of 8
    assert code == terrors.EXIT_SHARES == 11
    assert "batch_size >= " in capsys.readouterr().err
    assert not (tmp_path / "small" / "checkpoints").exists()
