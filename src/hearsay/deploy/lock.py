"""One run per output: hearsay-score holds FILE.lock (beside -o FILE, and beside --windows-csv
FILE) while it writes FILE.partial, its run record and FILE.

    with hold([Path("scores.csv")]):      # LockedError naming the run that holds it
        ...                               # FILE.partial, FILE.partial.json, FILE: this run's

The lock is the kernel's flock on FILE.lock, so it ends with its holder however that ends
(a crash, SIGKILL, a container removed): a lock nobody holds is free. FILE.lock also holds its
holder's pid, host and start (UTC), for the message a second run gets; a run that finds
FILE.lock free but written takes it over and says whose it was (that run is gone). FILE.lock is
removed when its run ends, while still held; a run that locked a FILE.lock removed meanwhile
tries again on the new one, so two runs never both hold one output. Two containers on one
mount share the host's kernel and its locks; on a network mount the lock is as good as the
mount's own locking (NFS v4: yes). Stdlib only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from hearsay.deploy.io import OutputError, say


class LockedError(Exception):
    """Another hearsay-score run holds the output's lock (hearsay-score exits 6)."""


def lock_path(output: Path) -> Path:
    """FILE.lock: the lock of -o FILE (its .partial, its run record, FILE itself)."""
    return output.with_name(output.name + ".lock")


def _holder(fd: int) -> str:
    """What FILE.lock says of its holder ('pid P on host H, started T'), or ''."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        doc = json.loads(os.read(fd, 4096).decode("utf-8"))
        return f"pid {doc['pid']} on host {doc['host']}, started {doc['start']}"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _take(output: Path) -> int:
    """The held fd of FILE.lock (module docstring); LockedError when another run holds it."""
    path = lock_path(output)
    while True:
        try:  # O_NOFOLLOW: a symlink planted at FILE.lock is refused, not followed
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as err:
            raise OutputError(f"cannot create the lock {path} ({err.strerror or err}): pass "
                              "-o in a writable folder, where FILE.lock can be a plain "
                              "file") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _holder(fd) or "its pid, host and start not yet written"
            os.close(fd)
            raise LockedError(f"{output} is being written by another hearsay-score run ({who}; "
                              f"its lock {path}): wait for that run to end, or pass another "
                              "-o / --windows-csv") from None
        try:  # the holder before us may have removed this FILE.lock: lock the one there now
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    stale = _holder(fd)
    if stale:
        say(f"hearsay-score: taking over {path}: the run that held it ({stale}) is gone")
    start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    me = {"pid": os.getpid(), "host": socket.gethostname(), "start": start}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
    return fd


def _give_back(output: Path, fd: int) -> None:
    """Remove FILE.lock while still holding it, then release it."""
    try:
        lock_path(output).unlink(missing_ok=True)
    finally:
        os.close(fd)


@contextlib.contextmanager
def hold(outputs: list[Path | None]) -> Iterator[None]:
    """Hold the lock of every output given (None: stdout, nothing to lock) for the block;
    LockedError (nothing held) when another run holds one; OutputError when FILE.lock cannot
    be created."""
    held: list[tuple[Path, int]] = []
    try:
        for output in (o for o in outputs if o is not None):
            held.append((output, _take(output)))
        yield
    finally:
        for output, fd in reversed(held):
            _give_back(output, fd)
