"""Training augmentation: one type per clip, the same probability for both classes.

The recipe (docs/DESIGN.md, "Model and training"; every number is an `AugmentConfig` field):
with p 0.65 a clip gets one augmentation type, drawn by weight from

    codec:<c>    a codec copy from the bundle (codecs/<c>/<id>.flac: mp3, opus, aac, amrnb, mulaw)
    noise        coloured Gaussian noise at 5–30 dB SNR
    bandlimit    telephone band: low-pass at 3.4 or 4 kHz
    reverb       exponential-decay impulse response, direct path at lag 0 (no delay)
    gain_clip    gain into a hard-clipping ceiling
    rawboost     RawBoost convolutive (LnL) noise (Tak et al., ICASSP 2022)
    trim_jitter  re-trim at 30–40 dB with 0–200 ms margins (training only; shortens the clip)

The stage is four modules; this one runs the per-clip pipeline and re-exports the others' public
names, so `from hearsay import augment; augment.<name>` reaches all of them:

    hearsay.augment.recipe      AugmentConfig, choose (label-blind), the type names
    hearsay.augment.transforms  the pure numpy transforms: draw_<type>, render_<type>, apply
    hearsay.augment.rates       RateLog / check_balanced (per-class realised rates, exit 9) and
                                stream_shortcut_aucs (duration, peak, leading-silence AUCs)
    hearsay.augment.gpu         the batched torch rendering of the same draws (torch; imported
                                only by the trainer)

Per clip, in this order (`training_example` does it; the trainer only loads the right file):

    choose -> load original or codec copy -> trim_jitter (whole clip) -> random_crop
           -> wave-domain type on the valid samples -> crops.finish (band-limit 7.25 kHz, normalise)

Each wave type is `render_<type>(x, draw_<type>(n, rate, rng, cfg))`: `plan_example` does the
random part on the CPU, and hearsay.augment.gpu renders a whole batch on the GPU with the same
parameters.

Usage::

    from hearsay import augment
    from hearsay.sound import crops
    name = augment.choose(rng, cfg, available_codecs=row.codec_ids)   # before loading
    x = load(codec copy if name.startswith("codec:") else original)
    wave, n_valid = augment.training_example(x, name, n_samples, rng, cfg)
    rate_log.record(row.source, row.label, name)
"""

from __future__ import annotations

import numpy as np

from hearsay.augment.rates import (
    SHORTCUT_GATE,
    STREAM_FEATURES,
    AugmentRateError,
    RateLog,
    stream_record,
    stream_shortcut_aucs,
)
from hearsay.augment.recipe import (
    CODECS,
    SAMPLE_RATE,
    TYPES,
    WAVE_TYPES,
    AugmentConfig,
    choose,
    family,
    parse_codecs,
)
from hearsay.augment.transforms import (
    DRAW,
    RENDER,
    TRANSFORMS,
    add_noise,
    apply,
    bandlimit,
    coloured_noise,
    draw_bandlimit,
    draw_gain_clip,
    draw_noise,
    draw_rawboost,
    draw_reverb,
    gain_clip,
    rawboost,
    render_bandlimit,
    render_gain_clip,
    render_noise,
    render_rawboost,
    render_reverb,
    reverb,
    trim_jitter,
)
from hearsay.contracts.manifest import LABELS
from hearsay.sound import crops

__all__ = [  # the names other modules, scripts and tests reach as augment.<name>
    "CODECS", "DRAW", "LABELS", "RENDER", "SAMPLE_RATE", "SHORTCUT_GATE", "STREAM_FEATURES",
    "TRANSFORMS", "TYPES", "WAVE_TYPES", "AugmentConfig", "AugmentRateError", "RateLog",
    "add_noise", "apply", "bandlimit", "choose", "coloured_noise",
    "draw_bandlimit", "draw_gain_clip", "draw_noise", "draw_rawboost", "draw_reverb", "family",
    "gain_clip", "parse_codecs", "plan_example", "rawboost", "render_bandlimit",
    "render_gain_clip", "render_noise", "render_rawboost", "render_reverb", "reverb",
    "stream_record", "stream_shortcut_aucs", "training_example", "trim_jitter",
]


def plan_example(x: np.ndarray, name: str, n_samples: int, rng: np.random.Generator,
                 cfg: AugmentConfig = AugmentConfig()) -> tuple[np.ndarray, int, dict | None]:
    """The random part of one example: trim_jitter (whole clip) -> random crop -> draw params.

    Returns (crop (n_samples,) float32 zero-padded, n_valid, params for `name` or None). Render
    with RENDER[name] on crop[:n_valid] (numpy) or hearsay.augment.gpu (a batch), then finish.
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
