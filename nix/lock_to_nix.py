#!/usr/bin/env python3
"""requirements.lock -> nix/wheels.nix: one lock, read by pip (`make test`) and by Nix (the image)

Each lock line pins one package to one wheel for the box's platform (CPython 3.11, manylinux
x86_64) and that wheel's sha256, in pip's hash form, with the wheel's file name as a comment:

    numpy==2.4.6 --hash=sha256:<64 hex>  # numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.whl

    # after editing a pin's version (on CPython 3.11, x86_64 Linux): download the wheels by
    # name==version only (the old hash would not match the new file), hash them, regenerate
    sed 's/ .*//' requirements.lock | grep '==' > /tmp/pins.txt
    python3 -m pip download --no-deps --only-binary=:all: -d /tmp/wheels -r /tmp/pins.txt
    nix/lock_to_nix.py hash --wheels /tmp/wheels   # sha256 + file name of each wheel there
    nix/lock_to_nix.py                              # rewrite nix/wheels.nix from the lock
    nix/lock_to_nix.py --check                      # make test: exit 1 if they differ

    nix/lock_to_nix.py needed --wheels /tmp/wheels   # native libraries no wheel brings

`hash` accepts plain `name==version` lines (a new pin) and keeps nothing it did not compute from
a file: a hash is never typed in. A pin whose version did not change keeps its wheel: when the
downloaded file's sha256 differs from the one in the lock, `hash` refuses (a replaced file).
nix/wheels.nix holds, per package, the arguments of nixpkgs'
`fetchPypi { format = "wheel"; … }` (the wheel's python tag, abi tag and platform tags, which
also make its file name) and the sha256; nix/python.nix installs exactly those wheels.
`needed` reads the NEEDED entries of every ELF file in the downloaded wheels (binutils' readelf)
and names each library that no wheel provides: glibc, gcc's libstdc++/libgcc_s and zlib are
nix/python.nix's build inputs; anything else must be in its autoPatchelfIgnoreMissingDeps, or
autoPatchelf stops the image build (exit 1 names it here first).

Exit codes: 0 done / in agreement; 1 nix/wheels.nix disagrees with the lock (--check), or a
needed library is provided by nothing (needed); 2 usage;
3 the lock or a wheel folder is unusable (the message names the line or package and the fix).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
NIX = ROOT / "nix" / "wheels.nix"
PYTHON_NIX = ROOT / "nix" / "python.nix"
# Libraries nix/python.nix's inputs provide: stdenv's glibc, stdenv.cc.cc.lib, zlib.
PROVIDED = {**dict.fromkeys(["libc.so.6", "libm.so.6", "libmvec.so.1", "libdl.so.2",
                             "libpthread.so.0", "librt.so.1", "libutil.so.1",
                             "ld-linux-x86-64.so.2"], "glibc"),
            "libstdc++.so.6": "gcc-lib", "libgcc_s.so.1": "gcc-lib", "libz.so.1": "zlib"}
EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE, EXIT_BAD = 0, 1, 2, 3

HEADER = """\
# requirements.lock: every package of `make test`'s venv and of the trainer image's Python.
# One wheel per package for CPython 3.11 / manylinux x86_64, with the sha256 of that file:
# `make test` installs it with `pip install --require-hashes -r requirements.lock`; the image
# builds from the same lines (nix/lock_to_nix.py -> nix/wheels.nix). To move a pin: edit the
# version, then follow nix/lock_to_nix.py --help (download, `hash`, regenerate, rebuild).
"""
LINE_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)"
                     r"(?:\s+--hash=sha256:([0-9a-f]{64}))?(?:\s+#\s*(\S+\.whl))?\s*$")
# PEP 427: {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl; no build tag here,
# because fetchPypi's wheel URL has no place for one.
WHEEL_RE = re.compile(r"^([A-Za-z0-9_.]+)-([^-]+)-([^-]+)-([^-]+)-([^-]+)\.whl$")


class LockError(Exception):
    """The lock, a wheel file name or a wheel folder cannot be used (message says why)."""


def canonical(name: str) -> str:
    """PEP 503 name: 'Jinja2' and 'jinja2', 'typing_extensions' and 'typing-extensions' agree."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    name: str  # as written in the lock
    version: str
    sha256: str | None  # None only for a new pin before `hash`
    wheel: str | None  # the wheel's file name

    def fetch_args(self) -> dict[str, str]:
        """fetchPypi's wheel arguments; pname/version/python/abi/platform rebuild the file name."""
        m = WHEEL_RE.match(self.wheel or "")
        if not m:
            raise LockError(f"{self.name}: {self.wheel!r} is not a wheel file name without a build "
                            "tag (run `nix/lock_to_nix.py hash --wheels DIR`)")
        pname, version, python, abi, platform = m.groups()
        if canonical(pname) != canonical(self.name) or version != self.version:
            raise LockError(f"{self.name}=={self.version}: its wheel {self.wheel} is another "
                            "package or version (run `hash` again)")
        # The registry keeps a wheel under its python tag: that is fetchPypi's `dist`.
        return {"pname": pname, "version": version, "dist": python, "python": python,
                "abi": abi, "platform": platform}


def read_lock(path: Path = LOCK, need_hashes: bool = True) -> list[Pin]:
    """The lock's pins in file order; LockError names a bad line."""
    pins, seen = [], set()
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = LINE_RE.match(line)
        if not m:
            raise LockError(f"{path}:{number}: {raw!r} is not `name==version --hash=sha256:<hex>  "
                            "# <wheel>`")
        pin = Pin(*m.groups())
        if need_hashes and (pin.sha256 is None or pin.wheel is None):
            raise LockError(f"{path}:{number}: {pin.name} has no hash or wheel (run "
                            "`nix/lock_to_nix.py hash --wheels DIR` after downloading)")
        if canonical(pin.name) in seen:
            raise LockError(f"{path}:{number}: {pin.name} is pinned twice")
        seen.add(canonical(pin.name))
        pins.append(pin)
    if not pins:
        raise LockError(f"{path} pins nothing")
    return pins


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def hash_lock(pins: list[Pin], wheels: Path) -> list[Pin]:
    """Each pin with the sha256 and file name of its one wheel in `wheels`."""
    by_pin: dict[tuple[str, str], list[Path]] = {}
    for f in sorted(wheels.glob("*.whl")):
        m = WHEEL_RE.match(f.name)
        if m:
            by_pin.setdefault((canonical(m.group(1)), m.group(2)), []).append(f)
    out = []
    for pin in pins:
        found = by_pin.get((canonical(pin.name), pin.version), [])
        if len(found) != 1:
            raise LockError(f"{pin.name}=={pin.version}: {len(found)} wheels in {wheels} "
                            f"({[f.name for f in found]}); want exactly one (pip download "
                            "--no-deps --only-binary=:all: for CPython 3.11 manylinux x86_64)")
        sha = sha256_of(found[0])
        if pin.sha256 is not None and pin.wheel == found[0].name and pin.sha256 != sha:
            raise LockError(f"{found[0]} has sha256 {sha}, the lock says {pin.sha256} for the same "
                            "file: refusing (download it again; if the registry replaced it, "
                            "find out why before pinning the new file)")
        out.append(Pin(pin.name, pin.version, sha, found[0].name))
    return out


def format_lock(pins: list[Pin]) -> str:
    return HEADER + "".join(f"{p.name}=={p.version} --hash=sha256:{p.sha256}  # {p.wheel}\n"
                            for p in pins)


def format_nix(pins: list[Pin]) -> str:
    """nix/wheels.nix: a list of attribute sets, one per pin, in lock order."""
    lines = ["# Generated from requirements.lock by nix/lock_to_nix.py: do not edit by hand.",
             "# One fetchPypi wheel per locked package (nix/python.nix installs exactly these);",
             "# `nix/lock_to_nix.py --check` (run by make test) fails when the two disagree.",
             "["]
    for p in pins:
        args = p.fetch_args()
        fields = " ".join(f'{k} = "{v}";' for k, v in
                          [("name", p.name), *args.items(), ("sha256", p.sha256)])
        lines.append(f"  {{ {fields} }}")
    lines.append("]")
    return "\n".join(lines) + "\n"


def elf_needs(wheels: Path) -> tuple[dict[str, list[str]], set[str]]:
    """({needed library: [wheel:member needing it]}, every file name and SONAME the wheels hold)."""
    if shutil.which("readelf") is None:
        raise LockError("readelf not found (install binutils)")
    needs: dict[str, list[str]] = {}
    provided: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="lock-to-nix-") as tmp:
        elf = Path(tmp) / "member"
        for whl in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(whl) as z:
                for info in z.infolist():
                    if info.is_dir():
                        continue
                    provided.add(Path(info.filename).name)
                    with z.open(info) as f:
                        if f.read(4) != b"\x7fELF":
                            continue
                    with z.open(info) as f, open(elf, "wb") as g:
                        shutil.copyfileobj(f, g, 1 << 22)
                    dyn = subprocess.run(["readelf", "-d", "-W", str(elf)], capture_output=True,
                                         text=True).stdout
                    for kind, lib in re.findall(r"\((NEEDED|SONAME)\)[^\[]*\[([^\]]+)\]", dyn):
                        if kind == "SONAME":
                            provided.add(lib)
                        else:
                            needs.setdefault(lib, []).append(f"{whl.name}:{info.filename}")
    return needs, provided


def ignored_in_python_nix(path: Path = PYTHON_NIX) -> set[str]:
    """The quoted names in nix/python.nix's autoPatchelfIgnoreMissingDeps list."""
    m = re.search(r"autoPatchelfIgnoreMissingDeps = \[(.*?)\];", path.read_text(), re.S)
    if not m:
        raise LockError(f"{path} has no autoPatchelfIgnoreMissingDeps list")
    return set(re.findall(r'"([^"]+)"', m.group(1)))


def report_needed(wheels: Path, python_nix: Path) -> int:
    needs, provided = elf_needs(wheels)
    ignored = ignored_in_python_nix(python_nix)
    code = EXIT_OK
    for lib in sorted(set(needs) - provided):
        source = PROVIDED.get(lib) or ("ignored in nix/python.nix" if lib in ignored else None)
        if source is None:
            source, code = "MISSING: provide it or add it to autoPatchelfIgnoreMissingDeps", 1
        print(f"{lib}: {source} (needed by {len(needs[lib])}, e.g. {needs[lib][0]})")
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("command", nargs="?", choices=["nix", "hash", "needed"], default="nix",
                    help="nix (default): write nix/wheels.nix; hash: write the wheels' hashes "
                         "into the lock; needed: native libraries no wheel provides")
    ap.add_argument("--wheels", type=Path,
                    help="hash, needed: the folder pip downloaded the wheels into")
    ap.add_argument("--python-nix", type=Path, default=PYTHON_NIX, help=argparse.SUPPRESS)
    ap.add_argument("--check", action="store_true",
                    help="nix: write nothing, exit 1 if nix/wheels.nix is not what the lock gives")
    ap.add_argument("--lock", type=Path, default=LOCK, help="default: requirements.lock")
    ap.add_argument("--out", type=Path, default=NIX, help="default: nix/wheels.nix")
    args = ap.parse_args(argv)
    if args.command in ("hash", "needed") and (args.wheels is None or not args.wheels.is_dir()):
        ap.error(f"{args.command} needs --wheels DIR (a folder of downloaded wheels)")
    try:
        if args.command == "needed":
            return report_needed(args.wheels, args.python_nix)
        if args.command == "hash":
            pins = hash_lock(read_lock(args.lock, need_hashes=False), args.wheels)
            args.lock.write_text(format_lock(pins))
            print(f"lock_to_nix: {len(pins)} pins hashed from {args.wheels} into {args.lock}")
            return EXIT_OK
        want = format_nix(read_lock(args.lock))
    except (LockError, OSError) as e:
        print(f"lock_to_nix: {e}", file=sys.stderr)
        return EXIT_BAD
    if args.check:
        have = args.out.read_text() if args.out.is_file() else ""
        if have != want:
            print(f"lock_to_nix: {args.out} does not match {args.lock} (run nix/lock_to_nix.py "
                  "and commit both)", file=sys.stderr)
            return EXIT_DIFFERENT
        print(f"lock_to_nix: {args.out} matches {args.lock}")
        return EXIT_OK
    args.out.write_text(want)
    print(f"lock_to_nix: wrote {args.out} ({want.count('sha256 =')} wheels)")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
