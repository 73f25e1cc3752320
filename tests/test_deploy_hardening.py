"""hearsay-score as an operator runs it on hostile folders: names that look like URLs, resumed
runs that must not mix, samples out of range, special output files, closed streams, bounds."""

from __future__ import annotations

import codecs
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import test_deploy
from test_deploy import read_csv, speech_file

from hearsay import deploy
from hearsay.contracts.model_dir import model_sums
from hearsay.deploy import io, main
from hearsay.sound import decoder
from hearsay.sound.decoder import ffmpeg_exe
from hearsay.util.hashing import format_sums, sha256_file

SR = 16_000
world = test_deploy.world  # the fixture: a tiny exported model and a folder of clips


def run_cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hearsay.deploy", *args, "--progress", "0"],
                          capture_output=True, **kw)


# --------------------------------------------------------------------------- names


def test_a_name_like_a_url_is_scored_as_that_file_never_as_another(world, tmp_path,
                                                                    monkeypatch):
    model, _, _, _ = world
    root = tmp_path / "root"
    root.mkdir()
    speech_file(root / "x.m4a", 3.0, "aac", seed=1)
    other = speech_file(tmp_path / "o.m4a", 3.0, "aac", seed=2)
    (root / "file:x.m4a").write_bytes(other)  # `file:x.m4a` to ffmpeg would be x.m4a
    (root / "same.m4a").write_bytes(other)
    monkeypatch.chdir(root)  # the image's default: CLIPS_DIR is "."
    assert main([".", "-o", str(tmp_path / "s.csv"), "--model", str(model)]) == 0
    rows = {r["path"]: r for r in read_csv(tmp_path / "s.csv")}
    assert rows["file:x.m4a"]["error"] == ""
    assert rows["file:x.m4a"]["logit"] == rows["same.m4a"]["logit"] != rows["x.m4a"]["logit"]


def test_the_same_bytes_get_the_same_decoder_and_score_whatever_the_name(world, tmp_path):
    model, _, _, _ = world
    root = tmp_path / "root"
    root.mkdir()
    data = speech_file(tmp_path / "w.mp3", 12.0, "libmp3lame")
    cut = data[: len(data) // 2]  # a cut download: header_s comes from soundfile's header
    (root / "plain.mp3").write_bytes(cut)
    Path(os.fsdecode(os.path.join(os.fsencode(root), b"caf\xe9.mp3"))).write_bytes(cut)
    assert main([str(root), "-o", str(tmp_path / "s.csv"), "--model", str(model)]) == 0
    a, b = read_csv(tmp_path / "s.csv")
    assert a["path"] == "caf\\xe9.mp3" and b["path"] == "plain.mp3"
    assert a["header_s"] != "" and a["error"] == ""
    assert [a[k] for k in ("logit", "duration_s", "header_s")] == \
        [b[k] for k in ("logit", "duration_s", "header_s")]


def test_control_characters_and_formulas_in_names_stay_one_quoted_neutral_field(world,
                                                                                tmp_path):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    for name in ("a\rb.wav", "=cmd.wav", "'q.wav", "plain.wav"):
        shutil.copy(clips / "a.wav", root / name)
    out = tmp_path / "s.csv"
    assert main([str(root), "-o", str(out), "--model", str(model)]) == 0
    lines = out.read_bytes().split(b"\r\n")
    assert len(lines) == 1 + 4 + 1 and lines[-1] == b""  # one line per row, CRLF, RFC 4180
    assert all(ln.startswith(b'"') and ln.endswith(b'"') and  # every field quoted
               ln.count(b'","') == len(deploy.COLUMNS) - 1 for ln in lines[:-1])
    paths = [r["path"] for r in read_csv(out)]
    assert paths == ["''q.wav", "'=cmd.wav", "a\\x0db.wav", "plain.wav"]
    back = [codecs.escape_decode(p.removeprefix("'").encode())[0] for p in paths]
    assert back == [b"'q.wav", b"=cmd.wav", b"a\rb.wav", b"plain.wav"]


# --------------------------------------------------------------------------- resume


def interrupted_run(model: Path, root: Path, out: Path, monkeypatch, *extra: str) -> None:
    """A run stopped after its first onnxruntime pass: out.partial holds the first row(s)."""
    real, calls = deploy.windowed.windowed_rows, []

    def stop_after_one(*a, **k):
        for row in real(*a, **k):
            calls.append(row)
            yield row
            if len(calls) == 1:
                raise KeyboardInterrupt

    monkeypatch.setattr(deploy.windowed, "windowed_rows", stop_after_one)
    assert main([str(root), "-o", str(out), "--model", str(model), *extra]) == 130
    monkeypatch.undo()
    assert (out.with_name(out.name + ".partial.json")).is_file()


@pytest.mark.parametrize("change", ["other_folder", "first_window", "hop", "variant_record",
                                    "no_record"])
def test_resume_refuses_a_partial_file_of_another_run(world, tmp_path, monkeypatch, capsys,
                                                      change):
    model, _, clips, _ = world
    root, other = tmp_path / "root", tmp_path / "other"
    for d in (root, other):
        d.mkdir()
        shutil.copy(clips / "a.wav", d / "a.wav")
        shutil.copy(clips / "src.wav", d / "b.wav")
    out = tmp_path / "s.csv"
    interrupted_run(model, root, out, monkeypatch)
    args = [str(root), "-o", str(out), "--model", str(model), "--resume"]
    record = out.with_name("s.csv.partial.json")
    if change == "other_folder":
        args[0] = str(other)  # same names, other files
    elif change == "first_window":
        args.append("--first-window")
    elif change == "hop":
        args += ["--hop-s", "2"]
    elif change == "variant_record":  # an int8 run's record: the variant is in the identity
        record.write_text(json.dumps({**json.loads(record.read_text()), "variant": "int8"}))
    elif change == "no_record":
        record.unlink()
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "run without --resume" in err and "s.csv.partial" in err
    assert read_csv(out.with_name("s.csv.partial"))  # the kept rows are untouched


def test_resume_with_the_same_run_goes_on_and_rows_name_the_variant(world, tmp_path,
                                                                    monkeypatch):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(clips / "a.wav", root / "a.wav")
    shutil.copy(clips / "src.wav", root / "b.wav")
    out, ref = tmp_path / "s.csv", tmp_path / "ref.csv"
    assert main([str(root), "-o", str(ref), "--model", str(model)]) == 0
    interrupted_run(model, root, out, monkeypatch)
    assert main([str(root), "-o", str(out), "--model", str(model), "--resume"]) == 0
    assert out.read_text() == ref.read_text()
    assert not out.with_name("s.csv.partial.json").exists()
    assert {r["variant"] for r in read_csv(out)} == {"fp32"}


# --------------------------------------------------------------------------- finite


@pytest.mark.parametrize("rate", [16_000, 44_100])
@pytest.mark.parametrize("mode", [[], ["--first-window"]])
def test_samples_out_of_range_fail_the_file_with_a_reason_never_nan(world, tmp_path, rate,
                                                                    mode):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    t = np.arange(2 * rate)
    sf.write(root / "huge.wav", np.where(t % 7 < 3, 3.4e38, -3.4e38).astype(np.float32), rate,
             subtype="FLOAT")
    shutil.copy(clips / "a.wav", root / "ok.wav")
    out = tmp_path / "s.csv"
    proc = run_cli(str(root), "-o", str(out), "--model", str(model), *mode, text=True)
    assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    huge, ok = read_csv(out)
    assert "samples too large" in huge["error"] and huge["score"] == huge["logit"] == ""
    assert ok["error"] == "" and "nan" not in out.read_text().lower()
    assert "1/2 scored, 1 failed" in proc.stderr


@pytest.mark.parametrize("mode", [[], ["--first-window"]])
def test_a_non_finite_logit_fails_the_row_in_both_modes(world, tmp_path, monkeypatch, mode):
    model, _, clips, _ = world
    real = deploy.engine.run_logits
    monkeypatch.setattr(deploy.engine, "run_logits",
                        lambda *a, **k: np.full_like(real(*a, **k), np.nan))
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model), *mode]) == 0
    for r in read_csv(out):
        assert r["score"] == r["logit"] == "" and r["error"]
    assert "nan" not in "".join(r["score"] + r["logit"] for r in read_csv(out))
    assert "non-finite logit" in read_csv(out)[0]["error"]


def test_decode_failures_are_sentences_never_python_exception_names(world, tmp_path,
                                                                     monkeypatch):
    model, _, clips, _ = world

    def boom(*a, **k):
        raise IndexError("index 0 is out of bounds")

    monkeypatch.setattr(deploy.windows, "stream_span", boom)
    rows = deploy.score_folder(clips, model)
    assert all(r["error"].startswith("could not be decoded (index 0") for r in rows)


# --------------------------------------------------------------------------- outputs


@pytest.mark.parametrize("kind", ["fifo", "symlink", "windows_fifo"])
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_as_it_was(world, tmp_path,
                                                                           capsys, kind):
    model, _, clips, _ = world
    target = tmp_path / "target.csv"
    target.write_text("keep me\n")
    special = tmp_path / "out.csv"
    if kind == "symlink":
        special.symlink_to(target)
    else:
        os.mkfifo(special)
    flag = "--windows-csv" if kind == "windows_fifo" else "-o"
    assert main([str(clips), flag, str(special), "--model", str(model)]) == 5
    assert "leave -o out and redirect stdout" in capsys.readouterr().err
    assert special.is_symlink() if kind == "symlink" else special.is_fifo()
    assert target.read_text() == "keep me\n"


def test_o_and_windows_csv_on_one_file_is_a_usage_error(world, tmp_path, capsys):
    model, _, clips, _ = world
    out = tmp_path / "x.csv"
    assert main([str(clips), "-o", str(out), "--windows-csv", str(out), "--model",
                 str(model)]) == 2
    assert "same file" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("stderr", ["open", "closed"])
def test_a_full_stdout_exits_5_without_a_traceback(world, stderr):
    model, _, clips, _ = world
    redirect = "2>&-" if stderr == "closed" else ""  # closed too: nothing may go to stdout
    proc = subprocess.run(["bash", "-c", f'"{sys.executable}" -m hearsay.deploy "$1" --model '
                           f'"$2" --progress 0 >/dev/full {redirect}', "_", str(clips),
                           str(model)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 5, proc.stderr
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr
    assert ("writing stdout failed" in proc.stderr) == (stderr == "open")


def test_a_closed_stderr_loses_only_the_messages(world, tmp_path):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    proc = subprocess.run(["bash", "-c", f'"{sys.executable}" -m hearsay.deploy "$1" -o "$2" '
                           '--model "$3" 2>&-', "_", str(clips), str(out), str(model)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout == ""
    assert len(read_csv(out)) == 10


def test_a_stop_signal_whose_interrupt_a_callback_swallowed_still_ends_the_run(
        world, tmp_path, monkeypatch):
    """soundfile reads an opened file through C callbacks that swallow exceptions: the
    KeyboardInterrupt a SIGHUP raises there is lost, the recorded signal is not."""
    model, _, clips, _ = world
    real = io.Progress.update

    def update(self, rows):
        real(self, rows)
        try:  # what the callback does with the handler's KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
        except KeyboardInterrupt:
            pass

    monkeypatch.setattr(io.Progress, "update", update)
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model), "--batch-size", "1"]) == 130
    assert not out.exists() and len(read_csv(tmp_path / "s.csv.partial")) >= 1


def test_a_stop_the_decoder_swallowed_ends_the_run_and_fails_no_file(world, tmp_path,
                                                                     monkeypatch):
    """The stop handler's KeyboardInterrupt, raised inside a C callback (soundfile reading), is
    swallowed there and surfaces as the decoder's own error: the run was stopped, the file did
    not fail, so no row says it failed (--resume would keep such a row as done)."""
    model, _, clips, _ = world
    real, calls, stop = deploy.windowed.file_windows, [], [True]
    monkeypatch.setattr(io, "_stops", [])  # what the handler records, this test's own

    def file_windows(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the first file's read fails (SIGTERM meanwhile, if `stop`)
            if stop[0]:
                io._stops.append(signal.SIGTERM)
            raise RuntimeError("Error opening 'c.flac': System error.")
        return real(*args, **kwargs)

    monkeypatch.setattr(deploy.windowed, "file_windows", file_windows)
    out = tmp_path / "scores.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model), "--batch-size", "1",
                 "--progress", "0"]) == 130
    rows = read_csv(tmp_path / "scores.csv.partial")
    assert rows == [], rows  # the first file's failed row would have been its chunk's only row
    assert not out.exists()
    assert not io.stop_requested()  # the run's stop is forgotten with its handlers
    # without a stop, the same decoder error is that file's failure
    stop[0] = False
    calls.clear()
    assert main([str(clips), "-o", str(out), "--model", str(model), "--batch-size", "1",
                 "--progress", "0"]) == 0
    first = read_csv(out)[0]
    assert first["error"] == "could not be decoded (Error opening 'c.flac': System error.)"


def test_sighup_ends_the_run_as_interrupted_with_the_finished_rows_kept(world, tmp_path):
    model, _, _, _ = world
    root = tmp_path / "root"
    root.mkdir()
    for k in range(3):
        speech_file(root / f"{k}.flac", 60.0, "flac", seed=k)
    out = tmp_path / "s.csv"
    proc = subprocess.Popen([sys.executable, "-m", "hearsay.deploy", str(root), "-o", str(out),
                             "--model", str(model), "--batch-size", "1", "--progress", "0"],
                            stderr=subprocess.PIPE, text=True)
    partial = tmp_path / "s.csv.partial"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (partial.exists() and
                                               len(partial.read_text().splitlines()) >= 2):
        time.sleep(0.1)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted after" in err, err
    assert not out.exists() and read_csv(partial)


# --------------------------------------------------------------------------- model, exits


def consistent_copy(model: Path, dst: Path, name: str, data: bytes) -> Path:
    """A copy of the model folder with `name` replaced and SHA256SUMS made to match it."""
    shutil.copytree(model, dst)
    (dst / name).write_bytes(data)
    sums = model_sums(dst)
    sums[name] = sha256_file(dst / name)
    (dst / "SHA256SUMS").write_text(format_sums(sums))
    return dst


def test_a_model_that_matches_its_sums_but_cannot_load_exits_3(world, tmp_path, capsys):
    model, _, clips, _ = world
    bad = consistent_copy(model, tmp_path / "m", "model.onnx", b"not an onnx graph")
    assert main([str(clips), "--model", str(bad)]) == 3
    err = capsys.readouterr().err
    assert "onnxruntime cannot load it" in err and "Traceback" not in err


@pytest.mark.parametrize("max_s", [0, -8])
def test_a_front_end_without_a_window_length_exits_3_naming_max_s(world, tmp_path, capsys,
                                                                  max_s):
    model, _, clips, _ = world
    front = json.loads((model / "front_end.json").read_text())
    bad = consistent_copy(model, tmp_path / "m", "front_end.json",
                          json.dumps({**front, "max_s": max_s}).encode())
    assert main([str(clips), "--model", str(bad)]) == 3
    err = capsys.readouterr().err
    assert "max_s" in err and "--hop-s" not in err


@pytest.mark.parametrize("value", ["", " ", "not-a-sha"])
def test_an_empty_or_malformed_pin_is_refused_never_switched_off(world, tmp_path, monkeypatch,
                                                                 capsys, value):
    model, _, clips, _ = world
    monkeypatch.setenv("HEARSAY_MODEL_SUMS_SHA256", value)
    assert main([str(clips), "--model", str(model)]) == 3
    assert "HEARSAY_MODEL_SUMS_SHA256" in capsys.readouterr().err


# --------------------------------------------------------------------------- decode bounds


def test_a_decode_over_the_time_bound_fails_that_file_with_its_reason(world, tmp_path):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model),
                 "--max-decode-s", "1e-9"]) == 0
    rows = [r for r in read_csv(out) if r["path"] == "b/e.m4a"]
    assert "--max-decode-s" in rows[0]["error"]


def test_ffmpeg_over_the_memory_bound_fails_that_file_with_its_reason(world, tmp_path):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model),
                 "--max-decode-mb", "64"]) == 0  # the static ffmpeg needs more to start
    rows = {r["path"]: r for r in read_csv(out)}
    assert "--max-decode-mb" in rows["b/e.m4a"]["error"]
    assert rows["a.wav"]["error"] == ""  # soundfile's files are streamed in blocks


# --------------------------------------------------------------------------- odd inputs


def test_special_files_and_video_only_files_get_their_own_reasons(world, tmp_path):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / "pipe.wav")  # opened without waiting for a writer
    subprocess.run([ffmpeg_exe(), "-v", "error", "-f", "lavfi", "-i",
                    "testsrc=duration=1:size=64x64:rate=5", "-c:v", "mpeg4",
                    str(root / "video.mp4")], check=True)
    shutil.copy(clips / "a.wav", root / "a.wav")
    out = tmp_path / "s.csv"
    assert main([str(root), "-o", str(out), "--model", str(model)]) == 0
    rows = {r["path"]: r["error"] for r in read_csv(out)}
    assert "not a regular file (a FIFO)" in rows["pipe.wav"]
    assert "no audio stream" in rows["video.mp4"] and rows["a.wav"] == ""


def two_track_m4a(path: Path, first: Path, second: Path) -> None:
    """An M4A with two AAC audio tracks: `first`'s audio, then `second`'s."""
    subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(first), "-i", str(second),
                    "-map", "0:a", "-map", "1:a", "-c:a", "aac", str(path)], check=True)


@pytest.mark.parametrize("mode", [[], ["--first-window"]])
def test_a_second_audio_track_is_noted_and_the_first_alone_is_scored(world, tmp_path, mode):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    two_track_m4a(root / "two.m4a", clips / "a.wav", clips / "b" / "e.m4a")
    subprocess.run([ffmpeg_exe(), "-v", "error", "-i", str(clips / "a.wav"), "-c:a", "aac",
                    str(root / "one.m4a")], check=True)  # the first track alone, same encoder
    out = tmp_path / "s.csv"
    done = subprocess.run([sys.executable, "-m", "hearsay.deploy", str(root), "-o", str(out),
                           "--model", str(model), *mode], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = {r["path"]: r for r in read_csv(out)}
    assert rows["two.m4a"]["audio_tracks"] == "2" and rows["one.m4a"]["audio_tracks"] == ""
    assert rows["two.m4a"]["error"] == "" and rows["two.m4a"]["logit"] == rows["one.m4a"]["logit"]
    assert "1 with more than one audio track (the first scored: audio_tracks)" in done.stderr


@pytest.mark.parametrize("header_s,flagged", [(1.0 + 0.051, True), (1.0 + 0.049, False),
                                               (1.0 - 0.049, False), (1.0 - 0.051, True)])
def test_header_s_is_reported_when_the_header_declares_more_or_less_than_decodes(header_s,
                                                                                 flagged):
    row = {"header_s": ""}
    io.note_decode(row, 16_000, decoder.DecodeInfo(header_s=header_s))  # 1.000 s decoded
    assert row["duration_s"] == "1.000"
    assert (row["header_s"] == f"{header_s:.3f}") if flagged else row["header_s"] == ""


def test_a_cut_wav_reports_the_length_its_header_declares(world, tmp_path):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    data = (clips / "src.wav").read_bytes()  # 1.6 s of PCM_16
    (root / "cut.wav").write_bytes(data[: len(data) // 2])
    out = tmp_path / "s.csv"
    assert main([str(root), "-o", str(out), "--model", str(model)]) == 0
    (row,) = read_csv(out)
    assert row["error"] == "" and float(row["duration_s"]) == pytest.approx(0.8, abs=0.01)
    assert row["header_s"] == "1.600"
