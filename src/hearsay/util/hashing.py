"""Identity helpers every stage uses: sha256 of files, SHA256SUMS manifests, the git sha
(stdlib only, torch-free: the deploy image imports this).

    from hearsay.util.hashing import read_sums, sha256_file
    read_sums(Path("splits/SHA256SUMS"))["demo.folds.json"] == sha256_file("splits/demo.folds.json")
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

SUMS = "SHA256SUMS"  # the one spelling of a sums file's name (model folder, splits/, a publication)

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


def parse_sums(text: str, source: str = SUMS) -> dict[str, str]:
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


def read_sums(path: str | os.PathLike, *, missing_ok: bool = False) -> dict[str, str]:
    """The SHA256SUMS file at `path` -> {file name: hex sha256}. A missing file is {} with
    `missing_ok`, else FileNotFoundError; a malformed one raises SumsError naming the line."""
    path = Path(path)
    if missing_ok and not path.is_file():
        return {}
    return parse_sums(path.read_text(), source=str(path))


def git_sha() -> str:
    """$HEARSAY_GIT_SHA (set in the trainer image, which has no .git), else `git rev-parse HEAD`
    of the checkout this file is in, else "unknown"."""
    env = os.environ.get("HEARSAY_GIT_SHA")
    if env:
        return env
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
