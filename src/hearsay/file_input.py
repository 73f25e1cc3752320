"""Reading one input file as hearsay-score must: the name is only ever a name, special files are
refused, and each decode is bounded in time and memory (hearsay.sound.windows' streaming decode
calls
these).

    fh = open_regular(path)                        # AudioError: missing, a FIFO, a device, ...
    cmd = [ffmpeg, *ffmpeg_input(path), ...]       # file: + absolute path, file protocol only
    Popen(cmd, preexec_fn=limit_memory(1024))      # ffmpeg's address space <= 1024 MiB
    audio_stream_count(path, 600.0, 1024)          # 2: a container with two audio tracks
    for block in bounded(path, blocks, 600.0): ... # AudioError past 600 s spent decoding

Stdlib and hearsay.sound.audio (AudioError, the ffmpeg binary) only: the deploy image imports it.
"""

from __future__ import annotations

import os
import re
import resource
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from hearsay.sound import audio

MAX_DECODE_S = 600.0  # default decode time bound per file and pass (s; --max-decode-s)
MAX_DECODE_MB = 1024  # default ffmpeg address-space bound (MiB; hearsay-score --max-decode-mb)


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK:
          "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def open_regular(path: Path):
    """The file opened for reading; AudioError if it is missing or not a regular file (a FIFO is
    opened non-blocking, so it is refused instead of waiting for a writer)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise audio.AudioError(path, "file not found") from None
    except OSError as err:
        raise audio.AudioError(path, f"cannot open ({err.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise audio.AudioError(path, f"not a regular file ({kind}): only files are scored")
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
                raise audio.AudioError(path, f"decoding took over {max_s:g} s (the per-file "
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
    cmd = [audio.ffmpeg_exe(), "-nostdin", "-hide_banner", "-v", "info", *ffmpeg_input(path)]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=max_s,
                              preexec_fn=limit_memory(max_mb))
    except subprocess.TimeoutExpired:
        return None
    found = len(_AUDIO_STREAM.findall(done.stderr.decode(errors="replace")))
    return found or None
