"""hearsay.store: path guard, local + real-rclone stores, retries, checkpoint files (no pickle)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from hearsay import store as st


@pytest.mark.parametrize("bad", ["../x", "a/../../b", "a/..", "/abs/path", "a\\b", "", " ", ".",
                                 "checkpoints/../../etc"])
def test_guard_refuses_paths_outside_the_prefix(bad):
    with pytest.raises(st.PathGuardError):
        st.guard(bad)


def test_guard_keeps_ordinary_paths():
    assert st.guard("checkpoints/epoch_0003") == "checkpoints/epoch_0003"
    assert st.guard("final/./model.safetensors") == "final/model.safetensors"


def test_latest_epoch_is_by_number_in_the_name():
    names = ["epoch_0002", "epoch_0010", "epoch_0009", "final", "epoch_12x", "epoch_0003.partial"]
    assert st.latest_epoch(names) == 10
    assert st.latest_epoch(["final"]) is None


def _ckpt_dir(tmp_path, name="src", payload=b"weights"):
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "model.safetensors").write_bytes(payload)
    (d / "state.json").write_text("{}")
    return d


def test_local_store_push_pull_list(tmp_path):
    s = st.LocalStore(tmp_path / "store", backoff_s=0)
    src = _ckpt_dir(tmp_path)
    s.push_dir(src, "checkpoints/epoch_0001")
    s.push_dir(src, "checkpoints/epoch_0002")
    assert s.list_dirs("checkpoints") == ["epoch_0001", "epoch_0002"]
    s.pull_dir("checkpoints/epoch_0002", tmp_path / "back")
    assert (tmp_path / "back" / "model.safetensors").read_bytes() == b"weights"


def test_local_store_refuses_a_symlink_out_of_the_prefix(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    (root / "escape").symlink_to(tmp_path)
    s = st.LocalStore(root, backoff_s=0)
    with pytest.raises(st.PathGuardError):
        s.push_dir(_ckpt_dir(tmp_path), "escape/x")


def test_push_retries_three_times_then_raises(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the store root should be")
    s = st.LocalStore(blocker, backoff_s=0)
    calls = []
    real = s._push
    s._push = lambda local, rel: (calls.append(rel), real(local, rel))
    with pytest.raises(st.StoreError, match="failed after 4 attempts"):
        s.push_dir(_ckpt_dir(tmp_path), "checkpoints/epoch_0001")
    assert len(calls) == 4  # one try + three retries


@pytest.fixture
def rclone_remote(tmp_path, monkeypatch):
    """A real rclone `alias` remote named `box` over a temp folder, in a temp RCLONE_CONFIG."""
    conf = tmp_path / "rclone.conf"
    monkeypatch.setenv("RCLONE_CONFIG", str(conf))
    target = tmp_path / "remote_root"
    target.mkdir()
    subprocess.run([st.rclone_exe(), "config", "create", "box", "alias", f"remote={target}"],
                   check=True, capture_output=True)
    return target


def test_rclone_store_round_trip_and_latest_by_name(tmp_path, rclone_remote):
    s = st.open_store("box:campaign/fold3", tmp_path / "run", backoff_s=0)
    assert isinstance(s, st.RcloneStore)
    assert s.latest_checkpoint() is None  # nothing pushed yet is "none", not an error
    for epoch in (2, 10, 3):
        s.publish_checkpoint(_ckpt_dir(tmp_path, f"e{epoch}", payload=f"w{epoch}".encode()),
                             epoch)
    # make the lower epoch the newest file: selection must ignore mtimes
    future = time.time() + 3600
    for f in (rclone_remote / "campaign/fold3/checkpoints/epoch_0002").iterdir():
        os.utime(f, (future, future))
    assert s.latest_checkpoint() == 10
    s.pull_dir("checkpoints/epoch_0010", tmp_path / "pulled")
    assert (tmp_path / "pulled" / "model.safetensors").read_bytes() == b"w10"
    assert (rclone_remote / "campaign/fold3/checkpoints/epoch_0003/state.json").is_file()


def test_rclone_store_guards_before_calling_rclone(tmp_path, rclone_remote):
    s = st.open_store("box:campaign/fold3", tmp_path / "run", backoff_s=0)
    with pytest.raises(st.PathGuardError):
        s.push_dir(_ckpt_dir(tmp_path), "../fold4/checkpoints/epoch_0001")
    assert not (rclone_remote / "campaign" / "fold4").exists()
    with pytest.raises(st.PathGuardError):
        st.open_store("box:campaign/../other", tmp_path / "run")


def test_rclone_push_failure_retries_then_raises(tmp_path, rclone_remote, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    subprocess.run([st.rclone_exe(), "config", "create", "broken", "alias",
                    f"remote={blocker}/sub"], check=True, capture_output=True)
    s = st.open_store("broken:p", tmp_path / "run", backoff_s=0)
    calls = []
    real = s._rclone
    s._rclone = lambda *a: (calls.append(a[0]), real(*a))[1]
    with pytest.raises(st.StoreError, match="failed after 4 attempts"):
        s.push_dir(_ckpt_dir(tmp_path), "checkpoints/epoch_0001")
    assert calls == ["copy"] * 4


def test_open_store_kinds(tmp_path):
    assert isinstance(st.open_store(None, tmp_path), st.LocalStore)
    assert isinstance(st.open_store(str(tmp_path / "x"), tmp_path), st.LocalStore)
    r = st.open_store("rclone:r2:bucket/pre", tmp_path)
    assert isinstance(r, st.RcloneStore) and r.uri == "r2:bucket/pre"


# --------------------------------------------------------------------------- atomic publishing


def _published(s, tmp_path, epoch, payload=b"w"):
    d = _ckpt_dir(tmp_path, f"local/checkpoints/{st.ckpt_name(epoch)}", payload=payload)
    s.publish_checkpoint(d, epoch)
    return d


@pytest.mark.parametrize("kind", ["local", "rclone"])
def test_a_checkpoint_without_its_marker_is_skipped_by_resume(tmp_path, rclone_remote, kind,
                                                              capsys):
    s = (st.LocalStore(tmp_path / "store", backoff_s=0) if kind == "local" else
         st.open_store("box:campaign/fold3", tmp_path / "run", backoff_s=0))
    _published(s, tmp_path, 1)
    root = (tmp_path / "store" if kind == "local" else rclone_remote / "campaign/fold3")
    mark = root / "checkpoints" / "epoch_0001.complete"
    assert mark.read_text().strip() == st.sha256_file(root / "checkpoints/epoch_0001/state.json")
    # a box died while rclone was copying epoch 2 file by file: the folder is there, no marker
    half = root / "checkpoints" / "epoch_0002"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"half")
    assert s.latest_checkpoint() == 1
    assert "skipping epoch_0002 (no .complete marker" in capsys.readouterr().err
    _published(s, tmp_path, 2)  # the relaunch republishes epoch 2 whole
    assert s.latest_checkpoint() == 2


def test_a_marker_without_its_folder_is_not_a_checkpoint():
    names = ["epoch_0001/", "epoch_0001.complete", "epoch_0003.complete", "epoch_0002/"]
    assert st.complete_epochs(names) == ([1], [2])


def test_rclone_store_keeps_an_absolute_path_on_a_local_remote(tmp_path, monkeypatch):
    conf = tmp_path / "rclone.conf"
    conf.write_text("[store]\ntype = local\n")
    monkeypatch.setenv("RCLONE_CONFIG", str(conf))
    monkeypatch.chdir(tmp_path)  # a relative path would land here instead
    target = tmp_path / "bucket" / "runs" / "fold2"
    s = st.open_store(f"store:{target}", tmp_path / "run", backoff_s=0)
    s.push_dir(_ckpt_dir(tmp_path), "checkpoints/epoch_0001")
    assert (target / "checkpoints" / "epoch_0001" / "model.safetensors").is_file()
    assert s.list_dirs("checkpoints") == ["epoch_0001"]
