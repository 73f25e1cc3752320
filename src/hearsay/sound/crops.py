"""Training crops and test-time inputs: how much of each clip the model sees, and where.

The recipe (docs/DESIGN.md, "Model and training"; every number is a `CropConfig` field):

1. One crop length per batch: with p 0.7 a duration drawn from the test set's duration
   distribution, else uniform 3–14 s; rounded to one of a few buckets (1, 2, 3, 4, 6, 8, 10,
   12, 14 s; stochastic rounding keeps the mean); capped at the longest length *both* classes
   reach (`class_cap_s`), so a crop length never exists for one class only.
2. A fresh random offset per clip per draw (the caller passes a generator that moves on each
   epoch), so the model does not see the same window every epoch.
3. Clips shorter than the crop are zero-padded with an attention mask; never tiled or repeated
   (a tiled clip carries a periodicity that only short clips have: a length shortcut).
4. Every crop the model sees goes through `finish` = `hearsay.sound.audio.band_limit` then
   `hearsay.sound.audio.normalize(x, n_valid)`, after augmentation (hearsay.sound.example).

Test time (`test_input`): the whole trimmed clip up to `max_s` (8 s deploy default, 14 s
diagnostic) through `hearsay.sound.audio.prepare`, the same call the deploy scorer makes.

numpy only (no torch): the trainer's per-clip CPU pipeline runs this in data-loader workers.

Usage::

    from hearsay.sound import crops
    cfg = crops.CropConfig()
    cap_s = crops.class_cap_s(bona_durations, spoof_durations)
    n = crops.n_samples(crops.crop_length_s(rng, test_durations, cap_s, cfg))
    wave, n_valid = crops.random_crop(clip, n, rng)          # (n,) float32, zero-padded
    x = crops.finish(wave, n_valid)                          # band-limit -> normalise
    n_cut = crops.cut_samples(max(n_valids), n, cfg.buckets_s)  # padding a batch needs
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hearsay import config
from hearsay.sound import audio

SAMPLE_RATE = audio.SAMPLE_RATE


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
