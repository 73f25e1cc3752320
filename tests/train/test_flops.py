"""hearsay.train.flops: the analytic FLOPs of a fine-tune step, against a hand count and against
torch's own FlopCounterMode on the CPU (which counts every mm/bmm/conv torch actually runs)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from hearsay.detector.model import Detector, ModelConfig
from hearsay.train import flops

# FlopCounterMode also counts SpecAugment's span convolution (a 1-channel conv over the frames,
# about 3,000 FLOP here, under 0.01 %): 0.1 % covers it, where a rule off by one product kind
# (a layer's FFN, the attention, a 2x backward, the projection) moves the total by several %.
TOLERANCE = 0.001


def test_tiny_config_one_second_clip_matches_the_hand_count():
    cfg = ModelConfig.tiny()  # D 32, 2 layers both trained, FFN 64, CNN 16 ch, pos conv 16 / 2
    # CNN lengths for 16,000 samples: 3199, 1599, 799, 399, 199, 99, 49 frames (T' = 49)
    cnn = (2 * 3199 * 16 * 1 * 10 + 2 * 1599 * 16 * 16 * 3 + 2 * 799 * 16 * 16 * 3
           + 2 * 399 * 16 * 16 * 3 + 2 * 199 * 16 * 16 * 3 + 2 * 99 * 16 * 16 * 2
           + 2 * 49 * 16 * 16 * 2)
    proj = 2 * 49 * 16 * 32
    pos = 2 * 50 * 32 * 16 * 16  # 50 = 49 + 1: the even kernel's extra frame
    layer = (2 * 49 * 32 * 32 * 4) + (2 * 49 * 32 * 64 * 2) + (2 * 49 * 49 * 32 * 2)
    pool = 2 * 49 * 32 * 16 + 2 * 49 * 16 + 2 * 64
    forward = cnn + proj + pos + 2 * layer + pool
    backward = 2 * (pool + proj + pos + 2 * layer)  # every trained product twice
    assert forward == 8_918_624
    assert flops.clip_flops(cfg, 16000) == {"forward": forward, "backward": backward,
                                            "total": forward + backward}
    assert flops.step_flops(cfg, [16000] * 3)["total"] == 3 * (forward + backward)


def _counted(cfg: ModelConfig, batch: int, n: int) -> int:
    """FLOPs torch counts for one training step's forward + backward on the CPU (fp32), its
    grouped-conv backward corrected: torch 2.11's counter prices the weight grad of a conv of
    g groups as if it had one (measured: a Conv1d's backward counts 2x its forward at g 1, 3x
    at g 2, 17x at g 16), so the positional conv's backward, counted (1 + g) x its forward, is
    scaled to the 2x it computes."""
    torch.manual_seed(0)
    det = Detector(cfg).train()
    x, m = torch.randn(batch, n), torch.ones(batch, n, dtype=torch.long)
    y = (torch.arange(batch) % 2).float()
    counter = FlopCounterMode(display=False)
    with counter:
        F.binary_cross_entropy_with_logits(det(x, m), y).backward()
    conv_bwd = counter.get_flop_counts()["Global"].get(torch.ops.aten.convolution_backward, 0)
    return counter.get_total_flops() - conv_bwd + conv_bwd * 2 // (1 + cfg.pos_conv_groups)


# eager attention only: FlopCounterMode counts no FLOP of the CPU's fused SDPA kernel, so an
# sdpa model would check nothing of the attention
@pytest.mark.parametrize("train_top", [3, 1, 0])
def test_step_count_matches_torch_flop_counter(train_top):
    # 3 layers kept: train_top 1 leaves two frozen below a trained one, 0 trains the head only
    cfg = ModelConfig.tiny(num_layers=3, keep_layers=3, train_top=train_top,
                           attn_implementation="eager")
    n = 24000  # 1.5 s: T' = 74 frames
    analytic = flops.step_flops(cfg, [n] * 2)["total"]
    counted = _counted(cfg, 2, n)
    assert abs(analytic - counted) <= TOLERANCE * counted, (analytic, counted)


def test_mean_pooling_counts_no_product_over_frames():
    cfg = ModelConfig.tiny(pooling="mean", attn_implementation="eager")
    counted = _counted(cfg, 2, 16000)
    analytic = flops.step_flops(cfg, [16000] * 2)["total"]
    assert abs(analytic - counted) <= TOLERANCE * counted, (analytic, counted)


def test_a_clip_shorter_than_the_cnn_kernel_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="longer clip"):
        flops.clip_flops(ModelConfig.tiny(), 5)
