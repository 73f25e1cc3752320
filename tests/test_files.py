"""hearsay.util.files: a write that fails leaves the old file whole and no temp file behind."""

import pytest

from hearsay.util import files


@pytest.mark.parametrize("write, name, old, new", [
    (files.write_atomic, "scores.csv", "old\n", "new\n"),
    (files.write_json, "run_meta.json", '{"complete": true}\n', {"complete": False}),
])
def test_write_is_atomic_when_replace_fails(tmp_path, monkeypatch, write, name, old, new):
    target = tmp_path / name
    target.write_text(old)

    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(files.os, "replace", boom)
    with pytest.raises(OSError):
        write(target, new)
    assert target.read_text() == old and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_write_json_writes_sorted_indented_json(tmp_path):
    files.write_json(tmp_path / "m.json", {"b": 1, "a": tmp_path})
    assert (tmp_path / "m.json").read_text() == f'{{\n "a": "{tmp_path}",\n "b": 1\n}}\n'
