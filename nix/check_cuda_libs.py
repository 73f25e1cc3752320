#!/usr/bin/env python3
"""Load torch's CUDA libraries the way the trainer does, without a GPU (the image's install check)

Each library of the locked nvidia-* wheels is loaded in its own child process (a cuDNN whose
sub-libraries cannot be found aborts the process, SIGABRT, instead of raising) and asked for its
version, which needs no GPU and no driver:

    cudnn    nvidia/cudnn/lib/libcudnn.so.9   cudnnGetVersion + the graph/ops/cnn/adv checks
                                              (each dlopens its sub-library by name: $ORIGIN)
    cublas   nvidia/cu13/lib/libcublas.so.13  cublasGetProperty(MAJOR_VERSION)
    cufft    nvidia/cu13/lib/libcufft.so.12   cufftGetVersion
    nccl     nvidia/nccl/lib/libnccl.so.2     ncclGetVersion
    torch    import torch; torch.backends.cudnn.version()   (torch's own loader, its RUNPATHs)

    check_cuda_libs.py [--site DIR] [--only NAME ...]

nix/python.nix runs it in the locked wheels' installCheckPhase (after autoPatchelf and
nix/keep_runpaths.py); tests/test_cuda_libs.py runs it on the venv and on a patched copy of cuDNN.
One line per library on stdout: `check_cuda_libs: ok cudnn 91900` or `check_cuda_libs: FAIL ...`.

Exit codes: 0 every library loaded and answered; 1 one did not (named, with its exit status and
last stderr line); 2 usage; 3 a library file is missing under --site (cannot measure).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BAD = 0, 1, 2, 3
TIMEOUT_S = 120  # one child: importing torch on a loaded CPU takes tens of seconds


def int_query(call: str) -> str:
    """Child code for a C call that fills one int through `ref` and returns a status (0 = ok)."""
    fn = call.split("(")[0]
    return f"""
v = ctypes.c_int()
ref = ctypes.byref(v)
status = lib.{call}
if status != 0:
    raise SystemExit(f"{fn} returned {{status}}")
print(v.value)
"""


# name -> (path under site-packages, code run in the child with `lib` = ctypes.CDLL(path)); the
# code prints the version it got and raises on a non-zero status.
LIBS = {
    "cudnn": ("nvidia/cudnn/lib/libcudnn.so.9", """
lib.cudnnGetVersion.restype = ctypes.c_size_t
v = lib.cudnnGetVersion()
for f in ("cudnnGraphVersionCheck", "cudnnOpsVersionCheck", "cudnnCnnVersionCheck",
          "cudnnAdvVersionCheck"):
    status = getattr(lib, f)()
    if status != 0:
        raise SystemExit(f"{f}() returned cudnnStatus {status}")
print(v)
"""),
    "cublas": ("nvidia/cu13/lib/libcublas.so.13", int_query("cublasGetProperty(0, ref)")),  # MAJOR
    "cufft": ("nvidia/cu13/lib/libcufft.so.12", int_query("cufftGetVersion(ref)")),
    "nccl": ("nvidia/nccl/lib/libnccl.so.2", int_query("ncclGetVersion(ref)")),
}
TORCH = """
import torch
v = torch.backends.cudnn.version()
if v is None:
    raise SystemExit("torch.backends.cudnn.version() is None: torch could not load cuDNN")
print(torch.__version__, "cudnn", v)
"""


def child(name: str, code: str, site: Path) -> tuple[bool, str]:
    """(ok, what it printed or why it failed) for one child python running code."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    if proc.returncode == 0:
        return True, proc.stdout.strip()
    rc = proc.returncode
    how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}"
    last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
    return False, f"{how}: {last}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--site", type=Path, default=Path(sysconfig.get_paths()["purelib"]),
                    help="the site-packages holding nvidia/ and torch/ (default: this python's)")
    ap.add_argument("--only", nargs="+", choices=[*LIBS, "torch"], default=None,
                    help="check only these (default: all)")
    args = ap.parse_args(argv)
    names = args.only or [*LIBS, "torch"]
    failed = 0
    for name in names:
        if name == "torch":
            ok, out = child(name, TORCH, args.site)
        else:
            rel, body = LIBS[name]
            path = args.site / rel
            if not path.is_file():
                print(f"check_cuda_libs: cannot measure {name}: {path} is missing (is the "
                      "locked nvidia wheel installed there?)", file=sys.stderr)
                return EXIT_BAD
            ok, out = child(name, f"import ctypes\nlib = ctypes.CDLL({str(path)!r})\n{body}",
                            args.site)
        print(f"check_cuda_libs: {'ok' if ok else 'FAIL'} {name} {out}")
        failed += not ok
    return EXIT_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
