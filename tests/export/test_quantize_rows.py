"""The row-wise int8 form of the encoder convs (export/quantize_rows.py) against the fp32 Conv
it replaces, run by onnxruntime on small graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from hearsay.engines.cpu_engine import make_session
from hearsay.export import quantize_rows


def conv_graph(path: Path, kernel: int, stride: int, c_in: int = 16, c_out: int = 24,
               pads: int = 0, seed: int = 0) -> None:
    """x (B, c_in, T) -> Conv(kernel, stride, bias) -> y (B, c_out, T')."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 1 / np.sqrt(c_in * kernel), (c_out, c_in, kernel)).astype(np.float32)
    b = rng.normal(0, 0.1, c_out).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", strides=[stride],
                            kernel_shape=[kernel], pads=[pads, pads])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, c_in, None])
    g = helper.make_graph([node], "conv", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9),
              str(path))


def gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(np.float32)


def test_weight_digits_rebuild_the_weights_within_half_a_second_step():
    w = np.random.default_rng(0).normal(0, 0.05, (96, 32)) * np.geomspace(0.01, 10, 32)
    (q1, s1), (q2, s2) = quantize_rows.weight_digits(w)
    assert q1.dtype == q2.dtype == np.int8 and np.abs(q2).max() <= 127
    np.testing.assert_allclose(s2, s1 / quantize_rows.DIGIT, rtol=1e-6)
    error = np.abs(w - (q1 * s1.astype(np.float64) + q2 * s2.astype(np.float64)))
    assert np.all(error <= s2 / 2 * (1 + 1e-4))  # per column: half the second digit's step
    assert np.all(np.abs(w - q1 * s1).max(axis=0) > 20 * error.max(axis=0))  # the 2nd digit counts


@pytest.mark.parametrize("kernel, stride", [(3, 2), (2, 2), (4, 2), (3, 3)])
def test_the_row_wise_conv_gives_the_fp32_conv_at_every_length(tmp_path, kernel, stride):
    conv_graph(tmp_path / "fp32.onnx", kernel, stride)
    done = quantize_rows.quantize_convs_rowwise(tmp_path / "fp32.onnx", tmp_path / "int8.onnx",
                                                ["conv"])
    assert done == ["conv"]
    ops = [n.op_type for n in onnx.load(str(tmp_path / "int8.onnx")).graph.node]
    assert "Conv" not in ops and ops.count("MatMulIntegerToFloat") == 2 * (1 + kernel - stride)
    fp32, int8 = make_session(tmp_path / "fp32.onnx", 1), make_session(tmp_path / "int8.onnx", 1)
    rng = np.random.default_rng(1)
    for frames in (kernel, kernel + 1, 7, 8, 9, 101):  # odd and even, the shortest possible
        x = gelu(rng.normal(0, 1.5, (2, 16, frames)))  # what every conv after the first reads
        ref = fp32.run(None, {"x": x})[0]
        got = int8.run(None, {"x": x})[0]
        assert got.shape == ref.shape == (2, 24, (frames - kernel) // stride + 1)
        assert np.abs(got - ref).max() <= 0.01 * np.abs(ref).max(), (frames, got - ref)


@pytest.mark.parametrize("kernel, stride", [(3, 2), (2, 2)])
def test_one_digit_with_the_mean_correction_keeps_the_mean_frame_of_the_fp32_conv(
        tmp_path, kernel, stride):
    conv_graph(tmp_path / "fp32.onnx", kernel, stride, c_in=64, c_out=32)
    rng = np.random.default_rng(1)
    # a mean that differs between channels, as post-GELU features do
    x = gelu(rng.normal(0, 1.0, (2, 64, 300)) + rng.normal(0.3, 0.4, (1, 64, 1)))
    mean = x.astype(np.float64).mean(axis=(0, 2))  # (C,): the input's mean frame
    quantize_rows.quantize_convs_rowwise(tmp_path / "fp32.onnx", tmp_path / "plain.onnx",
                                         ["conv"], {"conv": np.zeros(64)})  # no correction
    quantize_rows.quantize_convs_rowwise(tmp_path / "fp32.onnx", tmp_path / "mean.onnx",
                                         ["conv"], {"conv": mean})
    ops = [n.op_type for n in onnx.load(str(tmp_path / "mean.onnx")).graph.node]
    assert ops.count("MatMulIntegerToFloat") == 1 + kernel - stride  # one digit per part
    ref = make_session(tmp_path / "fp32.onnx", 1).run(None, {"x": x})[0]  # (B, N, T')
    err = {k: make_session(tmp_path / f"{k}.onnx", 1).run(None, {"x": x})[0] - ref
           for k in ("plain", "mean")}
    # the weights' rounding, the same on every frame, leaves a mean error per output channel
    # that pooling keeps; the correction takes most of it away (frame-to-frame noise stays)
    bias = {k: np.abs(e.mean(axis=(0, 2))).mean() for k, e in err.items()}
    assert bias["mean"] < bias["plain"] / 4, bias
    assert np.abs(err["mean"]).max() <= 0.02 * np.abs(ref).max()


def test_a_conv_without_the_row_wise_form_is_refused(tmp_path):
    conv_graph(tmp_path / "padded.onnx", 3, 2, pads=1)
    with pytest.raises(ValueError, match="row-wise form"):
        quantize_rows.quantize_convs_rowwise(tmp_path / "padded.onnx", tmp_path / "o.onnx",
                                             ["conv"])
    conv_graph(tmp_path / "fp32.onnx", 3, 2)
    with pytest.raises(ValueError, match="not in"):
        quantize_rows.quantize_convs_rowwise(tmp_path / "fp32.onnx", tmp_path / "o.onnx",
                                             ["conv", "other"])
    with pytest.raises(ValueError, match="no Conv"):
        quantize_rows.quantize_convs_rowwise(tmp_path / "fp32.onnx", tmp_path / "o.onnx", [])


def test_the_error_simulation_runs_and_rounds_what_it_names(tmp_path, demo_bundle):
    import importlib.util
    import json

    import torch

    from hearsay.detector.model import Detector, ModelConfig, save_detector

    torch.manual_seed(0)
    save_detector(Detector(ModelConfig.tiny()).eval(), tmp_path / "ckpt")
    script = Path(__file__).resolve().parents[2] / "scripts" / "conv_int8_error.py"
    spec = importlib.util.spec_from_file_location("conv_int8_error", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "rows.json"
    assert mod.main([str(tmp_path / "ckpt"), "--bundle", str(demo_bundle.root), "--clips", "6",
                     "--json", str(out)]) == 0
    rows = {r["scheme"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == list(mod.SCHEMES)
    assert all(0 < r["rms_dlogit"] < 1 for r in rows.values()), rows  # every scheme rounds
    w = torch.randn(48, 8)
    one, two = mod.round_weights(w, 1), mod.round_weights(w, 2)
    assert (two - w).abs().max() < (one - w).abs().max() / 50  # the second digit refines
