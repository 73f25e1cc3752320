"""int8 of the conv feature encoder: static (calibrated) QDQ quantisation of its convolutions.

    (called by export/quantize.py's quantize_int8 when `hearsay export onnx --calibration BUNDLE`
    names a bundle and the row-wise recipes, quantize_rows.py, failed their gate; the sensitivity
    table below: quantize.conv_sensitivity)

The encoder's seven Conv1d (raw waveform -> 512 channels every 20 ms) are 39 of the 175 GFLOP of
an 8 s clip on the XLS-R shape and were 43 % of the MatMul-only int8 model's time. onnxruntime's
dynamic quantiser reaches only MatMul / Attention, so here they are quantised statically
(quantize_rows.py rewrites them as GEMMs instead): QuantizeLinear / DequantizeLinear pairs
around each chosen Conv (QDQ format), weights signed int8 per output channel, activations uint8
with one scale per tensor, the scales taken from the min / max each tensor reaches over the
calibration clips. onnxruntime fuses every DQ -> Conv -> Q into one QLinearConv at session load.

Calibration clips are real audio: clips of the bundle (audio/<id>.flac, the trimmed copies the
training read) prepared exactly as hearsay-score prepares them, each fed alone at its own length,
so no padding enters the ranges. The gate then judges on other clips of the same bundle (never
a calibration clip), topped up with synthetic clips over the deploy range when the bundle is
small (quantize.py).

The first conv reads the raw waveform (one channel, peaks of a normalised wave): it is the one
most likely to lose from an 8-bit input, so the recipes are tried with it quantised and then
without it, and the gate decides (`RECIPES` in quantize.py).

Sensitivity (quantize.conv_sensitivity, 2026-12-02): each conv quantised alone (MatMuls fp32)
against ORT fp32, on the demo's trained model (`make demo`'s runs/full, 32-channel CNN, fused
export, fp32 logit std 1.34), calibrated on 24 clips of the demo bundle, judged on 100 other
clips of it (1.0-5.9 s), export gate (Spearman >= 0.995, agreement >= 99 %, max |dlogit| <= 0.05):

    quantised                Spearman  agreement  max |dlogit|  rms |dlogit|
    conv 0 (raw waveform)     0.9369     92 %        1.95         0.56       failed
    conv 1                    0.9997    100 %        0.094        0.025      failed (max)
    conv 2                    0.9997    100 %        0.057        0.023      failed (max)
    conv 3                    0.9998     98 %        0.084        0.046      failed
    conv 4                    0.9996     96 %        0.146        0.075      failed
    conv 5                    0.9997     98 %        0.109        0.049      failed
    conv 6                    0.9997     99 %        0.111        0.044      failed (max)
    all seven                 0.9378     93 %        1.99         0.56       failed
    convs 1-6 (first fp32)    0.9990     99 %        0.146        0.048      failed (max)

The first conv is by far the most sensitive (an 8-bit raw waveform); the others keep the ranking
(Spearman >= 0.9996) but each moves single logits past the 0.05 bound on this model, so its
static recipe fails there. On the XLS-R shape (random init, logit std 0.04) the picture is in
docs/BENCHMARKS.md ("CPU inference", its history); quantize_rows.py shows where the error comes
from (the weights' rounding, which one scale per tensor of activations adds to).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def encoder_convs(model) -> list[str]:
    """Names of the feature encoder's Conv nodes of `model` (an onnx.ModelProto), graph order.

    Found by shape, not by name (TorchScript and dynamo name nodes differently): the Convs with a
    constant weight and group 1 that come before the first MatMul. The positional conv (grouped,
    after the projection MatMul) is not one of them. Raises ValueError when none is found or one
    is unnamed (quantize_static selects by name)."""
    consts = {t.name for t in model.graph.initializer}
    consts |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    names = []
    for n in model.graph.node:
        if n.op_type == "MatMul":
            break
        group = next((a.i for a in n.attribute if a.name == "group"), 1)
        if n.op_type == "Conv" and len(n.input) >= 2 and n.input[1] in consts and group == 1:
            names.append(n.name)
    if not names or not all(names):
        raise ValueError(f"{len(names)} encoder Conv nodes before the first MatMul (all must be "
                         "named): export the Detector with export/onnx_export.py")
    return names


def bundle_clips(root: Path, front: dict, calib: int, gate: int,
                 rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(calibration, gate) prepared waves from the bundle at `root`, disjoint: a random draw of
    the bundle's clips, the first `calib` for calibration, up to `gate` of the rest for the gate.
    Prepared with the model folder's front end (hearsay.sound.audio.prepare_file: trim, cap at
    max_s,
    band-limit, normalise); clips shorter than min_s after that are skipped, as scoring skips
    them. Raises ValueError when the bundle has fewer than `calib` usable clips."""
    from hearsay.contracts.bundle import load_bundle
    from hearsay.contracts.model_dir import prepare_args
    from hearsay.sound.audio import AudioError, prepare_file

    b = load_bundle(root)
    ids = list(b.manifest["id"])
    kwargs = prepare_args(front)
    min_n = int(front["min_s"] * front["sample_rate"])
    waves: list[np.ndarray] = []
    for i in rng.permutation(len(ids)):
        if len(waves) >= calib + gate:
            break
        try:
            w = prepare_file(b.flac(ids[i]), **kwargs)
        except AudioError:
            continue
        if len(w) >= min_n:
            waves.append(w)
    if len(waves) < calib:
        raise ValueError(f"{root}: {len(waves)} usable clips, calibration needs {calib} (pass a "
                         "bigger bundle to --calibration, or fewer --calibration-clips)")
    return waves[:calib], waves[calib:]


def clip_feed(w: np.ndarray) -> dict:
    """The exported model's inputs for one prepared wave (T,), unpadded: (1, T) each."""
    return {"input_values": w[None, :].astype(np.float32),
            "attention_mask": np.ones((1, len(w)), dtype=np.int64)}


class _Reader:
    """onnxruntime CalibrationDataReader over prepared waves: one clip per batch, unpadded."""

    def __init__(self, waves: list[np.ndarray]):
        self._it = iter(waves)

    def get_next(self) -> dict | None:
        w = next(self._it, None)
        return None if w is None else clip_feed(w)


def quantize_convs(src: Path, dst: Path, convs: list[str], calib: list[np.ndarray]) -> list[str]:
    """Static QDQ quantisation of the Conv nodes `convs` of `src` into `dst`, calibrated (min /
    max) on `calib`; per-channel int8 weights, uint8 activations. Every other node stays as it
    is. Returns the nodes quantised; convs=[] is refused (onnxruntime reads [] as 'all')."""
    import onnx

    if not convs:
        raise ValueError("no Conv nodes to quantise (onnxruntime would read [] as 'every node')")
    if not calib:
        raise ValueError("no calibration clips")
    # The fused graph's Gelu (com.microsoft) has no type for onnx's shape inference, and the
    # calibrator skips a tensor it cannot see is float: name every chosen conv's input and
    # output float up front (a copy beside dst; src stays as it is).
    m = onnx.load(str(src))
    typed = {v.name for v in (*m.graph.value_info, *m.graph.input, *m.graph.output)}
    chosen = set(convs)
    for n in m.graph.node:
        if n.name in chosen:
            for name in (n.input[0], n.output[0]):
                if name not in typed:
                    m.graph.value_info.append(onnx.helper.make_tensor_value_info(
                        name, onnx.TensorProto.FLOAT, None))
                    typed.add(name)
    typed_src = dst.with_suffix(".typed.onnx")
    onnx.save(m, str(typed_src))
    try:
        _quantize_static(typed_src, dst, convs, calib)
    finally:
        typed_src.unlink(missing_ok=True)
    return list(convs)


def _quantize_static(src: Path, dst: Path, convs: list[str], calib: list[np.ndarray]) -> None:
    import onnx
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    quantize_static(str(src), str(dst), _Reader(calib), quant_format=QuantFormat.QDQ,
                    op_types_to_quantize=["Conv"], nodes_to_quantize=list(convs),
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
