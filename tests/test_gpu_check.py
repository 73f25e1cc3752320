"""scripts/gpu_check.sh: the one command an operator runs on a GPU machine (docs/RUNBOOK.md).

The GPU figures cannot be measured here; what is tested is that the script runs end to end
(dry run: the same steps on the CPU with tiny shapes), writes its files flat into $OUT, records a
timed-out step and still runs the next one, and refuses without CUDA outside the dry run.
The two `slow` tests start torch several times each (the dry run: ~90 s of CPU, 4-6 min of wall
time on a shared, loaded 2-core machine); the others take seconds (a fake interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
FILES = {"gpu_check.log", "env.json", "preflight.txt", "ddp.json", "parity.json",
         "bench_score.txt", "bench_train.json", "summary.json"}
STEPS = ["setup", "preflight", "ddp", "parity", "score", "train"]


def run(out: Path, *args: str, py: str = sys.executable, timeout: int = 600, **env: str):
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}
    full = {**inherited, "OUT": str(out), "PY": py, **env}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=full, text=True,
                          capture_output=True, timeout=timeout)


def steps(out: Path) -> dict:
    return {s["step"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}


def test_help_and_usage_errors(tmp_path):
    r = run(tmp_path, "--help")
    assert r.returncode == 0 and "Usage: bash scripts/gpu_check.sh" in r.stdout
    assert run(tmp_path, "--bogus").returncode == 2
    r = run(tmp_path, GPU_CHECK_STEPS="parity gpu")
    assert r.returncode == 2 and "unknown step 'gpu'" in r.stderr
    assert run(tmp_path, GPU_CHECK_TOTAL_S="7m").returncode == 2
    r = run(tmp_path, "--help")
    assert "preflight" in r.stdout and "torchrun" in r.stdout and "NCCL" in r.stdout
    assert not any(tmp_path.iterdir())  # usage errors write nothing


@pytest.mark.slow
def test_dry_run_writes_every_file_flat_in_out(tmp_path):
    """The whole script on the CPU: setup, the preflight's train check (cpu), ddp (2 gloo
    ranks), parity (tiny, CPU bf16), score, train (--dry-run)."""
    r = run(tmp_path, "--dry-run", timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:]
    got = {p.name for p in tmp_path.iterdir()}
    assert got == FILES and all((tmp_path / f).is_file() for f in got)  # <= 8, no folders
    assert [s["rc"] for s in steps(tmp_path).values()] == [0] * len(STEPS)
    assert list(steps(tmp_path)) == STEPS
    assert "ok   train: hearsay train on cpu: 2 optimiser steps" in (
        tmp_path / "preflight.txt").read_text()
    ddp = json.loads((tmp_path / "ddp.json").read_text())
    assert (ddp["world_size"], ddp["backend"], ddp["rc"], ddp["steps"]) == (
        2, "gloo (dry run)", 0, 2)
    assert ddp["complete"] and [v["step"] for v in ddp["val"]] == [1, 2]
    parity = json.loads((tmp_path / "parity.json").read_text())
    assert parity["parity_a"]["passed"]
    assert parity["parity_b"] is None  # a CPU check is never recorded as parity B
    assert parity["parity_b_cpu_check"]["clips"] == 3
    train = json.loads((tmp_path / "bench_train.json").read_text())
    assert train["dry_run"] and [f["variant"] for f in train["figures"]] == [
        "fine-tune", "frozen", "fine-tune + cudnn", "frozen + b128", "fine-tune + pack",
        "fine-tune + flex", "fine-tune + mask-free", "fine-tune + graphs", "fine-tune + fp8"]
    levers = {f["variant"].split(" + ")[-1]: f for f in train["figures"][4:]}
    for name in ("pack", "mask-free", "graphs", "fp8"):  # each lever off and on, raw and trainer
        assert {"raw_off", "raw", "trainer_off", "trainer"} <= set(levers[name]), name
    assert levers["fp8"]["raw"]["fp8_layers"] == 12 and "skipped" in levers["flex"]
    assert 0 < train["figures"][0]["trainer"]["valid_share"] <= 1
    score = (tmp_path / "bench_score.txt").read_text()
    assert "end-to-end:" in score and "fed scoring, overlapped:" in score
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["ready"] and env["import hearsay.export.parity"].startswith(str(ROOT / "src"))
    assert env["ffmpeg_missing_encoders"] == [] and "lock_differs" in env
    # the summary table closes the output: its title, a header, a row per step
    assert "DRY RUN" in r.stdout.splitlines()[-(len(STEPS) + 2)]
    assert "gpu_check summary" in (tmp_path / "gpu_check.log").read_text()


FAKE_PY = """#!/usr/bin/env bash
# stands in for python: the parity step hangs, the score step prints bench_score's lines,
# env writes a ready env.json; anything else (the summary) is the real interpreter
case "$*" in
  "-m hearsay.cli parity"*) exec sleep 120 ;;
  "scripts/bench_score.py"*) echo "end-to-end: 9.0 clips/s wall, 50.0 audio-s/s (1 s wall)" ;;
  "scripts/gpu_check.py env"*) echo '{"ready": true, "dry_run": false}' > "$3/env.json" ;;
  *) exec REAL "$@" ;;
esac
"""


def test_a_timed_out_step_is_recorded_and_the_next_one_runs(tmp_path):
    fake = tmp_path / "fakepy"
    fake.write_text(FAKE_PY.replace("REAL", sys.executable))
    fake.chmod(0o755)
    out = tmp_path / "out"
    r = run(out, py=str(fake), timeout=60, GPU_CHECK_STEPS="parity score",
            GPU_CHECK_MAX_S_PARITY="2")
    assert r.returncode == 1, r.stdout  # a step failed: not a clean run
    s = steps(out)
    assert s["parity"]["rc"] == 124 and s["parity"]["timed_out"] and s["parity"]["seconds"] < 20
    assert s["score"]["rc"] == 0
    assert "parity TIMED OUT after 2 s" in r.stdout
    assert "end-to-end 9.0 clips/s" in r.stdout.splitlines()[-1]


def test_a_spent_budget_skips_the_step_instead_of_running_it_unbounded(tmp_path):
    fake = tmp_path / "fakepy"
    fake.write_text(FAKE_PY.replace("REAL", sys.executable))
    fake.chmod(0o755)
    r = run(tmp_path / "out", py=str(fake), timeout=60, GPU_CHECK_STEPS="score",
            GPU_CHECK_TOTAL_S="0")  # `timeout 0` would mean no limit at all
    assert r.returncode == 1
    assert steps(tmp_path / "out")["score"]["skipped"]


def test_quick_runs_its_own_steps_and_a_named_list_overrides_them(tmp_path):
    fake = tmp_path / "fakepy"
    fake.write_text(FAKE_PY.replace("REAL", sys.executable))
    fake.chmod(0o755)
    for out, env, want in (
            (tmp_path / "quick", {}, ["setup", "preflight", "ddp", "score", "train"]),  # no parity
            (tmp_path / "named", {"GPU_CHECK_STEPS": "score"}, ["setup", "score"])):
        run(out, "--quick", py=str(fake), timeout=60, GPU_CHECK_TOTAL_S="0", **env)
        assert list(steps(out)) == want  # a spent budget skips each step: only the plan shows


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this box has CUDA: the GPU run would start")
def test_gpu_run_without_cuda_stops_after_setup(tmp_path):
    r = run(tmp_path)
    assert r.returncode == 3, r.stdout[-2000:]
    assert list(steps(tmp_path)) == ["setup"]  # no step ran
    env = json.loads((tmp_path / "env.json").read_text())
    assert not env["ready"] and "no CUDA device" in env["error"]
    assert not (tmp_path / "parity.json").exists()


def _helpers():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_versions_that_differ_from_the_lock_are_named_and_equal_ones_are_not(tmp_path,
                                                                            monkeypatch):
    from importlib import metadata

    mod = _helpers()
    lock = tmp_path / "requirements.lock"
    have = metadata.version("numpy")
    lock.write_text(f"numpy=={have} --hash=sha256:00\npandas==0.0.1 --hash=sha256:00\n")
    monkeypatch.setattr(mod, "LOCK", lock)
    assert mod.lock_differences(["numpy", "pandas", "torch"]) == {
        "pandas": f"installed {metadata.version('pandas')}, lock 0.0.1"}  # torch: no pin here


def test_the_ffmpeg_in_use_and_its_missing_encoders_are_recorded(tmp_path, monkeypatch):
    fake = tmp_path / "ffmpeg"
    fake.write_text("#!/bin/sh\necho ' A..... aac  AAC'\necho ' A..... pcm_mulaw  mu-law'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("HEARSAY_FFMPEG", str(fake))
    info = _helpers().ffmpeg_info()
    assert info == {"ffmpeg": str(fake),
                    "ffmpeg_missing_encoders": ["libmp3lame", "libopus", "libopencore_amrnb"]}
