#!/usr/bin/env python3
"""Keep the wheels' own $ORIGIN runpaths through autoPatchelf (the image's fix-up step)

autoPatchelf replaces each ELF file's RUNPATH with the directories of the NEEDED libraries it
found. A wheel's library that dlopens siblings by name loses them: cuDNN's libcudnn.so.9 (RUNPATH
`$ORIGIN`, NEEDED only libstdc++/libgcc_s/glibc) dlopens libcudnn_graph.so.9, libcudnn_ops.so.9,
... from its own folder, and with `$ORIGIN` gone every cuDNN call aborts ("Invalid handle. Cannot
load symbol cudnnGetVersion", SIGABRT). nixpkgs' cudnn package works around the same loss by
adding NEEDED entries; this step instead restores what the wheel shipped, for every file:

    keep_runpaths.py save ROOT MANIFEST      before autoPatchelf: every ELF file's $ORIGIN entries
    keep_runpaths.py restore ROOT MANIFEST   after it: those entries first, then autoPatchelf's

nix/python.nix runs exactly these two commands around `autoPatchelf "$out"`, and
tests/test_cuda_libs.py runs them on the lock's cuDNN wheel around an emulated autoPatchelf.
Only entries that start with $ORIGIN are kept (a wheel's absolute paths point at its build
machine). `patchelf` comes from PATH (override: --patchelf).

Exit codes: 0 done; 1 a file in the manifest is gone or patchelf failed on it; 2 usage;
3 the manifest or ROOT is unusable (the message names it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BAD = 0, 1, 2, 3
ELF_MAGIC = b"\x7fELF"


class FixupError(Exception):
    """A file could not be read or patched (message names it); `code` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


def elf_files(root: Path) -> list[Path]:
    """Regular files (not links) under root that start with the ELF magic, in path order."""
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        with p.open("rb") as f:
            if f.read(4) == ELF_MAGIC:
                out.append(p)
    return out


def runpath(patchelf: str, path: Path) -> list[str] | None:
    """The file's RUNPATH (or RPATH) entries; None when it has no dynamic section (static)."""
    proc = subprocess.run([patchelf, "--print-rpath", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return [e for e in proc.stdout.strip().split(":") if e]


def is_origin(entry: str) -> bool:
    return entry.startswith("$ORIGIN") or entry.startswith("${ORIGIN}")


def save(root: Path, manifest: Path, patchelf: str) -> int:
    """Record every ELF file's $ORIGIN entries (relative path -> entries) in manifest."""
    if not root.is_dir():
        raise FixupError(f"{root} is not a folder (give the installed prefix)", EXIT_BAD)
    kept = {}
    for p in elf_files(root):
        entries = [e for e in runpath(patchelf, p) or [] if is_origin(e)]
        if entries:
            kept[str(p.relative_to(root))] = entries
    manifest.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    print(f"keep_runpaths: {len(kept)} ELF files with $ORIGIN runpaths under {root} -> {manifest}")
    return len(kept)


def merged(kept: list[str], now: list[str]) -> list[str]:
    """The wheel's $ORIGIN entries first (its own layout wins), then what autoPatchelf set."""
    return list(dict.fromkeys([*kept, *now]))


def restore(root: Path, manifest: Path, patchelf: str) -> int:
    """Put each recorded file's $ORIGIN entries back in front of its current RUNPATH."""
    try:
        kept = json.loads(manifest.read_text())
    except (OSError, ValueError) as e:
        raise FixupError(f"cannot read {manifest}: {e} (run `save` before autoPatchelf)",
                         EXIT_BAD) from e
    if not isinstance(kept, dict):
        raise FixupError(f"{manifest} is not a `save` manifest (run `save` again)", EXIT_BAD)
    changed = 0
    for rel, entries in sorted(kept.items()):
        path = root / rel
        now = runpath(patchelf, path) if path.is_file() else None
        if now is None:
            raise FixupError(f"{path}: recorded by `save` but now missing or not a dynamic ELF "
                             "file (was it removed between save and restore?)")
        want = merged(entries, now)
        if want == now:
            continue
        proc = subprocess.run([patchelf, "--set-rpath", ":".join(want), str(path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise FixupError(f"{path}: patchelf --set-rpath failed: {proc.stderr.strip()}")
        changed += 1
    print(f"keep_runpaths: restored $ORIGIN runpaths in {changed} of {len(kept)} ELF files "
          f"under {root}")
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("action", choices=["save", "restore"])
    ap.add_argument("root", type=Path, help="the installed prefix (nix: $out)")
    ap.add_argument("manifest", type=Path, help="JSON written by save, read by restore")
    ap.add_argument("--patchelf", default=None, help="patchelf executable (default: from PATH)")
    args = ap.parse_args(argv)
    patchelf = args.patchelf or shutil.which("patchelf")
    if patchelf is None:
        print("keep_runpaths: patchelf not found (put it on PATH or pass --patchelf)",
              file=sys.stderr)
        return EXIT_BAD
    try:
        (save if args.action == "save" else restore)(args.root, args.manifest, patchelf)
    except FixupError as e:
        print(f"keep_runpaths: {e}", file=sys.stderr)
        return e.code
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
