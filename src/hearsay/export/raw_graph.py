"""A graph any ONNX runtime can feed decoded audio: the front end's arithmetic (band-limit,
then zero-mean unit-variance over the valid samples) in front of the portable graph.

    model = raw_model(onnx.load("model/model.portable.onnx"), front_end)   # front_end.json
    onnx.save(model, "model.raw.onnx")
    # inputs:  audio (batch, samples) float32: 16 kHz mono, trimmed and capped (below), zero-padded
    #          attention_mask (batch, samples) int64: 1 on the valid samples
    # output:  logits (batch,) float32, high = synthetic

What needs control flow stays outside and is specified, with its reference implementation:
trim (hearsay.sound.audio.trim_silence: frames of TRIM_FRAME samples every TRIM_HOP, quieter
than the loudest frame by front_end.json's top_db count as silence, cut from both ends), then cap
(the first max_s seconds), and for a long file the windows (hearsay.sound.windows). Inside the
graph, as hearsay.sound.audio.prepare does after them: the FIR low-pass at cutoff_hz
(hearsay.sound.audio.band_limit: FIR_TAPS Blackman-windowed sinc taps, zero phase, the wave
zero-padded at its ends), then normalize ((x - mean) / sqrt(var + 1e-7) over the valid samples).
The arithmetic is float32 here (numpy's is float64): tests/export/test_raw_graph.py bounds the
difference in logit by parity A's tolerance, run in onnx's reference evaluator.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, compose, helper, numpy_helper

from hearsay.sound.audio import SAMPLE_RATE, _lowpass_taps

EPS = 1e-7  # normalize's variance floor (Hugging Face's Wav2Vec2FeatureExtractor's)


def front_graph(cutoff_hz: float | None, opset: int, ir_version: int) -> onnx.ModelProto:
    """(audio, attention_mask) -> (prepared, mask): band-limit and normalise, batched."""
    nodes = [helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["audio", "m"], ["x"])]  # padding is zero, as band_limit's
    inits = [numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")]
    if cutoff_hz is not None and cutoff_hz < SAMPLE_RATE / 2:
        taps = _lowpass_taps(cutoff_hz, SAMPLE_RATE).astype(np.float32)  # (FIR_TAPS,), symmetric
        half = (len(taps) - 1) // 2
        inits.append(numpy_helper.from_array(taps.reshape(1, 1, -1), "fir"))
        nodes += [helper.make_node("Unsqueeze", ["x", "axis1"], ["x3"]),  # (B, 1, T)
                  helper.make_node("Conv", ["x3", "fir"], ["y3"], pads=[half, half]),
                  helper.make_node("Squeeze", ["y3", "axis1"], ["y"])]  # (B, T)
    else:
        nodes.append(helper.make_node("Identity", ["x"], ["y"]))
    inits.append(numpy_helper.from_array(np.array(EPS, dtype=np.float32), "eps"))
    nodes += [helper.make_node("ReduceSum", ["m", "axis1"], ["n"], keepdims=1),  # (B, 1)
              helper.make_node("Mul", ["y", "m"], ["ym"]),
              helper.make_node("ReduceSum", ["ym", "axis1"], ["s"], keepdims=1),
              helper.make_node("Div", ["s", "n"], ["mean"]),
              helper.make_node("Sub", ["y", "mean"], ["c"]),
              helper.make_node("Mul", ["c", "m"], ["d"]),  # centred, 0 on padding
              helper.make_node("Mul", ["d", "d"], ["d2"]),
              helper.make_node("ReduceSum", ["d2", "axis1"], ["ss"], keepdims=1),
              helper.make_node("Div", ["ss", "n"], ["var"]),
              helper.make_node("Add", ["var", "eps"], ["ve"]),
              helper.make_node("Sqrt", ["ve"], ["sd"]),
              helper.make_node("Div", ["d", "sd"], ["prepared"]),
              helper.make_node("Identity", ["attention_mask"], ["mask"])]
    batch_samples = ["batch", "samples"]
    graph = helper.make_graph(
        nodes, "hearsay_front_end",
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, batch_samples),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, batch_samples)],
        [helper.make_tensor_value_info("prepared", TensorProto.FLOAT, batch_samples),
         helper.make_tensor_value_info("mask", TensorProto.INT64, batch_samples)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=ir_version)


def write_front_graph(path, model_path, front: dict) -> None:
    """front_graph at the opset and IR version of the graph at `model_path`, saved to `path`."""
    model = onnx.load(str(model_path), load_external_data=False)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    onnx.save(front_graph(front.get("cutoff_hz"), opset, model.ir_version), str(path))


def raw_model(portable: onnx.ModelProto, front: dict) -> onnx.ModelProto:
    """The portable graph (inputs input_values, attention_mask) behind front_graph."""
    opset = next(o.version for o in portable.opset_import if o.domain in ("", "ai.onnx"))
    head = compose.add_prefix(front_graph(front.get("cutoff_hz"), opset, portable.ir_version),
                              "hearsay_front_end/", rename_inputs=False, rename_outputs=False)
    return compose.merge_models(head, portable, io_map=[("prepared", "input_values"),
                                                        ("mask", "attention_mask")])
