"""hearsay-score's inputs in-process: what a list names (its lines, duplicates, the run record's
sha of its absolute paths), a single file, a folder's walk (extensions, dot-names, a folder
reached twice, one that cannot be listed, the rows' order), the usage errors, the run record
(its fields, where it lives), and --resume's guards on the partial file's rows. The scorer's
own tests (tests/test_deploy*.py) show the same end to end."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from hearsay.deploy import inputs
from hearsay.deploy.io import COLUMNS, ResumeError

NOT_UTF8 = b"caf\xe9.wav"  # Latin-1 bytes: no UTF-8 decoding of them exists


def _empty_files(root: Path, names) -> None:
    """An empty file at each relative name under root, its folders made."""
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")


def _sha_of(paths: list[str]) -> str:
    """A list's files_sha256 by the rule: the absolute names, NUL-joined."""
    return hashlib.sha256(b"\0".join(os.fsencode(os.path.abspath(p)) for p in paths)).hexdigest()


def test_a_list_file_gives_one_path_a_line_crlf_or_lf_empty_lines_skipped_bytes_kept(tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_bytes(b"a.wav\r\n\r\nmy call\t2.flac \n\n" + NOT_UTF8 + b"\nlast.mp3")
    paths = inputs.read_list(str(listing))
    assert paths == [Path("a.wav"), Path("my call\t2.flac "), Path(os.fsdecode(NOT_UTF8)),
                     Path("last.mp3")]  # spaces and tabs belong to the name, only the line ends
    assert os.fsencode(paths[2]) == NOT_UTF8  # the name's bytes, not a replacement character


def test_a_list_on_stdin_is_read_as_bytes(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x.wav\r\n" + NOT_UTF8 + b"\n")))
    assert inputs.read_list("-") == [Path("x.wav"), Path(os.fsdecode(NOT_UTF8))]


def test_an_unreadable_list_is_an_input_error_naming_it(tmp_path):
    with pytest.raises(inputs.InputError) as err:
        inputs.read_list(str(tmp_path / "nowhere.txt"))
    assert str(err.value) == (f"--files-from {tmp_path / 'nowhere.txt'}: cannot read it "
                              "(No such file or directory)")


def test_a_list_scores_each_path_once_in_its_order_and_counts_the_repeats(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "list.txt").write_text("b.wav\na.wav\nb.wav\n./a.wav\nc.txt\nb.wav\n")
    got = inputs.resolve(None, "list.txt")
    assert got.root is None and got.where == "in list.txt"
    assert got.files == [Path("b.wav"), Path("a.wav"), Path("c.txt")]  # ./a.wav is a.wav
    assert got.skipped == Counter({"duplicate": 3})
    assert got.source == {"clips": None, "clips_id": None, "files": 3,
                          "files_sha256": _sha_of(["b.wav", "a.wav", "c.txt"])}


def test_a_lists_record_names_files_not_spellings(tmp_path, monkeypatch):
    """The same files spelled relative or absolute give one record; the same lines read from
    another folder name other files, so another record (--resume refuses to mix them)."""
    (tmp_path / "d").mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel.txt").write_text("a.wav\nd/b.wav\n")
    (tmp_path / "abs.txt").write_text(f"{tmp_path / 'a.wav'}\n{tmp_path / 'd' / 'b.wav'}\n")
    here = inputs.resolve(None, "rel.txt").source
    assert here == inputs.resolve(None, "abs.txt").source
    monkeypatch.chdir(tmp_path / "d")
    assert inputs.resolve(None, str(tmp_path / "rel.txt")).source["files_sha256"] != \
        here["files_sha256"]


def test_one_file_is_its_own_list_whatever_its_name(tmp_path):
    clip = tmp_path / "call.data"  # no audio extension: named, so scored
    clip.write_bytes(b"")
    got = inputs.resolve(clip, None)
    assert (got.root, got.files, got.skipped) == (None, [clip], Counter())
    assert got.where == f"in {clip}"
    assert got.source == {"clips": None, "clips_id": None, "files": 1,
                          "files_sha256": _sha_of([str(clip)])}


def test_a_folder_is_walked_case_blind_on_extensions_and_counts_what_it_skips(tmp_path):
    _empty_files(tmp_path, ("B.WAV", "a.Flac", "notes.txt", ".hidden.wav", ".git/x.wav", "z/y.mp3"))
    got = inputs.resolve(tmp_path, None)
    assert got.root == tmp_path and got.where == f"under {tmp_path}"
    assert [p.relative_to(tmp_path).as_posix() for p in got.files] == ["B.WAV", "a.Flac",
                                                                        "z/y.mp3"]
    assert got.skipped == Counter({"not audio": 1, "hidden": 2})
    st = os.stat(tmp_path)
    assert got.source == {"clips": os.path.realpath(tmp_path),
                          "clips_id": f"{st.st_dev}:{st.st_ino}"}


def test_a_folder_reached_twice_is_walked_once_under_its_first_name_in_sorted_order(tmp_path):
    _empty_files(tmp_path, ("z_real/x.wav", ".dot/deep/y.wav"))  # .dot: hidden all the way down
    (tmp_path / "a_link").symlink_to(tmp_path / "z_real", target_is_directory=True)
    (tmp_path / "m_link").symlink_to(tmp_path / "z_real", target_is_directory=True)
    files, skipped = inputs.find_audio(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["a_link/x.wav"]
    assert skipped == Counter({"symlink loop": 2, "hidden": 1})  # m_link, then z_real itself


def test_rows_come_in_the_text_order_of_their_relative_paths(tmp_path):
    """`a-b/x.wav` before `a/y.wav` ('-' sorts before '/', as `sort` in the C locale has it),
    though the walk enters `a` first: one order for every walk, whatever the folder tree."""
    _empty_files(tmp_path, ("a/y.wav", "a-b/x.wav", "a/b/z.wav", "A.wav"))
    files, _ = inputs.find_audio(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["A.wav", "a-b/x.wav",
                                                                    "a/b/z.wav", "a/y.wav"]


def test_folders_that_cannot_be_listed_are_counted_and_the_walk_goes_on(tmp_path, monkeypatch):
    _empty_files(tmp_path, ("locked/x.wav", "open/y.wav", "shut/z.wav"))
    scandir = os.scandir

    def refuse_two(path):
        if Path(path).name in ("locked", "shut"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(inputs.os, "scandir", refuse_two)
    files, skipped = inputs.find_audio(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["open/y.wav"]
    assert skipped == Counter({"unreadable": 2})


def test_an_entry_whose_kind_cannot_be_read_is_taken_as_a_file(tmp_path, monkeypatch):
    """is_dir() raising (a stat refused mid-walk): the entry is a file, judged by its name, never
    walked as a folder (it would be counted unreadable and its name lost)."""
    _empty_files(tmp_path, ("odd.wav", "fine.wav"))
    scandir = os.scandir

    class Unknown:
        def __init__(self, entry):
            self.name, self.path = entry.name, entry.path

        def is_dir(self):
            raise PermissionError(13, "Permission denied", self.path)

    def odd_unknown(path):
        return [Unknown(e) if e.name == "odd.wav" else e for e in scandir(path)]

    monkeypatch.setattr(inputs.os, "scandir", odd_unknown)
    files, skipped = inputs.find_audio(tmp_path)
    assert [p.name for p in files] == ["fine.wav", "odd.wav"] and skipped == Counter()


# --------------------------------------------------------------------------- usage

MISSING_FIX = ("pass a folder of clips, a file, or --files-from LIST; in a container: "
               'docker run --rm -v "$PWD:/data" hearsay-score clips/')


@pytest.mark.parametrize("clips, files_from, why", [
    ("list.txt", "list.txt", "give CLIPS (a folder or a file) or --files-from LIST, not both"),
    (None, None, "nothing to score: give a folder of clips, a file, or --files-from LIST "
                 "(- for stdin)"),
    ("-", None, "'-' is not a folder or a file: to read a list of paths from stdin, pass "
                "--files-from -"),
    ("nowhere", None, "{tmp}/nowhere is not a folder or a file (" + MISSING_FIX + ")"),
])
def test_each_usage_error_is_named_before_any_work(tmp_path, clips, files_from, why):
    (tmp_path / "list.txt").write_text("a.wav\n")
    if clips is not None:
        clips = Path("-") if clips == "-" else tmp_path / clips
    files_from = None if files_from is None else str(tmp_path / files_from)
    assert inputs.usage_error(clips, files_from) == why.format(tmp=tmp_path)
    with pytest.raises(inputs.InputError) as err:
        inputs.resolve(clips, files_from)
    assert str(err.value) == why.format(tmp=tmp_path)


def test_a_dangling_link_is_a_file_to_score_not_a_usage_error(tmp_path):
    """It is named, so it gets a row (its failure said there), never a usage error."""
    (tmp_path / "gone.wav").symlink_to(tmp_path / "nowhere.wav")
    assert inputs.usage_error(tmp_path / "gone.wav", None) == ""
    assert inputs.resolve(tmp_path / "gone.wav", None).files == [tmp_path / "gone.wav"]


def test_a_list_on_stdin_is_said_to_be_on_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x.wav\n")))
    got = inputs.resolve(None, "-")
    assert (got.root, got.files, got.where) == (None, [Path("x.wav")], "on stdin")


# --------------------------------------------------------------------------- the run record


def test_the_run_record_names_inputs_options_engine_and_model(tmp_path):
    from importlib import metadata

    from hearsay.deploy import ScoreConfig

    (tmp_path / "clips").mkdir()
    args = SimpleNamespace(clips=tmp_path / "clips", format="jsonl",
                           windows_csv=tmp_path / "w.csv")
    cfg = ScoreConfig(hop_s=2.5, max_decode_s=60.0, max_decode_mb=512, variant="int8")
    rec = inputs.run_record(args, cfg, "ab" * 32)
    st = os.stat(tmp_path / "clips")
    real = Path(os.path.realpath(tmp_path))  # the record names real paths (tmp may be a link)
    assert rec == {"clips": str(real / "clips"), "clips_id": f"{st.st_dev}:{st.st_ino}",
                   "format": "jsonl", "first_window": False, "hop_s": 2.5,
                   "windows_csv": str(real / "w.csv"), "max_decode_s": 60.0,
                   "max_decode_mb": 512, "variant": "int8", "model_sums_sha256": "ab" * 32,
                   "engine": f"onnxruntime {metadata.version('onnxruntime')}",
                   "hearsay": metadata.version("hearsay"), "columns": COLUMNS}
    # the campaign's first window has no hop; a list's source replaces the folder's; no
    # --format or --windows-csv on args: csv and none
    first = inputs.run_record(SimpleNamespace(clips=None), ScoreConfig(first_window=True),
                              "cd", source={"clips": None, "files": 2})
    assert (first["hop_s"], first["first_window"], first["format"], first["windows_csv"]) == \
        (None, True, "csv", None)
    assert (first["clips"], first["files"]) == (None, 2)


def test_the_record_lives_beside_the_partial_file_and_goes_with_it(tmp_path):
    out = tmp_path / "scores.csv"
    assert inputs.record_path(out) == tmp_path / "scores.csv.partial.json"
    inputs.write_record(out, {"a": 1})
    assert json.loads((tmp_path / "scores.csv.partial.json").read_text()) == {"a": 1}
    inputs.drop_record(out)
    assert not (tmp_path / "scores.csv.partial.json").exists()
    inputs.drop_record(out)  # twice: nothing to remove is no error
    inputs.write_record(None, {"a": 1})  # stdout: no record at all
    inputs.drop_record(None)
    assert [p.name for p in tmp_path.iterdir()] == []


def test_an_uninstalled_package_has_version_unknown():
    assert inputs._version("no-such-distribution-hearsay") == "unknown"


# --------------------------------------------------------------------------- --resume's guards


def _partial_run(tmp_path: Path, record: dict, rows: list[dict]) -> SimpleNamespace:
    """-o OUT with OUT.partial holding `rows` and OUT.partial.json holding `record`."""
    out = tmp_path / "scores.csv"
    with open(tmp_path / "scores.csv.partial", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, COLUMNS)
        w.writeheader()
        w.writerows({c: r.get(c, "") for c in COLUMNS} for r in rows)
    inputs.write_record(out, record)
    return SimpleNamespace(output=out, windows_csv=None)


RECORD = {"clips": "/data/clips", "format": "csv", "variant": "fp32", "model_sums_sha256": "aa"}
FIX = ("run again with the first run's folder and options, or remove {p} and {r} and run "
       "without --resume")


def test_resume_keeps_the_rows_of_this_run(tmp_path, capsys):
    rows = [{"path": "a.wav", "model_sums_sha256": "aa", "variant": "fp32", "score": "0.5"}]
    args = _partial_run(tmp_path, RECORD, rows)
    inputs.IdLog(args.output, {"a.wav": [1, 2, 3, 4]}).close()
    kept, windows, ids = inputs.resume_rows(args, dict(RECORD), [], {"a.wav": [1, 2, 3, 4]})
    assert [(r["path"], r["score"]) for r in kept] == [("a.wav", "0.5")] and windows == []
    assert ids == {"a.wav": [1, 2, 3, 4]}
    p = tmp_path / "scores.csv.partial"
    assert capsys.readouterr().err == f"hearsay-score: --resume: 1 files already done in {p}\n"


@pytest.mark.parametrize("now", [{"a.wav": [1, 2, 3, 5]}, {"a.wav": None}, {}],
                         ids=["changed", "gone", "not_an_input"])
def test_resume_scores_again_a_row_whose_file_is_not_the_one_scored(tmp_path, capsys, now):
    rows = [{"path": "a.wav", "model_sums_sha256": "aa", "variant": "fp32", "score": "0.5"}]
    args = _partial_run(tmp_path, RECORD, rows)
    inputs.IdLog(args.output, {"a.wav": [1, 2, 3, 4]}).close()
    assert inputs.resume_rows(args, dict(RECORD), [], now) == ([], [], {})
    assert "0 files already done" in capsys.readouterr().err


@pytest.mark.parametrize("row", [{"model_sums_sha256": "bb", "variant": "fp32"},
                                 {"model_sums_sha256": "aa", "variant": "int8"}])
def test_resume_refuses_a_row_of_another_model_even_under_this_runs_record(tmp_path, row):
    """The record matches, but a row names another model folder or variant (a partial file
    pieced together): every kept row must be this run's model, never mixed into one file."""
    rows = [{"path": "a.wav", "model_sums_sha256": "aa", "variant": "fp32"},
            {"path": "b.wav", **row}]
    args = _partial_run(tmp_path, RECORD, rows)
    with pytest.raises(ResumeError) as err:
        inputs.resume_rows(args, dict(RECORD), [], {})
    p, r = tmp_path / "scores.csv.partial", tmp_path / "scores.csv.partial.json"
    other = (row["model_sums_sha256"], row["variant"])
    assert str(err.value) == (f"{p} holds rows of model {other}, not this run's: "
                              + FIX.format(p=p, r=r))


def test_resume_names_every_option_that_differs(tmp_path):
    args = _partial_run(tmp_path, RECORD, [])
    now = {**RECORD, "format": "jsonl", "variant": "int8"}
    with pytest.raises(ResumeError) as err:
        inputs.resume_rows(args, now, [], {})
    p, r = tmp_path / "scores.csv.partial", tmp_path / "scores.csv.partial.json"
    assert str(err.value) == (f"{p} was written by another run (format 'csv' -> 'jsonl'; "
                              f"variant 'fp32' -> 'int8'): " + FIX.format(p=p, r=r))


def test_resume_with_an_unreadable_record_says_which_file_and_the_fix(tmp_path):
    args = _partial_run(tmp_path, RECORD, [])
    r = tmp_path / "scores.csv.partial.json"
    r.write_text("{cut")
    with pytest.raises(ResumeError) as err:
        inputs.resume_rows(args, dict(RECORD), [], {})
    p = tmp_path / "scores.csv.partial"
    assert str(err.value).startswith(f"{r} cannot be read (")
    assert str(err.value).endswith("): " + FIX.format(p=p, r=r))


def test_resume_without_a_partial_file_scores_everything_and_says_so(tmp_path, capsys):
    args = SimpleNamespace(output=tmp_path / "scores.csv", windows_csv=None)
    assert inputs.resume_rows(args, dict(RECORD), [], {}) == ([], [], {})
    p = tmp_path / "scores.csv.partial"
    assert capsys.readouterr().err == f"hearsay-score: --resume: no {p}, scoring every file\n"
