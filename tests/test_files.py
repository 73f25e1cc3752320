"""hearsay.files: a write that fails leaves the old file whole and no temp file behind."""

import pytest

from hearsay import files


def test_write_is_atomic_when_replace_fails(tmp_path, monkeypatch):
    target = tmp_path / "scores.csv"
    target.write_text("old\n")

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(files.os, "replace", boom)
    with pytest.raises(OSError):
        files.write_atomic(target, "new\n")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == [target.name]
