"""What a training clip gets: the augmentation recipe (`AugmentConfig`) and `choose`.

The recipe's numbers are `AugmentConfig` fields (docs/DESIGN.md, "Model and training"):
with p 0.65 a clip gets one augmentation type, drawn by weight. `choose` never sees the label,
so both classes get the same probabilities by construction. The transforms themselves are in
hearsay.sound.transforms; one training example is built in
hearsay.sound.example.

    from hearsay.sound.augment import AugmentConfig, choose
    name = choose(rng, AugmentConfig(), available_codecs="mp3;opus")  # "none", "codec:mp3", ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from hearsay import config
from hearsay.sound import audio, codecs

SAMPLE_RATE = audio.SAMPLE_RATE
CODECS = tuple(codecs.CODECS)  # the bundle's codec copies (hearsay.sound.codecs)
TYPES = ("codec", "noise", "bandlimit", "reverb", "gain_clip", "rawboost", "trim_jitter")
WAVE_TYPES = ("noise", "bandlimit", "reverb", "gain_clip", "rawboost")  # same length out


@dataclass(frozen=True)
class AugmentConfig:
    """Augmentation recipe. Ranges are (low, high), drawn uniformly."""

    p_aug: float = 0.65  # probability that a clip (of either class) gets one augmentation
    w_codec: float = 1.0  # relative weight of each type among augmented clips
    w_noise: float = 1.0
    w_bandlimit: float = 1.0
    w_reverb: float = 1.0
    w_gain_clip: float = 1.0
    w_rawboost: float = 2.0  # 2 of 8: RawBoost on 0.25 of augmented clips (DESIGN "p 0.25")
    w_trim_jitter: float = 1.0
    codecs: tuple[str, ...] = CODECS  # codec copies that may be used (the bundle's names)
    noise_snr_db: tuple[float, float] = (5.0, 30.0)  # dB, signal power / noise power
    noise_tilt: tuple[float, float] = (0.0, 2.0)  # noise power ~ 1/f^tilt: 0 white, 1 pink, 2 brown
    bandlimit_hz: tuple[float, ...] = (3400.0, 4000.0)  # low-pass cut-offs, one picked per clip
    reverb_rt60_s: tuple[float, float] = (0.2, 1.0)  # s to decay 60 dB
    reverb_drr_db: tuple[float, float] = (0.0, 15.0)  # direct-to-reverberant energy ratio, dB
    clip_drive_db: tuple[float, float] = (1.0, 12.0)  # dB the peak is driven above the ceiling
    clip_ceiling: float = 0.999  # hard-clip level after the gain (full scale)
    rb_bands: int = 5  # RawBoost LnL: filters per multi-band stage (paper/repo defaults below)
    rb_f_hz: tuple[float, float] = (20.0, 8000.0)  # band centre frequency range
    rb_bw_hz: tuple[float, float] = (100.0, 1000.0)  # band width range
    rb_coeffs: tuple[int, int] = (10, 100)  # FIR taps per band (made odd)
    rb_gain_db: tuple[float, float] = (0.0, 0.0)  # gain of the linear component
    rb_bias_db: tuple[float, float] = (5.0, 20.0)  # non-linear components this much lower
    rb_order: int = 5  # N_f: powers x, x^2, ..., x^N_f
    trim_top_db: tuple[float, float] = (30.0, 40.0)  # trim threshold below the loudest frame
    trim_margin_ms: tuple[float, float] = (0.0, 200.0)  # margin kept before/after the span

    def __post_init__(self):
        if not 0.0 <= self.p_aug <= 1.0:
            raise ValueError(f"AugmentConfig.p_aug={self.p_aug} (must be in [0, 1])")
        weights = self.weights()
        if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise ValueError(f"AugmentConfig weights {weights} must be >= 0 with a positive sum")
        unknown = sorted(set(self.codecs) - set(CODECS))
        if unknown:
            raise ValueError(f"AugmentConfig.codecs has unknown {unknown} (known: {CODECS})")

    def weights(self) -> dict[str, float]:
        return {t: float(getattr(self, f"w_{t}")) for t in TYPES}

    @classmethod
    def from_dict(cls, d: Mapping) -> AugmentConfig:
        """From a dict (e.g. config.json); an unknown key is an error naming the known ones."""
        return config.from_dict(cls, d)


# --------------------------------------------------------------------------- choosing


def parse_codecs(available_codecs: str | Iterable[str] | None) -> list[str]:
    """The manifest's `codec_ids` ("mp3;opus;…", a list, NaN or None) -> list of names."""
    if available_codecs is None or isinstance(available_codecs, float):  # NaN from pandas
        return []
    if isinstance(available_codecs, str):
        available_codecs = available_codecs.split(";")
    return [c.strip() for c in available_codecs if c and c.strip()]


def choose(rng: np.random.Generator, cfg: AugmentConfig = AugmentConfig(),
           available_codecs: str | Iterable[str] | None = ()) -> str:
    """One clip's augmentation: "none", "codec:<c>" or a type name. Never depends on the label.

    The codec type is drawn only among copies this clip has (and cfg.codecs allows); a clip with
    none has the codec weight spread over the other types, keeping p_aug. The generator is
    consumed identically for every clip with the same codec set.
    """
    if rng.random() >= cfg.p_aug:
        return "none"
    have = set(parse_codecs(available_codecs))
    usable = [c for c in cfg.codecs if c in have]
    weights = cfg.weights()
    if not usable:
        weights["codec"] = 0.0
    w = np.array([weights[t] for t in TYPES])
    if w.sum() <= 0:  # only codec was weighted and this clip has no copy
        return "none"
    kind = TYPES[int(rng.choice(len(TYPES), p=w / w.sum()))]
    if kind == "codec":
        return "codec:" + usable[int(rng.integers(len(usable)))]
    return kind


def family(name: str) -> str:
    """"codec:mp3" -> "codec"; other names unchanged."""
    return name.split(":", 1)[0]
