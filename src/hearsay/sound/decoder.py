"""Decoding: every step from a file (or samples in memory) to a (N,) float32 wave at 16 kHz mono.

    x = load_audio("clip.flac")                  # one shot: the bundle, the trainer, the codecs
    x, info = decode("call.m4a", max_s=600.0)    # hearsay-score's read: streamed and bounded

Both readings give the same samples: soundfile (libsndfile), else ffmpeg (AAC/M4A, AMR, WebM...);
channels averaged in float64; any rate resampled by soxr VHQ. `stream_audio` (blocks of BLOCK_S
s; `decode` joins them, hearsay.sound.windows cuts them) reads a file as hearsay-score must: the
name is only a name (`ffmpeg_input`: `file:` + absolute path, file protocol only), special files
are refused (`open_regular`), each decode is bounded in time (`bounded`) and memory
(`limit_memory`), the audio streams are counted (`audio_stream_count`: the first is scored), the
file must not change while read, and a file libsndfile opens but cannot read is decoded again,
whole, by ffmpeg (`with_fallback`). `mono_16k` mixes down and resamples (hearsay.deploy.memory
calls it on samples handed over in memory). What a wave becomes next is hearsay.sound.audio.
numpy, soundfile, soxr and an ffmpeg binary only: never torch (the deploy image has none).
"""

from __future__ import annotations

import io
import os
import re
import resource
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

SAMPLE_RATE = 16_000  # Hz; every wave past load_audio is at this rate
RESAMPLER = "soxr VHQ"  # the one documented resampler (libsoxr, very high quality)
BLOCK_S = 30.0  # decode block (s of the file's own rate): bounds decode memory
MAX_DECODE_S = 600.0  # default decode time bound per file and pass (s; --max-decode-s)
MAX_DECODE_MB = 1024  # default ffmpeg address-space bound (MiB; hearsay-score --max-decode-mb)


class AudioError(Exception):
    """A clip that cannot enter the pipeline. `path` names the file, `reason` says why."""

    def __init__(self, path: str | os.PathLike | None, reason: str):
        self.path = None if path is None else str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}" if self.path else reason)


# --------------------------------------------------------------------------- one shot


def ffmpeg_exe() -> str:
    """Path of the ffmpeg binary: $HEARSAY_FFMPEG, else the imageio-ffmpeg wheel's, else PATH's."""
    env = os.environ.get("HEARSAY_FFMPEG")
    if env:
        return env
    try:
        import imageio_ffmpeg  # optional: the deploy image uses Debian's ffmpeg on PATH

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:  # noqa: BLE001 - any failure means "not available", fall through
        pass
    found = shutil.which("ffmpeg")
    if found:
        return found
    raise AudioError(None, "no ffmpeg found (pip install imageio-ffmpeg, or set HEARSAY_FFMPEG)")


def ffmpeg_command(path: Path) -> list[str]:
    """ffmpeg decoding the first audio stream of `path` to float32 WAV on stdout, at the file's
    own rate and channels; nothing is written to disk (a read-only container decodes too)."""
    return [ffmpeg_exe(), "-nostdin", "-v", "error", "-i", str(path),
            "-map", "0:a:0", "-c:a", "pcm_f32le", "-f", "wav", "-bitexact", "pipe:1"]


def _decode_ffmpeg(path: Path) -> tuple[np.ndarray, int]:
    """Decode anything ffmpeg reads to (frames, channels) float32 at the file's own rate."""
    proc = subprocess.run(ffmpeg_command(path), capture_output=True, timeout=300)
    if proc.returncode != 0 or not proc.stdout:
        lines = [ln for ln in proc.stderr.decode(errors="replace").strip().splitlines()
                 if ln.strip()]
        why = lines[-1] if lines else f"ffmpeg exit {proc.returncode}"
        raise AudioError(path, f"undecodable ({why})")
    # a WAV on a pipe carries 0xFFFFFFFF as its sizes; libsndfile reads it up to the end
    data, rate = sf.read(io.BytesIO(proc.stdout), dtype="float32", always_2d=True)
    return data, rate


def load_audio(path: str | os.PathLike) -> np.ndarray:
    """Decode `path` to a (N,) float32 wave at 16 kHz mono: soundfile, else ffmpeg. Raises
    AudioError naming the file: missing or empty, undecodable, zero samples, NaN/inf samples."""
    path = Path(path)
    if not path.is_file():
        raise AudioError(path, "file not found")
    if path.stat().st_size == 0:
        raise AudioError(path, "empty file (0 bytes)")
    try:
        data, rate = sf.read(path, dtype="float32", always_2d=True)
    except Exception as sf_err:  # noqa: BLE001 - libsndfile raises several types
        try:
            data, rate = _decode_ffmpeg(path)
        except AudioError as ff_err:
            raise AudioError(path, f"{ff_err.reason}; soundfile: {sf_err}") from None
    if data.size == 0:
        raise AudioError(path, "no audio samples (header only or truncated)")
    if not np.isfinite(data).all():
        raise AudioError(path, "contains NaN or inf samples")
    wave = data.mean(axis=1, dtype=np.float64).astype(np.float32)  # (frames,) mono mix-down
    return resample(wave, rate)


def resample(x: np.ndarray, rate: int, target: int = SAMPLE_RATE) -> np.ndarray:
    """(N,) float32 at `rate` -> float32 at `target` with soxr VHQ (identity if equal)."""
    if rate == target:
        return np.ascontiguousarray(x, dtype=np.float32)
    return soxr.resample(x.astype(np.float32), rate, target, quality="VHQ").astype(np.float32)


# ------------------------------------------------- one input file as hearsay-score must read it

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK:
          "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def open_regular(path: Path):
    """The file opened for reading; AudioError if it is missing or not a regular file (a FIFO is
    opened non-blocking, so it is refused instead of waiting for a writer)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise AudioError(path, "file not found") from None
    except OSError as err:
        raise AudioError(path, f"cannot open ({err.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise AudioError(path, f"not a regular file ({kind}): only files are scored")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def bounded(path: Path, blocks: Iterator, max_s: float) -> Iterator:
    """`blocks`, failing the file once producing them (decoding + resampling, not what the
    consumer does between blocks) took longer than max_s seconds."""
    spent = 0.0
    with closing(blocks):
        while True:
            t0 = time.monotonic()
            block = next(blocks, None)
            spent += time.monotonic() - t0
            if spent > max_s:
                raise AudioError(path, f"decoding took over {max_s:g} s (the per-file "
                                       "bound: --max-decode-s)")
            if block is None:
                return
            yield block


def ffmpeg_input(path: str | os.PathLike) -> list[str]:
    """ffmpeg's input arguments for a file NAME: only the file protocol, and the absolute path
    behind `file:`, so no name is read as a URL or protocol (`file:x.m4a`, `concat:a|b`)."""
    return ["-protocol_whitelist", "file", "-i", b"file:" + os.fsencode(os.path.abspath(path))]


def limit_memory(mb: int):
    """preexec_fn: ffmpeg's address space at most `mb` MiB (a junk file cannot take the box)."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
    return apply


# One audio stream's line in ffmpeg's listing of its input: "  Stream #0:1[0x2](eng): Audio: aac"
_AUDIO_STREAM = re.compile(r"^\s*Stream #0:\d+\S*: Audio: ", re.MULTILINE)


def audio_stream_count(path: Path, max_s: float, max_mb: int) -> int | None:
    """How many audio streams the container holds, from ffmpeg's listing of its input (ffmpeg
    run with no output lists the input and exits 1; the wheel ships no ffprobe). The decode maps
    the first (`-map 0:a:0`); a row says when there were more. None when ffmpeg cannot list it
    in time (the decode that follows reports why the file fails); bounded like the decode:
    `max_s` seconds, `max_mb` MiB of address space."""
    cmd = [ffmpeg_exe(), "-nostdin", "-hide_banner", "-v", "info", *ffmpeg_input(path)]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=max_s,
                              preexec_fn=limit_memory(max_mb))
    except subprocess.TimeoutExpired:
        return None
    found = len(_AUDIO_STREAM.findall(done.stderr.decode(errors="replace")))
    return found or None


@dataclass
class DecodeInfo:
    """What a decode learned besides the samples (filled as the stream runs)."""

    decoder: str = "auto"  # "auto": soundfile, ffmpeg if it cannot open the file; or "ffmpeg"
    header_s: float | None = None  # the length the file's header declares (soundfile), if any
    sf_error: str = ""  # why soundfile gave up (it could not open or read the file)
    size: int | None = None  # the file's bytes when first opened (a later pass must see the same)
    max_s: float = MAX_DECODE_S  # decode time bound per pass (s): past it the file fails
    max_mb: int = MAX_DECODE_MB  # ffmpeg's address space bound (MiB): past it the file fails
    # audio streams in the container where ffmpeg decodes it (MP4, MKV, WebM...); only the first
    # is scored. None: not counted (soundfile decoded it, or ffmpeg could not list them).
    audio_streams: int | None = None


class _SoundfileReadError(AudioError):
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
    samples, NaN/inf, over the time or memory bound, changed while read); with_fallback turns a
    soundfile read failure into an ffmpeg decode."""
    path = Path(path)
    info = DecodeInfo() if info is None else info
    fh = open_regular(path)
    size = os.fstat(fh.fileno()).st_size
    if size == 0:
        fh.close()
        raise AudioError(path, "empty file (0 bytes)")
    if info.size is not None and size != info.size:
        fh.close()
        raise AudioError(path, f"file changed while it was read ({info.size} -> {size} "
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
    yield from bounded(path, mono_16k(path, frames), info.max_s)
    if os.stat(path).st_size != size:
        raise AudioError(path, f"file changed while it was read ({size} -> "
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
    cmd = [ffmpeg_exe(), "-nostdin", "-v", "error", *ffmpeg_input(path),
           "-map", "0:a:0", "-c:a", "pcm_f32be", "-f", "au", "-bitexact", "pipe:1"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=limit_memory(info.max_mb))
    errors: list[bytes] = []
    drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    drain.start()

    def fail(default: str) -> AudioError:
        proc.wait()
        drain.join()
        lines = [ln for ln in b"".join(errors).decode(errors="replace").splitlines() if ln.strip()]
        why = lines[-1] if lines else default
        if any("matches no streams" in ln for ln in lines):
            why = "no audio stream (video or data only)"
        elif "alloc" in why.lower() or proc.returncode in (-6, -9, -11):
            why = f"{why}; over the decode memory bound {info.max_mb} MiB: --max-decode-mb"
        return AudioError(path, f"undecodable ({why}); soundfile: {sf_error}")

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


TOO_LARGE = ("samples too large to score (peak {:.3g}; audio is -1..1): float samples out of "
              "range overflow the resampler or the normalisation")


def mono_16k(path: Path, frames: Iterator[tuple[np.ndarray, int]]) -> Iterator[np.ndarray]:
    """Mix down (float64 mean, as load_audio) and resample a stream of (frames, ch) blocks."""
    stream, total = None, 0
    for data, rate in frames:
        if not np.isfinite(data).all():
            raise AudioError(path, "contains NaN or inf samples")
        wave = data.mean(axis=1, dtype=np.float64).astype(np.float32)
        total += len(wave)
        if rate == SAMPLE_RATE:
            yield wave
            continue
        if stream is None:
            stream = soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32", quality="VHQ")
        out = stream.resample_chunk(wave, last=False)
        if not np.isfinite(out).all():  # float samples near 3.4e38 overflow the filter
            raise AudioError(path, TOO_LARGE.format(np.abs(data).max()))
        if len(out):
            yield out
    if total == 0:
        raise AudioError(path, "no audio samples (header only or truncated)")
    if stream is not None:
        tail = stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        if len(tail):
            yield tail
