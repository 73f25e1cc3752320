"""What hearsay-score scores: a folder (walked), one file, or a list of files.

    hearsay-score clips/              # every audio file under clips/ (io.find_audio)
    hearsay-score call.m4a            # that file (any name: the decoder goes by its bytes)
    hearsay-score --files-from list.txt      # one path a line
    find . -name '*.wav' | hearsay-score --files-from -    # the list on stdin

A folder's rows name paths relative to it; a file's or a list's rows name each path as given
(pathlib's spelling: `./a.wav` is `a.wav`), relative paths resolved from the current folder. A
list line is a path as bytes (any encoding), without its line end (LF or CRLF); empty lines are
skipped and a path listed again is scored once (counted as "duplicate"). A listed file is scored
whatever its extension: the list names it. A missing or unreadable listed file is a failed row
(its reason in `error`), like an undecodable one. Stdlib only.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hearsay.deploy.io import find_audio


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
