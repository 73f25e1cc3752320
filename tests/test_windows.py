"""Windowed scoring of long recordings: hearsay.sound.windows and hearsay-score's windows (real
ORT)."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from hearsay import deploy
from hearsay.sound import audio, decoder, windows
from hearsay.util.hashing import format_sums, sha256_file

SR = 16_000
FRONT = {"sample_rate": SR, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0, "min_s": 0.5}


def tone(seconds: float, f0: float, rate: int = SR, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return (amp * np.sin(2 * np.pi * f0 * t)).astype(np.float32)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def diff_energy_model(folder: Path) -> Path:
    """A model folder whose ONNX 'detector' has a known logit: the mean squared first difference
    of the valid (mask = 1) samples of the normalised input, i.e. 2 (1 - lag-1 autocorrelation).
    A 200 Hz tone gives ~0.006, a 5 kHz tone ~2.8: the window holding most of a high tone has the
    highest logit. Real onnxruntime runs it through the real scorer."""
    import onnx
    from onnx import TensorProto, helper

    def const(name, values):
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(
            name + "_v", TensorProto.INT64, [len(values)], values))

    big = 2**62
    nodes = [const("s1", [1]), const("e1", [big]), const("s0", [0]), const("e0", [-1]),
             const("ax", [1]),
             helper.make_node("Slice", ["input_values", "s1", "e1", "ax"], ["xa"]),
             helper.make_node("Slice", ["input_values", "s0", "e0", "ax"], ["xb"]),
             helper.make_node("Sub", ["xa", "xb"], ["d"]),
             helper.make_node("Mul", ["d", "d"], ["d2"]),
             helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Slice", ["mf", "s1", "e1", "ax"], ["ma"]),
             helper.make_node("Slice", ["mf", "s0", "e0", "ax"], ["mb"]),
             helper.make_node("Mul", ["ma", "mb"], ["m"]),  # both samples of the pair valid
             helper.make_node("Mul", ["d2", "m"], ["dm"]),
             helper.make_node("ReduceSum", ["dm", "ax"], ["num"], keepdims=0),
             helper.make_node("ReduceSum", ["m", "ax"], ["den"], keepdims=0),
             helper.make_node("Div", ["num", "den"], ["logits"])]
    graph = helper.make_graph(
        nodes, "diff_energy",
        [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, ["B", "T"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["B", "T"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.metadata_props.add(key="hearsay.front_end", value=json.dumps(FRONT))  # as exported
    folder.mkdir(parents=True)
    onnx.save(model, folder / "model.onnx")
    (folder / "front_end.json").write_text(json.dumps(FRONT))
    sums = {n: sha256_file(folder / n) for n in ("model.onnx", "front_end.json")}
    (folder / "SHA256SUMS").write_text(format_sums(sums))
    return folder


def diff_energy(w: np.ndarray) -> float:
    """What diff_energy_model computes, in numpy (float64)."""
    return float(np.mean(np.diff(w.astype(np.float64)) ** 2))


# --------------------------------------------------------------------------- the cutting


@pytest.mark.parametrize("n_s", [0.5, 7.99, 8.0, 8.01, 12.0, 12.5, 21.0, 60.0])
def test_window_starts_cover_every_sample_and_never_start_past_the_end(n_s):
    win, hop = windows.seconds(8.0), windows.seconds(4.0)
    n = windows.seconds(n_s)
    starts = windows.window_starts(n, win, hop)
    assert starts[0] == 0 and np.all(np.diff(starts) == hop)
    assert starts[-1] < n <= starts[-1] + win  # the last window reaches the end, starts inside
    if len(starts) > 1:
        assert starts[-2] + win < n  # ... and is needed: the one before did not reach the end
        assert n - starts[-1] > win - hop  # so a last short window is never a sliver
    else:
        assert n <= win


def test_windows_are_the_deploy_front_end_on_each_slice_of_the_trimmed_span():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.zeros(SR, np.float32), tone(21.3, 180) +
                        0.01 * rng.standard_normal(windows.seconds(21.3)).astype(np.float32),
                        np.zeros(SR // 2, np.float32)])
    lo, hi = audio.trim_silence(x)
    ws = windows.wave_windows(x, 8.0, 4.0)
    assert [w.start for w in ws] == [lo + k * 4 * SR for k in range(len(ws))]
    assert ws[-1].end == hi and len(ws[-1].wave) < 8 * SR  # short last window, not tiled
    for w in ws:
        want = audio.normalize(audio.band_limit(x[w.start : w.end]))
        np.testing.assert_array_equal(w.wave, want)
        assert abs(w.wave.mean()) < 1e-4 and abs(w.wave.std() - 1) < 1e-3  # over its own samples


def test_the_first_window_is_prepare_and_a_short_clip_is_one_window():
    rng = np.random.default_rng(1)
    x = np.concatenate([np.zeros(3000, np.float32), tone(5.0, 230)])
    (w,) = windows.wave_windows(x, 8.0, 4.0)
    np.testing.assert_array_equal(w.wave, audio.prepare(x, 8.0))
    assert w.start == audio.trim_silence(x)[0]
    long = np.concatenate([x, rng.standard_normal(15 * SR).astype(np.float32)])
    np.testing.assert_array_equal(windows.wave_windows(long)[0].wave, audio.prepare(long, 8.0))


def write_formats(root: Path) -> list[Path]:
    """The same 23.7 s signal as 16 kHz WAV, 44.1 kHz stereo FLAC and AAC/M4A (ffmpeg only)."""
    rng = np.random.default_rng(5)
    mono = np.concatenate([np.zeros(7000, np.float32), tone(22.0, 150, 44_100) +
                           0.01 * rng.standard_normal(22 * 44_100).astype(np.float32),
                           np.zeros(22_000, np.float32)])
    sf.write(root / "a.wav", decoder.resample(mono, 44_100), SR)
    sf.write(root / "b.flac", np.stack([mono, 0.5 * mono], axis=1), 44_100)
    subprocess.run([decoder.ffmpeg_exe(), "-v", "error", "-i", str(root / "b.flac"), "-c:a", "aac",
                    str(root / "c.m4a")], check=True)
    return [root / "a.wav", root / "b.flac", root / "c.m4a"]


def test_streamed_decode_trim_and_windows_equal_the_loaded_wave(tmp_path):
    for path in write_formats(tmp_path):
        full = audio.load_audio(path)
        streamed = np.concatenate(list(decoder.stream_audio(path, block_s=0.77)))
        np.testing.assert_array_equal(streamed, full)  # soundfile blocks / ffmpeg pipe, soxr
        n, rms, _ = windows.stream_rms(decoder.stream_audio(path, block_s=1.3))
        np.testing.assert_array_equal(rms, audio.frame_rms(full))
        n, span, _ = windows.stream_span(path, block_s=1.3)
        assert (n, span) == (len(full), audio.trim_silence(full))
        n, span, lazy, _ = windows.file_windows(path, block_s=2.1)
        got, want = list(lazy), windows.wave_windows(full)
        assert [(w.start, w.end) for w in got] == [(w.start, w.end) for w in want]
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a.wave, b.wave)


def test_streaming_holds_a_few_windows_not_the_recording(tmp_path):
    """5 minutes at 16 kHz are 19 MB as float32; streaming must stay far below that."""
    rng = np.random.default_rng(0)
    path = tmp_path / "long.flac"
    with sf.SoundFile(path, "w", SR, 1, subtype="PCM_16") as f:
        for _ in range(10):  # written in 30 s pieces: the test itself never holds 5 minutes
            f.write(tone(30.0, 200) + 0.02 * rng.standard_normal(30 * SR).astype(np.float32))
    tracemalloc.start()
    try:
        n, span, lazy, _ = windows.file_windows(path, block_s=5.0)
        count = sum(1 for _ in lazy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 300 * SR and count == 74
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB while streaming 5 min"


# --------------------------------------------------------------------------- the scorer


@pytest.fixture(scope="module")
def probe_model(tmp_path_factory) -> Path:
    return diff_energy_model(tmp_path_factory.mktemp("probe") / "model")


def score(clips: Path, model: Path, tmp: Path, *extra: str) -> tuple[list[dict], list[dict]]:
    out, wins = tmp / "scores.csv", tmp / "windows.csv"
    args = [str(clips), "-o", str(out), "--model", str(model), *extra]
    if "--first-window" not in extra:
        args += ["--windows-csv", str(wins)]
    assert deploy.main(args) == 0
    return read_csv(out), (read_csv(wins) if wins.exists() else [])


def test_a_spliced_segment_gets_the_highest_window_with_its_timestamp(probe_model, tmp_path):
    """60 s of a low tone with 6 s of a high tone spliced in at 30-36 s: the window that holds
    all of it (28-36 s) is the file's peak, its logit is the file's logit; the mean is lower."""
    clips = tmp_path / "clips"
    clips.mkdir()
    x = tone(60.0, 200)
    x[30 * SR : 36 * SR] = tone(6.0, 5000)
    sf.write(clips / "call.wav", x, SR)
    (row,), wrows = score(clips, probe_model, tmp_path)
    assert (row["windows"], row["covered_s"], row["duration_s"]) == ("14", "60.000", "60.000")
    assert (row["peak_start_s"], row["peak_end_s"]) == ("28.000", "36.000")
    assert [w["start_s"] for w in wrows] == [f"{4.0 * k:.3f}" for k in range(14)]
    logits = [float(w["logit"]) for w in wrows]
    assert row["logit"] == wrows[int(np.argmax(logits))]["logit"] == f"{max(logits):.6f}"
    assert float(row["score"]) == pytest.approx(1 / (1 + math.exp(-max(logits))), abs=1e-6)
    assert float(row["mean_logit"]) == pytest.approx(np.mean(logits), abs=1e-5)
    assert float(row["mean_logit"]) < float(row["logit"])
    want = [diff_energy(w.wave) for w in windows.wave_windows(x, 8.0, 4.0)]
    np.testing.assert_allclose(logits, want, rtol=1e-4)  # the scorer fed it exactly these windows


def test_timestamps_are_in_the_original_files_time_after_trimming(probe_model, tmp_path):
    """3 s of silence, then 20 s of sound with a high tone at 15-21 s (file time), then 2 s of
    silence: windows start at the trim offset, and the peak window holds 15-21 s."""
    clips = tmp_path / "clips"
    clips.mkdir()
    x = np.concatenate([np.zeros(3 * SR, np.float32), tone(20.0, 200), np.zeros(2 * SR,
                                                                                 np.float32)])
    x[15 * SR : 21 * SR] = tone(6.0, 5000)
    sf.write(clips / "msg.wav", x, SR)
    lo, hi = audio.trim_silence(x)
    assert 2.9 * SR < lo <= 3 * SR and 23 * SR <= hi < 23.1 * SR
    (row,), wrows = score(clips, probe_model, tmp_path)
    assert float(wrows[0]["start_s"]) == pytest.approx(lo / SR, abs=1e-3)
    assert float(wrows[-1]["end_s"]) == pytest.approx(hi / SR, abs=1e-3)
    assert float(row["covered_s"]) == pytest.approx((hi - lo) / SR, abs=1e-3)
    assert float(row["peak_start_s"]) <= 15.0 and float(row["peak_end_s"]) >= 21.0
    assert float(row["peak_start_s"]) == pytest.approx(lo / SR + 12.0, abs=1e-3)
    first, _ = score(clips, probe_model, tmp_path, "--first-window")
    assert float(first[0]["peak_start_s"]) == pytest.approx(lo / SR, abs=1e-3)
    assert first[0]["windows"] == "1" and first[0]["covered_s"] == "8.000"


def test_first_window_keeps_the_first_8_s_score_and_short_files_agree(probe_model, tmp_path):
    clips = tmp_path / "clips"
    clips.mkdir()
    long = tone(30.0, 200)
    long[20 * SR : 26 * SR] = tone(6.0, 5000)  # the high part lies past the first 8 s
    sf.write(clips / "long.wav", long, SR)
    sf.write(clips / "short.wav", tone(5.0, 3000), SR)
    first, _ = score(clips, probe_model, tmp_path, "--first-window")
    windowed, _ = score(clips, probe_model, tmp_path)
    assert first[0]["logit"] == f"{diff_energy(audio.prepare(long, 8.0)):.6f}"
    assert float(windowed[0]["logit"]) > 10 * float(first[0]["logit"])
    assert first[1]["logit"] == windowed[1]["logit"]  # one window: the same input, same score


def test_a_file_failing_between_long_files_keeps_input_order(probe_model, tmp_path):
    clips = tmp_path / "clips"
    clips.mkdir()
    sf.write(clips / "a.wav", tone(40.0, 200), SR)
    (clips / "b.wav").write_bytes(b"RIFF not a wave" * 20)
    sf.write(clips / "c.wav", tone(9.0, 300), SR)
    rows, wrows = score(clips, probe_model, tmp_path, "--batch-size", "3")
    assert [r["path"] for r in rows] == ["a.wav", "b.wav", "c.wav"]
    assert rows[1]["error"].startswith("undecodable") and rows[1]["windows"] == ""
    assert [r["windows"] for r in (rows[0], rows[2])] == ["9", "2"]
    assert [w["path"] for w in wrows] == ["a.wav"] * 9 + ["c.wav"] * 2


def test_progress_counts_audio_seconds_inside_a_long_file(probe_model, tmp_path, capsys):
    clips = tmp_path / "clips"
    clips.mkdir()
    sf.write(clips / "a.wav", tone(40.0, 200), SR)  # 9 windows; --batch-size 1: 4 per pass
    assert deploy.main([str(clips), "-o", str(tmp_path / "s.csv"), "--model", str(probe_model),
                        "--batch-size", "1", "--progress", "1e-9"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "audio s" in ln]
    # 'hearsay-score: 0/1 files (0%), 0.0 files/s, 1 s [0 failed, 20 audio s]'
    assert [ln.split(", ")[0].split(": ")[1] + " " + ln.rsplit("[", 1)[1].rstrip("]")
            for ln in lines] == [
        "0/1 files (0%) 0 failed, 20 audio s", "0/1 files (0%) 0 failed, 36 audio s",
        "0/1 files (0%) 0 failed, 40 audio s", "1/1 files (100%) 0 failed, 40 audio s"]


def test_window_options_that_cannot_work_are_usage_errors(probe_model, tmp_path, capsys):
    clips = tmp_path / "clips"
    clips.mkdir()
    sf.write(clips / "a.wav", tone(3.0, 200), SR)
    base = [str(clips), "--model", str(probe_model)]
    assert deploy.main([*base, "--hop-s", "8.5"]) == deploy.EXIT_USAGE  # > the 8 s window
    assert "--hop-s 8.5 must be in (0, 8]" in capsys.readouterr().err
    assert deploy.main([*base, "--first-window", "--windows-csv", str(tmp_path / "w.csv")]) == 2
    assert "--windows-csv needs windowed scoring" in capsys.readouterr().err


def test_an_interrupted_windowed_run_keeps_the_finished_files_and_their_windows(
        probe_model, tmp_path, monkeypatch):
    clips = tmp_path / "clips"
    clips.mkdir()
    for name, seconds in (("a.wav", 16.0), ("b.wav", 9.0), ("c.wav", 30.0)):
        sf.write(clips / name, tone(seconds, 200), SR)
    real, calls = deploy.engine.run_logits, []

    def run_logits(*args, **kwargs):  # Ctrl-C during the second onnxruntime pass
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(deploy.engine, "run_logits", run_logits)
    out, wins = tmp_path / "s.csv", tmp_path / "w.csv"
    # --batch-size 1: 4 windows per pass; pass 1 = a's 3 windows + b's first
    assert deploy.main([str(clips), "-o", str(out), "--model", str(probe_model), "--windows-csv",
                        str(wins), "--batch-size", "1"]) == 130
    assert not out.exists() and not wins.exists()
    assert [r["path"] for r in read_csv(tmp_path / "s.csv.partial")] == ["a.wav"]
    assert [(w["path"], w["start_s"]) for w in read_csv(tmp_path / "w.csv.partial")] == [
        ("a.wav", "0.000"), ("a.wav", "4.000"), ("a.wav", "8.000"),
        ("b.wav", "0.000")]  # window rows are written per pass, ahead of their file's row


def test_exported_models_window_scores_equal_torch_on_the_same_windows(tmp_path):
    """A tiny detector exported for real: hearsay-score's per-window logits of a 12 s recording
    equal PyTorch's on windows cut from the loaded wave; parity A covers windows too."""
    import torch

    from hearsay.detector.model import Detector, ModelConfig
    from hearsay.engines import torch_engine
    from hearsay.export import probe
    from hearsay.export.onnx_export import ExportConfig, export_model

    torch.manual_seed(2)
    det = Detector(ModelConfig.tiny()).eval()
    report = export_model(det, tmp_path / "model", ExportConfig(int8=False, parity_clips=2))
    w = report["parity_a"]["windows"]
    assert w["passed"] and w["lengths_s"] == [6.0, 8.0]  # 10 s: one full, one short (padded)
    clips = tmp_path / "clips"
    clips.mkdir()
    sf.write(clips / "rec.flac", probe.voice_like(np.random.default_rng(4), 12.0), SR)
    (row,), wrows = score(clips, tmp_path / "model", tmp_path)
    ws = windows.wave_windows(audio.load_audio(clips / "rec.flac"), 8.0, 4.0)
    assert [(w["start_s"], w["end_s"]) for w in wrows] == \
        [(f"{v.start_s:.3f}", f"{v.end_s:.3f}") for v in ws]
    want = torch_engine.torch_logits(det, [v.wave for v in ws], batched=False)
    np.testing.assert_allclose([float(w["logit"]) for w in wrows], want, atol=1e-4)
    assert row["windows"] == "2" and row["logit"] == f"{max(float(w['logit']) for w in wrows):.6f}"


def test_hearsay_score_hop_reads_out_the_max_window_of_each_bundle_clip(tmp_path):
    """`hearsay score --hop-s`: 1.5 s windows every 0.5 s over 0.6-2.5 s bundle clips. The first
    window is the --max-s 1.5 input, so the windowed logit is never lower, equal for a clip of one
    window, and the count is the one hearsay.sound.windows gives."""
    from fakes.fake_runs import make_bundle, make_run

    from hearsay.evaluate import score as bundle_score

    bundle = make_bundle(tmp_path / "b", n_holdout=6)
    run = make_run(tmp_path / "run", job="full", fold=None)
    plain, _ = bundle_score.score_split(bundle, run, "holdout", cfg=bundle_score.ScoreConfig(
        max_s=1.5))
    win, side = bundle_score.score_split(bundle, run, "holdout", cfg=bundle_score.ScoreConfig(
        max_s=1.5, hop_s=0.5))
    assert side["config"]["hop_s"] == 0.5 and list(win.columns)[-2:] == ["windows", "mean_logit"]
    lengths = [sf.info(bundle.root / f).frames for f in
               bundle.manifest.set_index("path").loc[win["path"], "flac"]]
    want = [len(windows.window_starts(n, 3 * SR // 2, SR // 2)) for n in lengths]
    assert win["windows"].tolist() == want and max(want) > 1 and min(want) == 1
    for one, z_win, z_plain in zip(want, win["logit"], plain["logit"], strict=True):
        assert z_win >= z_plain - 1e-6
        if one == 1:
            assert z_win == pytest.approx(z_plain, abs=1e-6)


def test_a_file_that_grows_while_it_is_decoded_fails_as_changed(tmp_path):
    path = tmp_path / "growing.wav"
    sf.write(path, np.zeros(SR * 70, dtype=np.float32) + 0.1, SR)  # 3 blocks of 30 s
    blocks = decoder.stream_audio(path)
    next(blocks)
    with open(path, "ab") as fh:  # a recorder still writing
        fh.write(b"\0" * 4096)
    with pytest.raises(audio.AudioError, match="changed while it was read"):
        list(blocks)
