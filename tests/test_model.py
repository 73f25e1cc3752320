"""hearsay.detector.model: shapes, masking, freezing, save/load, the pinned-weights refusal, ONNX
tracing."""

from __future__ import annotations

import hashlib

import pytest
import torch

from hearsay.detector.model import (
    XLSR_300M_SHA256,
    Detector,
    ModelConfig,
    WeightsError,
    load_detector,
    load_pretrained,
    save_detector,
)
from hearsay.sound import example


def _batch(lengths, t=None, seed=0):
    """Random waves with the given valid lengths, zero-padded to t: (B, T) float32, (B, T) int64."""
    g = torch.Generator().manual_seed(seed)
    t = t or max(lengths)
    x = torch.zeros(len(lengths), t)
    m = torch.zeros(len(lengths), t, dtype=torch.long)
    for i, n in enumerate(lengths):
        x[i, :n] = torch.randn(n, generator=g)
        m[i, :n] = 1
    return x, m


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return Detector(ModelConfig.tiny()).eval()


def test_forward_gives_one_float_logit_per_clip(tiny):
    x, m = _batch([16000, 9000, 4000])
    y = tiny(x, m)
    assert y.shape == (3,) and y.dtype == torch.float32 and torch.isfinite(y).all()


def test_padding_does_not_change_a_clips_logit(tiny):
    x, m = _batch([16000, 7000])
    both = tiny(x, m)
    alone = tiny(x[1:, :7000], m[1:, :7000])
    torch.testing.assert_close(both[1:], alone, atol=1e-5, rtol=1e-4)


def test_xlsr_defaults_are_the_300m_shape():
    cfg = ModelConfig()
    hf = cfg.hf_config()
    assert (hf.hidden_size, hf.num_attention_heads, hf.intermediate_size) == (1024, 16, 4096)
    assert cfg.num_layers == 24 and hf.num_hidden_layers == cfg.keep_layers == 12
    assert tuple(hf.conv_dim) == (512,) * 7 and hf.feat_extract_norm == "layer"
    assert hf.do_stable_layer_norm and hf.layerdrop == 0.0


def test_train_top_zero_freezes_every_backbone_parameter():
    det = Detector(ModelConfig.tiny(train_top=0))
    stray = [n for n, p in det.backbone.named_parameters() if p.requires_grad]
    assert stray == []
    trainable = {n for n, p in det.named_parameters() if p.requires_grad}
    assert trainable == {"layer_logits", "pool.attn.0.weight", "pool.attn.0.bias",
                         "pool.attn.2.weight", "pool.attn.2.bias", "head.weight", "head.bias"}


def test_train_top_one_trains_only_the_top_kept_layer():
    det = Detector(ModelConfig.tiny(train_top=1))
    trainable = {n for n, p in det.backbone.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("encoder.layers.1.") for n in trainable)


def test_cnn_stays_frozen_in_full_fine_tune():
    det = Detector(ModelConfig.tiny())
    assert not any(p.requires_grad for p in det.backbone.feature_extractor.parameters())
    assert det.backbone.masked_spec_embed.requires_grad  # the stem trains with every layer


def test_no_gradient_reaches_the_feature_encoder_in_training():
    """Frozen as transformers intends: in training mode the CNN's output is not in autograd,
    so backward stops at the projection (no conv activations kept, no conv backward)."""
    det = Detector(ModelConfig.tiny()).train()
    outs = []
    det.backbone.feature_extractor.register_forward_hook(lambda m, i, o: outs.append(o))
    x, m = _batch([16000, 12000])
    det(x, m).sum().backward()
    assert not outs[0].requires_grad
    assert all(p.grad is None for p in det.backbone.feature_extractor.parameters())
    assert det.backbone.feature_projection.projection.weight.grad is not None


def test_train_top_zero_keeps_the_whole_backbone_out_of_autograd():
    det = Detector(ModelConfig.tiny(train_top=0)).train()
    states, _ = det.hidden_states(*_batch([16000, 12000]))
    assert not any(h.requires_grad for h in states)  # only the head enters backward
    assert det(*_batch([16000])).requires_grad


def test_train_top_one_starts_autograd_at_the_top_layer():
    det = Detector(ModelConfig.tiny(train_top=1)).train()
    states, _ = det.hidden_states(*_batch([16000]))
    assert [h.requires_grad for h in states] == [False, False, True]


def test_spec_augment_only_in_training_and_seeded():
    det = Detector(ModelConfig.tiny(mask_time_prob=0.5, mask_time_length=2))
    x, m = _batch([16000, 16000])
    det.eval()
    torch.testing.assert_close(det(x, m), det(x, m))
    det.train()
    det.generator = torch.Generator().manual_seed(1)
    a = det(x, m)
    det.generator = torch.Generator().manual_seed(1)
    b = det(x, m)
    det.generator = torch.Generator().manual_seed(2)
    c = det(x, m)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)
    det.eval()
    assert not torch.allclose(det(x, m), a)


def test_save_load_rebuilds_from_saved_config_not_defaults(tmp_path):
    cfg = ModelConfig.tiny(pool_hidden=8, hidden_size=24, num_heads=3)
    det = Detector(cfg).eval()
    save_detector(det, tmp_path / "final", extra_config={"train": {"lr": 1.0}})
    back, back_cfg = load_detector(tmp_path)  # a run dir: final/ is found
    assert back_cfg == cfg and not back.training
    x, m = _batch([8000, 5000])
    torch.testing.assert_close(back(x, m), det(x, m), atol=0, rtol=0)


def test_config_from_dict_rejects_unknown_keys():
    d = ModelConfig.tiny().to_dict()
    assert ModelConfig.from_dict(d) == ModelConfig.tiny()
    with pytest.raises(ValueError, match="unknown model config keys \\['hiden_size'\\]"):
        ModelConfig.from_dict({**d, "hiden_size": 3})


def test_pretrained_weights_refused_when_sha_differs(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"not the real checkpoint")
    found = hashlib.sha256(b"not the real checkpoint").hexdigest()
    det = Detector(ModelConfig.tiny())
    with pytest.raises(WeightsError) as err:
        load_pretrained(det, tmp_path)
    assert found in str(err.value) and XLSR_300M_SHA256 in str(err.value)


def test_pretrained_weights_missing_names_the_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("HEARSAY_WEIGHTS_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(WeightsError, match="HEARSAY_WEIGHTS_DIR"):
        load_pretrained(Detector(ModelConfig.tiny()))


def _fake_hf_checkpoint(cfg: ModelConfig) -> dict:
    """A pre-training-style state dict (wav2vec2. prefix, old weight-norm names, 1 extra layer,
    quantizer keys) made from a random model with one layer more than we keep."""
    big = Detector(ModelConfig.tiny(num_layers=3, keep_layers=3, train_top=3))
    sd = {}
    for k, v in big.backbone.state_dict().items():
        k = k.replace("parametrizations.weight.original0", "weight_g")
        k = k.replace("parametrizations.weight.original1", "weight_v")
        sd["wav2vec2." + k] = v.clone()
    sd["wav2vec2.encoder.layer_norm.weight"] = torch.ones(cfg.hidden_size)
    sd["quantizer.codevectors"] = torch.zeros(1, 4, 8)
    sd["project_hid.weight"] = torch.zeros(4, cfg.hidden_size)
    return sd


def test_pretrained_weights_load_when_sha_matches(tmp_path):
    cfg = ModelConfig.tiny()
    sd = _fake_hf_checkpoint(cfg)
    torch.save(sd, tmp_path / "pytorch_model.bin")
    sha = hashlib.sha256((tmp_path / "pytorch_model.bin").read_bytes()).hexdigest()
    det = Detector(cfg)
    assert load_pretrained(det, tmp_path, expected_sha=sha) == sha
    got = det.backbone.state_dict()
    torch.testing.assert_close(got["encoder.layers.1.attention.q_proj.weight"],
                               sd["wav2vec2.encoder.layers.1.attention.q_proj.weight"])
    torch.testing.assert_close(got["encoder.pos_conv_embed.conv.parametrizations.weight.original1"],
                               sd["wav2vec2.encoder.pos_conv_embed.conv.weight_v"])


def test_pretrained_weights_that_do_not_fit_are_refused(tmp_path):
    sd = _fake_hf_checkpoint(ModelConfig.tiny())
    del sd["wav2vec2.encoder.layers.0.attention.k_proj.weight"]
    torch.save(sd, tmp_path / "pytorch_model.bin")
    sha = hashlib.sha256((tmp_path / "pytorch_model.bin").read_bytes()).hexdigest()
    with pytest.raises(WeightsError, match="encoder.layers.0.attention.k_proj.weight"):
        load_pretrained(Detector(ModelConfig.tiny()), tmp_path, expected_sha=sha)


def test_forward_traces_to_onnx_with_dynamic_batch_and_time(tmp_path, tiny):
    ort = pytest.importorskip("onnxruntime")
    x, m = _batch([16000, 9000])
    path = tmp_path / "m.onnx"
    torch.onnx.export(tiny, (x, m), str(path), dynamo=False, opset_version=17,
                      input_names=["input_values", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_values": {0: "B", 1: "T"},
                                    "attention_mask": {0: "B", 1: "T"}, "logits": {0: "B"}})
    x2, m2 = _batch([24000, 20000, 6000], seed=3)  # other batch size, other length
    got = ort.InferenceSession(str(path)).run(
        None, {"input_values": x2.numpy(), "attention_mask": m2.numpy()})[0]
    torch.testing.assert_close(torch.from_numpy(got), tiny(x2, m2).detach(),
                               atol=1e-4, rtol=1e-4)


def test_cutting_a_batch_to_its_bucket_leaves_the_logits_unchanged(tiny):
    # clips of 1.2 s and 0.7 s in a batch padded to a 3 s crop: cut to the 2 s bucket
    x, m = _batch([19200, 11200], t=48000)
    n = example.cut_samples(int(m.sum(1).max()), x.shape[1], example.CropConfig().buckets_s)
    assert n == 32000
    torch.testing.assert_close(tiny(x[:, :n], m[:, :n]), tiny(x, m), atol=1e-5, rtol=1e-4)


def test_compiled_training_forward_with_dynamic_shapes_matches_eager():
    """torch.compile (dynamic sizes, CPU, the tiny model) in training mode: SpecAugment's masks
    come from the same generator draws as eager, so the logits and the generator's state after
    the step are eager's. Backend aot_eager: dynamo's trace and AOT autograd's symbolic-shape
    graph (where a generator draw with symbolic sizes fails), without inductor's C++ build,
    which takes minutes on a small CPU (inductor's kernels run in scripts/gpu_check.sh)."""
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny(mask_time_prob=0.5, mask_time_length=2)).train()
    compiled = torch.compile(det, dynamic=True, backend="aot_eager")
    for lengths, t in (([16000, 12000], 16000), ([9600, 4800, 6400], 9600)):  # two shapes
        x, m = _batch(lengths, t=t)
        det.generator = torch.Generator().manual_seed(3)
        want = det(x, m)
        eager_state = det.generator.get_state()
        det.generator = torch.Generator().manual_seed(3)
        got = compiled(x, m)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        assert torch.equal(det.generator.get_state(), eager_state)
        assert not torch.equal(eager_state, torch.Generator().manual_seed(3).get_state())
    det.eval()
    assert not torch.allclose(det(x, m), want)  # the masks were drawn and used
