"""hearsay.detector.model guards: the attention/pooling mask counts exactly the frames the CNN
makes."""

from __future__ import annotations

import pytest
import torch

from hearsay.deploy import MIN_SAMPLES
from hearsay.detector.model import Detector, ModelConfig

STRIDE = 320  # samples per frame of the XLS-R CNN (20 ms @ 16 kHz)
# the deploy minimum, each side of every frame boundary near it, and a spread up to 0.5 s
LENGTHS = sorted({MIN_SAMPLES, MIN_SAMPLES + 1,
                  *(400 + STRIDE * k + d for k in (1, 2, 3, 7, 20) for d in (-1, 0, 1)),
                  *range(401, 8_000, 523)})


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return Detector(ModelConfig.tiny()).eval()


def test_mask_valid_frames_equal_the_cnn_output_length_for_every_length(tiny):
    g = torch.Generator().manual_seed(0)
    waves = [torch.randn(n, generator=g) for n in LENGTHS]
    t = max(LENGTHS)
    x = torch.zeros(len(waves), t)
    m = torch.zeros(len(waves), t, dtype=torch.long)
    for i, w in enumerate(waves):
        x[i, : len(w)], m[i, : len(w)] = w, 1
    with torch.no_grad():
        _, valid = tiny.hidden_states(x, m)  # the mask the encoder and the pooling use
        real = [tiny.backbone.feature_extractor(w[None]).shape[-1] for w in waves]  # unpadded
    counted = valid.sum(dim=1).tolist()
    wrong = [(n, c, r) for n, c, r in zip(LENGTHS, counted, real, strict=True) if c != r]
    assert not wrong, f"(samples, mask frames, CNN frames): {wrong}"
    assert counted[0] >= 1  # the deploy minimum keeps a frame to pool
    frames = torch.arange(valid.shape[1])  # valid frames lead, padding frames follow
    assert torch.equal(valid, frames[None, :] < torch.tensor(real)[:, None])
