"""hearsay.deploy.Scorer (the Python API) and hearsay-score's inputs and formats: a file, a list
of files, stdin, JSON Lines; the ONNX metadata the export stamps. Real onnxruntime on a tiny
exported model, real ffmpeg."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import soundfile as sf
import test_deploy

from hearsay import deploy
from hearsay.contracts import model_dir
from hearsay.deploy import Scorer, main
from hearsay.deploy.rowtypes import typed
from hearsay.export import onnx_meta
from hearsay.sound import windows

world = test_deploy.world  # the fixture: a tiny exported model and a folder of clips
read_csv = test_deploy.read_csv
SR = 16_000
GOOD = ["a.wav", "b/c.flac", "b/deep/d.wav", "b/e.m4a", "b/e.mp3", "src.wav"]


def cli_rows(*args: str) -> list[dict]:
    """hearsay-score's stdout rows (a subprocess: stdin and cwd are the test's to set)."""
    proc = subprocess.run([sys.executable, "-m", "hearsay.deploy", *args, "--progress", "0"],
                          capture_output=True, text=True, check=True)
    return list(csv.DictReader(io.StringIO(proc.stdout)))


# --------------------------------------------------------------------------- the Python API


@pytest.mark.parametrize("mode", [[], ["--first-window"]])
def test_score_file_gives_the_row_hearsay_score_writes_for_that_file(world, tmp_path, mode):
    model, _, clips, expected = world
    scorer = Scorer(model, first_window=bool(mode))
    names = sorted(expected)
    out = tmp_path / "s.csv"
    assert main([*[str(clips / n) for n in names[:1]], "-o", str(out), "--model", str(model),
                 *mode]) == 0
    assert [typed(r) for r in read_csv(out)] == [scorer.score_file(clips / names[0])]
    folder = {r["path"]: r for r in deploy.score_folder(
        clips, model, deploy.ScoreConfig(first_window=bool(mode)))}
    for name, row in zip(names, scorer.score_files([clips / n for n in names]), strict=True):
        full = {c: folder[name].get(c, "") for c in deploy.COLUMNS}  # every column, as the CSV
        assert row == typed(full) | {"path": str(clips / name)}  # same numbers, path as given
        assert bool(row["error"]) == bool(expected[name])


@pytest.mark.parametrize("mode", [{}, {"first_window": True}])
def test_score_array_of_a_files_samples_gives_that_files_row(world, tmp_path, mode):
    """Raw samples at their own rate (44.1 kHz stereo here) are prepared as the file is."""
    model, _, clips, _ = world
    rng = np.random.default_rng(3)
    t = np.arange(int(9.5 * 44_100)) / 44_100  # longer than one 8 s window: two windows
    sound = 0.3 * np.sin(2 * np.pi * 180 * t) + 0.01 * rng.standard_normal(len(t))
    left = sound * (t > 0.4)  # 0.4 s of silence first: trimmed, as the file's is
    wave = np.stack([left, 0.5 * left], axis=1).astype(np.float32)
    sf.write(tmp_path / "st.wav", wave, 44_100, subtype="FLOAT")
    scorer = Scorer(model, **mode)
    want = scorer.score_file(tmp_path / "st.wav")
    got = scorer.score_array(*sf.read(tmp_path / "st.wav", dtype="float32"), label="st.wav")
    assert got == want | {"path": "st.wav"} and got["error"] is None
    assert got["peak_start_s"] == pytest.approx(0.4, abs=0.03)  # the trim offset
    if not mode:
        assert got["windows"] == 2
    mono, rate = sf.read(clips / "a.wav", dtype="float32")
    assert scorer.score_array(mono, rate) == scorer.score_file(clips / "a.wav") | {
        "path": "<array>"}


def test_score_array_fails_silence_as_the_file_would_and_applies_the_decision(world, tmp_path):
    model, _, clips, _ = world
    folder = test_deploy.with_thresholds(model, tmp_path / "m", {
        "default": "min_dcf", "thresholds": {"min_dcf": {"value": -1e9}},
        "calibration": {"a": 2.0, "b": 1.0}})
    scorer = Scorer(folder, llr=True)
    assert scorer.threshold == -1e9
    silent = scorer.score_array(np.zeros(SR, dtype=np.float32), SR)
    assert "silent" in silent["error"] and silent["score"] is silent["decision"] is None
    row = scorer.score_array(*sf.read(clips / "a.wav", dtype="float32"))
    assert row["decision"] == "spoof" and row["llr"] == pytest.approx(2 * row["logit"] + 1,
                                                                      abs=1e-5)


@pytest.mark.parametrize("wave,rate,says", [
    (np.zeros(SR, dtype=np.int16), SR, "wave / 32768"),
    (np.zeros((2, SR), dtype=np.float32), SR, "needs .T"),
    (np.zeros((2, 2, SR), dtype=np.float32), SR, "(frames, channels)"),
    (np.zeros(SR, dtype=np.float32), 0, "not a rate in Hz"),
    (np.zeros(SR, dtype=np.float32), 16_000.0, "not a rate in Hz"),
    (np.zeros(SR, dtype=np.float32), 10_000_000, "not a rate in Hz"),
])
def test_score_array_refuses_what_cannot_be_a_recording(world, wave, rate, says):
    scorer = Scorer(world[0])
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        scorer.score_array(wave, rate)


def test_prepared_logits_refuse_a_raw_wave_that_would_score_silently_wrong(world):
    """The trap: a raw wave fed where a prepared input belongs gives another logit, no error."""
    model, _, clips, _ = world
    engine = deploy.load_engine(model)
    raw = sf.read(clips / "a.wav", dtype="float32")[0]
    prepared = windows.wave_windows(raw, 8.0, 4.0)[0].wave
    unchecked = engine.logits([raw, prepared])
    assert abs(unchecked[0] - unchecked[1]) > 1e-3  # the silent difference being guarded
    with pytest.raises(ValueError, match="wave 0 is not a prepared model input.*score_array"):
        engine.prepared_logits([raw], SR)
    with pytest.raises(ValueError, match="over one 8 s window"):
        engine.prepared_logits([np.tile(prepared, 8)], SR)
    assert engine.prepared_logits([prepared], SR) == pytest.approx(unchecked[1:], abs=1e-5)
    row = Scorer(model).score_file(clips / "a.wav")
    assert row["logit"] == pytest.approx(float(unchecked[1]), abs=1e-5)


def test_the_api_example_in_the_interfaces_doc_runs(world, tmp_path, monkeypatch):
    model, _, clips, _ = world
    doc = (test_deploy.REPO / "docs" / "INTERFACES.md").read_text()
    example = doc.split("<!-- api example -->")[1].split("```python")[1].split("```")[0]
    shutil.copy(clips / "a.wav", tmp_path / "call.wav")
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(example.replace("demo_out/export", str(model)), scope)  # noqa: S102 - the doc's own
    assert scope["row"]["path"] == "call.wav" and scope["row"]["error"] is None
    assert scope["same"] == scope["row"] | {"path": "<array>"}


# --------------------------------------------------------------------------- inputs


def test_a_file_a_list_and_stdin_give_the_folders_rows_with_paths_as_given(world, tmp_path,
                                                                          monkeypatch):
    model, _, clips, expected = world
    folder = {r["path"]: r for r in cli_rows(str(clips), "--model", str(model))}
    monkeypatch.chdir(clips)
    listed = ["b/e.m4a", "a.wav", "", "b/e.m4a", "README.txt", "missing.wav", "b/c.flac"]
    (tmp_path / "list.txt").write_bytes("\r\n".join(listed).encode() + b"\r\n")  # CRLF too
    from_file = cli_rows("--files-from", str(tmp_path / "list.txt"), "--model", str(model))
    proc = subprocess.run([sys.executable, "-m", "hearsay.deploy", "--files-from", "-",
                           "--model", str(model), "--progress", "0"], capture_output=True,
                          text=True, input="\n".join(listed), check=True)
    from_stdin = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert from_file == from_stdin
    assert [r["path"] for r in from_file] == ["b/e.m4a", "a.wav", "README.txt", "missing.wav",
                                              "b/c.flac"]  # input order, once each
    assert "1 duplicate" in proc.stderr
    for r in from_file:
        if r["path"] in folder:
            assert r == folder[r["path"]]
    assert from_file[2]["error"] and from_file[3]["error"]  # listed: scored, and failed
    one = cli_rows("b/deep/d.wav", "--model", str(model))
    assert one == [folder["b/deep/d.wav"]]
    assert all(not expected[r["path"]] for r in one)


@pytest.mark.parametrize("argv,says", [
    (["-"], "pass --files-from -"),
    (["CLIPS", "--files-from", "-"], "not both"),
    ([], "nothing to score"),
    (["nowhere"], "is not a folder or a file"),
    (["--files-from", "nowhere.txt"], "cannot read it"),
])
def test_inputs_named_wrongly_exit_2_with_the_fix(world, tmp_path, capsys, argv, says):
    model, _, clips, _ = world
    argv = [str(clips) if a == "CLIPS" else str(tmp_path / a) if a.startswith("nowhere")
            else a for a in argv]
    assert main([*argv, "--model", str(model)]) == 2
    assert says in capsys.readouterr().err


def test_an_empty_list_exits_4(world, tmp_path, capsys):
    (tmp_path / "list.txt").write_text("\n\n")
    assert main(["--files-from", str(tmp_path / "list.txt"), "--model", str(world[0])]) == 4
    assert "no audio files in" in capsys.readouterr().err


# --------------------------------------------------------------------------- --format jsonl


def test_jsonl_rows_are_the_csv_rows_typed_one_object_a_line(world, tmp_path):
    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(clips / "a.wav", root / "=cmd\ttab.wav")  # a formula start and a control char
    shutil.copy(clips / "garbage.wav", root / "garbage.wav")
    assert main([str(root), "-o", str(tmp_path / "s.csv"), "--model", str(model)]) == 0
    assert main([str(root), "-o", str(tmp_path / "s.jsonl"), "--model", str(model),
                 "--format", "jsonl"]) == 0
    lines = (tmp_path / "s.jsonl").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) == 3  # LF-terminated, no header
    rows = [json.loads(line) for line in lines[:-1]]
    assert rows == [typed(r) for r in read_csv(tmp_path / "s.csv")]  # numbers, null, text
    assert list(rows[0]) == deploy.COLUMNS
    assert rows[0]["path"] == "'=cmd\\x09tab.wav" and rows[1]["error"]


def test_jsonl_resume_goes_on_and_a_format_change_is_refused(world, tmp_path, monkeypatch,
                                                             capsys):
    from test_deploy_hardening import interrupted_run

    model, _, clips, _ = world
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(clips / "a.wav", root / "a.wav")
    shutil.copy(clips / "src.wav", root / "b.wav")
    out, ref = tmp_path / "s.jsonl", tmp_path / "ref.jsonl"
    assert main([str(root), "-o", str(ref), "--model", str(model), "--format", "jsonl"]) == 0
    interrupted_run(model, root, out, monkeypatch, "--format", "jsonl")
    partial = out.with_name("s.jsonl.partial")
    assert len(partial.read_text().splitlines()) == 1
    with open(partial, "a") as fh:
        fh.write('{"path": "b.wav", "dur')  # the line an interrupt cut: dropped, never parsed
    assert main([str(root), "-o", str(out), "--model", str(model), "--resume"]) == 2
    assert "format 'jsonl' -> 'csv'" in capsys.readouterr().err
    assert main([str(root), "-o", str(out), "--model", str(model), "--format", "jsonl",
                 "--resume"]) == 0
    assert out.read_text() == ref.read_text()
    assert "--resume: 1 files already done" in capsys.readouterr().err


def stop_after_first_row(monkeypatch) -> None:
    """The next run stops (as Ctrl-C does) after its first row."""
    real = deploy.windowed.windowed_rows

    def stop_after_one(*a, **k):
        for row in real(*a, **k):
            yield row
            raise KeyboardInterrupt

    monkeypatch.setattr(deploy.windowed, "windowed_rows", stop_after_one)


def test_a_list_run_resumes_only_with_the_same_list(world, tmp_path, monkeypatch, capsys):
    model, _, clips, _ = world
    monkeypatch.chdir(clips)
    (tmp_path / "list.txt").write_text("a.wav\nsrc.wav\n")
    (tmp_path / "other.txt").write_text("a.wav\nb/c.flac\n")
    out = tmp_path / "s.csv"
    args = ["-o", str(out), "--model", str(model)]
    stop_after_first_row(monkeypatch)
    assert main(["--files-from", str(tmp_path / "list.txt"), *args]) == 130
    monkeypatch.undo()
    monkeypatch.chdir(clips)
    assert main(["--files-from", str(tmp_path / "other.txt"), *args, "--resume"]) == 2
    assert "files_sha256" in capsys.readouterr().err
    assert main(["--files-from", str(tmp_path / "list.txt"), *args, "--resume"]) == 0
    assert "--resume: 1 files already done" in capsys.readouterr().err
    assert [r["path"] for r in read_csv(out)] == ["a.wav", "src.wav"]


# --------------------------------------------------------------------------- ONNX metadata


def test_the_exported_graph_carries_the_folders_facts_and_scores_the_same(world, tmp_path):
    model, _, _, _ = world
    meta = ort.InferenceSession(str(model / model_dir.ONNX)).get_modelmeta()
    props = meta.custom_metadata_map
    assert props["hearsay.format"] == "hearsay-detector-onnx"
    assert props["hearsay.format_version"] == "1"
    assert json.loads(props["hearsay.front_end"]) == model_dir.read_front_end(model)
    assert "hearsay.checkpoint_sha256" not in props  # built in code: no checkpoint to name
    assert onnx_meta.read(model / model_dir.ONNX) == props
    bare = onnx.load(str(model / model_dir.ONNX))
    del bare.metadata_props[:]
    onnx.save(bare, str(tmp_path / "bare.onnx"))
    x = np.random.default_rng(0).standard_normal((2, SR)).astype(np.float32)
    feeds = {"input_values": x, "attention_mask": np.ones((2, SR), dtype=np.int64)}
    a = ort.InferenceSession(str(model / model_dir.ONNX)).run(None, feeds)[0]
    b = ort.InferenceSession(str(tmp_path / "bare.onnx")).run(None, feeds)[0]
    np.testing.assert_array_equal(a, b)  # metadata only: the graph parity A judged


def test_metadata_names_the_thresholds_and_never_a_missing_checkpoint():
    front = {"max_s": 8.0}
    with_all = onnx_meta.props("f", 1, front, "ab" * 32, {"thresholds": {"eer": {},
                                                                        "min_dcf": {}}})
    assert with_all["hearsay.thresholds"] == "eer,min_dcf"
    assert with_all["hearsay.checkpoint_sha256"] == "ab" * 32
    assert set(onnx_meta.props("f", 1, front, None, None)) == {
        "hearsay.format", "hearsay.format_version", "hearsay.front_end"}


def test_a_hop_of_exactly_the_window_length_is_accepted_a_longer_or_zero_one_refused(world):
    max_s = float(json.loads((world[0] / "front_end.json").read_text())["max_s"])
    assert Scorer(world[0], hop_s=max_s).cfg.hop_s == max_s  # windows end to end: allowed
    for bad in (max_s + 0.001, 0.0, -1.0):
        with pytest.raises(ValueError, match=rf"hop_s {bad:g} must be in \(0, {max_s:g}\]"):
            Scorer(world[0], hop_s=bad)
    # the first window alone has no hop to judge
    assert Scorer(world[0], hop_s=max_s + 1, first_window=True).cfg.first_window
