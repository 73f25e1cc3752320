"""What a training clip gets: the augmentation recipe (`AugmentConfig`), `choose`, and the
wave-domain augmentations as pure numpy functions (the reference the GPU path matches).

The recipe's numbers are `AugmentConfig` fields (docs/DESIGN.md, "Model and training"):
with p 0.65 a clip gets one augmentation type, drawn by weight. `choose` never sees the label,
so both classes get the same probabilities by construction. One training example is built in
hearsay.sound.example.

    codec:<c>    not made here: a codec copy read from the bundle (codecs/<c>/<id>.flac)
    noise        coloured Gaussian noise at 5–30 dB SNR
    bandlimit    telephone band: low-pass at 3.4 or 4 kHz
    reverb       exponential-decay impulse response, direct path at lag 0 (no delay)
    gain_clip    gain into a hard-clipping ceiling
    rawboost     RawBoost convolutive (LnL) noise (Tak et al., ICASSP 2022)
    trim_jitter  re-trim at 30–40 dB with 0–200 ms margins (training only; shortens the clip)

Every transform is a pure function `(wave, rate, rng, cfg) -> wave` of the same length (except
trim_jitter), numpy + scipy only, randomness from the explicit np.random.Generator.

    from hearsay.sound.augment import AugmentConfig, apply, choose
    name = choose(rng, AugmentConfig(), available_codecs="mp3;opus")  # "none", "codec:mp3", ...
    y = apply("reverb", x, np.random.default_rng(0))   # (n,) float32 @ 16 kHz -> same shape
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy import signal

from hearsay.sound import audio, codecs
from hearsay.util import config

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


# --------------------------------------------------------------------------- transforms
#
# Each wave type is split in two so that a batched torch path (hearsay.train.augment_gpu) can render
# exactly what the numpy reference renders: `draw_<type>(n, rate, rng, cfg) -> params` takes all
# the randomness (numpy, per clip, in the data-loader worker); `render_<type>(x, params, rate)`
# is deterministic. The public transform `<type>(x, rate, rng, cfg)` is render(draw(...)).


def _u(rng: np.random.Generator, lo_hi: Sequence[float]) -> float:
    """Uniform draw between the two ends of `lo_hi` (either order)."""
    lo, hi = sorted((float(lo_hi[0]), float(lo_hi[1])))
    return float(rng.uniform(lo, hi))


def _power(x: np.ndarray) -> float:
    return float(np.mean(np.square(x, dtype=np.float64))) if len(x) else 0.0


def coloured_noise(n: int, tilt: float, rng: np.random.Generator) -> np.ndarray:
    """(n,) float64 Gaussian noise with power spectrum ~ 1/f^tilt, unit power."""
    white = rng.standard_normal(n)
    if tilt == 0 or n < 4:
        out = white
    else:
        spec = sp_fft.rfft(white)
        f = np.arange(len(spec), dtype=np.float64)
        f[0] = f[1]  # no infinite DC gain
        out = sp_fft.irfft(spec * f ** (-tilt / 2), n)
    return out / np.sqrt(max(np.mean(out ** 2), 1e-20))


def draw_noise(n: int, rate: int, rng: np.random.Generator, cfg: AugmentConfig,
               snr_db: float | None = None) -> dict:
    snr = _u(rng, cfg.noise_snr_db) if snr_db is None else float(snr_db)
    noise = coloured_noise(n, _u(rng, cfg.noise_tilt), rng).astype(np.float32)  # half the IPC
    return {"snr_db": snr, "noise": noise}


def render_noise(x: np.ndarray, p: dict, rate: int = SAMPLE_RATE) -> np.ndarray:
    """x + unit-power noise scaled to the SNR against x's own power. Digital silence passes."""
    power = _power(x)
    if power == 0:
        return x.astype(np.float32)
    return (x + p["noise"] * np.sqrt(power / 10 ** (p["snr_db"] / 10))).astype(np.float32)


def draw_bandlimit(n: int, rate: int, rng: np.random.Generator, cfg: AugmentConfig) -> dict:
    return {"cutoff_hz": float(cfg.bandlimit_hz[int(rng.integers(len(cfg.bandlimit_hz)))])}


def render_bandlimit(x: np.ndarray, p: dict, rate: int = SAMPLE_RATE) -> np.ndarray:
    """Telephone band: hearsay.sound.audio.band_limit at the drawn cut-off."""
    return audio.band_limit(np.asarray(x, np.float32), p["cutoff_hz"], rate)


def draw_reverb(n: int, rate: int, rng: np.random.Generator, cfg: AugmentConfig) -> dict:
    """h = [1, tail]: Gaussian tail * exp(-6.91 t / rt60) (60 dB down at rt60), at the drawn DRR."""
    rt60, drr = _u(rng, cfg.reverb_rt60_s), _u(rng, cfg.reverb_drr_db)
    n_tail = max(1, int(rt60 * rate))
    t = np.arange(1, n_tail + 1) / rate  # s after the direct path
    tail = rng.standard_normal(n_tail) * np.exp(-np.log(1000.0) * t / rt60)
    tail *= np.sqrt(10 ** (-drr / 10) / np.sum(tail ** 2))  # energy(direct) = 1 -> DRR
    return {"h": np.concatenate([[1.0], tail])}


def render_reverb(x: np.ndarray, p: dict, rate: int = SAMPLE_RATE) -> np.ndarray:
    """x convolved with h, direct path at lag 0 (nothing shifts), tail cut, input RMS kept."""
    if len(x) == 0:
        return x
    y = signal.fftconvolve(x.astype(np.float64), p["h"])[: len(x)]
    p_in, p_out = _power(x), _power(y)
    if p_out > 0:
        y *= np.sqrt(p_in / p_out)
    return y.astype(np.float32)


def draw_gain_clip(n: int, rate: int, rng: np.random.Generator, cfg: AugmentConfig) -> dict:
    return {"drive_db": _u(rng, cfg.clip_drive_db), "ceiling": float(cfg.clip_ceiling)}


def render_gain_clip(x: np.ndarray, p: dict, rate: int = SAMPLE_RATE) -> np.ndarray:
    """Gain that drives the peak drive_db above the ceiling, then hard-clip at the ceiling."""
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    if peak == 0:
        return x.astype(np.float32)
    g = p["ceiling"] / peak * 10 ** (p["drive_db"] / 20)
    return np.clip(x * g, -p["ceiling"], p["ceiling"]).astype(np.float32)


def _rawboost_filter(rng: np.random.Generator, cfg: AugmentConfig, rate: int,
                     gain_db: tuple[float, float]) -> np.ndarray:
    """RawBoost's multi-band FIR: cfg.rb_bands band-passes in series, peak gain set to gain_db."""
    b = np.ones(1)
    nyq = rate / 2
    for _ in range(cfg.rb_bands):
        fc, bw = _u(rng, cfg.rb_f_hz), _u(rng, cfg.rb_bw_hz)
        taps = int(rng.integers(cfg.rb_coeffs[0], cfg.rb_coeffs[1]))
        taps += 1 - taps % 2  # odd, as firwin band-pass needs
        f1 = min(max(fc - bw / 2, 1e-3), nyq - 2e-3)
        f2 = min(max(fc + bw / 2, f1 + 1e-3), nyq - 1e-3)
        b = np.convolve(signal.firwin(taps, [f1, f2], window="hamming", pass_zero=False,
                                      fs=rate), b)
    _, h = signal.freqz(b, 1, fs=rate)
    return 10 ** (_u(rng, gain_db) / 20) * b / np.max(np.abs(h))


def draw_rawboost(n: int, rate: int, rng: np.random.Generator, cfg: AugmentConfig) -> dict:
    """One multi-band filter per power 1..rb_order; powers >= 2 are rb_bias_db lower."""
    lo = cfg.rb_gain_db[0] - cfg.rb_bias_db[0]
    hi = cfg.rb_gain_db[1] - cfg.rb_bias_db[1]
    return {"filters": [_rawboost_filter(rng, cfg, rate, cfg.rb_gain_db if i == 1 else (lo, hi))
                        for i in range(1, cfg.rb_order + 1)]}


def render_rawboost(x: np.ndarray, p: dict, rate: int = SAMPLE_RATE) -> np.ndarray:
    """RawBoost convolutive noise (LnL): sum_i b_i * (x/peak)^i, mean removed, input RMS kept.

    Causal FIRs as in the reference; the output keeps the input's length.
    """
    if len(x) == 0:
        return x
    x64 = x.astype(np.float64)
    xn = x64 / (float(np.max(np.abs(x64))) or 1.0)  # powers of a [-1, 1] wave, as the reference
    filters = p["filters"]
    # sum_i conv(x^i, b_i)[:n] in one frequency domain: one FFT per power, one inverse.
    n_fft = sp_fft.next_fast_len(len(xn) + max(len(b) for b in filters) - 1, real=True)
    acc = np.zeros(n_fft // 2 + 1, dtype=np.complex128)
    power = np.ones_like(xn)
    for b in filters:
        power = power * xn  # x^i without np.power's slow generic path
        acc += sp_fft.rfft(power, n_fft) * sp_fft.rfft(b, n_fft)
    y = sp_fft.irfft(acc, n_fft)[: len(xn)]
    y -= y.mean()
    p_in, p_out = _power(x64), _power(y)
    if p_out > 0:
        y *= np.sqrt(p_in / p_out)
    return y.astype(np.float32)


DRAW = {"noise": draw_noise, "bandlimit": draw_bandlimit, "reverb": draw_reverb,
        "gain_clip": draw_gain_clip, "rawboost": draw_rawboost}
RENDER = {"noise": render_noise, "bandlimit": render_bandlimit, "reverb": render_reverb,
          "gain_clip": render_gain_clip, "rawboost": render_rawboost}


def add_noise(x: np.ndarray, rate: int, rng: np.random.Generator,
              cfg: AugmentConfig = AugmentConfig(), snr_db: float | None = None) -> np.ndarray:
    """x + coloured noise at `snr_db` (default: drawn from cfg.noise_snr_db)."""
    return render_noise(x, draw_noise(len(x), rate, rng, cfg, snr_db), rate)


def bandlimit(x: np.ndarray, rate: int, rng: np.random.Generator,
              cfg: AugmentConfig = AugmentConfig()) -> np.ndarray:
    """Low-pass at a cut-off picked from cfg.bandlimit_hz (3.4 / 4 kHz)."""
    return render_bandlimit(x, draw_bandlimit(len(x), rate, rng, cfg), rate)


def reverb(x: np.ndarray, rate: int, rng: np.random.Generator,
           cfg: AugmentConfig = AugmentConfig()) -> np.ndarray:
    """Exponential-decay reverb with the direct path aligned; same length and RMS."""
    return render_reverb(x, draw_reverb(len(x), rate, rng, cfg), rate)


def gain_clip(x: np.ndarray, rate: int, rng: np.random.Generator,
              cfg: AugmentConfig = AugmentConfig()) -> np.ndarray:
    """Gain into a hard-clipping ceiling."""
    return render_gain_clip(x, draw_gain_clip(len(x), rate, rng, cfg), rate)


def rawboost(x: np.ndarray, rate: int, rng: np.random.Generator,
             cfg: AugmentConfig = AugmentConfig()) -> np.ndarray:
    """RawBoost convolutive (LnL) noise; same length and RMS."""
    return render_rawboost(x, draw_rawboost(len(x), rate, rng, cfg), rate)


def trim_jitter(x: np.ndarray, rate: int, rng: np.random.Generator,
                cfg: AugmentConfig = AugmentConfig()) -> np.ndarray:
    """Re-trim at a drawn top_db, keeping a drawn margin of the clip's own audio at each end.

    Training only, on the whole clip before cropping. Returns x[start:end], NOT the same
    length: the span voiced at 30–40 dB, widened by 0–200 ms each side within the clip.
    """
    start, end = audio.trim_silence(x, top_db=_u(rng, cfg.trim_top_db))
    if end <= start:
        return x
    lead = int(_u(rng, cfg.trim_margin_ms) * rate / 1000)
    tail = int(_u(rng, cfg.trim_margin_ms) * rate / 1000)
    return x[max(0, start - lead): min(len(x), end + tail)]


TRANSFORMS = {"noise": add_noise, "bandlimit": bandlimit, "reverb": reverb,
              "gain_clip": gain_clip, "rawboost": rawboost, "trim_jitter": trim_jitter}


def apply(name: str, x: np.ndarray, rng: np.random.Generator,
          cfg: AugmentConfig = AugmentConfig(), rate: int = SAMPLE_RATE) -> np.ndarray:
    """Run the wave-domain transform `name` ("none" returns x unchanged)."""
    if name == "none":
        return x
    if family(name) == "codec":
        raise ValueError(f"apply({name!r}): codec copies are read from the bundle "
                         "(codecs/<codec>/<id>.flac), not made here: load that file instead")
    if name not in TRANSFORMS:
        raise ValueError(f"unknown augmentation {name!r} (one of: none, codec:<c>, "
                         f"{', '.join(TRANSFORMS)})")
    return TRANSFORMS[name](x, rate, rng, cfg)
