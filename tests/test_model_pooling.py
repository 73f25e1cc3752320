"""ModelConfig.pooling: attentive (default) or the masked mean - a model choice, so inside the
config hash, rebuilt from the checkpoint's config and exported to ONNX either way."""

import numpy as np
import pytest
import torch

from hearsay.detector.model import Detector, ModelConfig, load_detector, save_detector
from hearsay.detector.pooling import MaskedMeanPool
from hearsay.export.onnx_export import ExportConfig, export_model
from hearsay.export.quantize import QuantGate
from hearsay.train import config as tcfg
from hearsay.train.errors import ConfigError


def mean_detector(seed=0):
    torch.manual_seed(seed)
    return Detector(ModelConfig.tiny(pooling="mean")).eval()


def test_mean_pooling_changes_the_config_hash():
    base = tcfg.resolve_config("fold", 0, cpu_smoke=True)
    mean = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={"model": {"pooling": "mean"}})
    assert base["model"]["pooling"] == "attentive" and mean["model"]["pooling"] == "mean"
    assert tcfg.config_hash(base) != tcfg.config_hash(mean)


def test_an_unknown_pooling_is_a_config_error():
    with pytest.raises(ConfigError, match="pooling='max'"):
        tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={"model": {"pooling": "max"}})


def test_the_layer_rule_is_config_inside_the_hash_and_checked():
    base = tcfg.resolve_config("fold", 0, cpu_smoke=True)
    assert base["train"]["layer_rule"] == {"top_k": 3, "min_share": 0.5, "advise_keep": 16}
    other = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {"layer_rule": {"top_k": 3, "min_share": 0.6, "advise_keep": 16}}})
    assert tcfg.config_hash(base) != tcfg.config_hash(other)
    with pytest.raises(ConfigError, match="layer_rule"):
        tcfg.resolve_config("fold", 0, overrides={"train": {"layer_rule": {"share": 0.6}}})


def test_masked_mean_ignores_padded_frames():
    h = torch.tensor([[[1.0], [3.0], [100.0]]])
    valid = torch.tensor([[True, True, False]])
    assert MaskedMeanPool()(h, valid).item() == pytest.approx(2.0)


def test_a_mean_pooled_model_has_a_head_of_width_d_and_padding_does_not_change_its_logit():
    det = mean_detector()
    assert det.head.in_features == det.cfg.hidden_size
    assert not list(det.pool.parameters())
    rng = np.random.default_rng(0)
    x = torch.zeros(2, 16000)
    x[0] = torch.from_numpy(rng.normal(size=16000).astype(np.float32))
    x[1, :7000] = torch.from_numpy(rng.normal(size=7000).astype(np.float32))
    m = torch.zeros(2, 16000, dtype=torch.int64)
    m[0], m[1, :7000] = 1, 1
    both = det(x, m)
    alone = det(x[1:, :7000], m[1:, :7000])
    torch.testing.assert_close(both[1:], alone, atol=1e-5, rtol=1e-4)

def test_a_mean_pooled_checkpoint_is_rebuilt_mean_pooled(tmp_path):
    det = mean_detector()
    save_detector(det, tmp_path / "final")
    back, cfg = load_detector(tmp_path / "final")
    assert cfg.pooling == "mean" and isinstance(back.pool, MaskedMeanPool)


def test_a_mean_pooled_model_exports_with_parity_and_int8_finds_its_layers(tmp_path):
    # the attentive default's export: tests/export/test_export.py
    det = mean_detector()
    report = export_model(det, tmp_path / "m", ExportConfig(gate=QuantGate(clips=8, long_s=40.0)))
    assert report["exporter"] and report["parity_a"]["passed"], report["parity_a"]
    assert "error" not in (report["int8"] or {}), report["int8"]
