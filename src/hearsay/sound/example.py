"""One training example, built in one place: choose -> load -> crop -> augment -> finish.

The recipe (docs/DESIGN.md, "Model and training"; every number is an `AugmentConfig` field of
hearsay.sound.augment): with p 0.65 a clip gets one augmentation type, drawn by weight from

    codec:<c>    a codec copy from the bundle (codecs/<c>/<id>.flac: mp3, opus, aac, amrnb, mulaw)
    noise        coloured Gaussian noise at 5–30 dB SNR
    bandlimit    telephone band: low-pass at 3.4 or 4 kHz
    reverb       exponential-decay impulse response, direct path at lag 0 (no delay)
    gain_clip    gain into a hard-clipping ceiling
    rawboost     RawBoost convolutive (LnL) noise (Tak et al., ICASSP 2022)
    trim_jitter  re-trim at 30–40 dB with 0–200 ms margins (training only; shortens the clip)

Per clip, in this order (`build` does all of it; the trainer's batches call it once per clip):

    choose (hearsay.sound.augment; before loading: a codec copy is its own file)
      -> load the original or the codec copy (hearsay.sound.audio.load_audio)
      -> trim_jitter (whole clip) -> random_crop (hearsay.sound.crops)
      -> draw the wave type's parameters (hearsay.sound.augment.DRAW)
      -> render them on the valid samples (the padding stays zero) -> crops.finish
         (band-limit 7.25 kHz, normalise)

Two paths share every step up to the draw: the numpy path (`render=True`) renders and finishes
here, in the data-loader worker; the GPU path (`render=False`) stops after the draw and
hearsay.train.augment_gpu renders and finishes the whole batch on the device with the same
parameters. numpy only (no torch).

    from hearsay.sound import example
    ex = example.build(root, row, n_samples, rng, cfg, locate=clip_file, render=True)
    ex.wave, ex.n_valid, ex.name, ex.params      # (n_samples,) float32, int, str, dict | None
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hearsay.sound import audio, crops
from hearsay.sound.augment import (
    DRAW,
    RENDER,
    SAMPLE_RATE,
    WAVE_TYPES,
    AugmentConfig,
    choose,
    trim_jitter,
)


@dataclass
class Example:
    """One model input as the trainer batches it."""

    wave: np.ndarray  # (n_samples,) float32 @ 16 kHz, zeros past n_valid
    n_valid: int  # valid samples at the start of `wave`
    name: str  # the augmentation type drawn ("none", "codec:mp3", "reverb", ...)
    params: dict | None  # the drawn parameters, still to render (GPU path); None when rendered


def build(root: Path, row: Mapping, n_samples: int, rng: np.random.Generator,
          cfg: AugmentConfig, *, locate: Callable[[Mapping, str], str],
          render: bool = True) -> Example:
    """The example of one training row: choose -> load -> crop -> augment (-> finish).

    `locate(row, name)` is the clip's file relative to `root`: the original, or the codec copy
    when name is "codec:<c>". `render=False` (the GPU path) returns the crop with the drawn
    parameters, not yet rendered nor finished. `rng` moves on by the same draws either way."""
    name = choose(rng, cfg, row["codec_ids"])
    x = audio.load_audio(root / locate(row, name))
    if render:
        wave, n_valid = training_example(x, name, n_samples, rng, cfg)
        return Example(wave, n_valid, name, None)
    wave, n_valid, params = plan_example(x, name, n_samples, rng, cfg)
    return Example(wave, n_valid, name, params)


def plan_example(x: np.ndarray, name: str, n_samples: int, rng: np.random.Generator,
                 cfg: AugmentConfig = AugmentConfig()) -> tuple[np.ndarray, int, dict | None]:
    """The random part of one example: trim_jitter (whole clip) -> random crop -> draw params.

    Returns (crop (n_samples,) float32 zero-padded, n_valid, params for `name` or None). Render
    with RENDER[name] on crop[:n_valid] (numpy) or hearsay.train.augment_gpu (a batch), then
    finish.
    """
    if name == "trim_jitter":
        x = trim_jitter(x, SAMPLE_RATE, rng, cfg)
    wave, n_valid = crops.random_crop(x, n_samples, rng)
    params = DRAW[name](n_valid, SAMPLE_RATE, rng, cfg) if name in WAVE_TYPES else None
    return wave, n_valid, params


def training_example(x: np.ndarray, name: str, n_samples: int, rng: np.random.Generator,
                     cfg: AugmentConfig = AugmentConfig()) -> tuple[np.ndarray, int]:
    """One model input from a loaded clip (the codec copy when name is "codec:<c>").

    plan_example -> render the type on the valid samples only (the padding stays zero) ->
    crops.finish (band-limit 7.25 kHz, normalise). Returns (wave (n_samples,) float32, n_valid).
    """
    wave, n_valid, params = plan_example(x, name, n_samples, rng, cfg)
    if params is not None:
        wave[:n_valid] = RENDER[name](wave[:n_valid], params, SAMPLE_RATE)
    return crops.finish(wave, n_valid), n_valid
