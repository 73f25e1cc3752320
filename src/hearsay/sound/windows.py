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

Streaming (file_windows): the file is decoded in blocks of BLOCK_S seconds -- soundfile for what
libsndfile reads, otherwise an ffmpeg pipe (Sun AU, float32; no temporary file) -- channels
averaged in float64, any rate resampled by a soxr VHQ stream (the same samples as
audio.load_audio's one-shot soxr). It is decoded twice: pass 1 keeps only the frame RMS
(8 bytes per 10 ms: 1.4 MB for 30 min) to find the trim span, pass 2 cuts the windows. Neither
pass holds the wave. `wave_windows` is the same cutting for a wave already in memory (used by
`hearsay score --windows` on bundle clips).

numpy, soundfile, soxr and hearsay.sound.audio only: never torch (the deploy image has none).
"""

from __future__ import annotations

import math
import os
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from hearsay.sound import audio
from hearsay.sound.audio import (
    MAX_DECODE_MB,
    MAX_DECODE_S,
    audio_stream_count,
    bounded,
    ffmpeg_input,
    limit_memory,
    open_regular,
)

SR = audio.SAMPLE_RATE
HOP_S = 4.0  # default hop (s): with 8 s windows every moment is seen by two windows
BLOCK_S = 30.0  # decode block (s of the file's own rate): bounds decode memory


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


# --------------------------------------------------------------------------- streaming decode


@dataclass
class DecodeInfo:
    """What a decode learned besides the samples (filled as the stream runs)."""

    decoder: str = "auto"  # "auto": soundfile, ffmpeg if it cannot open the file; or "ffmpeg"
    header_s: float | None = None  # the length the file's header declares (soundfile), if any
    sf_error: str = ""  # why soundfile gave up (it could not open or read the file)
    size: int | None = None  # the file's bytes when first opened (a later pass must see the same)
    max_s: float = MAX_DECODE_S  # decode time bound per pass (s): past it the file fails
    max_mb: int = MAX_DECODE_MB  # ffmpeg's address space bound (MiB): past it the file fails
    # audio streams in the file's container, counted where ffmpeg decodes it (MP4, MKV, WebM, ...:
    # the containers that can hold more than one); only the first is ever scored. None: not
    # counted (soundfile decoded it, or ffmpeg could not list the streams).
    audio_streams: int | None = None


class _SoundfileReadError(audio.AudioError):
    """libsndfile opened the file but failed while reading it (a cut FLAC): decode with ffmpeg."""


def stream_audio(path: str | os.PathLike, block_s: float = BLOCK_S,
                 info: DecodeInfo | None = None) -> Iterator[np.ndarray]:
    """Blocks (n,) float32 of the file at 16 kHz mono, in order; the same samples as load_audio.

    Only the frames each read returned are yielded (a cut file ends where its data ends, never
    on a block of stale memory). `info.decoder` picks the decoder; info gets the header length.
    The decoder is chosen by the bytes, never by the name: soundfile reads the opened file (any
    name, UTF-8 or not), ffmpeg gets `file:` + the absolute path with only the file protocol
    allowed (a name like `file:x.m4a`, `concat:a|b` or `http:...` is a file name, nothing else).
    Raises AudioError naming the file (missing, not a regular file, empty, undecodable, no
    samples, NaN/inf, over the time or memory bound, changed while read); decode() and
    stream_span() turn a soundfile read failure into an ffmpeg decode."""
    path = Path(path)
    info = DecodeInfo() if info is None else info
    fh = open_regular(path)
    size = os.fstat(fh.fileno()).st_size
    if size == 0:
        fh.close()
        raise audio.AudioError(path, "empty file (0 bytes)")
    if info.size is not None and size != info.size:
        fh.close()
        raise audio.AudioError(path, f"file changed while it was read ({info.size} -> {size} "
                               "bytes): score it again once it is complete")
    info.size = size
    if info.decoder == "ffmpeg":
        fh.close()
        frames = _ffmpeg_frames(path, block_s, info)
    else:
        try:
            snd = sf.SoundFile(fh)  # the opened file: no name reaches libsndfile
        except Exception as sf_err:  # noqa: BLE001 - libsndfile raises several types
            fh.close()
            # libsndfile's own words (str() names the file object, which differs per process)
            info.decoder, info.sf_error = "ffmpeg", getattr(sf_err, "error_string", str(sf_err))
            frames = _ffmpeg_frames(path, block_s, info)
        else:
            known = 0 < snd.frames < 2**62  # libsndfile says SF_COUNT_MAX when it cannot tell
            info.header_s = snd.frames / snd.samplerate if known else None
            declared = riff_data_frames(fh.fileno())  # a cut WAV: libsndfile trims its header
            if declared is not None:
                info.header_s = declared / snd.samplerate
            frames = _soundfile_frames(path, snd, block_s, fh)
    yield from bounded(path, _mono_16k(path, frames), info.max_s)
    if os.stat(path).st_size != size:
        raise audio.AudioError(path, f"file changed while it was read ({size} -> "
                               f"{os.stat(path).st_size} bytes): score it again once complete")


def riff_data_frames(fd: int) -> int | None:
    """The frames a RIFF/WAVE header's data chunk declares (its byte size / the fmt chunk's
    block align), read with pread (the file position is untouched); None for anything else, or
    a streaming WAV's unknown size (0 or 0xFFFFFFFF). libsndfile reports a cut WAV's frames as
    what the file holds, so only this reading sees that the header promised more."""
    head = os.pread(fd, 4096, 0)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, align = 12, None
    while pos + 8 <= len(head):
        cid, size = head[pos : pos + 4], int.from_bytes(head[pos + 4 : pos + 8], "little")
        if cid == b"fmt " and pos + 22 <= len(head):
            align = int.from_bytes(head[pos + 20 : pos + 22], "little")  # nBlockAlign
        elif cid == b"data":
            return size // align if align and 0 < size < 0xFFFFFFFF else None
        pos += 8 + size + (size & 1)  # chunks are word-aligned
    return None


def with_fallback(path: str | os.PathLike, consume, block_s: float = BLOCK_S,
                  max_s: float = MAX_DECODE_S, max_mb: int = MAX_DECODE_MB):
    """consume(stream_audio(...)) -> (its result, DecodeInfo): the one decode both of
    hearsay-score's modes use. A file libsndfile opens but cannot read to its end (a cut FLAC)
    is decoded again, whole, by ffmpeg: one decoder per file, never a splice of two.
    max_s / max_mb: the per-file decode bounds (DecodeInfo)."""
    info = DecodeInfo(max_s=max_s, max_mb=max_mb)
    try:
        return consume(stream_audio(path, block_s, info)), info
    except _SoundfileReadError as err:
        info = DecodeInfo("ffmpeg", info.header_s, err.reason, max_s=max_s, max_mb=max_mb)
        return consume(stream_audio(path, block_s, info)), info


def decode(path: str | os.PathLike, block_s: float = BLOCK_S, max_s: float = MAX_DECODE_S,
           max_mb: int = MAX_DECODE_MB) -> tuple[np.ndarray, DecodeInfo]:
    """The whole file (N,) float32 at 16 kHz (the blocks joined) and its DecodeInfo."""
    return with_fallback(path, lambda blocks: np.concatenate(list(blocks)), block_s,
                         max_s, max_mb)


def _soundfile_frames(path: Path, snd: sf.SoundFile, block_s: float, fh
                      ) -> Iterator[tuple[np.ndarray, int]]:
    # SoundFile.blocks() is not used: it yields a full block even when the read returned fewer
    # frames (a cut MP3 whose header promises more), i.e. stale memory scored as audio.
    blocksize = max(1, int(block_s * snd.samplerate))
    with fh, snd:
        while True:
            try:
                data = snd.read(blocksize, dtype="float32", always_2d=True)  # (<=blocksize, ch)
            except Exception as err:  # noqa: BLE001 - libsndfile raises several types
                raise _SoundfileReadError(path, f"soundfile read failed: {err}") from None
            if not len(data):
                return
            yield data, snd.samplerate


def _ffmpeg_frames(path: Path, block_s: float, info: DecodeInfo
                   ) -> Iterator[tuple[np.ndarray, int]]:
    """(frames, channels) float32 blocks at the file's own rate from an ffmpeg pipe.

    ffmpeg writes Sun AU (a 24-byte big-endian header: magic, data offset, size, encoding 6 =
    float32, rate, channels) to stdout; stderr is drained by a thread so it can never block.
    Its address space is bounded by info.max_mb (an allocation past it fails the file)."""
    sf_error = info.sf_error
    if info.audio_streams is None:
        info.audio_streams = audio_stream_count(path, info.max_s, info.max_mb)
    cmd = [audio.ffmpeg_exe(), "-nostdin", "-v", "error", *ffmpeg_input(path),
           "-map", "0:a:0", "-c:a", "pcm_f32be", "-f", "au", "-bitexact", "pipe:1"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=limit_memory(info.max_mb))
    errors: list[bytes] = []
    drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    drain.start()

    def fail(default: str) -> audio.AudioError:
        proc.wait()
        drain.join()
        lines = [ln for ln in b"".join(errors).decode(errors="replace").splitlines() if ln.strip()]
        why = lines[-1] if lines else default
        if any("matches no streams" in ln for ln in lines):
            why = "no audio stream (video or data only)"
        elif "alloc" in why.lower() or proc.returncode in (-6, -9, -11):
            why = f"{why}; over the decode memory bound {info.max_mb} MiB: --max-decode-mb"
        return audio.AudioError(path, f"undecodable ({why}); soundfile: {sf_error}")

    try:
        head = proc.stdout.read(24)
        words = np.frombuffer(head, dtype=">u4") if len(head) == 24 else None
        if words is None or words[0] != 0x2E736E64 or words[3] != 6:
            raise fail(f"ffmpeg exit {proc.poll()}")
        offset, rate, channels = int(words[1]), int(words[4]), int(words[5])
        proc.stdout.read(offset - 24)
        step = max(1, int(block_s * rate)) * channels * 4  # bytes per block
        while chunk := proc.stdout.read(step):
            usable = len(chunk) - len(chunk) % (channels * 4)
            yield np.frombuffer(chunk[:usable], dtype=">f4").reshape(-1, channels), rate
        if proc.wait() != 0:
            raise fail(f"ffmpeg exit {proc.returncode}")
    finally:
        if proc.poll() is None:  # the consumer stopped early: do not leave ffmpeg running
            proc.kill()
            proc.wait()
        drain.join()
        proc.stdout.close()
        proc.stderr.close()


_TOO_LARGE = ("samples too large to score (peak {:.3g}; audio is -1..1): float samples out of "
              "range overflow the resampler or the normalisation")


def _mono_16k(path: Path, frames: Iterator[tuple[np.ndarray, int]]) -> Iterator[np.ndarray]:
    """Mix down (float64 mean, as load_audio) and resample a stream of (frames, ch) blocks."""
    stream, total = None, 0
    for data, rate in frames:
        if not np.isfinite(data).all():
            raise audio.AudioError(path, "contains NaN or inf samples")
        wave = data.mean(axis=1, dtype=np.float64).astype(np.float32)
        total += len(wave)
        if rate == SR:
            yield wave
            continue
        if stream is None:
            stream = soxr.ResampleStream(rate, SR, 1, dtype="float32", quality="VHQ")
        out = stream.resample_chunk(wave, last=False)
        if not np.isfinite(out).all():  # float samples near 3.4e38 overflow the filter
            raise audio.AudioError(path, _TOO_LARGE.format(np.abs(data).max()))
        if len(out):
            yield out
    if total == 0:
        raise audio.AudioError(path, "no audio samples (header only or truncated)")
    if stream is not None:
        tail = stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        if len(tail):
            yield tail


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
    (n, rms, carry), info = with_fallback(path, stream_rms, block_s, max_s, max_mb)
    if not (np.isfinite(rms).all() and np.isfinite(carry).all()):  # energies overflowed
        raise audio.AudioError(path, _TOO_LARGE.format(float("inf")))
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
            with closing(stream_audio(path, block_s, info)) as blocks:  # ends ffmpeg on early exit
                for w in cut_windows(blocks, span, seconds(win_s), seconds(hop_s), cutoff_hz):
                    if not np.isfinite(w.wave).all():  # the normalisation overflowed
                        raise audio.AudioError(path, _TOO_LARGE.format(float("inf")))
                    yield w
        except audio.AudioError as err:
            raise audio.AudioError(path, err.reason) from None

    return n, span, windows(), info
