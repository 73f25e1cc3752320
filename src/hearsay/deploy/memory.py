"""A wave already in memory as hearsay-score's input: what `Scorer.score_array` scores.

    src = memory.from_array(wave, 44_100, label="<array>")   # ValueError for a misshapen array
    wave16k, info = memory.decode(src)                         # as decoder.decode gives a file's
    n, span, lazy, info = memory.file_windows(src, 8.0, 4.0, top_db=40.0, cutoff_hz=7250.0)

The samples go through the decode stage a file's blocks go through (hearsay.sound.windows: mix
down in float64, soxr VHQ to 16 kHz, NaN/inf and overflow refused) as one block, then the same
trim span, windows and per-window front end. So an array holding a file's samples (as soundfile
reads them, float32) gives that file's row. numpy, hearsay.sound only (never torch).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from hearsay.sound import audio, decoder, windows

# The rates an array may be given at (Hz): telephone 8 kHz down to half of it, up to 384 kHz
# (the highest PCM rate audio interfaces record). 44 or 48 is kHz typed for Hz, 10_000_000 a
# sample count passed as the rate: refused, never scored as a recording hours long.
MIN_RATE, MAX_RATE = 4_000, 384_000


@dataclass(frozen=True)
class MemoryAudio:
    """Samples (frames, channels) float32 at `rate` Hz; `label` is the row's path (str(src))."""

    samples: np.ndarray
    rate: int
    label: str

    def __str__(self) -> str:
        return self.label


def from_array(wave, sample_rate, label: str = "<array>") -> MemoryAudio:
    """Check an array as a recording and hold it; ValueError (naming the fix) when it cannot be
    one: no samples, not float samples, not (frames,) or (frames, channels), or a sample rate
    that is not an integer number of Hz in MIN_RATE..MAX_RATE."""
    x = np.asarray(wave)
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int | np.integer) or \
            not MIN_RATE <= sample_rate <= MAX_RATE:
        kilo = (f" ({sample_rate} looks like kHz: {sample_rate} kHz is {sample_rate * 1000})"
                if isinstance(sample_rate, int | np.integer) and 4 <= sample_rate <= 384 else "")
        raise ValueError(f"sample_rate {sample_rate!r} is not a rate in Hz (an integer in "
                         f"{MIN_RATE}..{MAX_RATE}){kilo}: pass the rate the samples were "
                         "recorded or decoded at, in Hz, e.g. soundfile.read's second value")
    if x.size == 0:
        raise ValueError(f"samples of shape {np.shape(wave)}: an empty array has nothing to "
                         "score; pass the recording's samples (soundfile.read(path) gives them)")
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"samples of dtype {x.dtype}: pass float samples in -1..1 (int16 PCM: "
                         "wave / 32768; soundfile.read(path, dtype='float32') gives them)")
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] > x.shape[0] or x.shape[1] > 64:
        raise ValueError(f"samples of shape {np.shape(wave)}: pass (frames,) or (frames, "
                         "channels) as soundfile.read returns them (a (channels, frames) array "
                         "needs .T)")
    return MemoryAudio(np.ascontiguousarray(x, dtype=np.float32), int(sample_rate), label)


def _mono_16k(src: MemoryAudio) -> np.ndarray:
    """(N,) float32 at 16 kHz: the decode stage of a file's blocks, on one block."""
    if not len(src.samples):
        raise audio.AudioError(src.label, "no audio samples (an empty array)")
    return np.concatenate(list(decoder.mono_16k(src.label, iter([(src.samples, src.rate)]))))


def decode(src: MemoryAudio, **_bounds) -> tuple[np.ndarray, decoder.DecodeInfo]:
    """(wave at 16 kHz, DecodeInfo with no header length): decoder.decode for an array (the
    decode bounds, for files, do not apply: the samples are already here)."""
    return _mono_16k(src), decoder.DecodeInfo(decoder="memory")


def file_windows(src: MemoryAudio, win_s: float, hop_s: float, *, top_db: float,
                 cutoff_hz: float | None, **_bounds
                 ) -> tuple[int, tuple[int, int], Iterator[windows.Window], decoder.DecodeInfo]:
    """windows.file_windows for an array: (samples, trim span, lazy windows, DecodeInfo)."""
    x, info = decode(src)
    span = audio.trim_silence(x, top_db)  # the span stream_span finds over a file's blocks
    if span[1] <= span[0]:
        raise audio.AudioError(src.label, "silent (nothing left after trimming)")

    def cut() -> Iterator[windows.Window]:
        for w in windows.cut_windows([x], span, windows.seconds(win_s), windows.seconds(hop_s),
                                     cutoff_hz):
            if not np.isfinite(w.wave).all():  # the normalisation overflowed
                raise audio.AudioError(src.label, decoder.TOO_LARGE.format(float("inf")))
            yield w

    return len(x), span, cut(), info
