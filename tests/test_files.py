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


def test_write_json_is_atomic_when_replace_fails(tmp_path, monkeypatch):
    target = tmp_path / "run_meta.json"
    target.write_text('{"complete": true}\n')

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(files.os, "replace", boom)
    with pytest.raises(OSError):
        files.write_json(target, {"complete": False})
    assert target.read_text() == '{"complete": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_write_json_writes_sorted_indented_json(tmp_path):
    files.write_json(tmp_path / "m.json", {"b": 1, "a": tmp_path})
    assert (tmp_path / "m.json").read_text() == f'{{\n "a": "{tmp_path}",\n "b": 1\n}}\n'
