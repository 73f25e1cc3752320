"""The model folder's front_end.onnx: decoded 16 kHz audio, trimmed and capped as format.json
specifies, through front_end.onnx and the portable graph in a second runtime (onnx's reference
evaluator) gives hearsay-score's logit within parity A. Real onnx, onnxruntime, ffmpeg."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import test_deploy
from onnx.reference import ReferenceEvaluator

from hearsay.contracts.model_dir import model_sums
from hearsay.deploy import main
from hearsay.export.onnx_export import ExportConfig
from hearsay.export.raw_graph import raw_model
from hearsay.sound import audio

world = test_deploy.world  # a tiny exported model and a folder of clips
PARITY_A = ExportConfig().parity_tol  # max |delta logit| the export's own parity allows


def test_the_folder_ships_a_standard_front_end_graph_named_in_format_json(world):
    model, _, _, _ = world
    assert "front_end.onnx" in model_sums(model)  # part of the folder's identity
    fmt = json.loads((model / "format.json").read_text())
    assert fmt["raw_audio"]["graph"] == "front_end.onnx"
    assert {"trim", "windows", "inside"} <= set(fmt["raw_audio"])
    graph = onnx.load(str(model / "front_end.onnx"))
    onnx.checker.check_model(graph)
    assert {n.domain for n in graph.graph.node} <= {"", "ai.onnx"}  # any runtime loads it


@pytest.mark.parametrize("name", ["a.wav", "b/c.flac"])
def test_decoded_audio_through_the_shipped_graphs_in_a_second_runtime_matches_hearsay_score(
        world, tmp_path, name):
    model, _, clips, _ = world
    out = tmp_path / "s.csv"
    assert main([str(clips / name), "-o", str(out), "--model", str(model), "--first-window",
                 "--progress", "0"]) == 0
    want = float(test_deploy.read_csv(out)[0]["logit"])
    front = json.loads((model / "front_end.json").read_text())
    wave = audio.load_audio(clips / name)  # decoded 16 kHz mono, float32
    start, end = audio.trim_silence(wave, top_db=front["top_db"])  # format.json's "trim"
    x = audio.cap(wave[start:end], front["max_s"])[None].astype(np.float32)  # (1, N)
    evaluator = ReferenceEvaluator(onnx.load(str(model / "front_end.onnx")))
    prepared, mask = evaluator.run(None, {"audio": x,
                                          "attention_mask": np.ones(x.shape, np.int64)})
    logit = ReferenceEvaluator(onnx.load(str(model / "model.portable.onnx"))).run(
        ["logits"], {"input_values": prepared, "attention_mask": mask})[0]
    assert abs(float(logit[0]) - want) <= PARITY_A


def test_the_merged_one_file_graph_gives_the_same_logit(world):
    model, _, clips, _ = world
    front = json.loads((model / "front_end.json").read_text())
    wave = audio.load_audio(clips / "a.wav")
    start, end = audio.trim_silence(wave, top_db=front["top_db"])
    x = audio.cap(wave[start:end], front["max_s"])
    merged = raw_model(onnx.load(str(model / "model.portable.onnx")), front)
    onnx.checker.check_model(merged)
    prepared = audio.prepare(wave, front["max_s"], cutoff_hz=front["cutoff_hz"],
                             top_db=front["top_db"])
    import onnxruntime as ort

    ref = ort.InferenceSession(str(model / "model.portable.onnx")).run(
        ["logits"], {"input_values": prepared[None], "attention_mask": np.ones(
            (1, len(prepared)), np.int64)})[0]
    got = ort.InferenceSession(merged.SerializeToString()).run(
        ["logits"], {"audio": x[None].astype(np.float32),
                     "attention_mask": np.ones((1, len(x)), np.int64)})[0]
    assert abs(float(got[0]) - float(ref[0])) <= PARITY_A  # the front end's arithmetic inside
