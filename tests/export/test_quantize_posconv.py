"""The positional conv in int8 (export/quantize_posconv.py): the QLinearConv form against the fp32
Conv it replaces on a small grouped, padded conv, its ranges read from a tiny Detector's graph,
and that graph end to end, run by onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from hearsay.detector.model import Detector, ModelConfig
from hearsay.engines.cpu_engine import make_session, run_logits
from hearsay.export import probe, quantize_posconv
from hearsay.export.onnx_export import export_onnx

C, GROUPS, KERNEL = 32, 4, 16  # XLS-R's is 1024 channels, 16 groups, kernel 128
FRONT = {"sample_rate": 16_000, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0, "min_s": 0.5}


def grouped_conv(path: Path, seed: int = 0, convs: int = 1) -> None:
    """x (B, C, T) -> `convs` grouped Convs (kernel KERNEL, padding KERNEL / 2, bias) -> y, as
    the positional conv is (T + 1 frames out of T)."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(convs):
        w = rng.normal(0, 1 / np.sqrt(C // GROUPS * KERNEL), (C, C // GROUPS, KERNEL))
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(rng.normal(0, 0.1, C).astype(np.float32), f"b{i}")]
        out = "y" if i == convs - 1 else f"h{i}"
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [out], name=f"pos{i}",
                                      group=GROUPS, kernel_shape=[KERNEL],
                                      pads=[KERNEL // 2, KERNEL // 2]))
        x = out
    g = helper.make_graph(nodes, "pos", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [None, C, None])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9),
              str(path))


def stats_of(x: np.ndarray, y: np.ndarray) -> dict:
    return {"in": (float(x.min()), float(x.max())), "out": (float(y.min()), float(y.max())),
            "in_mean": x.astype(np.float64).mean(axis=(0, 2))}


def features(rng, frames: int = 200) -> np.ndarray:
    """(2, C, frames): channels of different means, as the projected features have."""
    return (rng.normal(0, 1.0, (2, C, frames)) + rng.normal(0.5, 0.5, (1, C, 1))).astype(
        np.float32)


def test_the_qlinearconv_form_gives_the_fp32_conv_within_its_steps(tmp_path):
    grouped_conv(tmp_path / "fp32.onnx")
    x = features(np.random.default_rng(1))
    ref = make_session(tmp_path / "fp32.onnx", 1).run(None, {"x": x})[0]  # (2, C, T + 1)
    quantize_posconv.quantize_posconv(tmp_path / "fp32.onnx", tmp_path / "q.onnx", "pos0",
                                      stats_of(x, ref))
    g = onnx.load(str(tmp_path / "q.onnx"))
    assert [(n.op_type, n.name) for n in g.graph.node] == [
        ("QuantizeLinear", "pos0_q8_quantize"), ("QLinearConv", "pos0"),
        ("DequantizeLinear", "pos0_q8_dequantize")]
    assert "w0" not in {t.name for t in g.graph.initializer}  # the fp32 weight is gone
    got = make_session(tmp_path / "q.onnx", 1).run(None, {"x": x})[0]
    assert got.shape == ref.shape
    # uint8 in and out over the calibration range: a few output steps at most
    step = (ref.max() - min(ref.min(), 0)) / 255
    assert np.abs(got - ref).max() <= 4 * step
    assert np.sqrt(np.mean((got - ref) ** 2)) <= step


def test_the_bias_takes_back_the_weights_rounding_at_the_mean_frame(tmp_path):
    grouped_conv(tmp_path / "fp32.onnx")
    x = features(np.random.default_rng(2), frames=400)
    ref = make_session(tmp_path / "fp32.onnx", 1).run(None, {"x": x})[0]
    stats = stats_of(x, ref)
    quantize_posconv.quantize_posconv(tmp_path / "fp32.onnx", tmp_path / "mean.onnx", "pos0",
                                      stats)
    quantize_posconv.quantize_posconv(tmp_path / "fp32.onnx", tmp_path / "plain.onnx", "pos0",
                                      {**stats, "in_mean": np.zeros(C)})  # no correction
    inner = slice(KERNEL, -KERNEL)  # frames whose window is all input, no padding
    bias = {k: np.abs((make_session(tmp_path / f"{k}.onnx", 1).run(None, {"x": x})[0] - ref)
                      [:, :, inner].mean(axis=(0, 2))).mean() for k in ("plain", "mean")}
    assert bias["mean"] < bias["plain"] / 2, bias


def test_zero_is_a_code_of_every_range_so_padding_reads_as_zero():
    for lo, hi in ((-1.3, 2.7), (0.2, 5.0), (-4.0, -0.5), (0.0, 0.0)):
        scale, zero = quantize_posconv.uint8_range(lo, hi)
        assert scale > 0 and zero.dtype == np.uint8  # an integer code: it dequantises to 0
        # codes 0 .. 255 reach the range's ends (to half a step), whichever side 0 is on
        assert -int(zero) * scale <= min(lo, 0) + scale / 2
        assert (255 - int(zero)) * scale >= max(hi, 0) - scale / 2
    assert quantize_posconv.uint8_range(0.2, 5.0)[1] == 0  # all positive: code 0 is 0


def test_the_positional_conv_is_the_one_grouped_conv_and_anything_else_is_refused(tmp_path):
    grouped_conv(tmp_path / "one.onnx")
    assert quantize_posconv.positional_conv(onnx.load(str(tmp_path / "one.onnx"))) == "pos0"
    grouped_conv(tmp_path / "two.onnx", convs=2)
    with pytest.raises(ValueError, match=r"^2 grouped Conv nodes: the positional conv must be "
                       r"the one, named \(export the Detector with export/onnx_export.py\)$"):
        quantize_posconv.positional_conv(onnx.load(str(tmp_path / "two.onnx")))
    with pytest.raises(ValueError, match="^Conv node not in"):
        quantize_posconv.quantize_posconv(tmp_path / "one.onnx", tmp_path / "o.onnx", "pos9",
                                          {})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(the tiny Detector, its fp32 export, prepared calibration clips)."""
    d = tmp_path_factory.mktemp("posconv")
    torch.manual_seed(0)
    model = Detector(ModelConfig.tiny()).eval()
    export_onnx(model, d / "model.onnx", "torchscript")
    clips = probe.synthetic_clips(np.random.default_rng(0), 6, 1.0, 3.0, FRONT)
    return model, d / "model.onnx", clips


def test_the_ranges_and_the_mean_frame_are_the_positional_conv_s_over_the_clips(tiny, tmp_path):
    model, fp32, clips = tiny
    seen = {"in": [], "out": []}
    conv = model.backbone.encoder.pos_conv_embed.conv

    def tap(module, inputs, output) -> None:  # None: the conv's output is left as it is
        seen["in"].append(inputs[0])
        seen["out"].append(output)

    hook = conv.register_forward_hook(tap)
    try:
        with torch.inference_mode():
            for w in clips:
                model(torch.from_numpy(w[None, :]), torch.ones(1, len(w), dtype=torch.long))
    finally:
        hook.remove()
    name = quantize_posconv.positional_conv(onnx.load(str(fp32)))
    got = quantize_posconv.conv_stats(fp32, name, clips, tmp_path)
    x = torch.cat([t[0] for t in seen["in"]], dim=1).double().numpy()  # (C, all frames)
    y = torch.cat([t[0] for t in seen["out"]], dim=1).numpy()
    assert got["in"] == pytest.approx((x.min(), x.max()), abs=1e-4)
    assert got["out"] == pytest.approx((y.min(), y.max()), abs=1e-4)
    np.testing.assert_allclose(got["in_mean"], x.mean(axis=1), atol=1e-5)
    assert list(tmp_path.iterdir()) == []  # its tapped copy is removed
    with pytest.raises(ValueError, match=r"^no clips to take the positional conv's ranges "
                       r"from \(pass --calibration BUNDLE\)$"):
        quantize_posconv.conv_stats(fp32, name, [], tmp_path)


def test_a_detector_with_its_positional_conv_int8_scores_as_the_fp32_one(tiny, tmp_path):
    _, fp32, clips = tiny
    graph = tmp_path / "int8.onnx"
    graph.write_bytes(fp32.read_bytes())
    assert quantize_posconv.quantize_positional_conv(fp32, graph, clips) == \
        "/pos_conv_embed/conv/Conv"
    assert sum(n.op_type == "QLinearConv" for n in onnx.load(str(graph)).graph.node) == 1
    waves = probe.synthetic_clips(np.random.default_rng(5), 12, 0.5, 8.0, FRONT)
    ref, got = run_logits(make_session(fp32), waves), run_logits(make_session(graph), waves)
    # measured 2026-12-06: max |dlogit| 3.3e-4, rms 1.7e-4 against a logit spread (std) of 0.055
    assert np.abs(got - ref).max() < 2e-3 and np.std(ref) > 20 * np.abs(got - ref).max()
