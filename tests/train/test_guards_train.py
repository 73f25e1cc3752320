"""hearsay.train guards: the loss's smoothed targets, layer-wise LR decay in the optimiser's
parameter groups, and the AUC tripwire at its boundary (a collapsed model, AUC exactly 0.5)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hearsay import train as tr
from hearsay.detector.model import Detector, ModelConfig
from hearsay.train import config as tcfg
from hearsay.train import errors as terrors
from hearsay.train.step import optimizer_groups


@pytest.fixture(scope="module")
def collapsed_run(demo_bundle, tmp_path_factory):
    """One CPU-smoke epoch (one micro-batch of 8) of a collapsed model whose logits are all 0,
    at the default label smoothing and tripwire: the targets the loss received and the abort."""
    tc = tcfg.TrainConfig()
    cfg = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={"train": {
        "epochs": 1, "batches_per_epoch": 1, "label_smoothing": tc.label_smoothing,
        "tripwire_auc": tc.tripwire_auc}})
    targets, real = [], F.binary_cross_entropy_with_logits

    def spy(logits, target, *args, **kwargs):
        targets.append(target.detach().cpu().clone())
        return real(logits, target, *args, **kwargs)

    def collapse(det):  # every clip gets logit 0: validation AUC is exactly 0.5 (all ties)
        det.head.register_forward_hook(lambda mod, inp, out: out * 0.0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "binary_cross_entropy_with_logits", spy)
        try:
            tr.run(cfg, demo_bundle.root, tmp_path_factory.mktemp("collapsed") / "run",
                   model_hook=collapse)
            raised = None
        except terrors.TrainError as err:
            raised = err
    return {"targets": targets, "raised": raised}


def test_label_smoothing_gives_the_loss_targets_0_025_and_0_975(collapsed_run):
    assert tcfg.TrainConfig().label_smoothing == 0.05
    (target,) = collapsed_run["targets"]  # one micro-batch of 8, half per class
    assert target.dtype == torch.float32 and target.shape == (8,)
    assert sorted(target.tolist()) == pytest.approx([0.025] * 4 + [0.975] * 4, abs=1e-7)


def test_a_collapsed_model_with_auc_exactly_half_trips_the_default_tripwire(collapsed_run):
    assert tcfg.TrainConfig().tripwire_auc == 0.5  # the rule is AUC <= 0.5
    err = collapsed_run["raised"]
    assert isinstance(err, terrors.Tripwire) and err.code == 5
    assert "validation AUC 0.5000 <= 0.5" in str(err)


@pytest.mark.parametrize("train_top", [3, 2])
def test_layer_wise_lr_decays_downwards_from_the_top_kept_layer(train_top):
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny(num_layers=4, keep_layers=3, train_top=train_top))
    tc = tcfg.TrainConfig()
    opt = torch.optim.AdamW(optimizer_groups(det, tc), betas=(0.9, 0.98), eps=1e-6)
    lr_of = {}  # id(param) -> (lr, base_lr) of the one group that holds it
    for g in opt.param_groups:
        for p in g["params"]:
            assert id(p) not in lr_of, "a parameter in two groups"
            lr_of[id(p)] = (g["lr"], g["base_lr"])
    layers = det.backbone.encoder.layers  # layers[-1] is the top kept layer
    for steps_down, layer in enumerate(reversed(layers)):
        for p in layer.parameters():
            if steps_down < train_top:
                want = tc.lr_backbone * tc.layer_decay ** steps_down
                assert lr_of[id(p)] == pytest.approx((want, want), rel=1e-12), steps_down
            else:  # frozen: not in the optimiser at all
                assert id(p) not in lr_of
    for p in det.head_params():
        assert lr_of[id(p)] == (tc.lr_head, tc.lr_head)
    stem = det.backbone.feature_projection.parameters()
    for p in stem:  # the stem sits one step below the lowest kept layer, when it trains
        if id(p) in lr_of:
            want = tc.lr_backbone * tc.layer_decay ** len(layers)
            assert lr_of[id(p)] == pytest.approx((want, want), rel=1e-12)
    assert not any(id(p) in lr_of for p in det.backbone.feature_extractor.parameters())
    assert set(lr_of) == {id(p) for p in det.parameters() if p.requires_grad}
