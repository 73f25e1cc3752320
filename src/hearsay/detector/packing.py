"""Packed attention: a batch's clips laid end to end in a few rows, so the transformer layers
compute no padding frame, and a document mask keeps each clip's attention inside the clip.

    from hearsay.detector.packing import pack_plan
    plan = pack_plan(lengths, n_samples, det.cfg, "sdpa", device)   # lengths: (B,) host ints
    logits = det(input_values, attention_mask, packed=plan)          # (B,) as unpacked

What is packed, and what is not (why the logits equal the padded forward's):
  the CNN feature encoder, the projection, SpecAugment and the positional conv run on the
  padded (B, T') layout as before: the CNN's receptive field (400 samples) and the positional
  conv's (pos_conv_kernel frames) then see each clip alone with zeros beyond its end, exactly
  as unpacked, and SpecAugment draws the same numbers. Only the kept transformer layers (the
  bulk of the FLOPs) run packed: (B, T', D) -> (R, C, D) -> layers -> back to (B, T', D), where
  C = T' (the batch's cut length: every clip fits a row) and R <= B rows, first fit, longest
  clip first, rounded up to a multiple of ROW_MULTIPLE rows (a handful of shapes per crop
  bucket for torch.compile; the rounding rows hold padding only).

Attention kinds (TrainConfig.pack):
  "sdpa": scaled_dot_product_attention with an (R, 1, C, C) bool document mask built on the
          device; attention dropout as unpacked. Runs everywhere (the CPU parity test).
  "flex": FlexAttention with a BlockMask of the same documents, made on the host side per
          batch: blocks (128 x 128 frames) no document spans are skipped. FlexAttention has no
          attention dropout, so training with model.attention_dropout > 0 is refused, and no
          backward off CUDA, so it trains on CUDA only (flex_training_problem).
Padding positions (the row tails) form their own document (-1): they attend each other, never
a clip, and the unpacking drops them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

PACK_KINDS = ("off", "sdpa", "flex")  # TrainConfig.pack
ROW_MULTIPLE = 8  # packed rows are rounded up to this (bounded compiled shapes per bucket)


class Packed(NamedTuple):
    """One batch's packing, every tensor on the model's device (built by pack_plan)."""

    kind: str  # "sdpa" or "flex"
    gather: torch.Tensor  # (R*C,) int64: index into the padded (B*T' + 1) frames; B*T' = a zero
    scatter: torch.Tensor  # (B*T',) int64: index into the packed (R*C + 1) frames; R*C = zero
    doc: torch.Tensor  # (R, C) int64: the clip (0..B-1) at each packed frame, -1 = padding
    block_mask: object | None  # flex: torch.nn.attention.flex_attention.BlockMask


def frame_lengths(sample_lengths: torch.Tensor, cfg) -> torch.Tensor:
    """(B,) valid samples -> (B,) valid frames, by the CNN's length formula (the only copy:
    Detector.frame_mask calls it; on a host tensor it is the packing plan's)."""
    lengths = sample_lengths
    for k, s in zip(cfg.conv_kernel, cfg.conv_stride, strict=True):
        lengths = torch.div(lengths - k, s, rounding_mode="floor") + 1
    return lengths


def _rows(frames: list[int], capacity: int) -> list[list[int]]:
    """First fit, longest first: clip indices per row, each row's frames <= capacity."""
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(frames)), key=lambda j: -frames[j]):
        r = next((r for r, left in enumerate(room) if frames[i] <= left), None)
        if r is None:
            rows.append([])
            room.append(capacity)
            r = len(rows) - 1
        rows[r].append(i)
        room[r] -= frames[i]
    return rows


def pack_plan(sample_lengths, n_samples: int, cfg, kind: str,
              device: torch.device | str = "cpu") -> Packed:
    """The packing of a batch whose clips have `sample_lengths` valid samples (host ints, (B,))
    in input rows of `n_samples`; cfg is the ModelConfig (CNN shape). Host work only, then
    three non-blocking copies from pinned memory (CUDA): nothing waits for the device."""
    if kind not in ("sdpa", "flex"):
        raise ValueError(f"packing kind {kind!r}: use one of {PACK_KINDS[1:]}")
    host = torch.as_tensor(np.asarray(sample_lengths, dtype=np.int64))
    frames = frame_lengths(host, cfg).clamp(min=0).tolist()  # (B,) valid frames
    t = int(frame_lengths(torch.tensor(n_samples), cfg))  # T': frames of the padded layout
    b, cap = len(frames), t
    rows = _rows(frames, cap)
    n_rows = -(-len(rows) // ROW_MULTIPLE) * ROW_MULTIPLE
    gather = np.full((n_rows, cap), b * t, dtype=np.int64)  # default: the zero frame
    doc = np.full((n_rows, cap), -1, dtype=np.int64)
    scatter = np.full(b * t, n_rows * cap, dtype=np.int64)  # default: the packed zero frame
    for r, clips in enumerate(rows):
        at = 0
        for i in clips:
            n = frames[i]
            gather[r, at: at + n] = i * t + np.arange(n)
            doc[r, at: at + n] = i
            scatter[i * t: i * t + n] = r * cap + at + np.arange(n)
            at += n
    pin = torch.device(device).type == "cuda"  # a pinned source: the copy never waits
    moved = [(torch.from_numpy(a).pin_memory() if pin else torch.from_numpy(a))
             .to(device, non_blocking=True) for a in (gather.reshape(-1), scatter, doc)]
    block_mask = _flex_block_mask(moved[2]) if kind == "flex" else None
    return Packed(kind, *moved, block_mask)


def _flex_block_mask(doc: torch.Tensor):
    """FlexAttention's BlockMask: a query frame sees the key frames of its own document."""
    from torch.nn.attention.flex_attention import create_block_mask

    def same_doc(b, h, q, k):
        return doc[b, q] == doc[b, k]

    n_rows, cap = doc.shape
    return create_block_mask(same_doc, B=n_rows, H=None, Q_LEN=cap, KV_LEN=cap,
                             device=doc.device)


def pack(h: torch.Tensor, plan: Packed) -> torch.Tensor:
    """(B, T', D) padded -> (R, C, D) packed (row tails zero)."""
    b, t, d = h.shape
    flat = torch.cat([h.reshape(b * t, d), h.new_zeros(1, d)])  # (B*T' + 1, D)
    return flat[plan.gather].view(*plan.doc.shape, d)


def unpack(h: torch.Tensor, plan: Packed, b: int, t: int) -> torch.Tensor:
    """(R, C, D) packed -> (B, T', D) padded (padding frames zero)."""
    d = h.shape[-1]
    flat = torch.cat([h.reshape(-1, d), h.new_zeros(1, d)])  # (R*C + 1, D)
    return flat[plan.scatter].view(b, t, d)


def packed_layer(layer, h: torch.Tensor, plan: Packed) -> torch.Tensor:
    """One transformers Wav2Vec2EncoderLayerStableLayerNorm on (R, C, D), its own weights and
    order (pre-LN attention, dropout, residual, pre-LN feed-forward), attention per document."""
    res = h
    h = res + layer.dropout(_attend(layer.attention, layer.layer_norm(h), plan))
    return h + layer.feed_forward(layer.final_layer_norm(h))


def flex_training_problem(device: torch.device | str) -> str | None:
    """Why pack 'flex' cannot train on `device`, or None (FlexAttention's backward is CUDA's;
    on the CPU it runs forward only: the parity tests)."""
    if torch.device(device).type == "cuda":
        return None
    return (f"pack 'flex' trains on CUDA only (FlexAttention has no backward on "
            f"{torch.device(device).type}): use pack 'sdpa' there")


def _attend(attn, h: torch.Tensor, plan: Packed) -> torch.Tensor:
    """Multi-head self-attention of (R, C, D) inside each document -> (R, C, D)."""
    r, c, d = h.shape
    heads = attn.num_heads
    q, k, v = (proj(h).view(r, c, heads, d // heads).transpose(1, 2)  # (R, H, C, D/H)
               for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
    if plan.kind == "flex":
        from torch.nn.attention.flex_attention import flex_attention

        if attn.training and attn.dropout > 0:
            raise ValueError(f"pack 'flex' has no attention dropout (model.attention_dropout "
                             f"{attn.dropout}): train with pack 'sdpa', or attention_dropout 0")
        if q.requires_grad and (why := flex_training_problem(q.device)):
            raise ValueError(why)
        o = flex_attention(q, k, v, block_mask=plan.block_mask, scale=attn.scaling)
    else:
        mask = (plan.doc[:, :, None] == plan.doc[:, None, :]).unsqueeze(1)  # (R, 1, C, C)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=attn.scaling,
                                           dropout_p=attn.dropout if attn.training else 0.0)
    return attn.out_proj(o.transpose(1, 2).reshape(r, c, d))
