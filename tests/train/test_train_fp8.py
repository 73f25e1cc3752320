"""The fp8 lever (hearsay.train.fp8, train.fp8): exactly the kept layers' Linear layers become
torchao Float8Linear, the logits and the trainer's loss curve stay near the fp32 model's, fp8 off
leaves the model as built, and a GPU without float8 tensor cores is refused before any work.
All on the CPU (torch computes float8 matmuls there without speed); the GPU figures, speed and
the loss curve against bf16 at the XLS-R shape, are scripts/gpu_check.sh's."""

from __future__ import annotations

import copy
import sys

import numpy as np
import pytest
import torch
from torchao.float8.float8_linear import Float8Linear
from train_world import final_weights, smoke

from hearsay import train as tr
from hearsay.detector.model import Detector, ModelConfig, load_detector
from hearsay.train import config as tcfg
from hearsay.train import fp8, prepare
from hearsay.train.errors import ConfigError

# 6 Linear layers per kept layer: the attention's 4 projections, the feed-forward's 2
PER_LAYER = ["attention.k_proj", "attention.v_proj", "attention.q_proj", "attention.out_proj",
             "feed_forward.intermediate_dense", "feed_forward.output_dense"]


def kept_linears(keep: int) -> list[str]:
    return [f"backbone.encoder.layers.{i}.{name}" for i in range(keep) for name in PER_LAYER]


def batch(seed: int = 3):
    """(4, 16000) clips of 1, 0.75, 0.5 and 0.3 s @ 16 kHz and their (4, 16000) sample mask."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 16000, generator=g)
    lengths = torch.tensor([16000, 12000, 8000, 5000])
    return x, (torch.arange(16000)[None, :] < lengths[:, None]).long()


def test_fp8_converts_exactly_the_kept_layers_linear_layers_and_keeps_their_parameters():
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny(num_layers=3, keep_layers=2, train_top=1))
    linears = {n: m for n, m in det.named_modules() if isinstance(m, torch.nn.Linear)}
    params = {n: (id(p), p.requires_grad) for n, p in det.named_parameters()}
    said = fp8.convert(det, "cpu")
    assert [n for n, m in det.named_modules() if isinstance(m, Float8Linear)] == kept_linears(2)
    assert fp8.float8_layers(det) == kept_linears(2)  # 12: the kept layers' Linear, no other
    for name, before in linears.items():  # the projection, the pooling, the head: as they were
        if name not in kept_linears(2):
            assert type(det.get_submodule(name)) is torch.nn.Linear
            assert det.get_submodule(name) is before, name
    # the same Parameters (names, objects, frozen or not): optimiser and checkpoints see them
    assert {n: (id(p), p.requires_grad) for n, p in det.named_parameters()} == params
    assert said.startswith("on: torchao 0.18.0 float8 training, recipe tensorwise")
    assert "12 Linear layers" in said


def test_fp8_logits_stay_within_2e_3_of_the_fp32_models():
    """The same weights and batch, eval mode: logits within 2e-3 (this batch's bf16-autocast
    logits are 1.9e-3 from fp32), the layers' outputs within 1% of their norm, and not equal
    (float8 did run)."""
    torch.manual_seed(0)
    ref = Detector(ModelConfig.tiny()).eval()
    det = copy.deepcopy(ref)
    fp8.convert(det, "cpu")
    x, mask = batch()
    with torch.no_grad():
        got, want = det(x, mask), ref(x, mask)
        states, _ = det.hidden_states(x, mask)
        ref_states, _ = ref.hidden_states(x, mask)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=2e-3)
    last, ref_last = states[-1], ref_states[-1]  # (4, T', 32): the top kept layer's output
    rel = float((last - ref_last).norm() / ref_last.norm())
    assert 1e-6 < rel < 1e-2, rel


def test_fp8_trainer_follows_the_fp32_loss_curve(demo_bundle, tmp_path):
    """The same seed, draws and batches through the trainer (fp32 on the CPU): the fp8 run's
    per-step losses within 0.01 of the fp32 run's, not identical (its layers were float8), and
    exactly the kept layers' Linear layers converted (the fp32 run: none)."""
    dets = {}

    def keep(name):
        return lambda det: dets.__setitem__(name, det)

    metas = {on: tr.run(tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {"fp8": on, "max_crop_s": 2.0}}), demo_bundle.root, tmp_path / str(on),
        model_hook=keep(on)) for on in (False, True)}
    fp32, f8 = (metas[on]["history"]["loss"] for on in (False, True))
    assert len(fp32) == len(f8) >= 4
    np.testing.assert_allclose(f8, fp32, rtol=0, atol=0.01)
    assert f8 != fp32
    keep_layers = dets[True].cfg.keep_layers
    assert fp8.float8_layers(dets[True]) == kept_linears(keep_layers)
    assert fp8.float8_layers(dets[False]) == []
    assert metas[True]["fp8"].startswith("on: torchao")
    assert metas[False]["fp8"] == "off (train.fp8 false)"


def test_an_fp8_run_resumes_exactly_and_its_weights_load_into_a_plain_detector(bundle_dir,
                                                                              tmp_path):
    """Float8Linear keeps nn.Linear's Parameters and names: the checkpoint of an fp8 run
    resumes into an fp8 run equal to an uninterrupted one, and its final weights load into a
    bare Detector (what export and scoring build), no Float8Linear in it."""
    cfg = smoke(epochs=2, batches_per_epoch=3, fp8=True)
    whole = tr.run(cfg, bundle_dir, tmp_path / "whole")
    tr.run(cfg, bundle_dir, tmp_path / "part", stop_after_epoch=1)
    resumed = tr.run(cfg, bundle_dir, tmp_path / "part", resume=True)
    assert resumed["resumed_from_epoch"] == 1 and resumed["complete"]
    assert resumed["history"]["loss"] == whole["history"]["loss"]
    a, b = final_weights(tmp_path / "whole"), final_weights(tmp_path / "part")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    det, _ = load_detector(tmp_path / "whole")
    assert fp8.float8_layers(det) == []
    assert all(torch.equal(det.state_dict()[k], a[k]) for k in a)


def test_fp8_off_leaves_the_model_as_built():
    """The trainer's nets with fp8 off: the Detector module for module and byte for byte what
    a bare Detector of the same seed is (no Float8Linear)."""
    mc = ModelConfig.tiny()
    nets = prepare._nets(tcfg.TrainConfig(fp8=False), mc, torch.device("cpu"), 0, 0, False, None)
    torch.manual_seed(tcfg.TrainConfig().seed)
    bare = Detector(mc)
    assert nets.fp8 == "off (train.fp8 false)"
    # class names: torch's parametrisation (the positional conv) makes a class per instance
    assert [(n, type(m).__name__) for n, m in nets.det.named_modules()] == [
        (n, type(m).__name__) for n, m in bare.named_modules()]
    got, want = nets.det.state_dict(), bare.state_dict()
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), key


def test_the_trainers_nets_with_fp8_on_are_converted_and_the_optimiser_holds_their_parameters():
    nets = prepare._nets(tcfg.TrainConfig(fp8=True), ModelConfig.tiny(), torch.device("cpu"),
                         0, 0, False, None)
    assert fp8.float8_layers(nets.det) == kept_linears(2)
    assert {id(p) for p in nets.trainable} == {
        id(p) for p in nets.det.parameters() if p.requires_grad}


@pytest.fixture
def a_gpu(monkeypatch):
    """torch.cuda answering for one GPU of the capability the test sets (no GPU here)."""
    card = {"cap": (9, 0), "name": "NVIDIA H100 80GB HBM3"}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: card["cap"])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: card["name"])
    return card


def test_fp8_runs_on_the_cpu_and_on_gpus_of_compute_capability_8_9_up(a_gpu):
    assert fp8.fp8_problem("cpu") is None
    for cap in ((8, 9), (9, 0), (10, 0)):
        a_gpu["cap"] = cap
        assert fp8.fp8_problem("cuda") is None, cap


def test_fp8_on_a_gpu_below_8_9_is_refused_naming_the_fix(a_gpu):
    a_gpu.update(cap=(8, 0), name="NVIDIA A100-SXM4-80GB")
    why = fp8.fp8_problem(torch.device("cuda", 0))
    assert why == ("train.fp8 needs float8 tensor cores, compute capability >= 8.9 (L4, L40, "
                   "RTX 4090, H100, H200 ...); this NVIDIA A100-SXM4-80GB is 8.0: set train.fp8 "
                   "false, or train on such a GPU")
    det = Detector(ModelConfig.tiny())
    with pytest.raises(ValueError, match="compute capability >= 8.9"):
        fp8.convert(det, "cuda")
    assert fp8.float8_layers(det) == []


def test_fp8_elsewhere_or_without_torchao_is_refused(monkeypatch):
    assert fp8.fp8_problem("mps").startswith("train.fp8 runs on CUDA (compute capability >= "
                                             "8.9) or the CPU, not on mps")
    monkeypatch.setitem(sys.modules, "torchao.float8", None)
    why = fp8.fp8_problem("cpu")
    assert why.startswith("train.fp8 needs torchao") and why.endswith("set train.fp8 false")


def test_the_trainer_refuses_fp8_on_that_gpu_before_reading_the_bundle(a_gpu, tmp_path):
    """ConfigError (exit 2) from build_run before anything is read: the bundle folder does
    not even exist."""
    a_gpu.update(cap=(8, 6), name="NVIDIA A40")
    resolved = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={"train": {"fp8": True}})
    with pytest.raises(ConfigError, match="this NVIDIA A40 is 8.6: set train.fp8 false"):
        prepare.build_run(resolved, tmp_path / "no-bundle", tmp_path / "out", store_uri=None,
                          resume=False, verify_bundle=True, model_hook=None, backoff_s=0.0,
                          world=1, rank=0, local_rank=0, ddp=False,
                          device=torch.device("cuda"), t_start=0.0)
    assert not (tmp_path / "out").exists()
