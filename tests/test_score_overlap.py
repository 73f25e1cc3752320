"""hearsay.evaluate.overlap: box scoring with the next batch's copy overlapped and one
read-back per several batches gives the logits of one-batch-at-a-time scoring, bit for bit
(on the CPU: the order and the read-back grouping are what is checked; the overlap itself is
CUDA's, timed by scripts/bench_score.py)."""

import numpy as np
import pytest
import torch
from fakes.fake_runs import make_bundle, make_run

from hearsay.detector.model import Detector, ModelConfig
from hearsay.evaluate import overlap, score


def batches(sizes, seed=0):
    """(values (b, T) float32, mask (b, T) int64) host batches, T and the lengths varied."""
    rng = np.random.default_rng(seed)
    out = []
    for k, b in enumerate(sizes):
        lengths = rng.integers(400, 4000 + 400 * k, size=b)
        waves = [rng.standard_normal(n).astype(np.float32) for n in lengths]
        out.append(score.padded(waves))
    return out


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_overlapped_logits_equal_one_batch_at_a_time_across_read_backs(precision):
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny()).eval()
    sizes = [3, 1, 4, 2, 5, 3, 1, 2, 4, 3, 2]  # 11 batches: one full read-back group and a rest
    assert len(sizes) > overlap.SYNC_EVERY
    data = batches(sizes)
    alone = [score.run_padded(det, v, m, "cpu", precision) for v, m in data]
    got = list(overlap.overlapped_logits(det, iter(data), "cpu", precision))
    assert [len(z) for z in got] == sizes
    for a, g in zip(alone, got, strict=True):
        assert g.dtype == np.float64 and np.array_equal(a, g)


def test_no_batch_gives_no_logits():
    det = Detector(ModelConfig.tiny()).eval()
    assert list(overlap.overlapped_logits(det, iter([]))) == []


def test_a_split_scored_with_overlap_has_the_same_scores(tmp_path):
    bundle = make_bundle(tmp_path / "bundle")
    run = make_run(tmp_path / "full", job="full", fold=None, seed=9)
    cfg = score.ScoreConfig(max_batch=2)  # several batches
    plain, side = score.score_split(bundle, run, "holdout", cfg=cfg)
    fed, side_fed = score.score_split(bundle, run, "holdout", cfg=cfg, overlap=True)
    assert plain.equals(fed) and side == side_fed
