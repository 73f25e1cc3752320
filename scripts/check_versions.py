#!/usr/bin/env python3
"""Check the trainer image's torch stays within requirements.lock's minor release.

The image's Python packages are nixpkgs' (at the rev in flake.lock), not the pip lock's: the two
cannot share versions. torch and torchaudio are gated (same major.minor as the lock); any other
package given is reported but does not fail the check.

    # online (nix with flakes, the pinned nixpkgs fetchable): asks
    # `nix eval --raw .#python.pkgs.<pkg>.version` for torch, torchaudio, transformers, numpy
    scripts/check_versions.py --nix
    scripts/check_versions.py --image torch=2.11.1 --image torchaudio=2.11.0   # versions given

Exit codes: 0 every gated package is within the lock's minor; 1 one differs; 2 usage (torch not
given); 3 cannot measure (nix eval failed, a version not parsable, a package not in the lock).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATED = ("torch", "torchaudio")
NIX_QUERIED = ("torch", "torchaudio", "transformers", "numpy")
EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


def read_lock(path: Path) -> dict[str, str]:
    """requirements.lock `name==version` lines -> {normalised name: version}."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[re.sub(r"[-_.]+", "-", name.strip().lower())] = version.strip()
    return pins


def minor(version: str) -> tuple[int, int] | None:
    """'2.11.0+cu130' -> (2, 11); None when it does not start with major.minor."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def nix_versions(flake: str) -> dict[str, str]:
    """Each NIX_QUERIED package's version in the image's Python, from `nix eval`."""
    found = {}
    for name in NIX_QUERIED:
        attr = f"{flake}#python.pkgs.{name}.version"
        proc = subprocess.run(["nix", "eval", "--raw", attr], capture_output=True, text=True)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            raise RuntimeError(f"nix eval {attr} failed: {lines[-1] if lines else proc.returncode}")
        found[name] = proc.stdout.strip()
    return found


def check(image: dict[str, str], lock: dict[str, str]) -> int:
    """Print one line per package; return the exit code."""
    code = EXIT_OK
    for name, version in image.items():
        gated = name in GATED
        pinned = lock.get(name)
        if pinned is None or minor(version) is None or minor(pinned) is None:
            shown = f"image {version or '(empty)'}, lock {pinned or '(absent)'}"
            print(f"{name}: {shown}: cannot compare")
            if gated or pinned is None:
                code = max(code, EXIT_UNKNOWN)
            continue
        if minor(version) == minor(pinned):
            print(f"{name}: image {version}, lock {pinned}: same minor")
        elif gated:
            print(f"{name}: image {version}, lock {pinned}: DIFFERENT minor")
            code = EXIT_UNKNOWN if code == EXIT_UNKNOWN else EXIT_DIFFERENT
        else:
            print(f"{name}: image {version}, lock {pinned}: different minor (not gated)")
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--image", action="append", default=[], metavar="PKG=VERSION",
                    help="a version in the image (repeatable); torch is required")
    ap.add_argument("--nix", action="store_true", help="read the image's versions with `nix eval`")
    ap.add_argument("--flake", default=str(ROOT),
                    help="flake to `nix eval` (default: this checkout)")
    ap.add_argument("--lock", type=Path, default=ROOT / "requirements.lock", help="the pip lock")
    args = ap.parse_args(argv)

    image = {}
    for item in args.image:
        name, sep, version = item.partition("=")
        if not sep:
            ap.error(f"--image {item!r}: expected PKG=VERSION, e.g. torch=2.11.0")
        image[re.sub(r"[-_.]+", "-", name.strip().lower())] = version.strip()
    if args.nix:
        try:
            image.update(nix_versions(args.flake))
        except (RuntimeError, FileNotFoundError) as e:
            print(f"check_versions: cannot measure: {e} (run it where `nix build` works)",
                  file=sys.stderr)
            return EXIT_UNKNOWN
    if "torch" not in image:
        print("check_versions: no image torch version (give --image torch=VERSION or --nix)",
              file=sys.stderr)
        return EXIT_USAGE
    return check(image, read_lock(args.lock))


if __name__ == "__main__":
    sys.exit(main())
