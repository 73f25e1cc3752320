"""The deploy image, built and run by a real container engine (podman) on clips incl. corrupt ones.

Builds the offline base once (container/build_base_image.sh: debootstrap minbase bookworm + python3,
reused while `podman image exists`), then container/score/build.sh with a tiny exported model
baked in, and runs it the way an operator locks a container down: read-only root (and no tmpfs:
docker's --read-only gives none), no network, no capabilities, an arbitrary non-root uid.
Skips only when podman is absent. CONTAINERS_CONF points at container/score/containers.conf
(runtime runc, default_ulimits) for every podman call.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
IMAGE = "localhost/hearsay-score:test"
RUN_LABEL = f"hearsay.test-run={uuid.uuid4().hex}"  # marks every image this test run builds
BASE = "localhost/hearsay-base:bookworm-py311"
CONF = {"CONTAINERS_CONF": str(REPO / "container/score/containers.conf")}
# docker run --read-only mounts no tmpfs (podman's default does): turn podman's off to match
LOCKED = ("--read-only", "--read-only-tmpfs=false", "--network", "none", "--cap-drop", "ALL",
          "--security-opt", "no-new-privileges", "--user", "12345:12345")
GOOD = ["a.wav", "e.mp3", "f.opus", "g.amr", "sub/b.flac", "sub/c.wav", "sub/d.m4a"]
BROKEN = ["corrupt.wav", "empty.flac", "sub/truncated.flac"]

NO_PODMAN = "podman not installed (scripts/system-deps.sh installs it)"
pytestmark = pytest.mark.slow
needs_podman = pytest.mark.skipif(shutil.which("podman") is None, reason=NO_PODMAN)


def podman(*args: str, check: bool = False, timeout: int = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True,
                          env={**os.environ, **CONF}, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} -> {proc.returncode}\n{proc.stderr[-2000:]}")
    return proc


def build(model: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **CONF, "BASE": BASE, "BUILD_LABEL": RUN_LABEL, **env}
    return subprocess.run([str(REPO / "container/score/build.sh"), str(model), IMAGE],
                          capture_output=True, text=True, env=full, timeout=600)


def export_tiny(out: Path, seed: int) -> Path:
    import torch

    from hearsay.detector.model import Detector, ModelConfig
    from hearsay.export.onnx_export import ExportConfig, export_model

    torch.manual_seed(seed)
    export_model(Detector(ModelConfig.tiny()), out, ExportConfig(int8=False, parity_clips=4))
    return out


def make_clips(clips: Path) -> None:
    """Every format people send (WAV, FLAC, M4A, MP3, Opus, AMR) and three broken files."""
    from hearsay.sound.decoder import ffmpeg_exe

    (clips / "sub").mkdir(parents=True)
    rng = np.random.default_rng(3)
    t = np.arange(int(1.5 * 16_000)) / 16_000
    for name, f0 in (("a.wav", 150), ("sub/b.flac", 210), ("sub/c.wav", 95)):
        x = 0.3 * np.sin(2 * np.pi * f0 * t) + 0.01 * rng.standard_normal(len(t))
        sf.write(clips / name, x.astype(np.float32), 16_000)
    for name, codec in (("sub/d.m4a", ["-c:a", "aac"]), ("e.mp3", ["-c:a", "libmp3lame"]),
                        ("f.opus", ["-c:a", "libopus"]),
                        ("g.amr", ["-ar", "8000", "-c:a", "libopencore_amrnb", "-b:a", "12.2k"])):
        subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(clips / "a.wav"), *codec,
                        str(clips / name)], check=True)
    (clips / "corrupt.wav").write_bytes(b"RIFF\x00\x00garbage" * 40)
    (clips / "empty.flac").write_bytes(b"")
    flac = (clips / "sub/b.flac").read_bytes()
    (clips / "sub/truncated.flac").write_bytes(flac[:60])  # header only
    (clips / "notes.txt").write_text("not audio: skipped and counted")


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    if shutil.which("podman") is None:
        pytest.skip(NO_PODMAN)
    base = subprocess.run([str(REPO / "container/build_base_image.sh"), BASE], capture_output=True,
                          text=True, timeout=900, env={**os.environ, **CONF})
    assert base.returncode == 0, base.stderr[-2000:]
    root = tmp_path_factory.mktemp("container")
    model = export_tiny(root / "model", seed=0)
    proc = build(model)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = root / "data"  # what a user has in $PWD: a clips/ folder
    make_clips(data / "clips")
    yield model, data, root
    # Each build leaves a 0.5-1 GB image; remove this run's (by its label), and only this run's:
    # other checkouts' images and the tagged base (the slow part to rebuild) stay.
    podman("rmi", "-f", IMAGE)
    podman("image", "prune", "-f", "--filter", f"label={RUN_LABEL}")


def run_locked(data: Path, *args: str, mount: str = ":ro", extra: tuple = ()):
    """The README's command, locked down: docker run --rm -v "$PWD:/data" IMAGE ARGS."""
    return podman("run", "--rm", *LOCKED, *extra, "-v", f"{data}:/data{mount}", IMAGE, *args)


@needs_podman
def test_locked_down_image_scores_every_format_like_the_host_scorer(image):
    from hearsay.deploy import score_folder
    from hearsay.util.hashing import sha256_file

    model, data, _ = image
    proc = run_locked(data, "clips/")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["path"] for r in rows] == sorted(GOOD + BROKEN)
    want = {r["path"]: r for r in score_folder(data / "clips", model)}
    sha = sha256_file(model / "SHA256SUMS")  # the folder's identity, as the image pins it
    for r in rows:
        assert r["model_sums_sha256"] == sha
        assert bool(r["error"]) == (r["path"] in BROKEN), r
        if not r["error"]:
            assert float(r["logit"]) == pytest.approx(float(want[r["path"]]["logit"]), abs=1e-4)
    assert "7/10 scored, 3 failed, 1 skipped (1 not audio)" in proc.stderr
    strict = run_locked(data, "clips/", "--strict")
    assert strict.returncode == 1


@needs_podman
def test_output_file_lands_in_the_mounted_folder_from_a_read_only_container(image, tmp_path):
    _, data, _ = image
    rw = tmp_path / "rw"
    shutil.copytree(data / "clips", rw / "clips")
    os.chmod(rw, 0o777)  # the container's uid 12345 writes here
    proc = run_locked(rw, "clips/", "-o", "scores.csv", mount="")
    assert proc.returncode == 0, proc.stderr
    assert len((rw / "scores.csv").read_text().splitlines()) == 1 + 10
    assert not (rw / "scores.csv.partial").exists()


@needs_podman
def test_an_output_folder_the_image_user_cannot_write_exits_5_before_scoring(image, tmp_path):
    """The README's `-v "$PWD:/data" ... -o scores.csv` with $PWD not writable by the uid."""
    _, data, _ = image
    ro = tmp_path / "ro"
    shutil.copytree(data / "clips", ro / "clips")
    os.chmod(ro, 0o755)  # this test's own uid owns it; the container's uid 12345 may not write
    proc = run_locked(ro, "clips/", "-o", "scores.csv", mount="")
    assert proc.returncode == 5, proc.stderr
    assert "cannot write scores.csv" in proc.stderr and '--user "$(id -u)"' in proc.stderr
    assert "Traceback" not in proc.stderr and sorted(p.name for p in ro.iterdir()) == ["clips"]


@needs_podman
def test_nothing_mounted_exits_4_and_shows_the_mount_to_type(image):
    proc = podman("run", "--rm", *LOCKED, IMAGE)
    assert proc.returncode == 4, proc.stderr
    assert 'docker run --rm -v "$PWD:/data" hearsay-score clips/' in proc.stderr
    assert proc.stdout == ""


# Enough clips that the scorer is still busy when the stop comes, also on a loaded machine where
# polling `podman logs` is slow (with 200 it had once finished all of them first: exit 0).
N_STOP_CLIPS = 1000


@needs_podman
def test_docker_stop_ends_the_scorer_at_once_with_finished_rows_out(image, tmp_path):
    """SIGTERM to PID 1 is ignored unless handled: podman stop would wait, then SIGKILL (137)."""
    _, data, _ = image
    many = tmp_path / "many"
    many.mkdir()
    for i in range(N_STOP_CLIPS):
        shutil.copy(data / "clips" / "a.wav", many / f"{i:04d}.wav")
    name = f"hearsay-stop-{uuid.uuid4().hex[:8]}"
    podman("run", "-d", "--name", name, *LOCKED, "-v", f"{many}:/data:ro", IMAGE, ".",
           "--batch-size", "1", check=True)
    try:
        for _ in range(300):  # up to 30 s for the first rows
            if len(podman("logs", name).stdout.splitlines()) >= 5:
                break
            time.sleep(0.1)
        started = time.monotonic()
        podman("stop", "-t", "30", name, check=True)
        waited = time.monotonic() - started
        code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        out = podman("logs", name).stdout.splitlines()
    finally:
        podman("rm", "-f", name)
    assert code == "130" and waited < 20, (code, waited)
    assert out[0].startswith('"path",') and 4 <= len(out) - 1 < N_STOP_CLIPS


@needs_podman
def test_image_runs_as_non_root_without_torch(image):
    who = podman("run", "--rm", "--entrypoint", "id", IMAGE, "-u", check=True)
    assert who.stdout.strip() == "10001"
    probe = podman("run", "--rm", "--entrypoint", "/opt/hearsay/venv/bin/python", IMAGE, "-c",
                   "import torch")
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr


@needs_podman
def test_image_refuses_a_different_model_folder_at_start(image):
    _, data, root = image
    other = export_tiny(root / "other", seed=1)  # valid manifest, but not the baked folder
    proc = run_locked(data, "clips/", extra=("-v", f"{other}:/opt/hearsay/model:ro"))
    assert proc.returncode == 3, proc.stderr
    assert "HEARSAY_MODEL_SUMS_SHA256" in proc.stderr and proc.stdout == ""


@needs_podman
def test_build_refuses_a_model_folder_that_is_not_the_requested_sha(image):
    model, _, _ = image
    proc = build(model, MODEL_SUMS_SHA256="0" * 64)
    assert proc.returncode == 1
    assert f"SHA256SUMS is not MODEL_SUMS_SHA256={'0' * 64}" in proc.stderr


@needs_podman
def test_a_plain_build_of_the_folder_is_refused_naming_build_sh(image):
    proc = podman("build", "--build-arg", f"BASE={BASE}", "--label", RUN_LABEL,
                  str(REPO / "container/score"), timeout=300)
    assert proc.returncode != 0
    assert "container/score/build.sh MODEL_DIR" in proc.stdout + proc.stderr


def test_build_script_builds_for_linux_amd64_with_the_folder_pin():
    """No engine needed (a real build.sh run costs a minute of pip here): the engine's build
    line asks for linux/amd64 (the wheels are x86_64; the default base is a multi-arch index),
    the SHA256SUMS pin and the marker that lets the Dockerfile's first step pass."""
    text = (REPO / "container/score/build.sh").read_text()
    line = " ".join(text[text.index('"$engine" build'):].split("\\\n")[:3])
    assert '"$engine" build --platform linux/amd64 ' in line, line
    assert "--build-arg HEARSAY_CONTEXT=build.sh" in line
    assert '--build-arg "MODEL_SUMS_SHA256=$want"' in line
    assert "want=${MODEL_SUMS_SHA256:-$(sha256sum \"$model/SHA256SUMS\"" in text


@needs_podman
def test_a_name_like_a_url_is_that_file_in_the_locked_image(image, tmp_path):
    """The image's default CLIPS_DIR is "." (/data): `file:x.m4a` there must never be x.m4a."""
    from hearsay.sound.decoder import ffmpeg_exe

    _, data, _ = image
    root = tmp_path / "names"
    root.mkdir()
    for name, src in (("x.m4a", "a.wav"), ("file:x.m4a", "sub/c.wav"), ("same.m4a", "sub/c.wav")):
        subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(data / "clips" / src), "-c:a",
                        "aac", str(root / name)], check=True)
    (root / "same.m4a").write_bytes((root / "file:x.m4a").read_bytes())
    proc = podman("run", "--rm", *LOCKED, "-v", f"{root}:/data:ro", IMAGE)  # CMD ["."]
    assert proc.returncode == 0, proc.stderr
    rows = {r["path"]: r for r in csv.DictReader(io.StringIO(proc.stdout))}
    assert rows["file:x.m4a"]["error"] == ""
    assert rows["file:x.m4a"]["logit"] == rows["same.m4a"]["logit"] != rows["x.m4a"]["logit"]


@needs_podman
def test_resume_in_the_locked_image_refuses_another_folder_or_mode_and_finishes_its_own(
        image, tmp_path):
    """Stopped mid-run, the partial file is resumed only by the same folder and options: a
    different host folder mounted at the same /data/clips (same names) or --first-window is
    refused (exit 2), the same run goes on to a complete CSV."""
    _, data, _ = image
    rw, other = tmp_path / "rw", tmp_path / "other"
    for folder in (rw, other):
        (folder / "clips").mkdir(parents=True)
        for i in range(300):
            shutil.copy(data / "clips" / ("a.wav" if folder is rw else "sub/c.wav"),
                        folder / "clips" / f"{i:03d}.wav")
    os.chmod(rw, 0o777)  # the container's uid 12345 writes here
    name = f"hearsay-resume-{uuid.uuid4().hex[:8]}"
    podman("run", "-d", "--name", name, *LOCKED, "-v", f"{rw}:/data", IMAGE, "clips/", "-o",
           "s.csv", "--batch-size", "1", check=True)
    partial = rw / "s.csv.partial"
    try:
        for _ in range(600):  # up to 60 s for the first rows
            if partial.exists() and len(partial.read_text().splitlines()) >= 4:
                break
            time.sleep(0.1)
        podman("stop", "-t", "30", name, check=True)
    finally:
        podman("rm", "-f", name)
    assert partial.exists() and not (rw / "s.csv").exists()
    kept = partial.read_text()
    mixed = podman("run", "--rm", *LOCKED, "-v", f"{rw}:/data", "-v",
                   f"{other / 'clips'}:/data/clips:ro", IMAGE, "clips/", "-o", "s.csv",
                   "--resume")
    assert mixed.returncode == 2 and "clips_id" in mixed.stderr, mixed.stderr
    mode = run_locked(rw, "clips/", "-o", "s.csv", "--resume", "--first-window", mount="")
    assert mode.returncode == 2 and "first_window" in mode.stderr, mode.stderr
    assert partial.read_text() == kept
    same = run_locked(rw, "clips/", "-o", "s.csv", "--resume", mount="")
    assert same.returncode == 0, same.stderr
    assert len(list(csv.DictReader(io.StringIO((rw / "s.csv").read_text())))) == 300
