"""int8 of the positional conv: onnxruntime's QLinearConv with static ranges from calibration
clips, the weights' rounding taken back from the bias at the mean input frame.

    (called by export/quantize.py's write_recipe: the recipe "row-wise convs 1.., one digit,
    mean-corrected + positional conv + layers", tried first when a bundle is given)

The positional conv (XLS-R: 1024 -> 1024 channels, 16 groups, kernel 128 frames, padding 64) is
the one conv every other recipe leaves fp32: 13.4 GFLOP per batch of two 8 s clips, the largest
fp32 product left once the layers and the encoder are int8. Of the two forms onnxruntime has
for it, timed in the whole int8 graph against the same graph with the conv fp32
(scripts/bench_cpu_inference.py, docs/BENCHMARKS.md "CPU inference", 2026-12-06, 2 threads):
the dynamic ConvInteger that quantize_dynamic writes made the graph slower (1.602 against
2.122 clips/s in one run); QLinearConv, static uint8 in and out, faster (1.049-1.089x in
three runs). So the static form, which needs ranges:

  * input  (B, C, T): one uint8 scale and zero point over the calibration clips' min .. max
    (0 inside the range, so the conv's zero padding is the zero point exactly);
  * output (B, C, T+1): the same over its calibration min .. max (QLinearConv writes uint8);
  * weights: int8 per output channel, symmetric; the bias, int32 at scale s_x * s_w[o], takes
    back what the weights' rounding costs the mean input frame m (quantize_rows.py says why
    the pooling keeps that part): b[o] + sum over the group's channels c and taps j of
    m[c] * (W - Q(W))[o, c, j], the edges' padding aside.

The calibration ranges are fixed: a clip louder than every calibration clip saturates at the
ends, and the export's gate judges that like any other error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def positional_conv(model) -> str:
    """Name of the positional conv in `model` (an onnx.ModelProto): its one grouped Conv.
    Raises ValueError when there is not exactly one."""
    grouped = [n.name for n in model.graph.node if n.op_type == "Conv" and
               next((a.i for a in n.attribute if a.name == "group"), 1) > 1]
    if len(grouped) != 1 or not grouped[0]:
        raise ValueError(f"{len(grouped)} grouped Conv nodes: the positional conv must be the "
                         "one, named (export the Detector with export/onnx_export.py)")
    return grouped[0]


def conv_stats(src: Path, conv: str, waves: list[np.ndarray], dst_dir: Path,
               threads: int = 0) -> dict:
    """Over `waves` (prepared clips, run one by one by onnxruntime fp32 on `src`:
    quantize_rows.tapped): the input's and the output's min and max, and the input's mean
    frame (C,) float64, of Conv `conv`. Raises ValueError for no such Conv, or no clips."""
    import onnx

    from hearsay.export.quantize_rows import tapped

    if not waves:
        raise ValueError("no clips to take the positional conv's ranges from (pass "
                         "--calibration BUNDLE)")
    m = onnx.load(str(src))
    node = next((n for n in m.graph.node if n.op_type == "Conv" and n.name == conv), None)
    if node is None:
        raise ValueError(f"Conv node not in {src}: {conv}")
    lo, hi, total, frames = [np.inf, np.inf], [-np.inf, -np.inf], 0.0, 0
    for outs in tapped(m, [node.input[0], node.output[0]], waves, dst_dir, threads):
        for i, o in enumerate(outs):  # the input (1, C, T), then the output (1, C, T + 1)
            lo[i], hi[i] = min(lo[i], float(o.min())), max(hi[i], float(o.max()))
        total = total + outs[0][0].astype(np.float64).sum(axis=1)
        frames += outs[0].shape[2]
    return {"in": (lo[0], hi[0]), "out": (lo[1], hi[1]), "in_mean": total / frames}


def uint8_range(lo: float, hi: float) -> tuple[np.float32, np.uint8]:
    """(scale, zero point) of asymmetric uint8 over [min(lo, 0), max(hi, 0)]: 0 is a code."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 or 1.0  # a tensor that is 0 on every clip: any scale
    return np.float32(scale), np.uint8(np.clip(round(-lo / scale), 0, 255))


def quantize_positional_conv(fp32: Path, graph: Path, calib: list[np.ndarray]) -> str:
    """Rewrite `graph` (an int8 recipe of `fp32`) in place with its positional conv in the
    QLinearConv form, the ranges and the mean frame taken on `fp32` over `calib` (prepared
    calibration clips). Returns the conv's name."""
    import onnx

    conv = positional_conv(onnx.load(str(fp32), load_external_data=False))
    quantize_posconv(graph, graph, conv, conv_stats(fp32, conv, calib, graph.parent))
    return conv


def quantize_posconv(src: Path, dst: Path, conv: str, stats: dict) -> None:
    """Write `dst`: `src` with Conv `conv` as QuantizeLinear -> QLinearConv -> DequantizeLinear
    (module docstring), `stats` from conv_stats on the fp32 graph; every other node as it is."""
    import onnx
    from onnx import helper, numpy_helper

    from hearsay.export.quantize_rows import constant_array

    m = onnx.load(str(src))
    node = next((n for n in m.graph.node if n.op_type == "Conv" and n.name == conv), None)
    if node is None:
        raise ValueError(f"Conv node not in {src}: {conv}")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    w = constant_array(m, node.input[1]).astype(np.float64)  # (N, C / groups, k)
    n_out, per_group, _ = w.shape
    groups = int(attrs.get("group", 1))
    bias = (constant_array(m, node.input[2]).astype(np.float64) if len(node.input) > 2
            else np.zeros(n_out))
    w_scale = np.maximum(np.abs(w).reshape(n_out, -1).max(axis=1), 1e-12) / 127.0  # (N,)
    q = np.clip(np.round(w / w_scale[:, None, None]), -127, 127)
    # the mean frame's rounding cost: output o reads its group's channels g*per .. (g+1)*per
    mean = stats["in_mean"].reshape(groups, per_group)  # (G, C / G)
    group_of = np.arange(n_out) // (n_out // groups)  # (N,)
    tap_sum = (w - q * w_scale[:, None, None]).sum(axis=2)  # (N, C / G)
    bias = bias + (mean[group_of] * tap_sum).sum(axis=1)
    x_scale, x_zero = uint8_range(*stats["in"])
    y_scale, y_zero = uint8_range(*stats["out"])
    p = conv.replace("/", "_").strip("_") + "_q8"
    consts = {f"{p}_xs": x_scale, f"{p}_xz": x_zero, f"{p}_ys": y_scale, f"{p}_yz": y_zero,
              f"{p}_w": q.astype(np.int8), f"{p}_ws": w_scale.astype(np.float32),
              f"{p}_wz": np.zeros(n_out, np.int8),
              f"{p}_b": np.clip(np.round(bias / (float(x_scale) * w_scale)),  # int32 at s_x s_w
                                -2**31, 2**31 - 1).astype(np.int32)}
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    new = [helper.make_node("QuantizeLinear", [node.input[0], f"{p}_xs", f"{p}_xz"], [f"{p}_x"],
                            name=f"{p}_quantize"),
           helper.make_node("QLinearConv", [f"{p}_x", f"{p}_xs", f"{p}_xz", f"{p}_w", f"{p}_ws",
                                            f"{p}_wz", f"{p}_ys", f"{p}_yz", f"{p}_b"],
                            [f"{p}_y"], name=conv, **attrs),
           helper.make_node("DequantizeLinear", [f"{p}_y", f"{p}_ys", f"{p}_yz"],
                            [node.output[0]], name=f"{p}_dequantize")]
    nodes = []
    for n in m.graph.node:
        nodes.extend(new if n.op_type == "Conv" and n.name == conv else [n])
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    used = {i for n in m.graph.node for i in n.input}
    keep = [t for t in m.graph.initializer if t.name in used]  # the fp32 weight goes
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep + inits)
    onnx.save(m, str(dst))
