"""What hearsay-score scores: a folder (walked), one file, or a list of files; and the run record
of them that --resume checks.

    hearsay-score clips/              # every audio file under clips/ (find_audio)
    hearsay-score call.m4a            # that file (any name: the decoder goes by its bytes)
    hearsay-score --files-from list.txt      # one path a line
    find . -name '*.wav' | hearsay-score --files-from -    # the list on stdin
    hearsay-score clips/ -o scores.csv            # interrupted: scores.csv.partial + .partial.json
    hearsay-score clips/ -o scores.csv --resume   # same folder, options, engine and model: goes on

A folder's rows name paths relative to it; a file's or a list's rows name each path as given
(pathlib's spelling: `./a.wav` is `a.wav`), relative paths resolved from the current folder. A
list line is a path as bytes (any encoding), without its line end (LF or CRLF); empty lines are
skipped and a path listed again is scored once (counted as "duplicate"). A listed file is scored
whatever its extension: the list names it. A missing or unreadable listed file is a failed row
(its reason in `error`), like an undecodable one.

`-o FILE` writes FILE.partial.json (the run record) before its first row: the inputs (a clips
folder's real path and its device:inode, so another folder mounted at the same path is told
apart; a file's or a list's absolute paths, as a sha256), the output format (csv, jsonl), every
option that changes a score or which files fail, the engine and the model identity (the folder's
SHA256SUMS sha and the variant). --resume keeps FILE.partial's rows only when the record equals
this run's; otherwise it refuses (exit 2) naming what differs and the fix. The record is removed
when FILE is complete. Stdlib only (the deploy image imports it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections import Counter, deque
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from hearsay.deploy import jsonl
from hearsay.deploy.io import (
    COLUMNS,
    OutputError,
    ResumeError,
    new_row,
    partial_of,
    read_partial,
    say,
    whole_lines,
)
from hearsay.util.files import write_json

# Extensions scored (lower case). Other files (README, .DS_Store, …) are skipped and counted.
AUDIO_EXTS = frozenset({
    ".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a", ".aac", ".mp4", ".amr", ".webm",
    ".wma", ".aif", ".aiff", ".au", ".caf", ".3gp", ".mka", ".spx", ".ulaw", ".mulaw",
})


def find_audio(root: Path) -> tuple[list[Path], Counter]:
    """Audio files under `root`, recursively, sorted by relative path; and what was skipped.

    Symlinked folders are followed; one that leads to a folder already walked (a loop, or a
    second way into the same files) is not walked again. Nothing under `root` goes uncounted:
    the Counter has "not audio", "hidden" (a dot-file, or any file under a dot-folder),
    "symlink loop" (folders) and "unreadable" (folders that cannot be listed)."""
    found, skipped, seen = [], Counter(), set()

    def walk(folder: Path, hidden: bool) -> None:
        try:
            st = folder.stat()
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            skipped["unreadable"] += 1
            return
        if (st.st_dev, st.st_ino) in seen:
            skipped["symlink loop"] += 1
            return
        seen.add((st.st_dev, st.st_ino))
        for entry in entries:
            path, dot = Path(entry.path), hidden or entry.name.startswith(".")
            try:
                is_dir = entry.is_dir()  # follows a symlink
            except OSError:
                is_dir = False
            if is_dir:
                walk(path, dot)
            elif dot:
                skipped["hidden"] += 1
            elif path.suffix.lower() not in AUDIO_EXTS:
                skipped["not audio"] += 1
            else:
                found.append(path)

    walk(root, False)
    found.sort(key=lambda p: p.relative_to(root).as_posix())
    return found, skipped


class InputError(Exception):
    """The inputs named cannot be read (usage: hearsay-score exits 2)."""


@dataclass
class Inputs:
    root: Path | None  # the folder walked (rows relative to it); None: paths as given
    files: list[Path]
    skipped: Counter = field(default_factory=Counter)
    source: dict = field(default_factory=dict)  # the run record's part that names the inputs
    where: str = ""  # for messages: "under clips/", "in list.txt"


def read_list(name: str) -> list[Path]:
    """--files-from NAME ('-': stdin): the paths of its lines (module docstring)."""
    try:
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as err:
        raise InputError(f"--files-from {name}: cannot read it ({err.strerror or err})") from None
    lines = (line.removesuffix(b"\r") for line in data.split(b"\n"))
    return [Path(os.fsdecode(line)) for line in lines if line]


def _listed(paths: list[Path]) -> tuple[list[Path], Counter]:
    seen, files, skipped = set(), [], Counter()
    for p in paths:
        if str(p) in seen:
            skipped["duplicate"] += 1
            continue
        seen.add(str(p))
        files.append(p)
    return files, skipped


def _list_source(files: list[Path]) -> dict:
    """The run record's inputs for a list: the paths as absolute names (a list read again from
    another folder names other files), as one sha256."""
    names = b"\0".join(os.fsencode(os.path.abspath(p)) for p in files)
    return {"clips": None, "clips_id": None, "files": len(files),
            "files_sha256": hashlib.sha256(names).hexdigest()}


def folder_source(clips: Path) -> dict:
    """The run record's inputs for a folder: its real path and device:inode (another folder
    mounted at the same path is told apart)."""
    st = os.stat(clips)
    return {"clips": os.path.realpath(clips), "clips_id": f"{st.st_dev}:{st.st_ino}"}


def usage_error(clips: Path | None, files_from: str | None) -> str:
    """What is wrong with CLIPS / --files-from as given (checked before any work), or ''."""
    if clips is not None and files_from is not None:
        return "give CLIPS (a folder or a file) or --files-from LIST, not both"
    if clips is None and files_from is None:
        return ("nothing to score: give a folder of clips, a file, or --files-from LIST "
                "(- for stdin)")
    if clips is not None and str(clips) == "-":
        return ("'-' is not a folder or a file: to read a list of paths from stdin, pass "
                "--files-from -")
    if clips is not None and not os.path.lexists(clips):
        return (f"{clips} is not a folder or a file (pass a folder of clips, a file, or "
                '--files-from LIST; in a container: docker run --rm -v "$PWD:/data" '
                "hearsay-score clips/)")
    return ""


def resolve(clips: Path | None, files_from: str | None) -> Inputs:
    """The inputs of CLIPS (a folder or a file) or --files-from; InputError for a usage error."""
    why = usage_error(clips, files_from)
    if why:
        raise InputError(why)
    if files_from is not None:
        files, skipped = _listed(read_list(files_from))
        where = "on stdin" if files_from == "-" else f"in {files_from}"
        return Inputs(None, files, skipped, _list_source(files), where)
    if clips.is_dir():
        files, skipped = find_audio(clips)
        return Inputs(clips, files, skipped, folder_source(clips), f"under {clips}")
    return Inputs(None, [clips], Counter(), _list_source([clips]), f"in {clips}")


# --------------------------------------------------------------------------- file identity

# A row's error when its file changed between the scorer taking it and its row being done.
CHANGED = "changed while scored (replaced or rewritten: its identity {} -> {}); score it again"


def file_id(path) -> list[int] | None:
    """The identity of the file at `path` as opened (symlinks followed): [st_dev, st_ino,
    st_size, st_mtime_ns]; None when there is no file to stat (missing, an array)."""
    if not isinstance(path, str | os.PathLike):
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def bound_rows(chunks_of, files: list, on_file=None):
    """The chunks of rows `chunks_of(paths)` makes of `files`, each row bound to its file's
    identity: taken as the scorer takes the file (`paths` is iterated lazily, before each file
    is opened) and again once its row is done. A file whose identity changed between gets an
    error row (CHANGED), never a score (`row` is emptied through `io.new_row`'s values).
    `on_file(path, identity)` hears each row's identity, None for a changed file (never kept
    by --resume). `chunks_of` yields lists of rows, one row per path, in order."""
    taken: deque = deque()  # (path, identity when taken), in order, until its row is done

    def take():
        for path in files:
            taken.append((path, file_id(path)))
            yield path

    for rows in chunks_of(take()):
        for row in rows:
            path, before = taken.popleft()
            now = file_id(path)
            if now != before:
                empty = new_row(None, Path("."), "", "")
                keep = {k: row[k] for k in ("path", "model_sums_sha256", "variant")}
                row.clear()
                row.update({**empty, **keep, "error": CHANGED.format(before, now)})
                now = None
            if on_file is not None:
                on_file(path, now)
        yield rows


# --------------------------------------------------------------------------- the run record


def record_path(output: Path) -> Path:
    """FILE.partial.json: the record of the run that writes FILE.partial."""
    return output.with_name(output.name + ".partial.json")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def run_record(args, cfg, model_sha: str, source: dict | None = None) -> dict:
    """What made (or would make) these rows: inputs (`source`, Inputs.source; None: the
    folder args.clips), options, output format, engine, model identity."""
    wcsv = getattr(args, "windows_csv", None)
    source = folder_source(args.clips) if source is None else source
    return {**source, "format": getattr(args, "format", "csv"),
            "first_window": cfg.first_window,
            "hop_s": None if cfg.first_window else cfg.hop_s,
            "windows_csv": None if wcsv is None else os.path.realpath(wcsv),
            "max_decode_s": cfg.max_decode_s, "max_decode_mb": cfg.max_decode_mb,
            "variant": cfg.variant, "model_sums_sha256": model_sha,
            "engine": f"onnxruntime {_version('onnxruntime')}",
            "hearsay": _version("hearsay"), "columns": COLUMNS}


def ids_path(output: Path) -> Path:
    """FILE.partial.ids: the run record's rows, one JSON line per row of FILE.partial (written
    after it): {"path": the row's path, "file": its file's identity (file_id) or null}."""
    return output.with_name(output.name + ".partial.ids")


def write_record(output: Path | None, record: dict) -> None:
    if output is not None:
        write_json(record_path(output), record)


def drop_record(output: Path | None) -> None:
    if output is not None:
        record_path(output).unlink(missing_ok=True)
        ids_path(output).unlink(missing_ok=True)


class IdLog:
    """FILE.partial.ids as rows are written (ids_path): `keep` first (--resume's kept rows),
    then each chunk's identities, flushed after its rows. A row whose identity line is missing
    (a run stopped between the two) is scored again by --resume. No file without -o."""

    def __init__(self, output: Path | None, keep: dict[str, list | None]):
        self.stream = None
        if output is not None:
            path = ids_path(output)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
                self.stream = open(fd, "w", encoding="utf-8", newline="")  # noqa: SIM115
            except OSError as err:
                raise OutputError(f"cannot write {path}: {err.strerror or err}") from None
        self.write(keep)

    def write(self, ids: dict[str, list | None]) -> None:
        if self.stream is None or not ids:
            return
        try:
            self.stream.write("".join(jsonl.json_line({"path": p, "file": f})
                                      for p, f in ids.items()))
            self.stream.flush()
        except OSError as err:
            raise OutputError(f"writing {self.stream.name} failed: {err.strerror or err}") \
                from None

    def close(self) -> None:
        if self.stream is not None:
            with contextlib.suppress(OSError):
                self.stream.close()


def _recorded_ids(output: Path) -> dict[str, list | None]:
    """FILE.partial.ids as {path: identity}; lines cut or not JSON read as no identity (their
    rows are scored again)."""
    ids = {}
    with contextlib.suppress(ResumeError):
        for line in whole_lines(ids_path(output)):
            try:
                doc = json.loads(line)
                ids[doc["path"]] = doc["file"]
            except (ValueError, TypeError, KeyError):
                continue
    return ids


def resume_rows(args, record: dict, window_columns: list[str], current: dict[str, list | None]
                ) -> tuple[list[dict], list[dict], dict[str, list]]:
    """--resume: the complete rows of -o's and --windows-csv's .partial files (the window rows
    of files whose row is kept only) and their identities, if FILE.partial.json is this run's
    record; else ResumeError naming what differs. A row is kept only when its file is among
    this run's inputs with the identity FILE.partial.ids recorded for it (`current`: each
    input's row path -> file_id now): a file replaced or rewritten since is scored again."""
    partial, rec = partial_of(args.output), record_path(args.output)
    if not partial.is_file():
        say(f"hearsay-score: --resume: no {partial}, scoring every file")
        return [], [], {}
    fix = (f"run again with the first run's folder and options, or remove {partial} and {rec} "
           "and run without --resume")
    if not rec.is_file():
        raise ResumeError(f"{partial} has no run record {rec} (not written by this "
                          f"hearsay-score): {fix}")
    try:
        old = json.loads(rec.read_text())
    except (OSError, ValueError) as err:
        raise ResumeError(f"{rec} cannot be read ({err}): {fix}") from None
    diff = [f"{k} {old.get(k)!r} -> {v!r}" for k, v in record.items() if old.get(k) != v]
    if diff:
        raise ResumeError(f"{partial} was written by another run ({'; '.join(diff)}): {fix}")
    read = jsonl.read_partial if record.get("format") == "jsonl" else read_partial
    kept = read(partial, COLUMNS)
    other = {(r["model_sums_sha256"], r["variant"]) for r in kept} - {
        (record["model_sums_sha256"], record["variant"])}
    if other:
        raise ResumeError(f"{partial} holds rows of model {sorted(other)[0]}, not this run's: "
                          f"{fix}")
    recorded = _recorded_ids(args.output)
    ids = {r["path"]: current[r["path"]] for r in kept
           if current.get(r["path"]) is not None and recorded.get(r["path"]) == current[r["path"]]}
    again = len(kept) - len(ids)
    kept = [r for r in kept if r["path"] in ids]
    kept_windows = []
    if args.windows_csv is not None:
        wpartial = partial_of(args.windows_csv)
        kept_windows = [r for r in read_partial(wpartial, window_columns) if r["path"] in ids]
    changed = (f"; {again} scored again (their file changed since it was scored, or is no "
               "longer among the inputs)" if again else "")
    say(f"hearsay-score: --resume: {len(kept)} files already done in {partial}{changed}")
    return kept, kept_windows, ids
