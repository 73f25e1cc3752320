"""Analytic FLOPs of one fine-tune step, counted from the model's shapes (no tracing).

    from hearsay.train import flops
    f = flops.step_flops(ModelConfig(), [6.6 * 16000] * 64)   # one step: 64 clips of 6.6 s
    f["total"]                                                 # FLOP, forward + backward
    tflops = f["total"] * steps / seconds / 1e12               # the achieved rate, TFLOP/s
    share = tflops / flops.bf16_matmul_tflops()                # of the card's bf16 matmul rate

What is counted: every matrix product and convolution at 2 FLOP per multiply-add (2*m*n*k),
for each clip at its own valid length (the useful work of a step: padding frames, rows a packing
leaves empty and flash attention's recomputation are not counted, so the share they cost shows
as a lower share). Element-wise work (norms, GELU, softmax, the layer mix) is not counted.

  forward, per clip of n samples (T' frames by the CNN's length formula, D hidden, F FFN):
    CNN (frozen)     sum over its 7 convs: 2 * L_out * C_out * C_in * kernel
    projection       2 * T' * C * D                     (C: the CNN's last channel count)
    positional conv  2 * (T' + 1) * D * (D / groups) * kernel   (even kernel: one extra frame)
    each layer       2 * T' * D * D * 4  (q, k, v, out)  + 2 * T' * D * F * 2  (FFN)
                     + 2 * T' * T' * D * 2  (scores q k^T and their sum over v)
    pooling, head    2 * T' * D * H + 2 * T' * H  (attentive statistics, H = pool_hidden)
                     + 2 * 2D  (head; the "mean" pooling: 2 * D)
  backward: twice the forward for each trained product (grad of its input and of its weight;
    every product's input carries a grad, even the projection's over the frozen CNN and the
    lowest trained layer's: the LayerNorm before each trains), nothing for the frozen CNN and
    the frozen layers. The stem (projection, positional conv) trains only when every kept
    layer does; with train_top 0 only the pooling and head train (the layer weights do too,
    so the pooling's input carries a grad).

tests/train/test_flops.py checks the count against a hand count on the tiny config and against
torch.utils.flop_counter.FlopCounterMode on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterable


def cnn_frames(n_samples: int, cfg) -> list[int]:
    """Output length of each CNN layer for n samples, frames (the last one is T')."""
    out, length = [], int(n_samples)
    for k, s in zip(cfg.conv_kernel, cfg.conv_stride, strict=True):
        length = (length - k) // s + 1
        out.append(length)
    return out


def clip_flops(cfg, n_samples: int) -> dict[str, int]:
    """{"forward", "backward", "total"} FLOP of one clip of n valid samples (module docstring)."""
    lens = cnn_frames(n_samples, cfg)
    t, d, f = lens[-1], cfg.hidden_size, cfg.ffn_size
    if t <= 0:
        raise ValueError(f"{n_samples} samples give no frame (the CNN needs at least "
                         f"{cfg.conv_kernel[0]}): give a longer clip")
    cnn, c_in = 0, 1
    for length, c_out, k in zip(lens, cfg.conv_dim, cfg.conv_kernel, strict=True):
        cnn += 2 * length * c_out * c_in * k
        c_in = c_out
    proj = 2 * t * cfg.conv_dim[-1] * d
    pos_len = t + 2 * (cfg.pos_conv_kernel // 2) - cfg.pos_conv_kernel + 1  # before the trim
    pos = 2 * pos_len * d * (d // cfg.pos_conv_groups) * cfg.pos_conv_kernel
    qkv, out = 2 * t * d * d * 3, 2 * t * d * d
    ffn_in, ffn_out = 2 * t * d * f, 2 * t * f * d
    attn = 2 * t * t * d * 2  # q k^T and (scores) v, summed over heads
    layer = qkv + out + ffn_in + ffn_out + attn
    if cfg.pooling == "mean":
        pool = 2 * d  # no product over frames: the head (D -> 1) only
    else:
        pool = 2 * t * d * cfg.pool_hidden + 2 * t * cfg.pool_hidden + 2 * 2 * d
    forward = cnn + proj + pos + cfg.keep_layers * layer + pool

    top, keep = cfg.train_top, cfg.keep_layers
    backward = 2 * pool + 2 * top * layer
    if top == keep:  # the stem trains too (the projection's LayerNorm: its input has a grad)
        backward += 2 * proj + 2 * pos
    return {"forward": forward, "backward": backward, "total": forward + backward}


def step_flops(cfg, sample_lengths: Iterable[int]) -> dict[str, int]:
    """{"forward", "backward", "total"} FLOP of one step over clips of these valid lengths."""
    sums = {"forward": 0, "backward": 0, "total": 0}
    for n in sample_lengths:
        for key, value in clip_flops(cfg, int(n)).items():
            sums[key] += value
    return sums


def bf16_matmul_tflops(n: int = 8192, reps: int = 10) -> float:
    """The CUDA card's rate of an n^3 bf16 product on random data (never zeros: they run
    faster), after three warm-ups, timed with CUDA events: 2 n^3 FLOP per product, TFLOP/s."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return 2 * n**3 * reps / (start.elapsed_time(end) / 1e3) / 1e12
