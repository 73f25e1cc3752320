"""hearsay.train.loop: a batch is cut to the smallest crop bucket holding its longest clip; the
valid and computed audio and the batch shapes land in run_meta."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from train_world import _clip, make_easy_bundle

from hearsay import train as tr
from hearsay.sound import audio, example
from hearsay.train import config as tcfg


def _bundle_with_two_long_clips(root):
    """The easy bundle (clips 1-2.5 s) with one training clip per class made 6 s long: the class
    cap, and so the drawn crops, reach 6 s while most batches hold only short clips."""
    from hearsay.contracts.bundle import tree_sha, write_identity

    make_easy_bundle(root)
    df = pd.read_csv(root / "manifest.csv", dtype={"fold": str})
    rng = np.random.default_rng(1)
    for label in ("bonafide", "spoof"):
        i = df.index[(df["fold"] == "1") & (df["label"] == label)][0]
        sf.write(root / df.at[i, "flac"], _clip(label, 6.0, rng), audio.SAMPLE_RATE,
                 subtype="PCM_16")
        df.at[i, "duration"] = 6.0
    df.to_csv(root / "manifest.csv", index=False)
    meta = json.loads((root / "bundle_meta.json").read_text())
    write_identity(root, meta)
    meta["tree_sha"] = tree_sha(root)
    (root / "bundle_meta.json").write_text(json.dumps(meta))
    return root


def test_a_batch_shorter_than_its_crop_is_cut_to_the_bucket_holding_its_longest_clip(tmp_path):
    bundle_dir = _bundle_with_two_long_clips(tmp_path / "bundle")
    seen = []  # (T, longest valid, B) of every training batch the model was fed

    def record(det):
        forward = det.forward

        def wrapped(iv, am):
            if det.training:  # not the readouts' whole clips
                seen.append((iv.shape[1], int(am.sum(1).max()), iv.shape[0]))
            return forward(iv, am)

        det.forward = wrapped

    # every draw is above the class cap: each batch's crop is the largest bucket under it
    cfg = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {"batches_per_epoch": 6, "max_crop_s": 0.0},
        "crop": {"p_test_dist": 0.0, "uniform_min_s": 13.0, "uniform_max_s": 14.0}})
    meta = tr.run(cfg, bundle_dir, tmp_path / "run", model_hook=record)
    buckets = example.CropConfig().buckets_s
    drawn = max(t for t, _, _ in seen)
    assert all(example.cut_samples(longest, t, buckets) == t for t, longest, _ in seen)
    assert any(t < drawn for t, _, _ in seen), f"no batch was cut: {seen}"
    tp = meta["throughput"]
    computed = sum(t * b for t, _, b in seen) / audio.SAMPLE_RATE
    assert tp["computed_audio_s"] == pytest.approx(computed, abs=1e-3)
    assert 0 < tp["valid_share"] <= 1
    assert tp["valid_share"] == pytest.approx(tp["valid_audio_s"] / computed, rel=1e-3)
    assert tp["batch_shapes"] == len({(b, t) for t, _, b in seen})
