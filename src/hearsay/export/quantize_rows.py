"""int8 of the conv feature encoder: each Conv becomes integer GEMMs over its input frames,
every frame row quantised on the fly with its own scale; two int8 digits per weight, or, given
calibration clips, one digit and a bias that takes back the rounding's cost to the mean frame.

    (called by export/quantize.py's quantize_int8: the recipes "row-wise convs 1.., one digit,
    mean-corrected + layers" (with a bundle) and "row-wise convs 1.. + layers")

Why not the static QDQ recipe (quantize_conv.py): its two errors measured apart, convs 1-6
rounded to int8 in PyTorch and the MatMuls left fp32, against fp32 on 100 bundle clips of
1.0-5.9 s (scripts/conv_int8_error.py CHECKPOINT --bundle demo_out/bundle, 2026-12-03; the XLS-R
shape is the bench's random-init 12-layer checkpoint, fp32 logit std 0.047; the demo's is
`make demo`'s runs/full, std 1.38):

    convs 1-6                                 XLS-R rms / max |dlogit|   demo rms / max |dlogit|
    weights int8 per channel, acts fp32          0.0095 / 0.0137           0.042 / 0.158
    weights fp32, acts uint8 per tensor          0.0012 / 0.0043           0.018 / 0.054
    weights fp32, acts uint8 per GEMM row        0.0007 / 0.0021           0.010 / 0.037
    weights int8, acts per row                   0.0095 / 0.0144           0.043 / 0.139
    two-digit weights, acts per row              0.0007 / 0.0022           0.010 / 0.032

The weights' rounding is the larger error: it is the same on every frame, so the pooling's
average over frames keeps it, where the activations' rounding is noise that averages out. So
here the weights carry two int8 digits (w ~ q1*s1 + q2*s1/254: the residual of the first digit
is at most s1/2, which the second digit's 127 steps of s1/254 cover) and the activations one
scale per row of the GEMM, found at run time (no calibration set, no range that a loud clip
can overrun). As shipped, with the layers' MatMuls int8 too, the export's gate (100 bundle
clips) gave Spearman 0.9991, agreement 100 %, max |dlogit| 0.0040 on the XLS-R shape and
0.99986 / 100 % / 0.041 on the demo's model, and the int8 model ran about 9 % more clips/s than
with the encoder fp32 (median of one interleaved run, the ranges overlapping: docs/BENCHMARKS.md,
"The conv encoder in int8, row-wise").

Conv -> GEMMs. A conv with kernel k and stride s (s <= k <= 2s: XLS-R's 3/2 and 2/2) reads, for
output frame t, input frames s*t .. s*t+k-1. In the frame-major layout X (B, T, C) the first s of
them are row t of X[:, :s*T'] reshaped to (B*T', s*C), and the other k-s are frames s*t+s+i,
strided slices of X. Each part is one GEMM against the matching taps of the weight:

    Y = sum over parts [ rowscale_p * (Q(part_p) - ZP) @ (q1 + q2/254) * s1 ] + bias   (B*T', N)

Q() is QuantizeLinear with one scale per row and the fixed zero point ZP (onnxruntime's integer
GEMM takes one zero point for all of A). The scale is max(row max / (255 - ZP), GELU_FLOOR / ZP):
the codes then reach down to -ZP * scale <= -0.17, below the least value GELU takes
(-0.16997), which every encoder conv after the first reads. Anything lower saturates and the gate
judges it. Each digit is one com.microsoft MatMulIntegerToFloat (uint8 x int8, per-column
scale); onnxruntime removes the Transposes this adds against the LayerNorm's own.

One digit, the mean corrected (`means`, from conv_input_means on calibration clips). The
second digit doubles the encoder's integer GEMMs. What makes it needed is the part of the
first digit's rounding that the pooling keeps: the error on frame t is x_t @ dW (dW = W - q1*s1,
the same on every frame), and its mean over the frames is mean(x) @ dW. Post-GELU features have
a large mean (about 0.28 per channel on the XLS-R shape, spread 0.3-0.4 between channels), so
that term dominates. With one digit the bias becomes b + m @ dW, m the calibration clips' mean
input frame (constant: a clip's score does not depend on its batch); what is left,
(x_t - m) @ dW, is noise across frames and clips. On the XLS-R shape (random init, 12 layers)
this recipe holds the export's gate about as well as two digits (docs/BENCHMARKS.md, "One
weight digit, the mean corrected"); on `make demo`'s trained 32-channel model it moved one
logit by 0.082, past the 0.05 bound (Spearman 0.99957, rms 0.027 on 100 bundle clips), so
there the two-digit recipe ships. The gate decides per model, as for every recipe.

The first conv (the raw waveform, one channel: 0.3 of 39 conv GFLOP per 8 s clip, and the most
sensitive) stays fp32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ZP = 16  # uint8 zero point of every activation row
GELU_FLOOR = 0.17  # > -min GELU(x) = 0.16997: the lowest value the codes must reach (see above)
DIGIT = 254.0  # the second weight digit's scale is the first's / DIGIT


def weight_digits(w: np.ndarray, count: int = 2) -> list[tuple[np.ndarray, np.ndarray]]:
    """(K, N) float weights -> [(q1, s1), (q2, s2)]: int8 codes and per-column scales with
    w ~ q1 * s1 + q2 * s2, s2 = s1 / DIGIT; |w - that| <= s2 / 2 per weight. count=1: the
    first digit alone, [(q1, s1)]."""
    s1 = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
    q1 = np.clip(np.round(w / s1), -127, 127)
    digits = [(q1.astype(np.int8), s1.astype(np.float32))]
    if count > 1:
        s2 = s1 / DIGIT
        q2 = np.clip(np.round((w - q1 * s1) / s2), -127, 127)
        digits.append((q2.astype(np.int8), s2.astype(np.float32)))
    return digits


class _Builder:
    """Nodes and initializers of one conv's replacement, names prefixed by the conv's."""

    def __init__(self, prefix: str, opset: int):
        self.prefix, self.opset = prefix, opset
        self.nodes, self.inits, self._made = [], [], set()

    def const(self, name: str, value) -> str:
        from onnx import numpy_helper

        full = f"{self.prefix}/{name}"
        if full not in self._made:
            self._made.add(full)
            self.inits.append(numpy_helper.from_array(np.asarray(value), full))
        return full

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        from onnx import helper

        out = output or f"{self.prefix}/{op_type}_{len(self.nodes)}"
        domain = "com.microsoft" if op_type == "MatMulIntegerToFloat" else ""
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{out}_node",
                                           domain=domain, **attrs))
        return out

    def row_max(self, x: str) -> str:  # (M, K) -> (M,); ReduceMax took axes as input from 18
        if self.opset >= 18:
            return self.op("ReduceMax", [x, self.const("axis1", np.array([1], np.int64))],
                           keepdims=0)
        return self.op("ReduceMax", [x], axes=[1], keepdims=0)


def constant_array(model, name: str) -> np.ndarray:
    """The value of tensor `name` in `model`: an initializer or a Constant node's output.
    Raises ValueError for any other (a computed tensor)."""
    from onnx import numpy_helper

    for t in model.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return numpy_helper.to_array(n.attribute[0].t)
    raise ValueError(f"{name}: not a constant (a conv's weight must be)")


def _replace(model, node, opset: int, mean: np.ndarray | None = None) -> _Builder:
    """The GEMM form of Conv `node` (module docstring), writing the conv's own output name.
    With `mean` (C,), the conv input's mean frame: one weight digit, the bias corrected."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    w = constant_array(model, node.input[1]).astype(np.float64)  # (N, C, k)
    n_out, c_in, k = w.shape
    s = int(attrs.get("strides", [1])[0])
    if (attrs.get("group", 1) != 1 or any(attrs.get("pads", [0])) or
            any(d != 1 for d in attrs.get("dilations", [1])) or not s <= k <= 2 * s):
        raise ValueError(f"{node.name}: only group-1 unpadded convs with stride <= kernel <= "
                         f"2 x stride have the row-wise form (kernel {k}, stride {s}, {attrs})")
    bias = (constant_array(model, node.input[2]).astype(np.float32) if len(node.input) > 2
            else np.zeros(n_out, np.float32))
    b = _Builder(node.name, opset)
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    x = b.op("Transpose", [node.input[0]], perm=[0, 2, 1])  # (B, C, T) -> (B, T, C)
    shape = b.op("Shape", [x])
    batch = b.op("Gather", [shape, b.const("i0", i64([0]))], axis=0)  # (1,)
    frames = b.op("Gather", [shape, b.const("i1", i64([1]))], axis=0)
    # T' = (T - k) // s + 1 output frames; s*T' input frames feed the first s taps
    t_out = b.op("Add", [b.op("Div", [b.op("Sub", [frames, b.const("k", i64([k]))]),
                                      b.const("s", i64([s]))]), b.const("one", i64([1]))])
    span = b.op("Mul", [t_out, b.const("s", i64([s]))])
    axis1 = b.const("i1", i64([1]))
    head = b.op("Slice", [x, b.const("i0", i64([0])), span, axis1])
    taps = [(b.op("Reshape", [head, b.const("rows_head", i64([-1, s * c_in]))]),
             w[:, :, :s].transpose(2, 1, 0).reshape(s * c_in, n_out))]  # rows: tap-major
    for i in range(k - s):  # frames s*t + s + i: every s-th frame from s + i
        tail = b.op("Slice", [x, b.const(f"from{i}", i64([s + i])),
                              b.op("Add", [span, b.const(f"from{i}", i64([s + i]))]), axis1,
                              b.const("s", i64([s]))])
        taps.append((b.op("Reshape", [tail, b.const("rows_tail", i64([-1, c_in]))]),
                     w[:, :, s + i].T))
    parts = []
    for j, (rows, wj) in enumerate(taps):
        scale = b.op("Max", [b.op("Div", [b.row_max(rows),
                                          b.const("levels", np.float32(255 - ZP))]),
                             b.const("min_scale", np.float32(GELU_FLOOR / ZP))])  # (M,)
        zero = b.op("Expand", [b.const("zp", np.uint8(ZP)), b.op("Shape", [scale])])
        codes = b.op("QuantizeLinear", [rows, scale, zero], axis=0)  # (M, K) uint8
        if mean is None:
            digits = weight_digits(wj)
        else:  # one digit; the bias takes back what its rounding costs the mean frame
            digits = weight_digits(wj, count=1)
            (q1, s1), = digits
            rows_mean = np.tile(mean, len(wj) // c_in)  # (K,): the part's taps, tap-major
            bias = bias + (rows_mean @ (wj - q1 * s1.astype(np.float64))).astype(np.float32)
        outs = [b.op("MatMulIntegerToFloat",
                     [codes, b.const(f"w{j}_{d}", q), b.const("one_f", np.float32(1.0)),
                      b.const(f"w{j}_{d}_scale", sd), b.const("zp", np.uint8(ZP))])
                for d, (q, sd) in enumerate(digits)]
        acc = b.op("Add", outs) if len(outs) > 1 else outs[0]
        parts.append(b.op("Mul", [acc, b.op("Unsqueeze", [scale, axis1])]))
    y = parts[0]
    for p in parts[1:]:
        y = b.op("Add", [y, p])
    y = b.op("Add", [y, b.const("bias", bias)])  # (B*T', N)
    y = b.op("Reshape", [y, b.op("Concat", [batch, t_out, b.const("n", i64([n_out]))], axis=0)])
    b.op("Transpose", [y], output=node.output[0], perm=[0, 2, 1])  # (B, N, T')
    return b


def tapped(m, names: list[str], waves: list[np.ndarray], dst_dir: Path, threads: int = 0):
    """Yield, per clip of `waves` (prepared clips, run one by one, unpadded, by onnxruntime
    fp32), the tensors `names` of graph `m` (an onnx.ModelProto, fp32, as its caller loaded it)
    as a list of arrays. `m` gains them as outputs; it is written so under `dst_dir` and
    removed when the generator ends."""
    import tempfile

    import onnx
    from onnx import TensorProto, helper

    from hearsay.engines.cpu_engine import make_session
    from hearsay.export.quantize_conv import clip_feed

    m.graph.output.extend(helper.make_tensor_value_info(t, TensorProto.FLOAT, None)
                          for t in names)
    with tempfile.TemporaryDirectory(dir=Path(dst_dir)) as tmp:
        onnx.save(m, str(Path(tmp) / "taps.onnx"))
        session = make_session(Path(tmp) / "taps.onnx", threads)
        for w in waves:
            yield session.run(names, clip_feed(w))


def conv_input_means(src: Path, convs: list[str], waves: list[np.ndarray], dst_dir: Path,
                     threads: int = 0) -> dict[str, np.ndarray]:
    """{conv name: (C,) float64}, the mean frame of each conv's input over every frame of
    `waves` (prepared clips, run one by one by onnxruntime fp32 on `src`: `tapped`). Raises
    ValueError for a name that is no Conv of `src`, or no clips."""
    import onnx

    if not waves:
        raise ValueError("no clips to take the mean frames from (pass --calibration BUNDLE)")
    m = onnx.load(str(src))
    inputs = {n.name: n.input[0] for n in m.graph.node if n.op_type == "Conv" and n.name in convs}
    if set(inputs) != set(convs):
        raise ValueError(f"Conv nodes not in {src}: {sorted(set(convs) - set(inputs))}")
    names = sorted(set(inputs.values()))
    sums = dict.fromkeys(names, 0.0)
    frames = dict.fromkeys(names, 0)
    for outs in tapped(m, names, waves, dst_dir, threads):
        for t, o in zip(names, outs, strict=True):  # (1, C, T) each: T the input's frames
            sums[t] = sums[t] + o[0].astype(np.float64).sum(axis=1)
            frames[t] += o.shape[2]
    return {c: sums[t] / frames[t] for c, t in inputs.items()}


def quantize_convs_rowwise(src: Path, dst: Path, convs: list[str],
                           means: dict[str, np.ndarray] | None = None) -> list[str]:
    """Write `dst`: `src` with the Conv nodes named in `convs` in the row-wise int8 form
    (module docstring); every other node as it is. With `means` (conv_input_means), one weight
    digit and the mean-corrected bias; without, two digits. Returns the nodes replaced. Raises
    ValueError for an empty list or a conv that has no such form."""
    import onnx
    from onnx import helper

    if not convs:
        raise ValueError("no Conv nodes to quantise")
    m = onnx.load(str(src))
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    chosen, found, nodes = set(convs), [], []
    for n in m.graph.node:
        if n.name in chosen and n.op_type == "Conv":
            b = _replace(m, n, opset, None if means is None else means[n.name])
            nodes.extend(b.nodes)
            m.graph.initializer.extend(b.inits)
            found.append(n.name)
        else:
            nodes.append(n)
    if set(found) != chosen:
        raise ValueError(f"Conv nodes not in {src}: {sorted(chosen - set(found))}")
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    used = {i for n in m.graph.node for i in n.input}
    keep = [t for t in m.graph.initializer if t.name in used]  # the fp32 conv weights go
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, str(dst))
    return found
