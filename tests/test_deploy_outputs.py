"""hearsay-score's output is its own run's, and each row is its file's: one run per -o (a real
second scorer process), rows bound to their files' identity across --resume and while scored,
numeric options refused before any work, partial files cut anywhere, line separators in JSON
Lines. Real onnxruntime on a tiny exported model, real ffmpeg."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import test_deploy
from test_deploy import read_csv
from test_deploy_api import stop_after_first_row

from hearsay import deploy
from hearsay.deploy import inputs, jsonl, lock, main
from hearsay.sound import decoder

SRC = Path(__file__).resolve().parents[1] / "src"
world = test_deploy.world  # the fixture: a tiny exported model and a folder of clips


def two_clips(clips: Path, root: Path) -> Path:
    root.mkdir()
    shutil.copy(clips / "a.wav", root / "a.wav")
    shutil.copy(clips / "src.wav", root / "b.wav")
    return root


def scorer(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen([sys.executable, "-m", "hearsay.deploy", *args, "--progress", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


# --------------------------------------------------------------------------- one run per output


def test_a_second_scorer_on_the_same_output_exits_6_naming_the_first_which_completes(
        world, tmp_path):
    model, _, clips, _ = world
    root, out = two_clips(clips, tmp_path / "root"), tmp_path / "s.csv"
    for k in range(8):  # enough work that the first run still holds the lock when stopped
        shutil.copy(clips / "src.wav", root / f"c{k}.wav")
    first = scorer(str(root), "-o", str(out), "--model", str(model))
    held = lock.lock_path(out)
    deadline = time.monotonic() + 120
    while not (held.exists() and held.read_text().endswith("\n")):  # the holder is written
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.01)
    os.kill(first.pid, signal.SIGSTOP)  # the first run holds the lock while the second starts
    try:
        second = scorer(str(root), "-o", str(out), "--model", str(model))
        _, err = second.communicate(timeout=120)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert second.returncode == 6, err
    assert (f"pid {first.pid} on host {socket.gethostname()}, started " in err
            and "is being written by another hearsay-score run" in err), err
    _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert [r["path"] for r in read_csv(out)] == ["a.wav", "b.wav", *[f"c{k}.wav" for k in
                                                                       range(8)]]  # whole
    assert not held.exists() and not out.with_name("s.csv.partial").exists()


def test_a_lock_whose_run_is_gone_is_taken_over_with_a_message(world, tmp_path, capsys):
    model, _, clips, _ = world
    root, out = two_clips(clips, tmp_path / "root"), tmp_path / "s.csv"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    lock.lock_path(out).write_text(json.dumps({"pid": int(dead), "host": "box-7",
                                               "start": "2026-12-01T03:00:00Z"}) + "\n")
    assert main([str(root), "-o", str(out), "--model", str(model)]) == 0
    err = capsys.readouterr().err
    assert (f"taking over {lock.lock_path(out)}: the run that held it (pid {dead} on host "
            "box-7, started 2026-12-01T03:00:00Z) is gone") in err
    assert len(read_csv(out)) == 2 and not lock.lock_path(out).exists()


def test_a_lock_held_here_refuses_the_windows_csv_too(world, tmp_path, capsys):
    model, _, clips, _ = world
    root = two_clips(clips, tmp_path / "root")
    with lock.hold([tmp_path / "w.csv"]):
        code = main([str(root), "-o", str(tmp_path / "s.csv"), "--windows-csv",
                     str(tmp_path / "w.csv"), "--model", str(model)])
    assert code == 6
    assert f"pid {os.getpid()} on host" in capsys.readouterr().err
    assert not (tmp_path / "s.csv.partial").exists()  # nothing written, nothing half-held
    assert not lock.lock_path(tmp_path / "s.csv").exists()


# --------------------------------------------------------------------------- a row is its file's


def interrupted(model: Path, root: Path, out: Path, monkeypatch, *extra: str) -> None:
    """A run stopped after its first row: out.partial holds a.wav's row."""
    stop_after_first_row(monkeypatch)
    assert main([str(root), "-o", str(out), "--model", str(model), *extra]) == 130
    monkeypatch.undo()


@pytest.mark.parametrize("how", ["replaced_same_size_and_mtime", "rewritten_in_place"])
def test_resume_scores_again_a_file_replaced_since_its_row(world, tmp_path, monkeypatch,
                                                           capsys, how):
    model, _, clips, _ = world
    root, out = two_clips(clips, tmp_path / "root"), tmp_path / "s.csv"
    interrupted(model, root, out, monkeypatch)
    old = read_csv(out.with_name("s.csv.partial"))[0]
    assert old["path"] == "a.wav"
    a, st = root / "a.wav", os.stat(root / "a.wav")
    data = bytearray(a.read_bytes())
    data[-2000:] = bytes(2000)  # the same size, other samples
    if how == "replaced_same_size_and_mtime":  # a new inode, its mtime set back (cp -p)
        (tmp_path / "new.wav").write_bytes(bytes(data))
        os.utime(tmp_path / "new.wav", ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp_path / "new.wav", a)
    else:  # the same inode and size, a later mtime
        a.write_bytes(bytes(data))
        os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    capsys.readouterr()
    assert main([str(root), "-o", str(out), "--model", str(model), "--resume"]) == 0
    assert "0 files already done" in capsys.readouterr().err
    ref = tmp_path / "ref.csv"
    assert main([str(root), "-o", str(ref), "--model", str(model)]) == 0
    assert out.read_text() == ref.read_text()
    assert read_csv(out)[0]["logit"] != old["logit"]  # the new file's own score


def test_resume_keeps_the_row_of_an_unchanged_file(world, tmp_path, monkeypatch, capsys):
    model, _, clips, _ = world
    root, out = two_clips(clips, tmp_path / "root"), tmp_path / "s.csv"
    interrupted(model, root, out, monkeypatch)
    ids = [json.loads(x) for x in inputs.ids_path(out).read_text().splitlines()]
    assert ids == [{"path": "a.wav", "file": inputs.file_id(root / "a.wav")}]
    scored = []
    real = deploy.windowed.windowed_rows
    monkeypatch.setattr(deploy.windowed, "windowed_rows",
                        lambda r, files, *a, **k: real(r, scored.extend(files) or scored, *a, **k))
    assert main([str(root), "-o", str(out), "--model", str(model), "--resume"]) == 0
    assert "1 files already done" in capsys.readouterr().err
    assert scored == [root / "b.wav"]  # a.wav kept, not scored again
    assert not inputs.ids_path(out).exists()


@pytest.mark.parametrize("mode", [[], ["--first-window"]])
def test_a_file_replaced_while_scored_is_an_error_row_never_a_score(world, tmp_path,
                                                                    monkeypatch, mode):
    model, _, clips, _ = world
    root, out = two_clips(clips, tmp_path / "root"), tmp_path / "s.csv"
    other = tmp_path / "other.wav"
    shutil.copy(clips / "a.wav", other)
    data = bytearray(other.read_bytes())
    data[-2000:] = bytes(2000)
    other.write_bytes(bytes(data))
    real = decoder.stream_audio

    def replaced_after_read(path, *a, **k):  # b.wav is replaced once its decode has begun
        yield from real(path, *a, **k)
        if Path(path).name == "b.wav" and other.exists():
            os.replace(other, root / "b.wav")

    monkeypatch.setattr(decoder, "stream_audio", replaced_after_read)
    assert main([str(root), "-o", str(out), "--model", str(model), *mode]) == 0
    a, b = read_csv(out)
    assert a["error"] == "" and a["logit"] != ""
    assert b["error"].startswith("changed while scored") and b["logit"] == b["score"] == ""
    assert b["windows"] == b["duration_s"] == ""


# --------------------------------------------------------------------------- numeric options


@pytest.mark.parametrize("option", [
    ["--threshold", "nan"], ["--threshold", "inf"], ["--threshold=-Infinity"],
    ["--hop-s", "nan"], ["--hop-s", "inf"], ["--hop-s", "0"], ["--max-decode-s", "inf"],
    ["--max-decode-s", "nan"], ["--max-decode-mb", "0"], ["--progress", "nan"],
    ["--progress", "-1"], ["--progress", "inf"], ["--batch-size", "0"],
    ["--batch-size", "100000"], ["--threads", "-1"]])
def test_a_numeric_option_not_finite_or_out_of_range_is_usage_before_any_work(world, tmp_path,
                                                                               capsys, option):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model), *option]) == 2
    err = capsys.readouterr().err
    assert option[0].split("=")[0] in err and "Traceback" not in err
    assert not out.with_name("s.csv.partial").exists()


def test_a_finite_threshold_number_still_decides(world, tmp_path, capsys):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model), "--threshold=-1e9"]) == 0
    assert {r["decision"] for r in read_csv(out) if r["logit"]} == {"spoof"}


# --------------------------------------------------------------------------- partial files cut


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("cut", ["in_a_character", "in_a_quote_or_string", "after_cr",
                                 "in_the_header"])
def test_a_partial_cut_anywhere_resumes_to_the_whole_run(world, tmp_path, monkeypatch, fmt, cut):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(clips / "a.wav", root / "é\u2028a.wav")  # a 2-byte character, a line separator
    shutil.copy(clips / "src.wav", root / "ö.wav")
    out, ref = tmp_path / "s.out", tmp_path / "ref.out"
    assert main([str(root), "-o", str(ref), "--model", str(model), "--format", fmt]) == 0
    interrupted(model, root, out, monkeypatch, "--format", fmt)
    partial = out.with_name("s.out.partial")
    whole = partial.read_bytes()
    second = ref.read_bytes()[len(whole):]  # the row the interrupted run did not write
    at = {"in_a_character": second.index("ö".encode()) + 1,
          "in_a_quote_or_string": second.index(b"\xc3\xb6.wav") + 4,
          "after_cr": second.index(b"\r\n") + 1 if fmt == "csv" else len(second) - 1,
          "in_the_header": 0}[cut]
    if cut == "in_the_header":
        whole = whole[:5]
    partial.write_bytes(whole + second[:at])
    assert main([str(root), "-o", str(out), "--model", str(model), "--format", fmt,
                 "--resume"]) == 0
    assert out.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize(("fmt", "junk"), [("csv", b'"path","dur\xff"\r\n'),
                                           ("csv", b'"a.wav","1.0"\r\n'),
                                           ("jsonl", b'{"path": "a.wav"\n'),
                                           ("jsonl", b"\xe9\n")])
def test_a_partial_that_is_not_this_scorers_is_refused_with_exit_2(world, tmp_path,
                                                                    monkeypatch, capsys,
                                                                    fmt, junk):
    model, _, clips, _ = world
    root, out = two_clips(clips, tmp_path / "root"), tmp_path / "s.out"
    interrupted(model, root, out, monkeypatch, "--format", fmt)
    partial = out.with_name("s.out.partial")
    partial.write_bytes(junk if fmt == "jsonl" else junk + partial.read_bytes())
    capsys.readouterr()
    assert main([str(root), "-o", str(out), "--model", str(model), "--format", fmt,
                 "--resume"]) == 2
    err = capsys.readouterr().err
    assert str(partial) in err and "run without --resume" in err and "Traceback" not in err


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_json_lines_escape_every_line_separator(sep):
    line = jsonl.json_line({"path": f"a{sep}b.wav", "error": ""})
    assert line.count("\n") == 1 and len(line.splitlines()) == 1
    assert json.loads(line) == {"path": f"a{sep}b.wav", "error": ""}


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_a_csv_path_with_a_line_separator_stays_one_line(sep):
    text = deploy.io.csv_path(None, Path(f"a{sep}b.wav"))
    assert len(text.splitlines()) == 1 and sep not in text
    import codecs

    assert codecs.escape_decode(text.encode())[0] == f"a{sep}b.wav".encode()


# --------------------------------------------------------------------------- memory


def test_first_window_decodes_the_long_file_once_for_energies_then_only_its_window(
        world, tmp_path, monkeypatch):
    """5 s of speech, 10 min of silence, 5 s of speech (the trimmed span is the whole file):
    pass 1 streams every block (energies only), pass 2 stops at the block that ends the first
    window; the whole wave is never held."""
    import numpy as np
    import soundfile as sf
    from signals import speech_like

    model, _, _, _ = world
    speech = speech_like(5.0, np.random.default_rng(0))
    wave = np.concatenate([speech, np.zeros(600 * 16_000, dtype=np.float32), speech])
    sf.write(tmp_path / "long.flac", wave, 16_000)
    real, passes = decoder.stream_audio, []

    def counted(*a, **k):
        passes.append(0)
        for block in real(*a, **k):
            passes[-1] += 1
            yield block

    monkeypatch.setattr(decoder, "stream_audio", counted)
    monkeypatch.setattr(decoder, "decode", None)  # the whole-file decode is never called
    out = tmp_path / "s.csv"
    assert main([str(tmp_path / "long.flac"), "-o", str(out), "--model", str(model),
                 "--first-window"]) == 0
    row = read_csv(out)[0]
    assert row["error"] == "" and row["windows"] == "1" and row["duration_s"] == "610.000"
    assert passes == [21, 1]  # 610 s in 30-s blocks, then the one block holding the window
