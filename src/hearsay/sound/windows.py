"""Long recordings as windows of the deploy length: the cutting, and a streaming decode.

    from hearsay.sound.windows import file_windows
    n, span, wins, info = file_windows("call.m4a", win_s=8.0, hop_s=4.0)
    for w in wins:                      # decoded in blocks: memory is a few windows, any length
        w.start_s, w.end_s, w.wave      # original-file seconds; (n,) float32, normalised

The order, per file (the deploy front end, hearsay.sound.audio, applied per window)::

    decode + trim span (once)  ->  windows of win_s every hop_s  ->  per window: band-limit,
    (16 kHz mono, whole file)      (inside the trimmed span)         normalise over its samples

1. The trim span is found once, over the whole file, with hearsay.sound.audio's own frame RMS and
   voiced-span rule (the same (start, end) as audio.trim_silence on the loaded wave).
2. Window starts are 0, hop, 2 hop, ... inside the span, up to the first window that reaches the
   span's end (window_starts): every trimmed sample is in a window, no window starts past the end.
   A span no longer than one window is one window; otherwise the last window is longer than
   win - hop and, when shorter than win, is left short: the scorer zero-pads it with an attention
   mask (never tiled).
3. Each window is `audio.prepare(slice, max_s=None, trim=False)`: band-limit, then zero-mean /
   unit-variance over its own samples -- exactly what training's crops get. The first window
   is therefore `audio.prepare(wave, max_s)` (trim -> cap -> band-limit -> normalise) sample for
   sample, and a clip no longer than one window is that one window.
4. Timestamps are in the original file's time: the trim offset is part of every start.

Streaming (file_windows): the file is read in blocks by hearsay.sound.decoder's stream_audio
(the same samples as its one-shot load_audio). It is decoded twice: pass 1 keeps only the frame
RMS (8 bytes per 10 ms: 1.4 MB for 30 min) to find the trim span, pass 2 cuts the windows.
Neither pass holds the wave. `wave_windows` is the same cutting for a wave already in memory
(used by `hearsay score --windows` on bundle clips).

numpy, hearsay.sound.decoder and hearsay.sound.audio only: never torch (the deploy image has none).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass

import numpy as np

from hearsay.sound import audio, decoder
from hearsay.sound.decoder import BLOCK_S, MAX_DECODE_MB, MAX_DECODE_S, TOO_LARGE, DecodeInfo

SR = audio.SAMPLE_RATE
HOP_S = 4.0  # default hop (s): with 8 s windows every moment is seen by two windows


@dataclass(frozen=True)
class Window:
    """One model input cut from a file: samples [start, end) of the decoded 16 kHz wave."""

    start: int  # sample index in the decoded file (trim offset included)
    end: int  # exclusive; end - start == len(wave)
    wave: np.ndarray  # (end - start,) float32, band-limited and normalised

    @property
    def start_s(self) -> float:
        return self.start / SR

    @property
    def end_s(self) -> float:
        return self.end / SR


def window_starts(n: int, win: int, hop: int) -> np.ndarray:
    """Start offsets (int64) of the windows over `n` samples: 0, hop, ... until one reaches n."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if win <= 0 or hop <= 0 or hop > win:
        raise ValueError(f"window {win} and hop {hop} samples: need 0 < hop <= window")
    k = 0 if n <= win else math.ceil((n - win) / hop)
    return hop * np.arange(k + 1, dtype=np.int64)


def cut_windows(blocks: Iterable[np.ndarray], span: tuple[int, int], win: int, hop: int,
                cutoff_hz: float | None = audio.BAND_LIMIT_HZ) -> Iterator[Window]:
    """Windows of `span` from consecutive blocks of a 16 kHz wave (block 0 starts at sample 0).

    Holds at most one window plus one block: the samples before the next window's start are
    dropped as soon as it is known."""
    lo, hi = span
    starts = iter(lo + window_starts(hi - lo, win, hop))
    nxt = next(starts, None)
    buf, buf_at, pos = np.zeros(0, dtype=np.float32), lo, 0  # buf[0] is sample buf_at
    for block in blocks:
        a, b = max(pos, lo), min(pos + len(block), hi)  # the part of this block inside the span
        if b > a:
            buf = np.concatenate([buf, block[a - pos : b - pos]])
        pos += len(block)
        while nxt is not None and buf_at + len(buf) >= min(nxt + win, hi):
            end = min(nxt + win, hi)
            raw = buf[nxt - buf_at : end - buf_at]
            yield Window(int(nxt), int(end), audio.prepare(raw, None, trim=False,
                                                          cutoff_hz=cutoff_hz))
            nxt = next(starts, None)
            if nxt is not None:  # drop what no later window needs
                buf, buf_at = buf[nxt - buf_at :], nxt
        if nxt is None or pos >= hi:
            break
    if nxt is not None:
        raise audio.AudioError(None, f"stream ended at sample {pos}, before the span's end {hi} "
                               "(file changed while it was read?)")


def wave_windows(x: np.ndarray, win_s: float = 8.0, hop_s: float = HOP_S, *, trim: bool = True,
                 top_db: float = audio.TRIM_TOP_DB,
                 cutoff_hz: float | None = audio.BAND_LIMIT_HZ) -> list[Window]:
    """The windows of a 16 kHz wave in memory (trimmed first unless `trim=False`)."""
    span = audio.trim_silence(x, top_db=top_db) if trim else (0, len(x))
    if span[1] <= span[0]:
        raise audio.AudioError(None, "silent (nothing left after trimming)")
    return list(cut_windows([x], span, seconds(win_s), seconds(hop_s), cutoff_hz))


def seconds(s: float) -> int:
    """Seconds -> samples at 16 kHz."""
    return int(round(s * SR))


# --------------------------------------------------------------------------- a file, streamed


def stream_rms(blocks: Iterable[np.ndarray]) -> tuple[int, np.ndarray, np.ndarray]:
    """(samples, frame RMS (F,) float64, samples after the last frame start) of a block stream:
    the same RMS as audio.frame_rms on the joined wave, holding one block at a time."""
    frame, hop = audio.TRIM_FRAME, audio.TRIM_HOP
    rms, carry, n = [], np.zeros(0, dtype=np.float32), 0
    for block in blocks:
        n += len(block)
        buf = np.concatenate([carry, block])
        r = audio.frame_rms(buf, frame, hop)  # the frames that start in buf and fit in it
        rms.append(r)
        carry = buf[len(r) * hop :]  # the next frame starts here
    return n, np.concatenate(rms) if rms else np.zeros(0), carry


def stream_span(path: str | os.PathLike, top_db: float = audio.TRIM_TOP_DB,
                block_s: float = BLOCK_S, max_s: float = MAX_DECODE_S,
                max_mb: int = MAX_DECODE_MB) -> tuple[int, tuple[int, int], DecodeInfo]:
    """Pass 1: (decoded samples, trim span, DecodeInfo) of a file, holding only its frame RMS."""
    (n, rms, carry), info = decoder.with_fallback(path, stream_rms, block_s, max_s, max_mb)
    if not (np.isfinite(rms).all() and np.isfinite(carry).all()):  # energies overflowed
        raise audio.AudioError(path, TOO_LARGE.format(float("inf")))
    if n < audio.TRIM_FRAME:  # all of it is in carry: the one-short-frame rule
        return n, audio.trim_silence(carry, top_db), info
    return n, audio.voiced_span(rms, n, top_db, audio.TRIM_FRAME, audio.TRIM_HOP), info


def file_windows(path: str | os.PathLike, win_s: float = 8.0, hop_s: float = HOP_S, *,
                 top_db: float = audio.TRIM_TOP_DB,
                 cutoff_hz: float | None = audio.BAND_LIMIT_HZ, block_s: float = BLOCK_S,
                 max_s: float = MAX_DECODE_S, max_mb: int = MAX_DECODE_MB
                 ) -> tuple[int, tuple[int, int], Iterator[Window], DecodeInfo]:
    """(decoded samples, trim span, lazy windows, DecodeInfo) of a file; pass 2 runs as windows
    are taken, with the decoder pass 1 settled on (each pass within the max_s/max_mb bounds)."""
    n, span, info = stream_span(path, top_db, block_s, max_s, max_mb)
    if span[1] <= span[0]:
        raise audio.AudioError(path, "silent (nothing left after trimming)")

    def windows() -> Iterator[Window]:
        try:
            # closing(): ends ffmpeg when the consumer stops early
            with closing(decoder.stream_audio(path, block_s, info)) as blocks:
                for w in cut_windows(blocks, span, seconds(win_s), seconds(hop_s), cutoff_hz):
                    if not np.isfinite(w.wave).all():  # the normalisation overflowed
                        raise audio.AudioError(path, TOO_LARGE.format(float("inf")))
                    yield w
        except audio.AudioError as err:
            raise audio.AudioError(path, err.reason) from None

    return n, span, windows(), info
