"""One training example, built in one place: crop length -> choose -> load -> crop -> augment ->
finish; and the test-time input that stands for it when scoring.

Crops (every number is a `CropConfig` field; docs/DESIGN.md, "Model and training"):

1. One crop length per batch: with p 0.7 a duration drawn from the test set's duration
   distribution, else uniform 3–14 s; rounded to one of a few buckets (1, 2, 3, 4, 6, 8, 10,
   12, 14 s; stochastic rounding keeps the mean); capped at the longest length *both* classes
   reach (`class_cap_s`), so a crop length never exists for one class only.
2. A fresh random offset per clip per draw (the caller passes a generator that moves on each
   epoch), so the model does not see the same window every epoch.
3. Clips shorter than the crop are zero-padded with an attention mask; never tiled or repeated
   (a tiled clip carries a periodicity that only short clips have: a length shortcut).
4. Every crop the model sees goes through `finish` = `hearsay.sound.audio.band_limit` then
   `hearsay.sound.audio.normalize(x, n_valid)`, after augmentation.

Augmentation (every number is an `AugmentConfig` field of hearsay.sound.augment): with p 0.65 a
clip gets one augmentation type, drawn by weight from the types hearsay.sound.augment lists (a
codec copy from the bundle, codecs/<c>/<id>.flac: mp3, opus, aac, amrnb, mulaw; noise, bandlimit,
reverb, gain_clip, rawboost, trim_jitter).

Per clip, in this order (`build` does all of it; the trainer's batches call it once per clip):

    choose (hearsay.sound.augment; before loading: a codec copy is its own file)
      -> load the original or the codec copy (hearsay.sound.audio.load_audio)
      -> trim_jitter (whole clip) -> random_crop
      -> draw the wave type's parameters (hearsay.sound.augment.DRAW)
      -> render them on the valid samples (the padding stays zero) -> finish
         (band-limit 7.25 kHz, normalise)

Two paths share every step up to the draw: the numpy path (`render=True`) renders and finishes
here, in the data-loader worker; the GPU path (`render=False`) stops after the draw and
hearsay.train.augment_gpu renders and finishes the whole batch on the device with the same
parameters.

Test time (`test_input`): the whole trimmed clip up to `max_s` (8 s deploy default, 14 s
diagnostic) through `hearsay.sound.audio.prepare`, the same call the deploy scorer makes.

numpy only (no torch): the trainer's per-clip CPU pipeline runs this in data-loader workers.

Usage::

    from hearsay.sound import example
    cfg = example.CropConfig()
    cap_s = example.class_cap_s(bona_durations, spoof_durations)
    n = example.n_samples(example.crop_length_s(rng, test_durations, cap_s, cfg))
    ex = example.build(root, row, n, rng, AugmentConfig(), locate=clip_file, render=True)
    ex.wave, ex.n_valid, ex.name, ex.params      # (n,) float32, int, str, dict | None
    wave, n_valid = example.random_crop(clip, n, rng)          # (n,) float32, zero-padded
    x = example.finish(wave, n_valid)                          # band-limit -> normalise
    n_cut = example.cut_samples(max(n_valids), n, cfg.buckets_s)  # padding a batch needs
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hearsay.sound import audio
from hearsay.sound.augment import (
    DRAW,
    RENDER,
    SAMPLE_RATE,
    WAVE_TYPES,
    AugmentConfig,
    choose,
    trim_jitter,
)
from hearsay.util import config


@dataclass(frozen=True)
class CropConfig:
    """Crop-length recipe. Units: seconds; probabilities in [0, 1]."""

    p_test_dist: float = 0.7  # share of batches whose length is drawn from the test durations
    uniform_min_s: float = 3.0  # the other batches: uniform in [uniform_min_s, uniform_max_s]
    uniform_max_s: float = 14.0
    grid_samples: int = 320  # crop lengths are rounded down to this grid (20 ms = the CNN stride)
    min_samples: int = 320  # a crop is never shorter than this (one CNN frame)
    # crop lengths, s, the continuous draw is rounded to (stochastically, between the two
    # neighbours: the mean length is kept); () = no buckets. A handful of shapes means a
    # handful of torch.compile graphs instead of one recompile per new length.
    buckets_s: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0)

    def __post_init__(self):
        if not 0.0 <= self.p_test_dist <= 1.0:
            raise ValueError(f"CropConfig.p_test_dist={self.p_test_dist} (must be in [0, 1])")
        if not 0.0 < self.uniform_min_s <= self.uniform_max_s:
            raise ValueError(f"CropConfig uniform range [{self.uniform_min_s}, "
                             f"{self.uniform_max_s}] s is empty (need 0 < min <= max)")
        if self.grid_samples < 1 or self.min_samples < 1:
            raise ValueError("CropConfig.grid_samples and min_samples must be >= 1")
        b = tuple(self.buckets_s)
        if b and (list(b) != sorted(set(b)) or b[0] <= 0):
            raise ValueError(f"CropConfig.buckets_s={b}: must be positive and strictly rising")

    @classmethod
    def from_dict(cls, d: Mapping) -> CropConfig:
        """From a dict (e.g. config.json); an unknown key is an error naming the known ones."""
        return config.from_dict(cls, d)


def class_cap_s(durations_bonafide: Sequence[float], durations_spoof: Sequence[float]) -> float:
    """The longest crop both classes reach: min(max bona fide duration, max spoof duration), s.

    A crop longer than this would be all-valid for one class only: the padding would tell the
    class. Raises ValueError when a class has no clips (the source mix is then broken upstream).
    """
    bona = np.asarray(durations_bonafide, dtype=np.float64)
    spoof = np.asarray(durations_spoof, dtype=np.float64)
    if bona.size == 0 or spoof.size == 0:
        raise ValueError(f"class_cap_s needs durations of both classes (got {bona.size} bona "
                         f"fide, {spoof.size} spoof): check the training rows' labels")
    return float(min(bona.max(), spoof.max()))


def crop_length_s(rng: np.random.Generator, test_durations_s: Sequence[float], cap_s: float,
                  cfg: CropConfig = CropConfig()) -> float:
    """One crop length (s) for one batch: test-distribution draw or uniform, capped at `cap_s`.

    With `cfg.buckets_s`, the draw is then rounded to a bucket: between buckets a < L < b it
    becomes b with probability (L - a) / (b - a), else a, so the mean length is kept (the
    distribution is the draw's, smeared over the two neighbours); below the first bucket it
    becomes the first, above the last the last; buckets above `cap_s` are not used (none
    left: `cap_s` itself). The result is on the `cfg.grid_samples` grid, at least
    `cfg.min_samples`, at most `cap_s` (rounded down to the grid).
    """
    test = np.asarray(test_durations_s, dtype=np.float64)
    if cfg.p_test_dist > 0 and test.size == 0:
        raise ValueError("crop_length_s: no test durations given (pass the bundle's test-split "
                         "durations, or set CropConfig.p_test_dist=0)")
    if not cap_s > 0:
        raise ValueError(f"crop_length_s: cap_s={cap_s} (must be > 0; see class_cap_s)")
    if rng.random() < cfg.p_test_dist:
        length = float(test[rng.integers(test.size)])
    else:
        length = float(rng.uniform(cfg.uniform_min_s, cfg.uniform_max_s))
    if cfg.buckets_s:
        length = _bucket(length, [b for b in cfg.buckets_s if b <= cap_s] or [cap_s], rng)
    n = min(int(round(length * SAMPLE_RATE)), int(cap_s * SAMPLE_RATE))
    n = max(cfg.min_samples, n // cfg.grid_samples * cfg.grid_samples)
    return n / SAMPLE_RATE


def _bucket(length: float, buckets: list[float], rng: np.random.Generator) -> float:
    """Stochastic rounding of `length` to its neighbouring buckets (mean kept inside)."""
    if length <= buckets[0]:
        return buckets[0]
    if length >= buckets[-1]:
        return buckets[-1]
    hi = int(np.searchsorted(buckets, length))
    a, b = buckets[hi - 1], buckets[hi]
    return b if rng.random() < (length - a) / (b - a) else a


def n_samples(length_s: float) -> int:
    """Crop length in samples at 16 kHz."""
    return int(round(length_s * SAMPLE_RATE))


def cut_samples(longest_valid: int, n: int, buckets_s: Sequence[float]) -> int:
    """Samples a batch padded to `n` needs: the smallest bucket (s) that holds its longest
    valid clip (`longest_valid` samples) when that bucket is shorter than `n`, else `n`.

    A batch whose clips are all shorter than the drawn crop is cut to that bucket: the model's
    view is unchanged (valid frames see only valid samples, padded frames are masked), less
    compute goes to zeros, and the lengths stay among the buckets (a bounded number of shapes
    for torch.compile). No buckets: no cut (every length would be a new shape)."""
    for b in buckets_s:
        m = n_samples(b)
        if longest_valid <= m < n:
            return m
    return n


def crop_offset(len_x: int, n_samples: int, rng: np.random.Generator) -> int:
    """A uniform random start in [0, len_x - n_samples]; 0 when the clip is not longer."""
    if len_x <= n_samples:
        return 0
    return int(rng.integers(0, len_x - n_samples + 1))


def take(x: np.ndarray, offset: int, n_samples: int) -> tuple[np.ndarray, int]:
    """`x[offset : offset + n_samples]` zero-padded to n_samples -> (wave (n,) float32, n_valid).

    Used with `crop_offset` to cut a codec copy at the original's offset. Padding is zeros,
    never a repeat of the clip.
    """
    if n_samples < 1:
        raise ValueError(f"take: n_samples={n_samples} (must be >= 1)")
    offset = max(0, int(offset))
    piece = np.asarray(x[offset: offset + n_samples], dtype=np.float32)
    out = np.zeros(n_samples, dtype=np.float32)
    out[: len(piece)] = piece
    return out, len(piece)


def random_crop(x: np.ndarray, n_samples: int,
                rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A fresh random window of `n_samples` -> (wave (n_samples,) float32, n_valid)."""
    return take(x, crop_offset(len(x), n_samples, rng), n_samples)


def finish(x: np.ndarray, n_valid: int | None = None) -> np.ndarray:
    """The last step for every clip the model sees: band_limit (7.25 kHz) then normalize.

    Runs after augmentation. Only the first `n_valid` samples are filtered (the padding stays
    exactly zero, so the FIR cannot smear signal into it) and normalised. Same length out.
    """
    n = len(x) if n_valid is None else int(n_valid)
    if not 0 <= n <= len(x):
        raise ValueError(f"finish: n_valid={n} outside [0, {len(x)}]")
    out = np.zeros(len(x), dtype=np.float32)
    out[:n] = audio.band_limit(np.asarray(x[:n], dtype=np.float32))
    return audio.normalize(out, n)


def test_input(x: np.ndarray, max_s: float | None = 8.0, *, trim: bool = False) -> np.ndarray:
    """Test-time model input: the whole clip up to `max_s` s, normalised as training does.

    Delegates to `hearsay.sound.audio.prepare` (cap -> band-limit -> normalise), the same call the
    deploy scorer makes. Bundle clips are already trimmed, so `trim` defaults to False; pass
    `trim=True` for a raw wave. For a clip no longer than `max_s` this equals
    `finish(x, len(x))`, the training path, sample for sample.
    """
    return audio.prepare(x, max_s, trim=trim)


test_input.__test__ = False  # not a pytest test, despite the name


# --------------------------------------------------------------------------- the example


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
    wave, n_valid = random_crop(x, n_samples, rng)
    params = DRAW[name](n_valid, SAMPLE_RATE, rng, cfg) if name in WAVE_TYPES else None
    return wave, n_valid, params


def training_example(x: np.ndarray, name: str, n_samples: int, rng: np.random.Generator,
                     cfg: AugmentConfig = AugmentConfig()) -> tuple[np.ndarray, int]:
    """One model input from a loaded clip (the codec copy when name is "codec:<c>").

    plan_example -> render the type on the valid samples only (the padding stays zero) ->
    finish (band-limit 7.25 kHz, normalise). Returns (wave (n_samples,) float32, n_valid).
    """
    wave, n_valid, params = plan_example(x, name, n_samples, rng, cfg)
    if params is not None:
        wave[:n_valid] = RENDER[name](wave[:n_valid], params, SAMPLE_RATE)
    return finish(wave, n_valid), n_valid
