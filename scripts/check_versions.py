#!/usr/bin/env python3
"""Check that this Python's installed packages are exactly requirements.lock's: a hard gate.

Every package the lock pins must be installed at exactly the lock's version, and every installed
distribution must be in the lock, except the project itself (hearsay) and the installer's own
(pip, setuptools, wheel: a venv brings them; the image has none). Run with the interpreter to
check, it reads only the standard library (importlib.metadata):

    .venv/bin/python scripts/check_versions.py                 # make test's venv
    python3 /opt/hearsay/scripts/check_versions.py --lock /opt/hearsay/requirements.lock  # image
    # the image build runs it over the installed wheels (nix/python.nix) and over the final
    # interpreter (`nix flake check`, checks.python-versions); the box's smoke check runs it too

It prints one line per difference and a summary. Hashes are not re-checked here: pip
(--require-hashes) and Nix (one fixed-output fetch per wheel) refuse a wheel whose sha256 is not
the lock's before it is installed.

Exit codes: 0 the installed set equals the lock; 1 it differs (a package missing, extra, or at
another version); 2 usage; 3 cannot measure (the lock is missing or has no pins, or a
distribution's metadata has no name or version).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Not pinned in the lock on purpose: the project (installed from its tree) and the installer's own.
NOT_LOCKED = {"hearsay", "pip", "setuptools", "wheel"}
EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3
PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


class CannotMeasure(Exception):
    """The lock or the installed metadata cannot be read (the message says which)."""


def canonical(name: str) -> str:
    """PEP 503: 'PyYAML' == 'pyyaml', 'typing_extensions' == 'typing-extensions'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> dict[str, str]:
    """requirements.lock (`name==version [--hash=…] [# wheel]` lines) -> {canonical: version}."""
    try:
        text = path.read_text()
    except OSError as e:
        raise CannotMeasure(f"cannot read the lock {path}: {e.strerror}") from e
    pins = {}
    for line in text.splitlines():
        m = PIN_RE.match(line.strip())
        if m:
            pins[canonical(m.group(1))] = m.group(2)
    if not pins:
        raise CannotMeasure(f"{path} pins nothing (is it requirements.lock?)")
    return pins


def installed() -> dict[str, str]:
    """{canonical name: version} of every distribution this interpreter can import from."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name, version = dist.metadata["Name"], dist.version
        if not name or not version:
            raise CannotMeasure(f"a distribution at {getattr(dist, '_path', '?')} has no name or "
                                "version in its metadata")
        # the first one on sys.path is the one imported; a shadowed copy is not what runs
        found.setdefault(canonical(name), version)
    return found


def compare(have: dict[str, str], lock: dict[str, str]) -> list[str]:
    """One line per difference between the installed set and the lock (empty: equal)."""
    lines = []
    for name in sorted(lock):
        if name not in have:
            lines.append(f"{name}: missing (lock {lock[name]})")
        elif have[name] != lock[name]:
            lines.append(f"{name}: installed {have[name]}, lock {lock[name]}")
    for name in sorted(set(have) - set(lock) - NOT_LOCKED):
        lines.append(f"{name}: installed {have[name]}, not in the lock")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--lock", type=Path, default=ROOT / "requirements.lock",
                    help="the lock (default: requirements.lock beside this script's folder)")
    args = ap.parse_args(argv)
    try:
        lock = read_lock(args.lock)
        have = installed()
    except CannotMeasure as e:
        print(f"check_versions: cannot measure: {e}", file=sys.stderr)
        return EXIT_UNKNOWN
    diff = compare(have, lock)
    for line in diff:
        print(f"check_versions: {line}")
    if diff:
        print(f"check_versions: {len(diff)} difference(s) between {sys.executable} and "
              f"{args.lock} (rebuild from the lock; to move a pin, see nix/lock_to_nix.py)",
              file=sys.stderr)
        return EXIT_DIFFERENT
    print(f"check_versions: {len(lock)} packages installed exactly as {args.lock} pins them")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
