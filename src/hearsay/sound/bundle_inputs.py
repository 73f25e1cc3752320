"""A bundle row's model input, as `hearsay score` and parity B build it: which file (the clip,
or one of its codec copies), the row's test-time augmentation (drawn from the clip's own
generator: the same for every model that scores the row), and the front end.

    augs = aug_plan(rows, seed)                       # one name per row: "none", "codec:mp3", ...
    x = model_input(bundle_root, row, augs[i], cfg)   # (N,) float32, N <= cfg.max_s * 16 kHz
    ws = window_inputs(bundle_root, row, aug, cfg)    # hearsay-score's windows of the whole clip

`cfg` is a hearsay.evaluate.score.ScoreConfig (max_s, hop_s, aug_seed are read).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from hearsay.sound import audio


def aug_rng(seed: int, clip_id: str) -> np.random.Generator:
    """The clip's own generator: depends on the seed and the id, nothing else."""
    return np.random.default_rng([int(seed), zlib.crc32(str(clip_id).encode())])


def aug_config():
    from hearsay.sound.augment import AugmentConfig

    return AugmentConfig(p_aug=1.0, w_trim_jitter=0.0)  # one type per clip, test-time types only


def aug_plan(rows, seed: int) -> list[str]:
    """One augmentation name per row ("codec:<c>" or a wave type); identical for every model."""
    from hearsay.sound import augment

    cfg = aug_config()
    codecs = rows["codec_ids"] if "codec_ids" in rows.columns else [None] * len(rows)
    return [augment.choose(aug_rng(seed, cid), cfg, c)
            for cid, c in zip(rows["id"], codecs, strict=True)]


def clip_file(root: Path, row, aug: str) -> Path:
    if aug.startswith("codec:"):
        return root / "codecs" / aug.split(":", 1)[1] / f"{row['id']}.flac"
    flac = row.get("flac")
    return root / (flac if isinstance(flac, str) and flac else f"audio/{row['id']}.flac")


def model_input(root: Path, row, aug: str, cfg) -> np.ndarray:
    """(N,) float32 normalised model input of one bundle row, N <= max_s * 16 kHz."""
    x = clip_wave(root, row, aug, cfg, cfg.max_s)
    return audio.prepare(x, cfg.max_s, trim=False)  # bundle clips are trimmed already


def window_inputs(root: Path, row, aug: str, cfg) -> list[np.ndarray]:
    """The row's whole clip as hearsay-score's windows (max_s every hop_s), each normalised."""
    from hearsay.sound.windows import wave_windows

    x = clip_wave(root, row, aug, cfg, None)
    return [w.wave for w in wave_windows(x, cfg.max_s, cfg.hop_s, trim=False)]


def clip_wave(root: Path, row, aug: str, cfg, cap_s: float | None) -> np.ndarray:
    """The bundle clip (capped at cap_s), with the row's augmentation when one is asked."""
    x = audio.cap(audio.load_audio(clip_file(root, row, aug)), cap_s)
    if aug not in ("none", "") and not aug.startswith("codec:"):
        from hearsay.sound import augment

        rng = aug_rng(cfg.aug_seed, row["id"])
        augment.choose(rng, aug_config(), row.get("codec_ids"))  # same draws as aug_plan
        x = augment.apply(aug, x, rng, aug_config())
    return x
