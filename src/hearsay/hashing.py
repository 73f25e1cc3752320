"""sha256 of files and SHA256SUMS manifests: the identity helpers every stage uses (stdlib only,
torch-free: the deploy image imports this)."""

from __future__ import annotations

import hashlib
import os
import re


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of the file at `path`, read in `chunk`-byte blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


# Every caller's files sit flat beside their manifest, so a name is one plain path component:
# starts with a letter or digit (no "/", no "..", no hidden files), then letters, digits, "._-".
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A SHA256SUMS line as `sha256sum` writes it: 64 lowercase hex, then "  name" (text mode) or
# " *name" (binary mode), the name a SAFE_NAME.
_SUMS_LINE = re.compile(rf"^([0-9a-f]{{64}}) [ *]({SAFE_NAME.pattern})$")


class SumsError(ValueError):
    """A SHA256SUMS manifest that cannot be trusted as written; the message names the line."""


def parse_sums(text: str, source: str = "SHA256SUMS") -> dict[str, str]:
    """SHA256SUMS text -> {file name: hex sha256}. Blank lines are skipped; a malformed line, an
    unsafe name or a name listed twice raises SumsError naming `source` and the line."""
    sums: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        m = _SUMS_LINE.match(line)
        if m is None:
            raise SumsError(f"{source}:{number}: malformed line {line!r} (want '<64 lowercase "
                            "hex sha256>  <plain file name>', as `sha256sum` writes it)")
        digest, name = m.groups()
        if name in sums:
            raise SumsError(f"{source}:{number}: {name} is listed twice")
        sums[name] = digest
    return sums


def format_sums(sums: dict[str, str]) -> str:
    """{name: hex} -> SHA256SUMS text, sorted by name (what `sha256sum --check` reads)."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items()))
