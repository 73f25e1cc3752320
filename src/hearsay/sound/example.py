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

Per clip, in this order:

    choose (hearsay.sound.augment; before loading: a codec copy is its own file)
      -> load the original or the codec copy (hearsay.sound.audio.load_audio)
      -> trim_jitter (whole clip) -> random_crop (hearsay.sound.crops)
      -> draw the wave type's parameters (hearsay.sound.transforms.DRAW)
      -> render them on the valid samples (the padding stays zero) -> crops.finish
         (band-limit 7.25 kHz, normalise)

Two paths share every step up to the draw: the numpy path (`training_example`) renders and
finishes here, in the data-loader worker; the GPU path (`plan_example`) stops after the draw and
hearsay.train.augment_gpu renders and finishes the whole batch on the device with the same
parameters. numpy only (no torch).

    from hearsay.sound import augment, example
    name = augment.choose(rng, cfg, available_codecs=row["codec_ids"])   # before loading
    x = load(codec copy if name.startswith("codec:") else original)
    wave, n_valid = example.training_example(x, name, n_samples, rng, cfg)
"""

from __future__ import annotations

import numpy as np

from hearsay.sound import crops
from hearsay.sound.augment import SAMPLE_RATE, WAVE_TYPES, AugmentConfig
from hearsay.sound.transforms import DRAW, RENDER, trim_jitter


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
