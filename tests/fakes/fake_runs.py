"""A hand-made bundle and training run (a random-init tiny model), for the score and assembly
tests."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf
import torch

from hearsay.detector import layer_weights
from hearsay.detector.model import Detector, ModelConfig, save_detector
from hearsay.sound import audio

SR = audio.SAMPLE_RATE


TREE_SHA = "t" * 40  # a hand-made bundle: any fixed string stands for the tree-sha


def make_bundle(root: Path, n_per_fold=2, n_holdout=4, n_test=3, codecs=("mp3",), seed=0,
                n_probe=0):
    """A bundle as INTERFACES.md lays it out; clips 0.6-2.5 s, codec copies are re-noised waves;
    `n_probe` rows in fold probe (the probe set), every other one bona fide.

    Returns the object `hearsay.contracts.bundle.load_bundle` returns (root, manifest, meta,
    tree_sha).
    """
    rng = np.random.default_rng(seed)
    rows = []
    folds = [str(k) for k in range(5) for _ in range(n_per_fold)] + \
        ["holdout"] * n_holdout + ["test"] * n_test + ["probe"] * n_probe + ["extra", "2"]
    for i, fold in enumerate(folds):
        cid = f"c{i:03d}"
        label = "spoof" if i % 2 else "bonafide"
        dur = float(rng.uniform(0.6, 2.5))
        t = np.arange(int(dur * SR)) / SR
        x = 0.3 * np.sin(2 * np.pi * rng.uniform(150, 400) * t) + 0.01 * rng.normal(size=len(t))
        (root / "audio").mkdir(parents=True, exist_ok=True)
        sf.write(root / "audio" / f"{cid}.flac", x.astype(np.float32), SR, subtype="PCM_16")
        for c in codecs:
            (root / "codecs" / c).mkdir(parents=True, exist_ok=True)
            y = x[: len(x) - 160] + 0.02 * rng.normal(size=len(x) - 160)
            sf.write(root / "codecs" / c / f"{cid}.flac", y.astype(np.float32), SR,
                     subtype="PCM_16")
        scope = "extra" if i >= len(folds) - 2 else "core"
        rows.append(dict(id=cid, path=f"clips/{cid}.wav", label=label,
                         generator="g1" if label == "spoof" else "bonafide",
                         source="srcA" if i % 3 else "srcB", group=f"grp{i}", fold=fold,
                         train_scope=scope, duration=dur, codec_ids=";".join(codecs),
                         flac=f"audio/{cid}.flac"))
    manifest = pd.DataFrame(rows)
    manifest.to_csv(root / "manifest.csv", index=False)
    meta = {"tree_sha": TREE_SHA, "counts": {"rows": len(rows)},
            "folds": {"config": {"n_folds": 5}}}
    (root / "bundle_meta.json").write_text(json.dumps(meta))
    return types.SimpleNamespace(root=root, manifest=manifest, meta=meta, tree_sha=TREE_SHA,
                                 n_folds=5)


def make_run(run: Path, job="fold", fold=0, seed=0, steps=100, tree_sha=TREE_SHA,
             config_hash="cfg0"):
    """A run dir with a tiny random-init final model and run_meta.json (INTERFACES.md)."""
    torch.manual_seed(seed)
    det = Detector(ModelConfig.tiny())
    save_detector(det, run / "final")
    (run / "config.json").write_text((run / "final" / "config.json").read_text())
    meta = {"job": job, "fold": fold if job == "fold" else None, "config_hash": config_hash,
            "bundle_tree_sha": tree_sha, "base_weights_sha": "random-init", "git_sha": "g" * 40,
            "steps": steps, "epochs": 1, "device": "cpu", "complete": True,
            "layer_weights": layer_weights.readout(det, layer_weights.DEFAULT_RULE)}
    (run / "run_meta.json").write_text(json.dumps(meta))
    return run
