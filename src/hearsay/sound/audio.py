"""The one audio front end: a decoded wave -> trim, cap, band-limit, normalise; pad_batch.

Every stage (bundle, trainer, scorer, ONNX parity, deploy image) calls these functions and no
other code re-implements them. The decoding before them (a file -> 16 kHz mono: `load_audio`,
the streamed read of hearsay-score) is hearsay.sound.decoder. numpy (+ the decoder) only: this
module must never import torch, because the deploy image has none.

The documented order, shared by training, scoring and the deploy image::

    load_audio  ->  trim_silence  ->  cap  ->  band_limit  ->  normalize  ->  pad_batch
    (16 kHz mono)   (energy, dB)      (max_s)  (7.25 kHz)      (zero mean,     (B, T) + mask,
                                                                unit var,       zeros, never
                                                                valid only)     a repeat)

`prepare(x, max_s)` is that order, the one function `hearsay score`, hearsay-score and the
parity checks call: trim -> cap -> band-limit -> normalise on an already-loaded wave;
`prepare_file(path, max_s)` adds the load. Capping before the band-limit is what training does
(a crop is cut, then `example.finish` filters it with zero edges), so a clip longer than the cap
gets, sample for sample, the input of a training crop at offset 0. The bundle stores clips
after load -> trim -> cap 15 s -> `peak_guard` as 16-bit FLAC; the trainer band-limits and
normalises its crops after augmentation (see hearsay.sound.example).

`pad_batch` is the one padding of the project: the trainer's batches (hearsay.train.data), the
in-process scorer (hearsay.evaluate.score), the CPU scorer (hearsay.engines.cpu_engine) and the
export probes stack model inputs of different lengths with it.

Usage::

    from hearsay.sound.audio import pad_batch, prepare_file
    x = prepare_file("clip.m4a", max_s=8.0)   # (N,) float32 @ 16 kHz, normalised
    input_values, attention_mask = pad_batch([x, ...], [n_valid, ...])
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from hearsay.sound.decoder import SAMPLE_RATE, AudioError, load_audio

PEAK = 0.999  # peak guard: waves louder than this are scaled down (never clipped)
BAND_LIMIT_HZ = 7_250.0  # low-pass cut-off; hides the 8 kHz Nyquist edge that codecs differ on
TRIM_TOP_DB = 40.0  # frames quieter than (loudest frame - TRIM_TOP_DB) dB count as silence
TRIM_FRAME = 400  # samples (25 ms @ 16 kHz)
TRIM_HOP = 160  # samples (10 ms @ 16 kHz)
FIR_TAPS = 129  # band-limit FIR length (odd: symmetric, zero phase, delay removed)
RMS_BLOCK = 4096  # frames measured per step by frame_rms (bounds its memory on long waves)


# --------------------------------------------------------------------------- wave transforms


def trim_silence(x: np.ndarray, top_db: float = TRIM_TOP_DB,
                 frame: int = TRIM_FRAME, hop: int = TRIM_HOP) -> tuple[int, int]:
    """(start, end) sample offsets of the non-silent span of `x` (16 kHz).

    A frame is voiced when its RMS is within `top_db` dB of the loudest frame. The span runs from
    the first voiced frame's start to the last voiced frame's end. All-silent input -> (0, 0).
    """
    n = len(x)
    if n == 0:
        return 0, 0
    if n < frame:  # one short frame: voiced iff not digital silence
        return (0, n) if np.any(x != 0) else (0, 0)
    return voiced_span(frame_rms(x, frame, hop), n, top_db, frame, hop)


def frame_rms(x: np.ndarray, frame: int = TRIM_FRAME, hop: int = TRIM_HOP) -> np.ndarray:
    """RMS (F,) float64 of the frames x[k*hop : k*hop+frame] that fit in `x` (F may be 0).

    Frame k depends on its own samples only, so a long wave can be measured block by block
    (hearsay.sound.windows streams it) and give the same values as one call on the whole wave."""
    n_frames = 0 if len(x) < frame else 1 + (len(x) - frame) // hop
    rms = np.empty(n_frames, dtype=np.float64)
    for s in range(0, n_frames, RMS_BLOCK):  # (block, frame) at a time: 13 MB, not 0.8 KB/10 ms
        k = np.arange(s, min(n_frames, s + RMS_BLOCK))
        idx = np.arange(frame)[None, :] + hop * k[:, None]  # (block, frame)
        rms[s : s + len(k)] = np.sqrt(np.mean(np.square(x[idx], dtype=np.float64), axis=1))
    return rms


def voiced_span(rms: np.ndarray, n: int, top_db: float = TRIM_TOP_DB,
                frame: int = TRIM_FRAME, hop: int = TRIM_HOP) -> tuple[int, int]:
    """trim_silence's span from the frame RMS of a wave of `n` >= `frame` samples."""
    peak = rms.max()
    if peak <= 0:
        return 0, 0
    voiced = np.flatnonzero(20 * np.log10(np.maximum(rms, 1e-12) / peak) > -top_db)
    start = int(voiced[0] * hop)
    end = int(min(n, voiced[-1] * hop + frame))
    if voiced[-1] == len(rms) - 1:  # the tail past the last full frame belongs to it
        end = n
    return start, end


def peak_guard(x: np.ndarray, peak: float = PEAK) -> np.ndarray:
    """Scale `x` down so that max |x| <= peak (16-bit FLAC must not clip); quieter waves pass."""
    top = float(np.max(np.abs(x))) if len(x) else 0.0
    if top <= peak:
        return x
    return (x * (peak / top)).astype(np.float32)


def _lowpass_taps(cutoff_hz: float, rate: int, taps: int = FIR_TAPS) -> np.ndarray:
    """Blackman-windowed sinc low-pass, unit DC gain, (taps,) float64."""
    t = np.arange(taps) - (taps - 1) / 2
    h = np.sinc(2 * cutoff_hz / rate * t) * np.blackman(taps)
    return h / h.sum()


def band_limit(x: np.ndarray, cutoff_hz: float | None = BAND_LIMIT_HZ,
               rate: int = SAMPLE_RATE) -> np.ndarray:
    """Zero-phase FIR low-pass at `cutoff_hz` (None or >= Nyquist: unchanged). Same length out."""
    if cutoff_hz is None or cutoff_hz >= rate / 2 or len(x) == 0:
        return x
    h = _lowpass_taps(cutoff_hz, rate)
    n = len(x)
    # np.convolve(mode="same") returns max(n, taps) samples: zero-pad a wave shorter than the
    # FIR (which is what "same" does at the edges anyway), then cut back to n.
    padded = np.zeros(max(n, len(h)), dtype=np.float64)
    padded[:n] = x
    y = np.convolve(padded, h, mode="same")[:n]  # symmetric taps: no delay
    return y.astype(np.float32)


def cap(x: np.ndarray, max_s: float | None, rate: int = SAMPLE_RATE) -> np.ndarray:
    """The first `max_s` seconds of `x` (None: all of it)."""
    if max_s is None:
        return x
    return x[: int(round(max_s * rate))]


def normalize(x: np.ndarray, n_valid: int | None = None) -> np.ndarray:
    """Zero mean, unit variance over the first `n_valid` samples; the padding after them is 0.

    Same formula as Hugging Face's Wav2Vec2FeatureExtractor: (x - mean) / sqrt(var + 1e-7).
    """
    n = len(x) if n_valid is None else int(n_valid)
    out = np.zeros(len(x), dtype=np.float32)
    if n == 0:
        return out
    valid = x[:n].astype(np.float64)
    out[:n] = (valid - valid.mean()) / np.sqrt(valid.var() + 1e-7)
    return out


# --------------------------------------------------------------------------- the pipeline


def prepare(x: np.ndarray, max_s: float | None = 8.0, *, trim: bool = True,
            top_db: float = TRIM_TOP_DB,
            cutoff_hz: float | None = BAND_LIMIT_HZ) -> np.ndarray:
    """Model input from a 16 kHz wave: trim -> cap -> band-limit -> normalise (the one order).

    Returns (N,) float32, N <= max_s * 16000. Raises AudioError when nothing is left after trim.
    """
    if trim:
        start, end = trim_silence(x, top_db=top_db)
        x = x[start:end]
    if len(x) == 0:
        raise AudioError(None, "silent (nothing left after trimming)")
    x = band_limit(cap(x, max_s), cutoff_hz)  # cap first: the FIR sees what a crop sees
    return normalize(x)


def prepare_file(path: str | os.PathLike, max_s: float | None = 8.0, **kwargs) -> np.ndarray:
    """load_audio + prepare; an AudioError always names `path`."""
    x = load_audio(path)
    try:
        return prepare(x, max_s, **kwargs)
    except AudioError as err:
        raise AudioError(path, err.reason) from None


# --------------------------------------------------------------------------- batches


def pad_batch(waves: Sequence[np.ndarray],
              n_valids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Stack clips -> (input_values (B, T) float32, attention_mask (B, T) int64; 1 = valid).

    T is the longest wave. Samples at or past each clip's n_valid are zero in input_values.
    """
    if len(waves) != len(n_valids) or not waves:
        raise ValueError(f"pad_batch: {len(waves)} waves vs {len(n_valids)} n_valids "
                         "(need the same non-zero count)")
    t = max(len(w) for w in waves)
    values = np.zeros((len(waves), t), dtype=np.float32)
    mask = np.zeros((len(waves), t), dtype=np.int64)
    for i, (w, n) in enumerate(zip(waves, n_valids, strict=True)):
        n = int(n)
        if not 0 <= n <= len(w):
            raise ValueError(f"pad_batch: clip {i} n_valid={n} outside [0, {len(w)}]")
        values[i, :n] = w[:n]
        mask[i, :n] = 1
    return values, mask
