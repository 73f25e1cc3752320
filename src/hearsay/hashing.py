"""sha256 of files: the one helper every stage uses for identity (stdlib only, torch-free)."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of the file at `path`, read in `chunk`-byte blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
