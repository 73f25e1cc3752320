"""The deploy image, built and run by a real container engine (podman) on clips incl. corrupt ones.

Builds the offline base once (scripts/build_base_image.sh: debootstrap minbase bookworm + python3,
reused while `podman image exists`), then container/score/build.sh with a tiny exported model
baked in. Skips only when podman is absent. CONTAINERS_CONF points at
container/score/containers.conf (runtime runc, default_ulimits) for every podman call.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
IMAGE = "localhost/hearsay-score:test"
RUN_LABEL = f"hearsay.test-run={uuid.uuid4().hex}"  # marks every image this test run builds
BASE = "localhost/hearsay-base:bookworm-py311"

NO_PODMAN = "podman not installed (scripts/system-deps.sh installs it)"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("podman") is None,
                                                   reason=NO_PODMAN)]


def podman(*args: str, check: bool = False, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "container/score/containers.conf")}
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} -> {proc.returncode}\n{proc.stderr[-2000:]}")
    return proc


def build(model: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "CONTAINERS_CONF": str(REPO / "container/score/containers.conf"),
            "BASE": BASE, "BUILD_LABEL": RUN_LABEL, **env}
    return subprocess.run([str(REPO / "container/score/build.sh"), str(model), IMAGE],
                          capture_output=True, text=True, env=full, timeout=600)


def export_tiny(out: Path, seed: int) -> Path:
    import torch

    from export.onnx_export import ExportConfig, export_model
    from hearsay.model import Detector, ModelConfig

    torch.manual_seed(seed)
    export_model(Detector(ModelConfig.tiny()), out, ExportConfig(int8=False, parity_clips=4))
    return out


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    base = subprocess.run([str(REPO / "scripts/build_base_image.sh"), BASE], capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ,
                               "CONTAINERS_CONF": str(REPO / "container/score/containers.conf")})
    assert base.returncode == 0, base.stderr[-2000:]
    root = tmp_path_factory.mktemp("container")
    model = export_tiny(root / "model", seed=0)
    proc = build(model)
    assert proc.returncode == 0, proc.stderr[-3000:]
    clips = root / "clips"
    (clips / "sub").mkdir(parents=True)
    rng = np.random.default_rng(3)
    t = np.arange(int(1.5 * 16_000)) / 16_000
    for name, f0 in (("a.wav", 150), ("sub/b.flac", 210), ("sub/c.wav", 95)):
        x = 0.3 * np.sin(2 * np.pi * f0 * t) + 0.01 * rng.standard_normal(len(t))
        sf.write(clips / name, x.astype(np.float32), 16_000)
    from hearsay.audio import ffmpeg_exe

    subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(clips / "a.wav"), "-c:a", "aac",
                    str(clips / "sub/d.m4a")], check=True)  # compressed: decoded by ffmpeg
    (clips / "corrupt.wav").write_bytes(b"RIFF\x00\x00garbage" * 40)
    (clips / "empty.flac").write_bytes(b"")
    flac = (clips / "sub/b.flac").read_bytes()
    (clips / "sub/truncated.flac").write_bytes(flac[:60])  # header only
    yield model, clips, root
    # Each build leaves a 0.5-1 GB image; remove this run's (by its label), and only this run's:
    # other sessions' images and the tagged base (the slow part to rebuild) stay.
    podman("rmi", "-f", IMAGE)
    podman("image", "prune", "-f", "--filter", f"label={RUN_LABEL}")


def run_image(clips: Path, *extra: str) -> subprocess.CompletedProcess:
    return podman("run", "--rm", "-v", f"{clips}:/clips:ro", *extra, IMAGE, "/clips")


def test_image_scores_a_folder_like_the_host_scorer(image):
    from hearsay.deploy import read_sums, score_folder

    model, clips, _ = image
    proc = run_image(clips)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["path"] for r in rows] == ["a.wav", "corrupt.wav", "empty.flac", "sub/b.flac",
                                         "sub/c.wav", "sub/d.m4a", "sub/truncated.flac"]
    want = {r["path"]: r for r in score_folder(clips, model)}
    sha = read_sums(model)["model.onnx"]
    for r in rows:
        assert r["model_sha256"] == sha
        assert bool(r["error"]) == bool(want[r["path"]]["error"]), r
        if not r["error"]:
            assert float(r["logit"]) == pytest.approx(float(want[r["path"]]["logit"]), abs=1e-4)
    assert "4/7 scored, 3 failed" in proc.stderr
    assert run_image(clips, "--entrypoint", "/opt/hearsay/venv/bin/hearsay-score").returncode == 0
    strict = podman("run", "--rm", "-v", f"{clips}:/clips:ro", IMAGE, "/clips", "--strict")
    assert strict.returncode == 1


def test_image_runs_as_non_root_without_torch(image):
    who = podman("run", "--rm", "--entrypoint", "id", IMAGE, "-u", check=True)
    assert who.stdout.strip() == "10001"
    probe = podman("run", "--rm", "--entrypoint", "/opt/hearsay/venv/bin/python", IMAGE, "-c",
                   "import torch")
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr


def test_image_refuses_a_different_model_at_start(image):
    _, clips, root = image
    other = export_tiny(root / "other", seed=1)  # valid manifest, but not the baked sha
    proc = run_image(clips, "-v", f"{other}:/opt/hearsay/model:ro")
    assert proc.returncode == 3, proc.stderr
    assert "HEARSAY_MODEL_SHA256" in proc.stderr and proc.stdout == ""


def test_build_refuses_a_model_that_is_not_the_requested_sha(image):
    model, _, _ = image
    proc = build(model, MODEL_SHA256="0" * 64)
    assert proc.returncode == 1
    assert f"model.onnx is not MODEL_SHA256={'0' * 64}" in proc.stderr
