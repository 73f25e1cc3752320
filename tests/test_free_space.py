"""scripts/free-space.sh and the Makefile's use of it: a new .venv on a too-full disk stops at
once with a message that names the fix, before any virtual environment is made."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "free-space.sh"


def run(*args: str) -> subprocess.CompletedProcess:
    """args in the project root, its own process group: should a broken check let make start pip,
    the timeout ends all of it rather than leaving pip installing."""
    proc = subprocess.Popen(list(args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_enough_space_passes_and_a_missing_folder_is_judged_by_its_parent(tmp_path):
    assert run(str(SCRIPT), str(tmp_path / "not" / "yet" / ".venv"), "0").returncode == 0


def test_too_little_space_exits_1_naming_the_need_and_the_fix(tmp_path):
    proc = run(str(SCRIPT), str(tmp_path), "1000000", "a new .venv")
    assert proc.returncode == 1
    assert "a new .venv needs about 1000000 GiB free" in proc.stderr
    assert "VENV=/path/.venv" in proc.stderr


@pytest.mark.parametrize("args", [(), ("/tmp",), ("/tmp", "8GB")])
def test_usage_errors_exit_2(args):
    assert run(str(SCRIPT), *args).returncode == 2


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_install_checks_the_space_before_making_a_venv(tmp_path):
    venv = tmp_path / "venv"
    proc = run("make", "install", f"VENV={venv}", "VENV_FREE_GB=1000000")
    assert proc.returncode != 0 and "needs about 1000000 GiB free" in proc.stderr
    assert not venv.exists()  # nothing half-made to clean up
