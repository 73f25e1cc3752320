"""hearsay.detector.layer_weights: the "concentrated at the top" rule at its boundary, its advice,
the readout of a Detector and its trainable backbone parameter count."""

import pytest
import torch

from hearsay.detector import layer_weights as lw
from hearsay.detector.model import Detector, ModelConfig

RULE = {"top_k": 3, "min_share": 0.5, "advise_keep": 16}


def weights_with_top_share(top: float, n: int = 13) -> list[float]:
    """n softmax weights whose top 3 sum to `top` (each power-of-two exact where possible)."""
    rest = (1.0 - top) / (n - 3)
    return [rest] * (n - 3) + [top / 4, top / 4, top / 2]


def test_the_rule_fires_at_its_threshold_and_advises_keeping_16_layers():
    v = lw.verdict(weights_with_top_share(0.5), 12, 24, RULE)
    assert v["top_share"] == 0.5 and v["fires"] is True
    assert v["advice"] == "keep 16 layers" and "advised: keep 16 layers" in v["verdict"]


def test_the_rule_does_not_fire_just_below_its_threshold():
    v = lw.verdict(weights_with_top_share(0.5 - 1e-9), 12, 24, RULE)
    assert v["fires"] is False and v["advice"] is None
    assert v["verdict"].startswith("not concentrated at the top")


def test_uniform_weights_do_not_fire_and_weight_on_the_top_does():
    assert not lw.verdict([1 / 13] * 13, 12, 24, RULE)["fires"]
    assert lw.verdict(weights_with_top_share(0.9), 12, 24, RULE)["fires"]


def test_no_advice_when_the_model_already_keeps_16_or_the_backbone_is_shorter():
    v = lw.verdict(weights_with_top_share(0.9, n=17), 16, 24, RULE)
    assert v["fires"] and v["advice"] is None and "already keeps 16" in v["verdict"]
    v = lw.verdict(weights_with_top_share(0.9), 12, 12, RULE)
    assert v["fires"] and v["advice"] is None and "has 12 layers" in v["verdict"]


def test_the_rule_is_not_applicable_when_top_k_covers_every_state():
    v = lw.verdict([0.2, 0.3, 0.5], 2, 2, RULE)
    assert v["fires"] is False and v["verdict"].startswith("not applicable")


def test_the_rule_is_read_from_config_and_refuses_bad_values():
    v = lw.verdict(weights_with_top_share(0.4), 12, 24, {**RULE, "min_share": 0.4})
    assert v["fires"] and v["rule"]["min_share"] == 0.4
    with pytest.raises(ValueError, match="unknown train.layer_rule keys"):
        lw.LayerRule.from_dict({"top": 3})
    for bad in ({"min_share": 0.0}, {"min_share": 1.5}, {"top_k": 0}, {"advise_keep": True}):
        with pytest.raises(ValueError, match="layer_rule"):
            lw.LayerRule.from_dict(bad)


def test_readout_of_a_detector_is_its_softmax_layer_weights():
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny(num_layers=6, keep_layers=5, train_top=1))
    with torch.no_grad():
        det.layer_logits.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 3.0, 3.0]))
    r = lw.readout(det, {"top_k": 2, "min_share": 0.8, "advise_keep": 6})
    assert r["states"] == ["h_0", "h_1", "h_2", "h_3", "h_4", "h_5"] and r["keep_layers"] == 5
    assert sum(r["weights"]) == pytest.approx(1.0)
    assert r["top_share"] == pytest.approx(2 * 20.0855 / (4 + 2 * 20.0855), rel=1e-4)
    assert r["fires"] and r["advice"] == "keep 6 layers"


def test_trainable_backbone_params_follow_train_top():
    frozen = Detector(ModelConfig.tiny(train_top=0))
    assert lw.trainable_backbone_params(frozen) == 0
    top = Detector(ModelConfig.tiny(train_top=1))
    layer = top.backbone.encoder.layers[-1]
    assert lw.trainable_backbone_params(top) == sum(p.numel() for p in layer.parameters())
    whole = Detector(ModelConfig.tiny())
    assert lw.trainable_backbone_params(whole) > lw.trainable_backbone_params(top)
