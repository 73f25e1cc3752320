"""Packed attention (hearsay.detector.packing) and the mask-free forward: the same logits and
gradients as the padded forward on the CPU in fp32, attention that never spans two clips, and no
key mask handed to SDPA when every clip fills the batch (on CUDA a bool mask keeps SDPA off its
flash kernel; on the CPU torch's flash kernel takes masks too, so the test is the mask not
passed)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hearsay.detector import packing
from hearsay.detector.model import Detector, ModelConfig

LENGTHS = [16000, 3200, 12000, 400, 8000, 15999]  # samples: full, short, the CNN's minimum, …


def batch(lengths, n=None, seed=0):
    """(B, n) float32 noise zero past each length, (B, n) int64 mask."""
    n = n or max(lengths)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), n, generator=g)
    mask = (torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]).long()
    return x * mask, mask


def model(**kw):
    torch.manual_seed(0)
    return Detector(ModelConfig.tiny(**kw)).eval()


@pytest.mark.parametrize("kind", ["sdpa", "flex"])
@pytest.mark.parametrize("pooling", ["attentive", "mean"])
def test_packed_logits_match_padded_in_fp32(kind, pooling):
    det = model(pooling=pooling)
    x, mask = batch(LENGTHS)
    plan = packing.pack_plan(LENGTHS, x.shape[1], det.cfg, kind)
    with torch.no_grad():
        padded = det(x, mask)
        packed = det(x, mask, packed=plan)
    torch.testing.assert_close(packed, padded, rtol=1e-5, atol=1e-5)


def test_packed_rows_hold_several_clips_and_no_padding_but_their_tails():
    det = model()
    plan = packing.pack_plan(LENGTHS, max(LENGTHS), det.cfg, "sdpa")
    frames = packing.frame_lengths(torch.tensor(LENGTHS), det.cfg).tolist()
    used = {int(r) for r in torch.nonzero(plan.doc >= 0)[:, 0]}
    assert len(used) < len(LENGTHS)  # at least two clips share a row
    assert plan.doc.shape[0] % packing.ROW_MULTIPLE == 0
    assert [int((plan.doc == i).sum()) for i in range(len(LENGTHS))] == frames
    for r in range(plan.doc.shape[0]):  # a row: its clips, then only padding
        row = plan.doc[r].tolist()
        tail = row.index(-1) if -1 in row else len(row)
        assert all(d == -1 for d in row[tail:]) and all(d >= 0 for d in row[:tail])


def test_a_clip_in_a_packed_row_never_sees_its_neighbour():
    """Change one clip's audio: only its own logit moves, though it shares a row."""
    det = model()
    lengths = [16000, 6000, 6000]
    x, mask = batch(lengths)
    plan = packing.pack_plan(lengths, x.shape[1], det.cfg, "sdpa")
    row_of = {i: int(torch.nonzero(plan.doc == i)[0, 0]) for i in range(3)}
    assert row_of[1] == row_of[2]  # clips 1 and 2 share a row
    y = x.clone()
    y[2, :6000] = torch.randn(6000)
    with torch.no_grad():
        a, b = det(x, mask, packed=plan), det(y, mask, packed=plan)
    assert torch.equal(a[:2], b[:2]) and not torch.equal(a[2], b[2])


def test_packed_training_gradients_match_padded():
    """Train mode (SpecAugment on, the same generator state for both): the same loss and
    gradients within fp32 tolerance."""
    det = model(mask_time_prob=0.3, mask_time_length=2)
    det.train()
    x, mask = batch(LENGTHS)
    y = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    plan = packing.pack_plan(LENGTHS, x.shape[1], det.cfg, "sdpa")
    grads = []
    for kw in ({}, {"packed": plan}):
        det.generator = torch.Generator().manual_seed(3)
        det.zero_grad(set_to_none=True)
        F.binary_cross_entropy_with_logits(det(x, mask, **kw), y).backward()
        grads.append({n: p.grad.clone() for n, p in det.named_parameters()
                      if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-4, atol=1e-5, msg=name)


def test_flex_refuses_training_with_attention_dropout():
    det = model(attention_dropout=0.1).train()
    x, mask = batch(LENGTHS)
    plan = packing.pack_plan(LENGTHS, x.shape[1], det.cfg, "flex")
    with pytest.raises(ValueError, match="no attention dropout.*pack 'sdpa'"):
        det(x, mask, packed=plan)


def test_flex_trains_on_cuda_only_but_scores_on_the_cpu():
    det = model().train()  # the tiny model: attention dropout 0
    x, mask = batch(LENGTHS)
    plan = packing.pack_plan(LENGTHS, x.shape[1], det.cfg, "flex")
    with pytest.raises(ValueError, match="trains on CUDA only.*use pack 'sdpa'"):
        det(x, mask, packed=plan)
    assert packing.flex_training_problem("cuda") is None


def test_unknown_packing_kind_names_the_known_ones():
    with pytest.raises(ValueError, match=r"'varlen'.*\('sdpa', 'flex'\)"):
        packing.pack_plan([400], 400, ModelConfig.tiny(), "varlen")


def sdpa_masks(monkeypatch) -> list:
    """The attn_mask of every scaled_dot_product_attention call from here on."""
    seen, real = [], F.scaled_dot_product_attention

    def spy(*args, **kw):
        seen.append(kw.get("attn_mask"))
        return real(*args, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    return seen


def test_mask_free_forward_passes_no_key_mask_and_matches(monkeypatch):
    det = model()
    x, mask = batch([8000] * 4)  # every clip fills T
    with torch.no_grad():
        masked = det(x, mask)
        seen = sdpa_masks(monkeypatch)
        free = det(x, mask, mask_free=True)
    assert len(seen) == det.cfg.keep_layers and all(m is None for m in seen)
    torch.testing.assert_close(free, masked, rtol=1e-5, atol=1e-5)


def test_padded_forward_passes_a_bool_key_mask(monkeypatch):
    """Today's forward: the key mask that sends SDPA off the flash kernel (the baseline)."""
    det = model()
    x, mask = batch([8000] * 4)
    seen = sdpa_masks(monkeypatch)
    with torch.no_grad():
        det(x, mask)
    assert len(seen) == det.cfg.keep_layers and all(m.dtype == torch.bool for m in seen)
