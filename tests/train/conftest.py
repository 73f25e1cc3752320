"""Fixtures of the trainer's tests: the easy bundle, a local rclone store,
torchrun's environment."""

from __future__ import annotations

import subprocess

import pytest
from train_world import make_easy_bundle

from hearsay import store as stores


@pytest.fixture(scope="module")
def easy_bundle_dir(tmp_path_factory):
    return make_easy_bundle(tmp_path_factory.mktemp("bundle") / "bundle")


@pytest.fixture
def bundle(demo_bundle):
    return demo_bundle


@pytest.fixture
def bundle_dir(demo_bundle):
    return demo_bundle.root


@pytest.fixture
def rclone_store(tmp_path, monkeypatch):
    monkeypatch.setenv("RCLONE_CONFIG", str(tmp_path / "rclone.conf"))
    (tmp_path / "remote").mkdir()
    subprocess.run([stores.rclone_exe(), "config", "create", "r2", "alias",
                    f"remote={tmp_path / 'remote'}"], check=True, capture_output=True)
    return "r2:campaign/fold0"


@pytest.fixture
def torchrun_env(monkeypatch):
    """The environment torchrun gives one process (world size 1, gloo on the CPU)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "1",
                 "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(k, v)
