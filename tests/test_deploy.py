"""hearsay-score: the torch-free CPU scorer on a folder of real clips (real ffmpeg, real ORT)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from hearsay import deploy
from hearsay.contracts.model_dir import model_sums
from hearsay.deploy import main
from hearsay.engines import cpu_engine
from hearsay.engines.cpu_engine import allowed_cpus
from hearsay.sound.audio import prepare_file
from hearsay.sound.decoder import ffmpeg_exe, load_audio
from hearsay.util.hashing import format_sums, sha256_file

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"
SR = 16_000


def tone(seconds: float, f0: float, rng: np.random.Generator, rate: int = SR) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    x = 0.3 * np.sin(2 * np.pi * f0 * t) + 0.01 * rng.standard_normal(len(t))
    return x.astype(np.float32)


def make_clips(root: Path) -> dict[str, str]:
    """A folder with good clips (nested, several formats and rates) and broken ones.
    Returns {relative path: expected error substring or ''}."""
    rng = np.random.default_rng(0)
    (root / "b" / "deep").mkdir(parents=True)
    sf.write(root / "a.wav", tone(1.2, 180, rng), SR)
    sf.write(root / "b" / "c.flac", tone(2.5, 120, rng), SR)
    sf.write(root / "b" / "deep" / "d.wav", tone(0.8, 240, rng, 44_100), 44_100)  # resampled
    sf.write(root / "src.wav", tone(1.6, 150, rng), SR)
    for ext, codec in (("m4a", "aac"), ("mp3", "libmp3lame")):
        subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(root / "src.wav"), "-c:a", codec,
                        str(root / "b" / f"e.{ext}")], check=True)
    (root / "garbage.wav").write_bytes(b"RIFF not really a wave file" * 10)
    (root / "empty.flac").write_bytes(b"")
    sf.write(root / "silent.wav", np.zeros(SR, dtype=np.float32), SR)
    blip = np.zeros(SR, dtype=np.float32)
    blip[8000:8000 + 3200] = tone(0.2, 300, rng)  # 0.2 s of sound in 1 s: < min_s after trim
    sf.write(root / "blip.wav", blip, SR)
    (root / "README.txt").write_text("not audio: skipped, not scored")
    (root / ".hidden.wav").write_bytes(b"skipped")
    return {"a.wav": "", "b/c.flac": "", "b/deep/d.wav": "", "b/e.m4a": "", "b/e.mp3": "",
            "blip.wav": "too short after trimming", "empty.flac": "empty file",
            "garbage.wav": "undecodable", "silent.wav": "silent",
            "src.wav": ""}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(model dir exported from a tiny detector, that detector, clips dir, expectations)."""
    import torch

    from hearsay.detector.model import Detector, ModelConfig
    from hearsay.export.onnx_export import ExportConfig, export_model

    base = tmp_path_factory.mktemp("deploy")
    torch.manual_seed(1)
    det = Detector(ModelConfig.tiny()).eval()
    export_model(det, base / "model", ExportConfig(int8=False, parity_clips=4))
    clips = base / "clips"
    expected = make_clips(clips)
    return base / "model", det, clips, expected


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_scores_every_clip_in_sorted_order_and_lists_broken_ones(world, tmp_path):
    model, _, clips, expected = world
    out = tmp_path / "scores.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model)]) == 0
    assert out.read_text().splitlines()[0] == (
        '"path","duration_s","score","logit","model_sums_sha256","error",'
        '"windows","covered_s","mean_logit","peak_start_s","peak_end_s","header_s","variant",'
        '"decision","llr","audio_tracks"')
    rows = read_csv(out)
    assert [r["path"] for r in rows] == sorted(expected)
    model_id = hashlib.sha256((model / "SHA256SUMS").read_bytes()).hexdigest()  # what pins it
    for r in rows:
        assert r["model_sums_sha256"] == model_id and r["header_s"] == ""
        if expected[r["path"]]:
            assert expected[r["path"]] in r["error"] and r["score"] == r["logit"] == ""
        else:
            assert r["error"] == ""
            assert float(r["score"]) == pytest.approx(1 / (1 + math.exp(-float(r["logit"]))),
                                                      abs=1e-6)
    durations = {r["path"]: r["duration_s"] for r in rows}
    assert float(durations["b/deep/d.wav"]) == pytest.approx(0.8, abs=1e-3)  # 44.1 kHz input
    assert float(durations["b/e.m4a"]) == pytest.approx(1.6, abs=0.1)  # through ffmpeg


def test_scores_equal_pytorch_on_the_same_front_end(world):
    import torch

    model, det, clips, expected = world
    rows = deploy.score_folder(clips, model)
    good = [r for r in rows if not r["error"]]
    waves = [prepare_file(clips / r["path"], max_s=8.0) for r in good]
    with torch.no_grad():
        want = [float(det(torch.from_numpy(w)[None], torch.ones(1, len(w), dtype=torch.int64)))
                for w in waves]
    got = [float(r["logit"]) for r in good]
    assert np.max(np.abs(np.array(want) - np.array(got))) <= 1e-4
    assert len(set(np.round(got, 4))) == len(got)  # distinct clips, distinct logits


def test_batch_size_does_not_change_scores(world):
    model, _, clips, _ = world
    one = deploy.score_folder(clips, model, deploy.ScoreConfig(batch_size=1))
    many = deploy.score_folder(clips, model, deploy.ScoreConfig(batch_size=8, chunk=3))
    for a, b in zip(one, many, strict=True):
        assert a["path"] == b["path"] and a["error"] == b["error"]
        if not a["error"]:
            assert float(a["logit"]) == pytest.approx(float(b["logit"]), abs=1e-5)


def test_strict_exits_1_when_a_file_failed_and_still_writes_every_row(world, tmp_path):
    model, _, clips, expected = world
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model), "--strict"]) == 1
    assert len(read_csv(out)) == len(expected)
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(clips / "a.wav", good / "a.wav")
    assert main([str(good), "-o", str(out), "--model", str(model), "--strict"]) == 0


def test_csv_goes_to_stdout_without_output_flag(world, capsys):
    model, _, clips, expected = world
    assert main([str(clips), "--model", str(model)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith('"path","duration_s",')
    assert len(captured.out.splitlines()) == 11
    assert "6/10 scored, 4 failed" in captured.err


def test_usage_errors_exit_2(world, tmp_path):
    model, _, _, _ = world
    assert main([str(tmp_path / "missing"), "--model", str(model)]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["--bogus"])
    assert exc.value.code == 2


@pytest.mark.parametrize("damage", ["no_folder", "no_sums", "flipped_byte", "unlisted",
                                    "pin_mismatch", "front_end_changed",
                                    "int8_absent"])
def test_model_problems_exit_3_and_leave_the_old_output(world, tmp_path, monkeypatch, damage,
                                                        capsys):
    model, _, clips, _ = world
    bad = tmp_path / "model"
    shutil.copytree(model, bad)
    args = [str(clips), "-o", str(tmp_path / "out.csv"), "--model", str(bad)]
    (tmp_path / "out.csv").write_text("previous run\n")
    if damage == "no_folder":
        shutil.rmtree(bad)
    elif damage == "no_sums":
        (bad / "SHA256SUMS").unlink()
    elif damage == "flipped_byte":
        data = bytearray((bad / "model.onnx").read_bytes())
        data[len(data) // 2] ^= 0x01
        (bad / "model.onnx").write_bytes(bytes(data))
    elif damage == "unlisted":
        lines = (bad / "SHA256SUMS").read_text().splitlines()
        (bad / "SHA256SUMS").write_text("".join(f"{x}\n" for x in lines if "model.onnx" not in x))
    elif damage == "pin_mismatch":
        monkeypatch.setenv("HEARSAY_MODEL_SUMS_SHA256", "f" * 64)
    elif damage == "front_end_changed":  # a consistent folder, but not the pinned one
        monkeypatch.setenv("HEARSAY_MODEL_SUMS_SHA256", sha256_file(bad / "SHA256SUMS"))
        front = json.loads((bad / "front_end.json").read_text())
        (bad / "front_end.json").write_text(json.dumps({**front, "max_s": 4.0}))
        sums = model_sums(bad)
        sums["front_end.json"] = sha256_file(bad / "front_end.json")
        (bad / "SHA256SUMS").write_text(format_sums(sums))
    elif damage == "int8_absent":
        args += ["--variant", "int8"]
    assert main(args) == 3
    assert "hearsay-score:" in capsys.readouterr().err
    assert (tmp_path / "out.csv").read_text() == "previous run\n"


def test_pinned_model_sha_is_accepted_when_it_matches(world, tmp_path, monkeypatch):
    model, _, clips, _ = world
    monkeypatch.setenv("HEARSAY_MODEL_SUMS_SHA256", sha256_file(model / "SHA256SUMS"))
    assert main([str(clips), "-o", str(tmp_path / "o.csv"), "--model", str(model)]) == 0


def test_threads_follow_affinity_and_cgroup_quota(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_engine.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(cpu_engine, "_cgroup_quota", lambda: None)
    assert allowed_cpus() == 4
    monkeypatch.setattr(cpu_engine, "_cgroup_quota", lambda: 1.5)
    assert allowed_cpus() == 2  # 1.5 CPUs of quota -> 2 threads
    monkeypatch.undo()
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cpu_engine._cgroup_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_engine._cgroup_quota(tmp_path) is None


# --------------------------------------------------------------------------- no torch, for real

BLOCK_TORCH = textwrap.dedent("""
    import sys
    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers", "torchaudio"):
                raise ImportError(f"blocked: hearsay.deploy imported {name}")
    sys.meta_path.insert(0, _NoTorch())
    import importlib, pkgutil
    import hearsay.deploy
    for module in pkgutil.iter_modules(hearsay.deploy.__path__, "hearsay.deploy."):
        importlib.import_module(module.name)  # every module of the package, __main__ too
    print("imported:", *sorted(m for m in sys.modules if m.startswith("hearsay.")),
          file=sys.stderr)
    from hearsay.deploy import main
    rc = main(sys.argv[1:])
    assert not any(m.split(".")[0] == "torch" for m in sys.modules), "torch got imported"
    sys.exit(rc)
""")


def test_deploy_never_imports_torch_even_when_scoring(world, tmp_path):
    """Fallback-strength check in this venv: a meta-path hook makes any torch import fail."""
    model, _, clips, _ = world
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH, str(clips), "--model", str(model),
                           "-o", str(tmp_path / "o.csv")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert len(read_csv(tmp_path / "o.csv")) == 10
    package = REPO / "src" / "hearsay" / "deploy"
    modules = {f"hearsay.deploy.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    imported = set(re.search(r"^imported: (.*)$", proc.stderr, re.M).group(1).split())
    assert modules and modules <= imported, f"not imported under the block: {modules - imported}"


def _pins(names: list[str]) -> list[str]:
    lock = {ln.split("==")[0].lower(): ln.split()[0] for ln in LOCK.read_text().splitlines()
            if "==" in ln}  # `name==version --hash=sha256:… # wheel` -> `name==version`
    return [lock[n] for n in names]


def torch_free_venv() -> Path:
    """A venv with only the scorer's dependencies (pinned from requirements.lock), cached across
    runs under $HEARSAY_TEST_CACHE (default ~/.cache/hearsay-tests); hearsay is reinstalled
    (--no-deps, non-editable) every time so it is the code under test."""
    pins = _pins(["numpy", "soundfile", "soxr", "onnxruntime", "tqdm"])
    key = hashlib.sha256("\n".join(pins + [sys.version]).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("HEARSAY_TEST_CACHE", Path.home() / ".cache" / "hearsay-tests"))
    venv = cache / f"venv-notorch-{key}"
    py = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        proc = subprocess.run([str(py), "-m", "pip", "install", "-q", *pins],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            pytest.skip(f"cannot install the scorer's wheels (no package index?): "
                        f"{proc.stderr.strip()[-300:]}")
        (venv / ".complete").touch()
    return venv


def test_hearsay_score_runs_in_a_fresh_venv_without_torch(world, tmp_path):
    model, _, clips, expected = world
    venv = torch_free_venv()
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "demo_out", "build", "*.egg-info", "__pycache__", ".*cache", "tests",
        "container", "runner"))
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    "--force-reinstall", str(src)], check=True, capture_output=True)
    py = str(venv / "bin" / "python")
    probe = subprocess.run([py, "-c", "import torch"], capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr
    out = tmp_path / "scores.csv"
    env = {**os.environ, "HEARSAY_FFMPEG": ffmpeg_exe()}  # no imageio-ffmpeg wheel in there
    proc = subprocess.run([str(venv / "bin" / "hearsay-score"), str(clips), "-o", str(out),
                           "--model", str(model)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(out)
    assert [r["path"] for r in rows] == sorted(expected)
    ref = {r["path"]: r for r in deploy.score_folder(clips, model)}
    for r in rows:
        assert r["error"] == ref[r["path"]]["error"]
        if r["logit"]:
            assert float(r["logit"]) == pytest.approx(float(ref[r["path"]]["logit"]), abs=1e-5)


# --------------------------------------------------------------------------- streaming, exits


def interrupt_on_call(monkeypatch, n: int) -> None:
    """The n-th onnxruntime pass raises KeyboardInterrupt (Ctrl-C while a chunk is scored)."""
    real, calls = deploy.engine.run_logits, []

    def run_logits(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(deploy.engine, "run_logits", run_logits)


def test_interrupt_keeps_every_finished_row_in_the_partial_file(world, tmp_path, monkeypatch,
                                                                capsys):
    model, _, clips, expected = world
    full = deploy.score_folder(clips, model)
    interrupt_on_call(monkeypatch, 2)  # --batch-size 1: rows are written per 4 files
    out = tmp_path / "scores.csv"
    # --first-window: its chunks are 4 files each (windowed runs: tests/test_windows.py)
    assert main([str(clips), "-o", str(out), "--model", str(model), "--batch-size", "1",
                 "--first-window"]) == 130
    assert not out.exists()
    rows = read_csv(tmp_path / "scores.csv.partial")
    assert [r["path"] for r in rows] == [r["path"] for r in full[:4]]
    assert [r["logit"] for r in rows] == [r["logit"] for r in full[:4]]
    assert "finished rows kept in" in capsys.readouterr().err


def test_rows_reach_stdout_chunk_by_chunk_before_the_run_ends(world, monkeypatch, capsys):
    model, _, clips, _ = world
    interrupt_on_call(monkeypatch, 3)
    assert main([str(clips), "--model", str(model), "--batch-size", "1", "--first-window"]) == 130
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ",".join(f'"{c}"' for c in deploy.COLUMNS) and len(lines) == 1 + 8


def test_sigterm_ends_a_real_run_with_the_finished_rows_kept(world, tmp_path):
    """docker stop sends SIGTERM (to PID 1, where an unhandled SIGTERM is ignored)."""
    model, _, clips, _ = world
    many = tmp_path / "many"
    many.mkdir()
    for i in range(40):
        shutil.copy(clips / "b" / "c.flac", many / f"{i:02d}.flac")
    out = tmp_path / "s.csv"
    proc = subprocess.Popen([sys.executable, "-m", "hearsay.deploy", str(many), "-o", str(out),
                             "--model", str(model), "--batch-size", "1"],
                            stderr=subprocess.PIPE, text=True)
    partial = tmp_path / "s.csv.partial"
    for _ in range(600):  # wait (up to 60 s) for the first chunk's rows
        if partial.exists() and len(partial.read_text().splitlines()) >= 5:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    rows = read_csv(partial)
    # the windowed default flushes a row as soon as its file is done (a long file is one row), so
    # any count of finished files is kept: each row whole and scored, the first files in order
    assert 4 <= len(rows) < 40, err
    assert [r["path"] for r in rows] == [f"{i:02d}.flac" for i in range(len(rows))]
    assert all(r["score"] and r["error"] == "" and r["variant"] for r in rows), rows
    assert not out.exists()


@pytest.mark.parametrize("content", [[], ["README.txt", "notes.pdf"]])
def test_a_folder_without_audio_exits_4_and_writes_nothing(world, tmp_path, capsys, content):
    model, _, _, _ = world
    empty = tmp_path / "clips"
    empty.mkdir()
    for name in content:
        (empty / name).write_text("x")
    out = tmp_path / "o.csv"
    assert main([str(empty), "-o", str(out), "--model", str(model)]) == 4
    err = capsys.readouterr().err
    assert f"no audio files under {empty} ({len(content)} other files skipped)" in err
    assert 'docker run --rm -v "$PWD:/data" hearsay-score clips/' in err
    assert not out.exists() and not (tmp_path / "o.csv.partial").exists()


def test_progress_lines_and_the_summary_go_to_stderr(world, tmp_path, capsys):
    model, _, clips, _ = world
    assert main([str(clips), "-o", str(tmp_path / "o.csv"), "--model", str(model),
                 "--batch-size", "1", "--progress", "1e-9", "--first-window"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "decision" not in ln]
    assert [ln.split(" (")[0] for ln in err[:3]] == [
        "hearsay-score: 4/10 files", "hearsay-score: 8/10 files", "hearsay-score: 10/10 files"]
    assert re.fullmatch(r"hearsay-score: 6/10 scored, 4 failed, 2 skipped "
                        r"\(1 hidden, 1 not audio\), [0-9.]+ s", err[-1]), err[-1]


def test_progress_is_a_bar_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    bar = deploy.Progress(10, stream=stream)
    bar.update([{"error": ""}] * 4)
    bar.close()
    assert "4/10" in stream.getvalue() and "%|" in stream.getvalue()
    plain = io.StringIO()
    deploy.Progress(10, every_s=3600, stream=plain).update([{"error": ""}])
    assert plain.getvalue() == ""  # not a terminal, interval not reached: quiet


@pytest.mark.parametrize("seconds", [8.5, 12.0, 15.0])
def test_deploy_and_hearsay_score_give_the_same_input_past_the_cap(tmp_path, seconds):
    """A bundle clip (trimmed, 16-bit FLAC) longer than the 8 s cap: both front ends agree."""
    from hearsay.evaluate import score
    from hearsay.sound import bundle_inputs as inputs

    rng = np.random.default_rng(int(seconds))
    x = tone(seconds, 170, rng) + 0.05 * rng.standard_normal(int(seconds * SR)).astype(np.float32)
    (tmp_path / "audio").mkdir()
    sf.write(tmp_path / "audio" / "c.flac", x, SR, subtype="PCM_16")
    front = {"max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0}
    scorer = deploy.Engine(session=None, model_sha="", front=front, min_samples=400)
    row = {"error": ""}
    got = deploy.model_input(tmp_path / "audio" / "c.flac", row, scorer)
    want = inputs.model_input(tmp_path, {"id": "c", "flac": "audio/c.flac"}, "none",
                             score.ScoreConfig(max_s=8.0))
    assert row["error"] == "" and len(got) == len(want) == 8 * SR
    np.testing.assert_array_equal(got, want)


def test_help_and_readme_show_the_docker_command_people_type(capsys):
    command = 'docker run --rm -v "$PWD:/data" hearsay-score clips/'
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert command in text
    assert command in (REPO / "README.md").read_text()
    interfaces = " ".join((REPO / "docs" / "INTERFACES.md").read_text().split())
    for code, what in ((5, "not writable"), (141, "stdout closed")):  # both list every exit
        assert re.search(rf"\b{code} [^,]*{what}", text), code
        assert re.search(rf"\b{code} [^,]*{what}", interfaces), code


# --------------------------------------------------------------------------- operator mistakes


def speech_file(path: Path, seconds: float, codec: str, seed: int = 0) -> bytes:
    """`seconds` of speech-shaped sound encoded by the bundled ffmpeg; the file's bytes."""
    from signals import speech_like

    wav = path.with_suffix(".src.wav")
    sf.write(wav, speech_like(seconds, np.random.default_rng(seed)), SR)
    subprocess.run([ffmpeg_exe(), "-y", "-v", "error", "-i", str(wav), "-c:a", codec, str(path)],
                   check=True)
    wav.unlink()
    return path.read_bytes()


def cut_clip(folder: Path, name: str, seconds: float, codec: str) -> Path:
    """A clip of `seconds` cut to half its bytes (a download that stopped half way)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = speech_file(folder / f"whole.{name}", seconds, codec)
    (folder / f"whole.{name}").unlink()
    (folder / f"cut.{name}").write_bytes(data[: len(data) // 2])
    return folder / f"cut.{name}"


@pytest.mark.parametrize("ext,codec,seconds", [("mp3", "libmp3lame", 40.0), ("flac", "flac", 12.0),
                                               ("aac", "aac", 12.0)])
def test_a_cut_file_is_scored_on_the_audio_it_holds_in_both_modes(world, tmp_path, ext, codec,
                                                                  seconds):
    """The header of a cut MP3/FLAC still promises the whole clip: only decoded samples count,
    the same ones (and the same score) run after run and in both modes."""
    from hearsay.sound import windows

    model, _, _, _ = world
    clips = tmp_path / "clips"
    cut = cut_clip(clips, ext, seconds, codec)
    prefix = load_audio(cut)  # soundfile up to where its data ends, else ffmpeg (a cut FLAC)
    ffmpeg_prefix = subprocess.run([ffmpeg_exe(), "-v", "quiet", "-i", str(cut), "-f", "f32le",
                                    "-ac", "1", "-ar", str(SR), "pipe:1"],
                                   capture_output=True).stdout  # what ffmpeg alone decodes
    assert len(prefix) / SR == pytest.approx(len(ffmpeg_prefix) / 4 / SR, abs=0.15)
    assert len(prefix) / SR < 0.6 * seconds
    runs = []
    for mode in ([], [], ["--first-window"]):
        out = tmp_path / f"s{len(runs)}.csv"
        wins = ["--windows-csv", str(tmp_path / f"w{len(runs)}.csv")] if not mode else []
        assert main([str(clips), "-o", str(out), "--model", str(model), *mode, *wins]) == 0
        runs.append(read_csv(out)[0])
    a, b, first = runs
    assert a == b and (tmp_path / "w0.csv").read_text() == (tmp_path / "w1.csv").read_text()
    assert float(a["duration_s"]) == pytest.approx(len(prefix) / SR, abs=1e-3)
    assert first["duration_s"] == a["duration_s"] and first["header_s"] == a["header_s"]
    if ext != "aac":  # ADTS declares no length; MP3 (Xing) and FLAC (STREAMINFO) do
        assert float(a["header_s"]) == pytest.approx(seconds, abs=0.1)
    want = windows.wave_windows(prefix, 8.0, 4.0)  # the windows of the decodable prefix
    rows = read_csv(tmp_path / "w0.csv")
    assert [(r["start_s"], r["end_s"]) for r in rows] == [
        (f"{w.start_s:.3f}", f"{w.end_s:.3f}") for w in want]
    scorer = deploy.load_engine(model)
    logits = scorer.logits([w.wave for w in want])
    assert [float(r["logit"]) for r in rows] == pytest.approx(logits.tolist(), abs=1e-5)
    assert float(first["logit"]) == pytest.approx(float(logits[0]), abs=1e-5)


def test_symlinked_folders_are_walked_once_and_dot_folders_counted(world, tmp_path, capsys):
    model, _, clips, _ = world
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "loop").mkdir(parents=True)
    (root / ".cache").mkdir()
    elsewhere.mkdir()
    shutil.copy(clips / "a.wav", root / "a.wav")
    shutil.copy(clips / "a.wav", elsewhere / "b.wav")
    shutil.copy(clips / "a.wav", root / ".cache" / "c.wav")
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    (root / "loop" / "up").symlink_to(root, target_is_directory=True)  # walks back into root
    out = tmp_path / "s.csv"
    assert main([str(root), "-o", str(out), "--model", str(model), "--progress", "0"]) == 0
    assert [r["path"] for r in read_csv(out)] == ["a.wav", "linked/b.wav"]
    err = capsys.readouterr().err
    assert "2/2 scored, 0 failed, 2 skipped (1 hidden, 1 symlink loop)" in err


def test_a_name_that_is_not_utf8_is_written_losslessly_and_the_batch_goes_on(world, tmp_path):
    import codecs

    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    raw = b"caf\xe9 \\ 1.wav"  # Latin-1, from another system; and a backslash
    shutil.copy(clips / "a.wav", os.path.join(os.fsencode(root), raw))
    shutil.copy(clips / "a.wav", root / "z.wav")
    out = tmp_path / "s.csv"
    assert main([str(root), "-o", str(out), "--model", str(model), "--progress", "0"]) == 0
    rows = read_csv(out)
    assert [r["path"] for r in rows] == ["caf\\xe9 \\\\ 1.wav", "z.wav"]
    assert codecs.escape_decode(rows[0]["path"].encode())[0] == raw
    assert rows[0]["error"] == "" and rows[0]["logit"] == rows[1]["logit"]


@pytest.mark.parametrize("flag", ["-o", "--windows-csv"])
def test_an_unwritable_output_exits_5_before_anything_is_scored(world, tmp_path, monkeypatch,
                                                                 capsys, flag):
    model, _, clips, _ = world
    (tmp_path / "file").write_text("a file, not a folder")
    monkeypatch.setattr(deploy.cli, "load_engine", lambda *a: pytest.fail("scored before checking"))
    assert main([str(clips), flag, str(tmp_path / "file" / "s.csv"), "--model", str(model)]) == 5
    err = capsys.readouterr().err
    assert "cannot write" in err and '--user "$(id -u)"' in err


def test_a_reader_that_closes_stdout_ends_the_run_quietly_with_141(world):
    model, _, clips, _ = world
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "hearsay.deploy", str(clips), "--model",
                             str(model), "--progress", "0"], stdout=w, stderr=subprocess.PIPE,
                            text=True)
    os.close(w)
    os.close(r)  # `| head -0`: the reader is gone before the first row
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and "Traceback" not in err and "Exception" not in err, err


def test_rows_name_the_whole_model_folder_not_only_model_onnx(world, tmp_path):
    """front_end.json changes every score: a folder with another one has another identity."""
    from hearsay.export import onnx_meta

    model, _, clips, _ = world
    other = tmp_path / "model"
    shutil.copytree(model, other)
    front = {**json.loads((other / "front_end.json").read_text()), "top_db": 30.0}
    (other / "front_end.json").write_text(json.dumps(front))
    stamp = {**onnx_meta.read(other / "model.onnx"),  # exported so: the graph says the same
             "hearsay.front_end": json.dumps(front, sort_keys=True)}
    onnx_meta.stamp(other / "model.onnx", stamp)
    sums = model_sums(other)
    for name in ("front_end.json", "model.onnx"):
        sums[name] = hashlib.sha256((other / name).read_bytes()).hexdigest()
    (other / "SHA256SUMS").write_text(format_sums(sums))
    ids = set()
    for folder in (model, other):
        out = tmp_path / f"{folder.name}{len(ids)}.csv"
        assert main([str(clips), "-o", str(out), "--model", str(folder), "--progress", "0"]) == 0
        ids |= {r["model_sums_sha256"] for r in read_csv(out)}
    assert ids == {hashlib.sha256((f / "SHA256SUMS").read_bytes()).hexdigest()
                   for f in (model, other)} and len(ids) == 2


@pytest.mark.parametrize("logit,score", [(-800.0, "0.000000"), (800.0, "1.000000")])
def test_both_modes_score_any_logit_with_one_stable_sigmoid(world, logit, score):
    class Session:  # an ONNX session whose model answers `logit` for every clip
        def run(self, names, feeds):
            return [np.full(len(feeds["input_values"]), logit, dtype=np.float32)]

    _, _, clips, _ = world
    front = {"max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0}
    scorer = deploy.Engine(session=Session(), model_sha="", front=front, min_samples=400)
    cfg = deploy.ScoreConfig(first_window=True)
    for rows in (deploy.score_chunk(clips, [clips / "a.wav"], scorer, cfg),
                 list(deploy.windowed.windowed_rows(clips, [clips / "a.wav"], scorer,
                                                          deploy.ScoreConfig()))):
        assert (rows[0]["score"], rows[0]["error"]) == (score, "")


def test_a_long_file_writes_window_rows_per_batch_and_resume_finishes_it(world, tmp_path,
                                                                        monkeypatch):
    """An interrupt inside a long file keeps its scored windows; --resume skips finished files
    and ends with the CSVs an uninterrupted run writes."""
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(clips / "a.wav", root / "a.wav")
    speech_file(root / "long.flac", 60.0, "flac")  # 14 windows: 4 passes of 4 (--batch-size 1)
    args = [str(root), "--model", str(model), "--batch-size", "1", "--progress", "0"]
    ref, ref_w = tmp_path / "ref.csv", tmp_path / "ref.w.csv"
    assert main([*args, "-o", str(ref), "--windows-csv", str(ref_w)]) == 0
    out, out_w = tmp_path / "s.csv", tmp_path / "s.w.csv"
    interrupt_on_call(monkeypatch, 3)  # passes of 4 windows: a.wav + 3 of long.flac, 4 more
    assert main([*args, "-o", str(out), "--windows-csv", str(out_w)]) == 130
    kept = read_csv(tmp_path / "s.w.csv.partial")
    assert [r["path"] for r in kept] == ["a.wav"] + ["long.flac"] * 7
    assert kept == read_csv(ref_w)[:8]
    assert [r["path"] for r in read_csv(tmp_path / "s.csv.partial")] == ["a.wav"]
    monkeypatch.undo()
    scored, cut = [], deploy.windowed.file_windows

    def file_windows(path, *rest):
        scored.append(path.name)
        return cut(path, *rest)

    monkeypatch.setattr(deploy.windowed, "file_windows", file_windows)
    assert main([*args, "-o", str(out), "--windows-csv", str(out_w), "--resume"]) == 0
    assert scored == ["long.flac"]  # a.wav was complete in the partial file
    assert out.read_text() == ref.read_text() and out_w.read_text() == ref_w.read_text()


def test_resume_refuses_rows_of_another_model_and_needs_o(world, tmp_path, capsys):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    row = {c: "" for c in deploy.COLUMNS} | {"path": "a.wav", "model_sums_sha256": "0" * 64}
    with open(tmp_path / "s.csv.partial", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=deploy.COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerow(row)
        fh.write("b/c.flac,1.2")  # the line an interrupt cut: dropped, never parsed
    import argparse  # the run record another model's run left beside its rows

    other = argparse.Namespace(clips=clips, windows_csv=None)
    deploy.inputs.write_record(out, deploy.inputs.run_record(other, deploy.ScoreConfig(),
                                                             "0" * 64))
    assert main([str(clips), "-o", str(out), "--model", str(model), "--resume"]) == 2
    assert f"model_sums_sha256 '{'0' * 64}' -> " in capsys.readouterr().err
    assert main([str(clips), "--model", str(model), "--resume"]) == 2
    assert "--resume needs -o FILE" in capsys.readouterr().err


# ---------------------------------------------------------------- decision column (engine.py)


def with_thresholds(model: Path, dest: Path, doc: dict) -> Path:
    """A copy of `model` that ships `doc` as thresholds.json, listed in its SHA256SUMS."""
    from hearsay.contracts import model_dir

    shutil.copytree(model, dest)
    model_dir.write_thresholds(dest, doc)
    model_dir.write_sums(dest, [*model_sums(dest), model_dir.THRESHOLDS])
    return dest


def test_the_decision_column_uses_the_model_folders_threshold(world, tmp_path, capsys):
    model, _, clips, expected = world
    assert main([str(clips), "-o", str(tmp_path / "plain.csv"), "--model", str(model)]) == 0
    assert "has no thresholds.json: the decision column stays empty" in capsys.readouterr().err
    plain = read_csv(tmp_path / "plain.csv")
    assert all(r["decision"] == r["llr"] == "" for r in plain)
    logits = sorted(float(r["logit"]) for r in plain if r["logit"])
    mid = (logits[1] + logits[2]) / 2  # two scored files below it, the rest above
    folder = with_thresholds(model, tmp_path / "model", {
        "default": "min_dcf", "thresholds": {"min_dcf": {"value": mid}, "eer": {"value": -1e9}},
        "calibration": {"a": 2.0, "b": 1.0}})
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(folder), "--llr"]) == 0
    assert f"decision = spoof at logit >= {mid:g} (min_dcf threshold)" in \
        capsys.readouterr().err
    rows = read_csv(out)
    for r in rows:
        if expected[r["path"]]:  # a file that failed gets no decision
            assert r["decision"] == r["llr"] == ""
            continue
        x = float(r["logit"])
        assert r["decision"] == ("spoof" if x >= mid else "bonafide")
        assert float(r["llr"]) == pytest.approx(2 * x + 1, abs=1e-5)
    assert [r["decision"] for r in rows].count("bonafide") == 2
    for spec, want in (("eer", {"spoof"}), ("1e9", {"bonafide"})):
        assert main([str(clips), "-o", str(out), "--model", str(folder), "--threshold",
                     spec]) == 0
        assert {r["decision"] for r in read_csv(out) if r["logit"]} == want
        assert all(r["llr"] == "" for r in read_csv(out))  # --llr not asked
    assert main([str(clips), "-o", str(out), "--model", str(folder), "--threshold",
                 "fa_rate"]) == 3
    assert "threshold 'fa_rate'" in capsys.readouterr().err
    assert main([str(clips), "-o", str(out), "--model", str(model), "--llr"]) == 3
    assert "--llr needs the calibration" in capsys.readouterr().err
