"""hearsay publish: upload a checkpoint folder, download it again, verify every sha256.

The GitHub backend talks to a fake GitHub REST API on loopback (the four endpoints it uses:
release by tag, create release, upload asset, download asset with its 302 to storage on a
second loopback host); the folder backend is real. No network.
"""

from __future__ import annotations

import hashlib

import pytest
from fakes.fake_github import TOKEN, FakeGitHub

from hearsay.publish import EXIT_UNPINNED, main


@pytest.fixture
def github(monkeypatch):
    fake = FakeGitHub()
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    yield fake
    fake.shutdown()


def published_digest(capsys) -> str:
    out = capsys.readouterr().out
    return out.split("SHA256SUMS sha256 ")[1].split()[0]


def test_github_release_round_trip_verifies_every_file(github, checkpoint, tmp_path, capsys):
    uri = "gh://acme/detectors@ckpt-1"
    assert main(["upload", str(checkpoint), "--to", uri]) == 0
    digest = published_digest(capsys)
    assert [a["name"] for a in github.releases["ckpt-1"]["assets"]] == [
        "config.json", "model.safetensors", "SHA256SUMS"]  # manifest last
    dest = tmp_path / "got"
    assert main(["download", uri, "--dest", str(dest), "--sums-sha256", digest]) == 0
    for f in checkpoint.iterdir():
        assert (dest / f.name).read_bytes() == f.read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == ["SHA256SUMS", "config.json",
                                                      "model.safetensors"]


def test_the_github_token_goes_to_the_api_host_only_never_along_the_storage_redirect(
        github, checkpoint, tmp_path, capsys):
    uri = "gh://acme/detectors@ckpt-6"
    assert main(["upload", str(checkpoint), "--to", uri]) == 0
    digest = published_digest(capsys)
    assert main(["download", uri, "--dest", str(tmp_path / "got"), "--sums-sha256", digest]) == 0
    # three assets, each a 302 from the API host (127.0.0.1) to the storage host (127.0.0.2)
    assert len([r for r in github.requests if "/releases/assets/" in r]) == 3
    assert github.storage_auth == [None, None, None]
    assert TOKEN not in capsys.readouterr().err
    # an asset whose API record names the storage host itself: no token there either
    for asset in github.releases["ckpt-6"]["assets"]:
        asset["url"] = f"{github.storage_url}/storage/{asset['id']}"
    assert main(["download", uri, "--dest", str(tmp_path / "got2"), "--sums-sha256", digest]) == 0
    assert github.storage_auth == [None] * 6


def test_tampered_asset_is_refused_and_nothing_lands(github, checkpoint, tmp_path, capsys):
    uri = "gh://acme/detectors@ckpt-2"
    assert main(["upload", str(checkpoint), "--to", uri]) == 0
    aid = github.asset_id("ckpt-2", "model.safetensors")
    blob = bytearray(github.blobs[aid])
    blob[1000] ^= 0xFF
    github.blobs[aid] = bytes(blob)
    dest = tmp_path / "got"
    assert main(["download", uri, "--dest", str(dest)]) == 1
    assert "model.safetensors: sha256" in capsys.readouterr().err
    assert not dest.exists() and not (tmp_path / "got.partial").exists()


def test_a_release_whose_files_and_sums_were_both_replaced_is_never_reported_verified(
        github, checkpoint, tmp_path, capsys):
    uri = "gh://acme/detectors@ckpt-7"
    assert main(["upload", str(checkpoint), "--to", uri]) == 0
    digest = published_digest(capsys)
    # someone with write access swaps a file and rewrites SHA256SUMS to match it
    evil = b'{"model": {"hidden_size": 32}, "backdoor": true}\n'
    sums = github.blobs[github.asset_id("ckpt-7", "SHA256SUMS")].decode()
    old = hashlib.sha256((checkpoint / "config.json").read_bytes()).hexdigest()
    github.blobs[github.asset_id("ckpt-7", "config.json")] = evil
    github.blobs[github.asset_id("ckpt-7", "SHA256SUMS")] = sums.replace(
        old, hashlib.sha256(evil).hexdigest()).encode()
    assert main(["download", uri, "--dest", str(tmp_path / "a")]) == EXIT_UNPINNED == 4
    out, err = capsys.readouterr()
    assert "all verified" not in out and "NOT verified against a pin" in out
    assert "WARNING: nothing was verified against a pin" in err and "--sums-sha256" in err
    assert main(["download", uri, "--dest", str(tmp_path / "b"), "--sums-sha256", digest]) == 1
    assert "not the pinned" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_download_help_documents_the_unpinned_exit_code(capsys):
    with pytest.raises(SystemExit):
        main(["download", "--help"])
    assert "4 downloaded without --sums-sha256" in " ".join(capsys.readouterr().out.split())


def test_manifest_not_the_pinned_one_is_refused(github, checkpoint, tmp_path, capsys):
    uri = "gh://acme/detectors@ckpt-3"
    assert main(["upload", str(checkpoint), "--to", uri]) == 0
    assert main(["download", uri, "--dest", str(tmp_path / "d"), "--sums-sha256", "0" * 64]) == 1
    assert "not the pinned" in capsys.readouterr().err


def test_release_is_immutable_and_auth_errors_exit_3(github, checkpoint, monkeypatch, capsys):
    uri = "gh://acme/detectors@ckpt-4"
    assert main(["upload", str(checkpoint), "--to", uri]) == 0
    assert main(["upload", str(checkpoint), "--to", uri]) == 3
    assert "already has assets" in capsys.readouterr().err
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    assert main(["upload", str(checkpoint), "--to", "gh://acme/detectors@ckpt-5"]) == 3
    err = capsys.readouterr().err
    assert "HTTP 401" in err and "set GITHUB_TOKEN" in err


def test_missing_release_exits_3(github, tmp_path):
    assert main(["download", "gh://acme/detectors@nope", "--dest", str(tmp_path / "d")]) == 3


def test_folder_release_round_trip_and_tamper(checkpoint, tmp_path, capsys):
    remote = tmp_path / "releases" / "r1"
    assert main(["upload", str(checkpoint), "--to", f"file://{remote}"]) == 0
    digest = published_digest(capsys)
    assert main(["download", str(remote), "--dest", str(tmp_path / "a"),
                 "--sums-sha256", digest]) == 0
    (remote / "config.json").write_text('{"model": {"hidden_size": 33}}\n')
    assert main(["download", str(remote), "--dest", str(tmp_path / "b")]) == 1
    (remote / "config.json").unlink()
    assert main(["download", str(remote), "--dest", str(tmp_path / "c")]) == 1
    assert "missing from the release" in capsys.readouterr().err
    assert main(["upload", str(checkpoint), "--to", str(remote)]) == 3  # not empty


def test_usage_errors_exit_2(checkpoint, tmp_path, capsys):
    assert main(["upload", str(checkpoint), "--to", "s3://bucket/x"]) == 2
    assert "unknown remote" in capsys.readouterr().err
    (checkpoint / "sub").mkdir()
    assert main(["upload", str(checkpoint), "--to", str(tmp_path / "r")]) == 2
    assert "flat folder" in capsys.readouterr().err


def test_a_remote_manifest_naming_a_path_outside_the_folder_is_refused(checkpoint, tmp_path,
                                                                       capsys):
    remote = tmp_path / "releases" / "r2"
    assert main(["upload", str(checkpoint), "--to", f"file://{remote}"]) == 0
    capsys.readouterr()
    sums = remote / "SHA256SUMS"
    sums.write_text(sums.read_text() + f"{'ab' * 32}  ../../outside.txt\n")
    assert main(["download", str(remote), "--dest", str(tmp_path / "d")]) == 1
    assert "malformed line" in capsys.readouterr().err
    assert not (tmp_path / "d").exists() and not (tmp_path / "outside.txt").exists()
