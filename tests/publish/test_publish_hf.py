"""hearsay publish to hf://: the real huggingface_hub client against tests/fakes/fake_hf_hub.py.

The fake speaks the Hub protocol as the client's source shows it (regular files inline in the
commit, big files through the git-LFS batch API with the "basic" transfer); xet is switched off
(HF_HUB_DISABLE_XET), and one subprocess test shows what happens when it is not. No network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hearsay.publish import main
from hearsay.publish.hf import HubRemote

_spec = importlib.util.spec_from_file_location(
    "fake_hf_hub", Path(__file__).parents[1] / "fakes" / "fake_hf_hub.py")
fake_hf_hub = sys.modules["fake_hf_hub"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_hf_hub)  # tests/fakes is not a package

# The client's own LFS PUT passes a file as httpx `data=` (deprecated there); not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload:DeprecationWarning")

TOKEN = "hf_test_secret_4f1c9a"  # must never show up in any output
LFS_THRESHOLD = 64 * 1024        # bytes: model.safetensors (1 MiB) goes by LFS, the rest inline


@pytest.fixture
def hub(monkeypatch):
    fake = fake_hf_hub.FakeHub(token=TOKEN, lfs_threshold=LFS_THRESHOLD).start()
    monkeypatch.setenv("HF_ENDPOINT", fake.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")  # what remote_for sets: not left behind
    # The client uploads through xet whenever hf_xet is importable and this constant (read from
    # $HF_HUB_DISABLE_XET at import) is false; the fake does not speak xet.
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_DISABLE_XET", True)
    # ... and, unless this is true, it fetches {its import-time endpoint}/api/agent-harnesses
    # for its User-Agent: huggingface.co here, since HF_ENDPOINT is set after the import.
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_DISABLE_TELEMETRY", True)
    elsewhere = []  # any host but the fake's two names is a leak off the machine
    lookup = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost"):
            elsewhere.append(host)
            raise OSError(f"test_publish_hf: no network ({host})")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    yield fake
    fake.stop()
    assert elsewhere == [], "the client tried to reach hosts other than the fake"
    assert fake.unknown == [], "the client called routes the fake does not model"
    assert fake.auth_to_storage == 0, "the token was sent to the storage host"


def publish(checkpoint: Path, uri: str, capsys) -> tuple[str, str]:
    """Upload; returns (SHA256SUMS sha256, the commit id printed for pinning)."""
    assert main(["upload", str(checkpoint), "--to", uri]) == 0
    out, err = capsys.readouterr()
    assert TOKEN not in out + err
    digest = out.split("SHA256SUMS sha256 ")[1].split()[0]
    commit = re.search(r"pin downloads with hf://[\w.-]+/[\w.-]+@([0-9a-f]{40})", err).group(1)
    return digest, commit


def test_hf_round_trip_is_one_private_commit_and_verifies(hub, checkpoint, tmp_path, capsys,
                                                          caplog):
    caplog.set_level(logging.DEBUG)
    digest, commit = publish(checkpoint, "hf://acme/detector", capsys)
    assert hub.commits_made == 1  # every file and the manifest in one commit
    assert hub.repos["acme/detector"].private
    assert sorted(hub.files("acme/detector")) == [".gitattributes", "SHA256SUMS", "config.json",
                                                   "model.safetensors"]
    dest = tmp_path / "got"
    assert main(["download", f"hf://acme/detector@{commit}", "--dest", str(dest),
                 "--sums-sha256", digest]) == 0
    for f in checkpoint.iterdir():
        assert (dest / f.name).read_bytes() == f.read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == ["SHA256SUMS", "config.json",
                                                      "model.safetensors"]  # no scratch cache
    out, err = capsys.readouterr()
    assert "all verified" in out
    assert TOKEN not in out + err + caplog.text
    assert hub.xet_attempts == 0


def test_hf_big_file_goes_by_lfs_and_small_ones_inline(hub, checkpoint, tmp_path, capsys):
    digest, _ = publish(checkpoint, "hf://acme/detector", capsys)
    weights_sha = hashlib.sha256((checkpoint / "model.safetensors").read_bytes()).hexdigest()
    files = hub.files("acme/detector")
    assert files["model.safetensors"].lfs_sha256 == weights_sha
    assert files["config.json"].lfs_sha256 is None and files["SHA256SUMS"].lfs_sha256 is None
    assert "POST /acme/detector.git/info/lfs/objects/batch" in hub.requests
    assert f"PUT /_storage/{weights_sha}" in hub.requests  # basic transfer to storage
    assert "POST /acme/detector.git/info/lfs/objects/verify" in hub.requests
    assert main(["download", "hf://acme/detector", "--dest", str(tmp_path / "got"),
                 "--sums-sha256", digest]) == 0
    assert f"GET /_storage/{weights_sha}" in hub.requests  # fetched from storage, no token


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])  # LFS, inline
def test_hf_tampered_file_is_refused_and_nothing_lands(hub, checkpoint, tmp_path, capsys, name):
    publish(checkpoint, "hf://acme/detector", capsys)
    hub.tamper("acme/detector", name, at=5)
    dest = tmp_path / "got"
    assert main(["download", "hf://acme/detector", "--dest", str(dest)]) == 1
    assert f"{name}: sha256" in capsys.readouterr().err
    assert not dest.exists() and not (tmp_path / "got.partial").exists()


def test_hf_file_missing_from_the_commit_is_refused(hub, checkpoint, tmp_path, capsys):
    publish(checkpoint, "hf://acme/detector", capsys)
    del hub.files("acme/detector")["config.json"]
    assert main(["download", "hf://acme/detector", "--dest", str(tmp_path / "got")]) == 1
    assert "config.json is missing from hf://acme/detector" in capsys.readouterr().err
    assert not (tmp_path / "got.partial").exists()


def test_hf_commit_landing_mid_download_is_not_mixed_in(hub, checkpoint, tmp_path, monkeypatch,
                                                         capsys):
    """Every file comes from the commit the branch named when the download began."""
    digest, _ = publish(checkpoint, "hf://acme/detector", capsys)
    fetch = HubRemote.download

    def fetch_then_race(self, name, dest):
        fetch(self, name, dest)
        if name == "SHA256SUMS":
            hub.commit_file("acme/detector", "config.json", b'{"model": {"hidden_size": 99}}\n')

    monkeypatch.setattr(HubRemote, "download", fetch_then_race)
    assert main(["download", "hf://acme/detector", "--dest", str(tmp_path / "got"),
                 "--sums-sha256", digest]) == 0
    assert "32" in (tmp_path / "got" / "config.json").read_text()


def test_hf_manifest_not_the_pinned_one_is_refused(hub, checkpoint, tmp_path, capsys):
    publish(checkpoint, "hf://acme/detector", capsys)
    assert main(["download", "hf://acme/detector", "--dest", str(tmp_path / "d"),
                 "--sums-sha256", "0" * 64]) == 1
    assert "not the pinned" in capsys.readouterr().err


def test_hf_lfs_object_damaged_in_transit_fails_verify_and_commits_nothing(hub, checkpoint,
                                                                           capsys):
    hub.damage_puts = 1
    assert main(["upload", str(checkpoint), "--to", "hf://acme/detector"]) == 3
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "422" in err
    assert hub.commits_made == 0 and hub.lfs == {}


def test_hf_non_empty_branch_is_refused(hub, checkpoint, capsys):
    publish(checkpoint, "hf://acme/detector", capsys)
    assert main(["upload", str(checkpoint), "--to", "hf://acme/detector"]) == 3
    assert "already holds SHA256SUMS, config.json" in capsys.readouterr().err
    assert hub.commits_made == 1


def test_hf_one_branch_per_checkpoint_while_main_stays_empty(hub, checkpoint, tmp_path, capsys):
    one, _ = publish(checkpoint, "hf://acme/detector@ckpt-1", capsys)
    (checkpoint / "config.json").write_text('{"model": {"hidden_size": 64}}\n')
    two, _ = publish(checkpoint, "hf://acme/detector@ckpt-2", capsys)
    assert sorted(hub.files("acme/detector", "main")) == [".gitattributes"]
    assert main(["download", "hf://acme/detector@ckpt-1", "--dest", str(tmp_path / "one"),
                 "--sums-sha256", one]) == 0
    assert main(["download", "hf://acme/detector@ckpt-2", "--dest", str(tmp_path / "two"),
                 "--sums-sha256", two]) == 0
    assert "32" in (tmp_path / "one" / "config.json").read_text()
    assert "64" in (tmp_path / "two" / "config.json").read_text()


def test_hf_public_repo_is_refused(hub, checkpoint, capsys):
    hub.create_repo("acme/open", private=False)
    assert main(["upload", str(checkpoint), "--to", "hf://acme/open"]) == 3
    assert "acme/open is public" in capsys.readouterr().err
    assert hub.commits_made == 0


def test_hf_commit_landing_after_the_empty_check_fails_the_upload(hub, checkpoint, monkeypatch,
                                                                  capsys):
    """The commit's parent is the head check_empty saw: a racing commit makes ours fail (412)."""
    check = HubRemote.check_empty

    def check_then_race(self):
        check(self)
        hub.commit_file(self.repo_id, "notes.txt", b"someone else's\n")

    monkeypatch.setattr(HubRemote, "check_empty", check_then_race)
    assert main(["upload", str(checkpoint), "--to", "hf://acme/detector"]) == 3
    assert "412" in capsys.readouterr().err
    assert hub.commits_made == 0


def test_hf_missing_token_names_HF_TOKEN_and_sends_nothing(hub, checkpoint, tmp_path,
                                                           monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN")
    assert main(["upload", str(checkpoint), "--to", "hf://acme/detector"]) == 3
    assert main(["download", "hf://acme/detector", "--dest", str(tmp_path / "d")]) == 3
    err = capsys.readouterr().err
    assert err.count("HF_TOKEN is not set") == 2
    assert hub.requests == []


def test_hf_wrong_token_exits_3_with_the_fix_and_is_never_printed(hub, checkpoint, tmp_path,
                                                                  monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    publish(checkpoint, "hf://acme/detector", capsys)
    wrong = "hf_wrong_secret_77d2"
    monkeypatch.setenv("HF_TOKEN", wrong)
    assert main(["upload", str(checkpoint), "--to", "hf://acme/other"]) == 3
    assert main(["download", "hf://acme/detector", "--dest", str(tmp_path / "d")]) == 3
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 2 and all("401" in line and "check HF_TOKEN" in line for line in lines)
    for secret in (wrong, TOKEN):
        assert secret not in out + err + caplog.text
    assert "acme/other" not in hub.repos


def test_fake_hub_keeps_repos_private_without_a_token(hub, checkpoint, capsys):
    import httpx

    publish(checkpoint, "hf://acme/detector", capsys)
    for url in (f"{hub.url}/api/models/acme/detector",
                f"{hub.url}/acme/detector/resolve/main/config.json"):
        assert httpx.get(url).status_code == 401


@pytest.mark.parametrize("uri", ["hf://acme", "hf://datasets/acme/x", "hf://acme/x/sub",
                                 "hf://acme/x@refs/pr/1", f"hf://acme/x@{'a' * 40}"])
def test_hf_bad_uris_are_usage_errors(hub, checkpoint, uri, capsys):
    assert main(["upload", str(checkpoint), "--to", uri]) == 2
    assert "hf://OWNER/REPO" in capsys.readouterr().err or uri.endswith("a" * 40)
    assert hub.commits_made == 0


def test_cli_with_xet_left_on_fails_clearly_and_HF_HUB_DISABLE_XET_fixes_it(hub, checkpoint,
                                                                              tmp_path):
    """Through `hearsay publish` in a fresh process: xet is chosen at import, from the environment.

    Left on, the client asks the fake for a xet write token (501) and the upload fails with
    exit 3; with HF_HUB_DISABLE_XET=1 the same command goes by LFS. The token is only ever in the
    environment, never in argv or output."""
    pytest.importorskip("hf_xet")  # without it the client never tries xet
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"),
           "HF_XET_CACHE": str(tmp_path / "hf_home" / "xet"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    for name in ("HF_HUB_DISABLE_XET", "HF_HUB_DISABLE_TELEMETRY"):  # hearsay sets the 2nd
        env.pop(name, None)
    cmd = [sys.executable, "-m", "hearsay.cli", "publish", "upload", str(checkpoint), "--to"]
    on = subprocess.run(cmd + ["hf://acme/xet-on"], env=env, capture_output=True, text=True,
                        timeout=120)
    assert on.returncode == 3, on.stderr
    assert "xet" in on.stderr and hub.xet_attempts >= 1
    off = subprocess.run(cmd + ["hf://acme/xet-off"], env={**env, "HF_HUB_DISABLE_XET": "1"},
                         capture_output=True, text=True, timeout=120)
    assert off.returncode == 0, off.stderr
    assert hub.files("acme/xet-off")["model.safetensors"].lfs_sha256
    for run in (on, off):
        assert TOKEN not in run.stdout + run.stderr
    assert hub.agent_registry_calls == 0  # hearsay turned the client's telemetry off
