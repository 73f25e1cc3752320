"""hearsay.train and its parts (train_config, train_data, train_step): config, sampler quotas,
fold protocol, LR schedule, aborts, resume, CPU smoke."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
import torch

from hearsay import augment
from hearsay import store as stores
from hearsay import train as tr
from hearsay.model import load_detector
from hearsay.train import checkpoint as ckpt
from hearsay.train import config as tcfg
from hearsay.train import data as tdata
from hearsay.train import step as tstep

SR = 16_000


# --------------------------------------------------------------------------- a tiny bundle


def _clip(label: str, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """bona fide: a harmonic tone with vibrato; spoof: band noise. Easy for a tiny model."""
    t = np.arange(int(seconds * SR)) / SR
    if label == "bonafide":
        f0 = rng.uniform(110, 220) * (1 + 0.01 * np.sin(2 * np.pi * 5 * t))
        phase = 2 * np.pi * np.cumsum(f0) / SR
        x = sum(np.sin(k * phase) / k for k in range(1, 6))
    else:
        x = rng.standard_normal(len(t))
    return (0.3 * x / np.max(np.abs(x))).astype(np.float32)


def make_easy_bundle(root, seed: int = 0, copies_for=("bonafide", "spoof")):
    """A bundle in the docs/INTERFACES.md layout (read by the real load_bundle) whose classes a
    tiny random model separates within a few steps: only the loss-falls smoke uses it. Every
    other test trains on conftest's `demo_bundle` (the real bundle stage on the demo corpus).
    5 inner folds x 2 sources x 2 clips per class, holdout, test, extra rows; mp3 "copies"
    are filtered copies (the layout, not a real codec)."""
    from hearsay.bundle import tree_sha

    rng = np.random.default_rng(seed)
    (root / "audio").mkdir(parents=True)
    (root / "codecs" / "mp3").mkdir(parents=True)
    rows = []

    def add(fold, label, source, scope="core", generator=None):
        rid = f"c{len(rows):03d}"
        dur = float(rng.uniform(1.0, 2.5))
        x = _clip(label, dur, rng)
        sf.write(root / "audio" / f"{rid}.flac", x, SR, subtype="PCM_16")
        has_copy = len(rows) % 2 == 0 and label in copies_for
        if has_copy:
            y = np.convolve(x, np.ones(4) / 4, mode="same").astype(np.float32)
            sf.write(root / "codecs" / "mp3" / f"{rid}.flac", y, SR, subtype="PCM_16")
        gen = generator or ("bonafide" if label == "bonafide" else "voc-a")
        rows.append({"id": rid, "path": f"orig/{rid}.wav", "label": label, "generator": gen,
                     "source": source, "group": f"g{fold}{source}", "fold": fold,
                     "train_scope": scope, "duration": round(dur, 4),
                     "codec_ids": "mp3" if has_copy else "", "flac": f"audio/{rid}.flac"})

    for fold in ["0", "1", "2", "3", "4", "holdout", "test"]:
        for source in ("studio", "phone"):
            for label in ("bonafide", "spoof"):
                for _ in range(2):
                    add(fold, label, source)
    add("extra", "spoof", "studio", scope="extra", generator="smear-x")
    add("extra", "spoof", "phone", scope="extra", generator="voc-x")
    add("extra", "bonafide", "studio", scope="extra")
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    meta = {"status": "ok", "tree_sha": tree_sha(root), "codecs": ["mp3"], "counts": {},
            "folds": {"config": {"family_exclusion": {"0": ["smear"]}}}}
    (root / "bundle_meta.json").write_text(json.dumps(meta))
    return root


@pytest.fixture(scope="module")
def easy_bundle_dir(tmp_path_factory):
    return make_easy_bundle(tmp_path_factory.mktemp("bundle") / "bundle")


@pytest.fixture
def bundle(demo_bundle):
    return demo_bundle


@pytest.fixture
def bundle_dir(demo_bundle):
    return demo_bundle.root


def smoke(job="fold", fold=0, **train):
    return tcfg.resolve_config(job, fold, cpu_smoke=True, overrides={"train": train})


def _sd(out):
    from safetensors.torch import load_file

    return load_file(str(out / "final" / "model.safetensors"))


# --------------------------------------------------------------------------- config


def test_unknown_config_keys_are_errors():
    with pytest.raises(tcfg.ConfigError, match="lr_hed"):
        tcfg.resolve_config("fold", 0, overrides={"train": {"lr_hed": 1.0}})
    with pytest.raises(tcfg.ConfigError, match="unknown config sections"):
        tcfg.resolve_config("fold", 0, overrides={"trian": {}})


def test_a_config_file_with_an_unknown_key_is_a_usage_error(bundle_dir, tmp_path, capsys):
    bad = tmp_path / "train.json"
    bad.write_text(json.dumps({"train": {"lr_hed": 1.0}}))
    code = tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "r"),
                    "--cpu-smoke", "--config", str(bad)])
    assert code == 2
    assert "lr_hed" in capsys.readouterr().err
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_config_hash_is_canonical_and_covers_every_section():
    a = tcfg.resolve_config("fold", 1)
    assert tcfg.config_hash(a) == tcfg.config_hash(json.loads(json.dumps(a)))
    assert tcfg.config_hash(a) != tcfg.config_hash(tcfg.resolve_config("fold", 2))
    b = tcfg.resolve_config("fold", 1, overrides={"augment": {"p_aug": 0.5}})
    assert tcfg.config_hash(a) != tcfg.config_hash(b)


# --------------------------------------------------------------------------- data protocol


def test_sampler_quotas_balance_labels_and_keep_the_source_mix():
    df = pd.DataFrame({"label": ["bonafide"] * 40 + ["spoof"] * 40,
                       "source": ["a"] * 30 + ["b"] * 10 + ["a"] * 20 + ["b"] * 20})
    s = tdata.Sampler(df, batch_size=8, mix="proportional", seed=0)
    assert s.quotas == {("bonafide", "a"): 3, ("bonafide", "b"): 1,
                        ("spoof", "a"): 2, ("spoof", "b"): 2}
    plan = s.epoch_plan(1, n_batches=10)
    for batch in plan:
        got = df.iloc[batch].value_counts().to_dict()
        assert got == s.quotas
    # without replacement inside a pass over a pool: the 10 small "bonafide/b" draws are distinct
    small = plan[:, 3]
    assert len(set(small)) == 10
    assert not np.array_equal(plan, s.epoch_plan(2, 10))  # fresh order each epoch
    np.testing.assert_array_equal(plan, s.epoch_plan(1, 10))  # a function of (seed, epoch)
    # half-batch 5 over 30:10 bona fide -> 3.75:1.25 -> largest remainder gives 4:1
    assert tdata.quotas(df, 10, "proportional")[("bonafide", "a")] == 4
    assert sum(tdata.quotas(df, 10, "proportional").values()) == 10
    assert s.without_quota == []
    many = pd.DataFrame({"label": ["bonafide"] * 6 + ["spoof"] * 6,
                         "source": [f"s{i}" for i in range(6)] * 2})
    assert len(tdata.Sampler(many, batch_size=4, mix="proportional", seed=0).without_quota) == 8
    eq = tdata.Sampler(df, batch_size=8, mix="equal", seed=0)
    assert eq.quotas[("bonafide", "a")] == eq.quotas[("bonafide", "b")] == 2


def _family(gen: str) -> str:
    return gen.split("-")[0]


def test_fold_protocol(bundle):
    df = bundle.manifest
    for k in range(5):
        train, val, excl = tdata.plan_job(bundle, "fold", k)
        assert not train["fold"].isin([str(k), "holdout", "test"]).any()
        assert set(val["fold"]) == {str(k)} and set(val["train_scope"]) == {"core"}
        assert set(val["label"]) == {"bonafide", "spoof"}
        assert set(train["id"]).isdisjoint(val["id"])
        # derived from the fold file: every family fold k validates on (spoof rows) is kept
        # out of its extra rows, on top of the hand list (smear for fold 0)
        val_fams = set(val.loc[val["label"] == "spoof", "generator"].map(_family))
        assert set(excl["listed"]) == ({"smear"} if k == 0 else set())
        assert set(excl["listed"]) | set(excl["derived"]) == val_fams | set(excl["listed"])
        extra = train.loc[train["train_scope"] == "extra"]
        assert not extra["generator"].map(_family).isin(val_fams).any()
        # and nothing else is left out: every other inner / extra row trains
        rest = df.loc[~df["id"].isin(train["id"])]
        excluded = (rest["train_scope"] == "extra") & rest["generator"].map(_family).isin(
            val_fams | set(excl["listed"]))
        assert rest.loc[~excluded, "fold"].isin([str(k), "holdout", "test"]).all()
    train, val, _ = tdata.plan_job(bundle, "pilot", None)
    assert set(train["fold"]) <= {"0", "1", "2", "3", "extra"} and set(val["fold"]) == {"4"}
    train, val, excl = tdata.plan_job(bundle, "full", None)
    assert set(train["fold"]) == {"0", "1", "2", "3", "4", "extra"} and val is None
    assert excl["derived"] == []  # no validation split: the hand list only


def test_a_forgotten_exclusion_is_derived_and_a_leak_is_a_train_error(bundle, monkeypatch):
    """Family exclusion follows the fold file even with an empty hand list, and the fold-leak
    guard is a TrainError with its own exit code (not an assert, which python -O drops)."""
    import dataclasses

    from hearsay import folds

    forgot = dataclasses.replace(bundle, meta={**bundle.meta, "folds": {"config": {}}})
    train, val, excl = tdata.plan_job(forgot, "fold", 0)
    val_fams = set(val.loc[val["label"] == "spoof", "generator"].map(_family))
    assert set(excl["derived"]) == val_fams and excl["extra_rows_dropped"] > 0
    extra = train.loc[train["train_scope"] == "extra", "generator"].map(_family)
    assert not extra.isin(val_fams).any()
    real = folds.train_ids
    monkeypatch.setattr(folds, "train_ids", lambda df, cfg, model: [
        *real(df, cfg, model), *df.loc[df["fold"] == "holdout", "id"][:1]])
    with pytest.raises(tcfg.FoldLeak, match="holdout/test/validation rows") as err:
        tdata.plan_job(bundle, "fold", 0)
    assert err.value.code == tcfg.EXIT["fold_leak"] == 10


# --------------------------------------------------------------------------- schedule


def test_lr_multiplier_warms_up_then_reaches_the_floor_on_the_last_step():
    total = 25
    m = [tstep.lr_multiplier(s, total, 0.08, 0.01) for s in range(total)]
    assert m[0] == 0.5 and m[1] == 1.0  # ceil(0.08 * 25) = 2 warm-up steps
    assert m[-1] == pytest.approx(0.01) and min(m) == pytest.approx(0.01)
    assert all(a >= b for a, b in zip(m[1:], m[2:], strict=False))


def test_accumulation_flushes_the_trailing_group_and_lr_ends_at_floor(bundle_dir, tmp_path):
    # 5 micro-batches per epoch, accumulation 2 -> groups 2+2+1: 3 optimiser steps per epoch
    cfg = smoke(batches_per_epoch=5, grad_accum=2, epochs=2, lr_floor=0.05, val_every=2)
    meta = tr.run(cfg, bundle_dir, tmp_path / "run")
    # readouts every 2 optimiser steps and at each epoch end (steps 3 and 6), once per step
    assert [v["step"] for v in meta["history"]["val"]] == [2, 3, 4, 6]
    assert meta["steps"] == meta["total_steps"] == 6 and meta["complete"]
    assert meta["history"]["lr"][-1] == pytest.approx(0.05)
    assert meta["history"]["lr"][0] == pytest.approx(1.0)  # ceil(0.08 * 6) = 1 warm-up step
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
    ck, _ = load_detector(run / "checkpoints" / "epoch_0002")  # config found above it
    for (k, a), b in zip(det.state_dict().items(), ck.state_dict().values(), strict=True):
        assert torch.equal(a, b), k  # the last checkpoint is the final model


# --------------------------------------------------------------------------- aborts


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
    with pytest.raises(tcfg.NonFinite, match="grad norm nan") as err:
        tr.run(smoke(batches_per_epoch=1), bundle_dir, tmp_path / "run", model_hook=plant)
    assert err.value.code == 4
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["aborted"]["error"] == "NonFinite" and not meta["complete"]
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_auc_tripwire_aborts(bundle_dir, tmp_path):
    # AUC <= 1.0 always holds: the readout must abort the run with exit code 5
    with pytest.raises(tcfg.Tripwire, match="validation AUC") as err:
        tr.run(smoke(tripwire_auc=1.0), bundle_dir, tmp_path / "run")
    assert err.value.code == 5


def test_store_push_failure_aborts_the_run(bundle_dir, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the store should be")
    with pytest.raises(stores.StoreError, match="after 4 attempts"):
        tr.run(smoke(), bundle_dir, tmp_path / "run", store_uri=str(blocker / "s"), backoff_s=0)
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["aborted"]["error"] == "StoreError" and meta["epochs"] == 1


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


# --------------------------------------------------------------------------- resume


@pytest.fixture
def rclone_store(tmp_path, monkeypatch):
    monkeypatch.setenv("RCLONE_CONFIG", str(tmp_path / "rclone.conf"))
    (tmp_path / "remote").mkdir()
    subprocess.run([stores.rclone_exe(), "config", "create", "r2", "alias",
                    f"remote={tmp_path / 'remote'}"], check=True, capture_output=True)
    return "r2:campaign/fold0"


def test_resume_after_epoch_one_equals_an_uninterrupted_run(bundle_dir, tmp_path, rclone_store):
    cfg = smoke(epochs=2, batches_per_epoch=3, grad_accum=2)
    whole = tr.run(cfg, bundle_dir, tmp_path / "whole")
    part = tr.run(cfg, bundle_dir, tmp_path / "part", store_uri=rclone_store, stop_after_epoch=1)
    assert part["epochs"] == 1 and not part["complete"]
    # the box died: a new box pulls from the store into an empty run dir
    resumed = tr.run(cfg, bundle_dir, tmp_path / "new_box", store_uri=rclone_store, resume=True)
    assert resumed["resumed_from_epoch"] == 1 and resumed["complete"]
    assert resumed["steps"] == whole["steps"]
    assert resumed["history"]["loss"] == whole["history"]["loss"]
    a, b = _sd(tmp_path / "whole"), _sd(tmp_path / "new_box")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ck_a = ckpt.read_checkpoint(tmp_path / "whole" / "checkpoints" / "epoch_0002")
    ck_b = ckpt.read_checkpoint(tmp_path / "new_box" / "checkpoints" / "epoch_0002")
    for idx, st in ck_a.optimizer["state"].items():
        for key, v in st.items():
            assert torch.equal(v, ck_b.optimizer["state"][idx][key])
    assert (tmp_path / "remote" / "campaign/fold0/final/model.safetensors").is_file()
    assert (tmp_path / "remote" / "campaign/fold0/run_meta.json").is_file()


def test_resume_refuses_another_bundle_or_config(bundle_dir, tmp_path, capsys):
    cfg = smoke(epochs=2, batches_per_epoch=2)
    tr.run(cfg, bundle_dir, tmp_path / "run", stop_after_epoch=1)
    other = tmp_path / "bundle2"
    shutil.copytree(bundle_dir, other)
    meta = json.loads((other / "bundle_meta.json").read_text())
    meta["tree_sha"] = "0" * 64
    (other / "bundle_meta.json").write_text(json.dumps(meta))
    args = ["--fold", "0", "--out", str(tmp_path / "run"), "--cpu-smoke", "--resume",
            "--no-verify-bundle"]
    (tmp_path / "cfg.json").write_text(json.dumps({"train": {"epochs": 2,
                                                              "batches_per_epoch": 2}}))
    assert tr.main(["--bundle", str(other), *args, "--config", str(tmp_path / "cfg.json")]) == 7
    assert "bundle_tree_sha" in capsys.readouterr().err
    (tmp_path / "cfg2.json").write_text(json.dumps({"train": {"epochs": 3,
                                                               "batches_per_epoch": 2}}))
    assert tr.main(["--bundle", str(bundle_dir), *args, "--config",
                    str(tmp_path / "cfg2.json")]) == 7
    assert "config_hash" in capsys.readouterr().err
    # and a fresh start over existing checkpoints is refused too
    assert tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "run"),
                    "--cpu-smoke", "--config", str(tmp_path / "cfg.json")]) == 7


# --------------------------------------------------------------------------- smoke


def test_cpu_smoke_loss_falls(easy_bundle_dir, tmp_path):
    cfg = smoke(job="full", fold=None, epochs=3, batches_per_epoch=8)
    meta = tr.run(cfg, easy_bundle_dir, tmp_path / "run")
    loss = meta["history"]["loss"]
    assert len(loss) == 24 and meta["complete"]
    assert np.mean(loss[-6:]) < 0.9 * np.mean(loss[:6]), loss


def test_batched_device_augmentation_matches_the_numpy_path(bundle):
    """gpu_augment (draw in the worker, render + finish batched in torch) must give the model
    the same input as augment.training_example clip by clip (here on the CPU)."""
    from hearsay import augment, crops
    from hearsay.augment import gpu as augment_gpu

    train, _, _ = tdata.plan_job(bundle, "fold", 1)
    rows = train[["id", "flac", "label", "source", "codec_ids"]].to_dict("records")
    sampler = tdata.Sampler(train, 8, "proportional", 0)
    test_durs = bundle.manifest.loc[bundle.manifest["fold"] == "test", "duration"].to_numpy()
    ctx = {"seed": 0, "world": 1, "rank": 0, "test_durations": test_durs, "cap_s": 2.0,
           "crop": crops.CropConfig(), "augment": augment.AugmentConfig(p_aug=1.0),
           "max_crop_s": 0.0}
    for b in range(3):
        ref = tdata.EpochBatches(bundle.root, rows, sampler, 3,
                                 {**ctx, "gpu_augment": False})[(1, b)]
        dev = tdata.EpochBatches(bundle.root, rows, sampler, 3,
                                 {**ctx, "gpu_augment": True})[(1, b)]
        assert ref["names"] == dev["names"]
        mask = tdata.sample_mask(dev["lengths"], dev["input_values"].shape[1])
        got = augment_gpu.train_batch(dev["input_values"], mask, dev["names"], dev["params"])
        torch.testing.assert_close(got, ref["input_values"], atol=2e-3, rtol=1e-3)


@pytest.fixture
def torchrun_env(monkeypatch):
    """The environment torchrun gives one process (world size 1, gloo on the CPU)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "1",
                 "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)


def test_ddp_run_completes_and_a_planted_nan_aborts_it(bundle_dir, tmp_path, torchrun_env):
    """The DDP code path (DistributedDataParallel, no_sync over accumulation, the all-reduced
    non-finite flag) in one gloo process; several GPUs cannot be tested on this machine."""
    meta = tr.run(smoke(grad_accum=2, batches_per_epoch=3), bundle_dir, tmp_path / "ok")
    assert meta["world_size"] == 1 and meta["complete"] and meta["steps"] == 4

    def plant(det):
        det.head.weight.register_hook(lambda g: g * float("nan"))

    with pytest.raises(tcfg.NonFinite):
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
    with pytest.raises(augment.AugmentRateError, match="codec"):
        tr.run(cfg, root, tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert meta["aborted"]["error"] == "AugmentRateError"
    assert meta["rates"]["all"]["bonafide"]["types"]["codec"] == 0.0


# --------------------------------------------------------------------------- device hygiene


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
    mp.setattr(tr, "_micro_batch", counted(tr._micro_batch))
    mp.setattr(tr, "_optimiser_step", counted(tr._optimiser_step))
    mp.setattr(tr, "_train_epoch", epoch(tr._train_epoch))
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


def test_two_ranks_train_read_out_checkpoint_and_resume_exactly(bundle_dir, tmp_path):
    """Two real processes (torchrun, gloo): training, a validation readout each epoch (the
    shares of both ranks all-reduced), a checkpoint holding both ranks' RNG, and a resume that
    ends where the uninterrupted run ends, on both ranks. Every collective is checked by
    device_audit: a tensor that a GPU run would hold on the host fails the run."""
    import os
    import sys
    from pathlib import Path

    torchrun = Path(sys.executable).with_name("torchrun")
    worker = Path(__file__).with_name("ddp_worker.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    res = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2", str(worker),
                          str(bundle_dir), str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for rank, got in enumerate(ranks):
        assert got["whole"]["world_size"] == 2 and got["whole"]["steps"] == 4
        assert got["part"]["steps"] == 2 and got["resumed"]["steps"] == 4
        # each rank's own epoch-2 losses (the history before the resume is rank 0's)
        assert got["resumed"]["loss"][2:] == got["whole"]["loss"][2:], rank
        assert [v["step"] for v in got["whole"]["val"]] == [2, 4]
        assert got["resumed"]["val"] == got["whole"]["val"]
    assert ranks[0]["resumed"]["loss"] == ranks[0]["whole"]["loss"]
    assert ranks[0]["whole"]["loss"] != ranks[1]["whole"]["loss"]  # two ranks, two shards
    assert ranks[0]["whole"]["val"] == ranks[1]["whole"]["val"]  # the same AUC on both ranks
    a, b = _sd(tmp_path / "whole"), _sd(tmp_path / "part")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ck = ckpt.read_checkpoint(tmp_path / "part" / "checkpoints" / "epoch_0001")
    assert {k.split(".")[0] for k in ck.rng} == {"rank0", "rank1"}
    assert ck.state["world_size"] == 2
