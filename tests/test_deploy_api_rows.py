"""hearsay.deploy.Scorer as Python users expect it: typed rows, the path as given, JSON lines
with numbers, arrays refused with the right message, prepared_logits' refusals, the warning
when there is no threshold, score_arrays and per-window rows. Real onnxruntime on the tiny
exported model of tests/test_deploy.py, real ffmpeg."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import soundfile as sf
import test_deploy

from hearsay.contracts.model_dir import ModelError
from hearsay.deploy import Scorer, main, prepared, rowtypes
from hearsay.deploy.api import NoThresholdWarning
from hearsay.deploy.engine import ScoreConfig, load_engine
from hearsay.engines.cpu_engine import allowed_cpus
from hearsay.sound import windows

world = test_deploy.world  # the fixture: a tiny exported model (no thresholds.json) and clips
read_csv = test_deploy.read_csv
SR = 16_000
quiet = pytest.mark.filterwarnings("ignore::hearsay.deploy.api.NoThresholdWarning")


def speech_like(seconds: float, rate: int = SR, seed: int = 0) -> np.ndarray:
    """(N,) float32 in -1..1: a buzzy tone with white noise, energy up to the Nyquist."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 30))
    return (0.1 * tone + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


# --------------------------------------------------------------------------- typed rows


@quiet
def test_rows_hold_floats_ints_and_none_and_the_path_as_given(world, tmp_path, monkeypatch):
    model, _, clips, _ = world
    shutil.copy(clips / "a.wav", tmp_path / "+15550100.wav")  # a formula start in the CSV
    shutil.copy(clips / "garbage.wav", tmp_path / "garbage.wav")
    monkeypatch.chdir(tmp_path)
    ok, bad = Scorer(model).score_files(["+15550100.wav", tmp_path / "garbage.wav"])
    assert ok["path"] == "+15550100.wav"  # no leading ': that is the CSV's
    assert isinstance(ok["score"], float) and ok["score"] > 0.0  # compares: not a string
    assert isinstance(ok["windows"], int) and ok["windows"] >= 1
    assert ok["error"] is None and ok["header_s"] is None and ok["decision"] is None
    assert ok["variant"] == "fp32" and len(ok["model_sums_sha256"]) == 64
    assert bad["score"] is None and bad["windows"] is None and isinstance(bad["error"], str)
    assert json.loads(json.dumps([ok, bad])) == [ok, bad]  # JSON as it is
    out = tmp_path / "s.csv"
    assert main(["+15550100.wav", "-o", str(out), "--model", str(model)]) == 0
    [csv_row] = read_csv(out)
    assert csv_row["path"] == "'+15550100.wav"  # escaped where the CSV is written
    assert rowtypes.typed(csv_row) | {"path": ok["path"]} == ok


def test_typed_and_text_are_inverse_on_every_row_hearsay_score_writes(world, tmp_path):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(model), "--windows-csv",
                 str(tmp_path / "w.csv")]) == 0
    rows = read_csv(out) + read_csv(tmp_path / "w.csv")
    assert any(r.get("error") for r in rows) and any(r.get("score") for r in rows)
    for row in rows:
        assert rowtypes.text(rowtypes.typed(row)) == row


def test_jsonl_lines_hold_numbers_and_null(world, tmp_path):
    model, _, clips, _ = world
    out = tmp_path / "s.jsonl"
    (tmp_path / "list.txt").write_text(f"{clips / 'a.wav'}\n{clips / 'garbage.wav'}\n")
    assert main(["--files-from", str(tmp_path / "list.txt"), "-o", str(out), "--model",
                 str(model), "--format", "jsonl"]) == 0
    ok, bad = (json.loads(line) for line in out.read_text().splitlines())
    assert isinstance(ok["score"], float) and isinstance(ok["windows"], int)
    assert ok["error"] is None and ok["decision"] is None and ok["header_s"] is None
    assert '"error": null' in out.read_text().splitlines()[0]
    assert bad["score"] is None and bad["error"]


# --------------------------------------------------------------------------- arrays refused


@pytest.mark.parametrize("wave,rate,says", [
    (np.zeros(SR, dtype=np.float32), 44, "44 looks like kHz: 44 kHz is 44000"),
    (np.zeros(SR, dtype=np.float32), 3_999, "an integer in 4000..384000"),
    (np.zeros(SR, dtype=np.float32), 384_001, "an integer in 4000..384000"),
    (np.zeros(0, dtype=np.float32), SR, "an empty array has nothing to score"),
    (np.zeros((0, 2), dtype=np.float32), SR, "an empty array has nothing to score"),
])
@quiet
def test_an_array_outside_the_documented_range_is_refused_with_the_fix(world, wave, rate, says):
    scorer = Scorer(world[0])
    with pytest.raises(ValueError, match=says) as err:
        scorer.score_array(wave, rate)
    assert ".T" not in str(err.value)  # an empty array is not a transposed one


@pytest.mark.parametrize("rate", [4_000, 384_000])
@quiet
def test_the_range_ends_are_rates(world, rate):
    row = Scorer(world[0]).score_array(speech_like(2.0, rate), rate)
    assert row["error"] is None and row["duration_s"] == pytest.approx(2.0, abs=1e-3)


# --------------------------------------------------------------------------- prepared_logits


def test_prepared_logits_refuse_raw_audio_normalised_by_hand_and_other_rates(world):
    model, _, clips, _ = world
    engine = load_engine(model)
    raw = speech_like(3.0)
    by_hand = ((raw - raw.mean()) / raw.std()).astype(np.float32)  # mean 0, std 1: not band-lim.
    with pytest.raises(ValueError, match="wave 0 is not a prepared.*not band-limited at 7250"):
        engine.prepared_logits([by_hand], SR)
    ok = windows.wave_windows(raw, 8.0, 4.0)[0].wave
    for rate in (8_000, 44_100, 16_000.5, True):
        with pytest.raises(ValueError, match=f"sample_rate {rate!r}: model inputs are 16000"):
            engine.prepared_logits([ok], rate)
    assert np.isfinite(engine.prepared_logits([ok], SR)).all()


def test_every_window_the_scorer_cuts_passes_the_prepared_check(world):
    """Speech-like, noise and mostly-pause windows, as hearsay-score cuts them, are prepared."""
    front = load_engine(world[0]).front
    rng = np.random.default_rng(4)
    pause = np.zeros(5 * SR, dtype=np.float32)
    x = np.concatenate([speech_like(6.0), pause, 0.01 * rng.standard_normal(9 * SR),
                        1e-4 * rng.standard_normal(3 * SR), speech_like(0.3, seed=1)])
    cut = windows.wave_windows(x.astype(np.float32), front["max_s"], 4.0,
                               top_db=front["top_db"], cutoff_hz=front["cutoff_hz"])
    assert len(cut) >= 5
    for w in cut:
        assert prepared.not_prepared(w.wave, SR, front, 400) == ""
        assert prepared.stop_band_power(w.wave, front["cutoff_hz"]) < 1e-6


# --------------------------------------------------------------------------- no threshold


def test_no_threshold_warns_and_can_raise(world, tmp_path):
    model, _, clips, _ = world
    with pytest.warns(NoThresholdWarning, match="no thresholds.json.*threshold=LOGIT"):
        scorer = Scorer(model)
    assert scorer.score_file(clips / "a.wav")["decision"] is None
    with pytest.raises(ModelError, match="no thresholds.json and no threshold was given"):
        Scorer(model, require_threshold=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a given threshold: no warning
        row = Scorer(model, threshold=0.0, require_threshold=True).score_file(clips / "a.wav")
    assert row["decision"] == ("spoof" if row["logit"] >= 0 else "bonafide")


# --------------------------------------------------------------------------- batches, windows


@quiet
def test_score_arrays_gives_each_arrays_own_row_in_order(world):
    model, _, clips, _ = world
    scorer = Scorer(model)
    a, rate_a = sf.read(clips / "a.wav", dtype="float32")
    b = speech_like(9.0, 22_050)
    silent = np.zeros(SR, dtype=np.float32)
    rows = scorer.score_arrays([a, b, silent], [rate_a, 22_050, SR], labels=["a", "b", "s"])
    assert rows == [scorer.score_array(a, rate_a, "a"), scorer.score_array(b, 22_050, "b"),
                    scorer.score_array(silent, SR, "s")]
    assert [r["path"] for r in scorer.score_arrays([b, b], 22_050)] == ["<array 0>",
                                                                        "<array 1>"]
    assert "silent" in rows[2]["error"] and rows[1]["windows"] == 2
    with pytest.raises(ValueError, match="array 1 \\(<array 1>\\): sample_rate 44"):
        scorer.score_arrays([a, a], [rate_a, 44])
    with pytest.raises(ValueError, match="2 arrays, 3 rates"):
        scorer.score_arrays([a, a], [SR, SR, SR])


@quiet
def test_per_window_rows_are_the_windows_csv_rows_of_each_input(world, tmp_path):
    model, _, clips, _ = world
    long = tmp_path / "long.wav"
    sf.write(long, speech_like(17.0), SR, subtype="FLOAT")  # the array's samples exactly
    wcsv = tmp_path / "w.csv"
    assert main([str(long), "-o", str(tmp_path / "s.csv"), "--model", str(model),
                 "--windows-csv", str(wcsv)]) == 0
    scorer = Scorer(model)
    row, bad = scorer.score_files([long, clips / "garbage.wav"], per_window=True)
    want = [{k: v for k, v in rowtypes.typed(w).items() if k != "path"} for w in read_csv(wcsv)]
    assert row["window_rows"] == want and len(want) == row["windows"] == 4  # 0, 4, 8, 12 s
    assert max(w["logit"] for w in want) == row["logit"]
    assert bad["window_rows"] == [] and bad["error"]
    same = scorer.score_array(speech_like(17.0), SR, per_window=True)["window_rows"]
    assert same == want
    with pytest.raises(ValueError, match="per_window needs windowed scoring"):
        Scorer(model, first_window=True).score_file(long, per_window=True)


def test_a_missing_model_folder_is_a_model_error(tmp_path):
    with pytest.raises(ModelError):
        Scorer(tmp_path / "nowhere")


@quiet
def test_the_api_refusals_say_their_whole_fix(world):
    model, _, clips, _ = world
    a, rate_a = sf.read(clips / "a.wav", dtype="float32")
    with pytest.raises(ValueError) as err:
        Scorer(model, first_window=True).score_array(a, rate_a, per_window=True)
    assert str(err.value) == ("per_window needs windowed scoring: Scorer(..., first_window=False)"
                              " (the first-window mode scores one window, row's peak_*_s)")
    with pytest.raises(ValueError) as err:
        Scorer(model).score_arrays([a, a], SR, labels=["only one"])
    assert str(err.value) == ("2 arrays, 2 rates and 1 labels: pass one rate (or one per array)"
                              " and one label per array")


@quiet
def test_score_arrays_lists_each_arrays_windows_when_asked(world):
    model, _, _, _ = world
    scorer = Scorer(model)
    long, short = speech_like(17.0), speech_like(3.0, seed=1)
    rows = scorer.score_arrays([long, short], SR, labels=["long", "short"], per_window=True)
    assert [len(r["window_rows"]) for r in rows] == [4, 1]  # 0, 4, 8, 12 s; one window
    assert rows[0]["window_rows"] == scorer.score_array(long, SR, per_window=True)["window_rows"]
    assert "window_rows" not in scorer.score_arrays([long], SR)[0]


@quiet
def test_samples_that_overflow_the_front_end_fail_their_row_without_a_numpy_warning(world):
    model, _, _, _ = world
    loud = (3e38 * np.sign(speech_like(2.0))).astype(np.float32)  # finite; squares overflow
    scorer = Scorer(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would raise here
        row = scorer.score_array(loud, SR, "loud")
    assert row["score"] is None and row["error"].startswith("samples too large to score")


@quiet
def test_per_window_rows_keep_their_paths_and_a_failed_file_lists_no_windows(world, tmp_path):
    model, _, _, _ = world
    late = speech_like(40.0)
    late[-SR:] = 3e38 * np.sign(late[-SR:])  # finite, but its last second overflows: it fails
    #                                            (found by the trim's pass, before any window)
    sf.write(tmp_path / "late.wav", late, SR, subtype="FLOAT")
    scorer = Scorer(model)
    bad, ok = scorer.score_files([tmp_path / "late.wav"], per_window=True) + \
        scorer.score_arrays([speech_like(9.0)], SR, labels=["ok"], per_window=True)
    assert [bad["path"], ok["path"]] == [str(tmp_path / "late.wav"), "ok"]
    assert ok["window_rows"] and bad["error"] and bad["window_rows"] == []


@quiet
def test_the_scorer_takes_hearsay_scores_options_and_gives_them_to_onnxruntime(world):
    model, _, _, _ = world
    scorer = Scorer(model, threads=1, batch_size=3, hop_s=0.5)  # a hop under a second is one
    assert scorer.cfg == ScoreConfig(batch_size=3, chunk=12, threads=1, hop_s=0.5,
                                     window_chunk=12)
    assert scorer.engine.session.get_session_options().intra_op_num_threads == 1
    default = Scorer(model)
    assert default.cfg == ScoreConfig() and default.cfg.threads == 0  # 0: the CPUs allowed
    assert default.engine.session.get_session_options().intra_op_num_threads == allowed_cpus()
    with pytest.raises(ModelError, match="model.int8.onnx is not listed in SHA256SUMS"):
        Scorer(model, variant="int8")  # this folder ships no int8: the variant reaches the check


def test_the_no_threshold_warning_points_at_the_line_that_built_the_scorer(world):
    model, _, _, _ = world
    with pytest.warns(NoThresholdWarning) as seen:
        Scorer(model)
    assert [w.filename for w in seen] == [__file__]  # stacklevel=2


def test_the_scorer_warns_in_full_words_and_prints_nothing(world, capsys):
    model, _, _, _ = world
    with pytest.warns(NoThresholdWarning) as seen:
        Scorer(model)
    [warning] = seen
    assert str(warning.message) == (
        f"{model} has no thresholds.json and no threshold was given: every row's decision is "
        "None (pass threshold=LOGIT, or export the folder with `hearsay export onnx --meta "
        "models/<stamp>/meta.json`)")
    max_s = Scorer(model, threshold=0.0).engine.front["max_s"]
    assert capsys.readouterr().err == ""  # hearsay-score's stderr notes are not a library's
    with pytest.raises(ValueError) as err:
        Scorer(model, threshold=0.0, hop_s=max_s + 1)
    assert str(err.value) == (f"hop_s {max_s + 1:g} must be in (0, {max_s:g}] (the window length, "
                              "front_end.json max_s)")


@quiet
def test_a_file_that_fails_after_its_first_windows_were_scored_lists_none(world, tmp_path,
                                                                          monkeypatch):
    from hearsay.sound import decoder

    model, _, _, _ = world
    sf.write(tmp_path / "long.wav", speech_like(100.0), SR, subtype="FLOAT")
    real, calls = decoder.stream_audio, []

    def cut_on_second_pass(path, *a, **kw):  # pass 1 (the trim) reads it whole; pass 2 fails
        calls.append(path)
        for k, block in enumerate(real(path, *a, **kw)):
            if len(calls) == 2 and k == 2:  # blocks of 30 s: 60 s read, windows scored
                raise decoder.AudioError(path, "the file changed while it was read")
            yield block

    monkeypatch.setattr(decoder, "stream_audio", cut_on_second_pass)
    row = Scorer(model, batch_size=1).score_file(tmp_path / "long.wav", per_window=True)
    assert row["error"] == "the file changed while it was read" and row["window_rows"] == []
