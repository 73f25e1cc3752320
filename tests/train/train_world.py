"""A tiny easy bundle made in code, and the small helpers the trainer's tests share."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import soundfile as sf

from hearsay.train import config as tcfg

SR = 16_000


# --------------------------------------------------------------------------- a tiny bundle


def _clip(label: str, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """bona fide: a harmonic tone with vibrato; spoof: band noise. Easy for a tiny model."""
    t = np.arange(int(seconds * SR)) / SR
    if label == "bonafide":
        f0 = rng.uniform(110, 220) * (1 + 0.01 * np.sin(2 * np.pi * 5 * t))
        phase = 2 * np.pi * np.cumsum(f0) / SR
        x = sum(np.sin(k * phase) / k for k in range(1, 6))
    else:
        x = rng.standard_normal(len(t))
    return (0.3 * x / np.max(np.abs(x))).astype(np.float32)


def make_easy_bundle(root, seed: int = 0, copies_for=("bonafide", "spoof"),
                     sources=("studio", "phone")):
    """A bundle in the docs/INTERFACES.md layout (read by the real load_bundle) whose classes a
    tiny random model separates within a few steps: only the loss-falls smoke uses it. Every
    other test trains on conftest's `demo_bundle` (the real bundle stage on the demo corpus).
    5 inner folds x 2 sources (`sources`) x 2 clips per class, holdout, test, extra rows; mp3
    "copies" are filtered copies (the layout, not a real codec)."""
    from hearsay.contracts.bundle import tree_sha, write_identity

    rng = np.random.default_rng(seed)
    (root / "audio").mkdir(parents=True)
    (root / "codecs" / "mp3").mkdir(parents=True)
    rows = []

    def add(fold, label, source, scope="core", generator=None):
        rid = f"c{len(rows):03d}"
        dur = float(rng.uniform(1.0, 2.5))
        x = _clip(label, dur, rng)
        sf.write(root / "audio" / f"{rid}.flac", x, SR, subtype="PCM_16")
        has_copy = len(rows) % 2 == 0 and label in copies_for
        if has_copy:
            y = np.convolve(x, np.ones(4) / 4, mode="same").astype(np.float32)
            sf.write(root / "codecs" / "mp3" / f"{rid}.flac", y, SR, subtype="PCM_16")
        gen = generator or ("bonafide" if label == "bonafide" else "voc-a")
        rows.append({"id": rid, "path": f"orig/{rid}.wav", "label": label, "generator": gen,
                     "source": source, "group": f"g{fold}{source}", "fold": fold,
                     "train_scope": scope, "duration": round(dur, 4),
                     "codec_ids": "mp3" if has_copy else "", "flac": f"audio/{rid}.flac"})

    for fold in ["0", "1", "2", "3", "4", "holdout", "test"]:
        for source in sources:
            for label in ("bonafide", "spoof"):
                for _ in range(2):
                    add(fold, label, source)
    add("extra", "spoof", "studio", scope="extra", generator="smear-x")
    add("extra", "spoof", "phone", scope="extra", generator="voc-x")
    add("extra", "bonafide", "studio", scope="extra")
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    meta = {"status": "ok", "codecs": ["mp3"], "counts": {},
            "folds": {"config": {"family_exclusion": {"0": ["smear"]}}}}
    write_identity(root, meta)  # the fold config is part of the bundle's identity
    meta["tree_sha"] = tree_sha(root)
    (root / "bundle_meta.json").write_text(json.dumps(meta))
    return root


def smoke(job="fold", fold=0, **train):
    return tcfg.resolve_config(job, fold, cpu_smoke=True, overrides={"train": train})


def final_weights(out):
    from safetensors.torch import load_file

    return load_file(str(out / "final" / "model.safetensors"))


def family_of(gen: str) -> str:
    return gen.split("-")[0]
