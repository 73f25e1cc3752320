"""hearsay.util.hashing: the one SHA256SUMS parser that folds, deploy and publish share."""

from __future__ import annotations

import subprocess

import pytest

from hearsay.contracts.folds import FoldError, pinned_sums
from hearsay.util.hashing import SumsError, format_sums, git_sha, parse_sums, read_sums, sha256_file

HEX = "ab" * 32


def test_reads_what_sha256sum_writes_and_format_sums_round_trips(tmp_path):
    (tmp_path / "a.onnx").write_bytes(b"model")
    (tmp_path / "b.json").write_text("{}")
    text = subprocess.run(["sha256sum", "a.onnx", "b.json"], cwd=tmp_path, check=True,
                          capture_output=True, text=True).stdout
    sums = parse_sums(text)
    assert sums == {"a.onnx": sha256_file(tmp_path / "a.onnx"),
                    "b.json": sha256_file(tmp_path / "b.json")}
    assert parse_sums(format_sums(sums)) == sums
    binary = subprocess.run(["sha256sum", "-b", "a.onnx"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout
    assert parse_sums(binary) == {"a.onnx": sums["a.onnx"]}
    # what format_sums writes, sha256sum --check accepts
    (tmp_path / "SUMS").write_text(format_sums(sums))
    subprocess.run(["sha256sum", "--check", "--strict", "SUMS"], cwd=tmp_path, check=True,
                   capture_output=True)


@pytest.mark.parametrize("line", [
    "demo.folds.json",                      # one token (folds' old parser died on this bare)
    f"{HEX} demo.folds.json",               # one space: neither text nor binary mode
    f"{HEX[:-1]}  short.json",              # 63 hex digits
    f"{HEX.upper()}  upper.json",           # sha256sum writes lowercase
    f"{HEX}  ../escape.onnx",               # a path out of the folder
    f"{HEX}  sub/model.onnx",               # not flat
    f"{HEX}  .hidden",
    f"{HEX}  ",
])
def test_a_malformed_or_unsafe_line_is_refused_naming_the_source_and_line(line):
    with pytest.raises(SumsError, match=r"model/SHA256SUMS:2: malformed"):
        parse_sums(f"{HEX}  ok.onnx\n{line}\n", source="model/SHA256SUMS")


def test_a_name_listed_twice_is_refused():
    with pytest.raises(SumsError, match="listed twice"):
        parse_sums(f"{HEX}  a.onnx\n{'cd' * 32}  a.onnx\n")


def test_folds_turns_a_bad_manifest_into_a_fold_error_that_names_the_fix(tmp_path):
    (tmp_path / "SHA256SUMS").write_text("demo.folds.json\n")
    with pytest.raises(FoldError, match="hearsay splits make"):
        pinned_sums(tmp_path / "SHA256SUMS")
    assert pinned_sums(tmp_path / "missing") == {}


def test_git_sha_prefers_the_image_s_env_then_the_checkout(monkeypatch):
    """One git_sha for the trainer and the report: $HEARSAY_GIT_SHA (the image has no .git)."""
    monkeypatch.setenv("HEARSAY_GIT_SHA", "abc123")
    assert git_sha() == "abc123"
    monkeypatch.delenv("HEARSAY_GIT_SHA")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    assert git_sha() == (head.stdout.strip() if head.returncode == 0 else "unknown")


def test_read_sums_of_a_missing_file_is_empty_only_when_asked(tmp_path):
    assert read_sums(tmp_path / "SHA256SUMS", missing_ok=True) == {}
    with pytest.raises(FileNotFoundError):
        read_sums(tmp_path / "SHA256SUMS")
