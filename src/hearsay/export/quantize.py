"""int8 variant of an exported model: dynamic quantisation of the transformer layers' MatMuls and
of the conv feature encoder (quantize_rows.py), or, given a calibration bundle and when that
fails its gate, static quantisation of the encoder (quantize_conv.py).

    (called by `hearsay export onnx`; see export/onnx_export.py)

What is quantised (`layer_matmuls`): the six MatMuls of every transformer layer (q, k, v, out,
FFN in, FFN out), per output channel, signed int8 weights, activations quantised on the fly;
and the encoder's convs but the first, as integer GEMMs with one activation scale per frame
row, found at run time, and int8 weights of one digit with a mean-corrected bias (needs
calibration clips) or of two digits (quantize_rows.py says why those forms); with a bundle,
the positional conv too (quantize_posconv.py: static, its ranges from the calibration clips).
RECIPES below are tried in turn and the gate decides: with `--calibration BUNDLE` the one-digit
row-wise convs + the positional conv + layers first, then the same with the positional conv
fp32; the two-digit row-wise convs + layers; with a bundle then the static QDQ convs (every
conv, then all but the first); last the layers alone. Everything else stays fp32:

  * the first encoder conv (the raw waveform: the most sensitive conv, and only 0.3 of the
    encoder's 39 GFLOP per 8 s clip);
  * the feature projection (conv features -> hidden), the first MatMul: it feeds h_0 and so every
    later state; quantised alone it moved the logits by rms 0.00087 (24 clips of 1-4 s);
  * the pooling attention (2 MatMuls) and the head (a Gemm, which onnxruntime's MatMul
    quantiser rewrites and quantises unless the node list leaves it out): the last products
    before the logit, nothing after them averages their error out. The head was most of the
    error of the old recipe "every MatMul": rms |delta logit| 0.0045 with it, 0.0009 without.

Their FLOPs are negligible (projection 0.4 of 175 GFLOP per 8 s clip; pool and head less), so the
speed is the same. Measured 2026-12-01 on the XLS-R-300M shape, 12 layers, random init (fp32 logit
std 0.042 over the gate clips: a random head barely separates clips, the harshest case for a rank
gate), against onnxruntime fp32 on the export gate's 100 clips (seed 1, 0.6-3 s, batches of 4):

    quantised                                 Spearman  agreement  rms |dlogit|
    every MatMul + the head (the old recipe)   0.9955     94 %       0.0049     failed
    projection + layers (pool, head fp32)      0.9993     96 %       0.0011     failed
    layers + pool (projection, head fp32)      0.9991    100 %       0.0011     passed
    layers only (this recipe)                  0.99905   100 %       0.0011     passed
      the same on 100 other clips (seed 2)     0.9992     99 %       0.0012     passed (1 flip)

The margin on agreement is thin on this model: at rms 0.0011 against a spread of 0.042 about one
clip in 100 sits close enough to the median to flip, and the gate allows one. With the head
quantised, per-tensor weights, QUInt8 weights and reduce_range were no better (24 clips of
1-4 s: rms 0.0066, 0.0050, 0.0031 vs 0.0045, each failing the gate); reduce_range on the layers
only was worse (0.0018 vs 0.0012); ActivationSymmetric is ignored by dynamic quantisation.
Quantising fewer of the layers' MatMuls does not help reliably: each kind alone (v, out, FFN in,
FFN out) moves the logits by rms 0.0011-0.0019 and the errors partly cancel.

The gate compares onnxruntime int8 against onnxruntime fp32 on each KIND of input the scorer
feeds the model, judged apart, with the same bounds, and an int8 ships only when every kind
passes (a variant that holds on whole clips but drifts on windows is not shipped):

  * "clips": whole clips, the bundle's gate clips (with --calibration) topped up with synthetic
    ones, lengths spread over the deploy range (front_end.json's min_s .. max_s: 0.5-8 s);
  * "long_windows": every window hearsay-score cuts from QuantGate.long_files recordings of
    long_s seconds (default one of 5 min): clips (the bundle's gate clips, else synthetic) at
    random recorded levels, joined with pauses of 0 .. max_gap_s s (digital silence or a room
    floor), written to a 16 kHz WAV and cut by hearsay.sound.windows.file_windows, the code
    hearsay-score cuts a file with: trimmed once, max_s windows every HOP_S (the overlaps),
    each band-limited and normalised over its own samples -- a window that is mostly pause
    is normalised up, which is where int8 drifts most.

Per kind:

  * Spearman rank correlation of the logits >= 0.995 (the ranking, i.e. every threshold's ROC);
  * the decision at the threshold agrees on >= 99% of inputs. The threshold is the fold's
    calibrated one when given (`--threshold`), else the kind's median fp32 logit -- the place
    where the most decisions can flip, so the strictest choice without a calibration;
  * max |delta logit| <= 0.05 over every input: the bound parity B holds bf16 to, so int8 moves
    no single score further than the training numerics may.

Every figure lands in parity.json under "int8": per recipe tried ("attempts") and per kind
("kinds": each kind's gate_report; the top-level figures are the worst kind's).
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hearsay.export import probe
from hearsay.sound.audio import SAMPLE_RATE

# Constant-weight MatMuls per transformer layer: q, k, v, out projections, FFN in, FFN out.
PER_LAYER = 6


@dataclass(frozen=True)
class QuantGate:
    clips: int = 100  # gate clips (synthetic), lengths spread evenly over [min_s, max_s]
    min_s: float | None = None  # shortest gate clip (s); None = front_end.json's min_s (0.5)
    max_s: float | None = None  # longest gate clip (s); None = front_end.json's max_s (8)
    min_spearman: float = 0.995  # Spearman(int8, fp32) must reach this
    min_agreement: float = 0.99  # share of clips whose decision at the threshold agrees
    max_abs_dlogit: float = 0.05  # no clip's logit may move further (parity B's bf16 bound)
    threshold: float | None = None  # decision threshold (logit); None = median fp32 logit
    calibration_clips: int = 24  # bundle clips that calibrate the static conv ranges (never gated)
    long_files: int = 1  # long recordings whose windows are gated as their own kind ...
    long_s: float = 300.0  # ... of this many seconds (5 min: 74 windows of 8 s every 4 s)
    max_gap_s: float = 6.0  # pauses between their clips: 0 .. this (s), longer than the hop


# The int8 recipes, tried in turn; the first whose gate holds is shipped: (label, which encoder
# convs are int8 besides the layers' MatMuls, and how). The row-wise ones (quantize_rows.py:
# every conv but the first, activations quantised per frame row at run time): "rowwise_mean"
# with one weight digit and the bias corrected by the calibration clips' mean frame,
# "rowwise" with two digits and no calibration; "rowwise_mean_pos" is "rowwise_mean" with the
# positional conv int8 too (quantize_posconv.py: static QLinearConv, ranges from calibration
# clips). The static ones (quantize_conv.py) and the two mean-corrected ones are tried only
# with a calibration bundle.
RECIPES = (("row-wise convs 1.., one digit, mean-corrected + positional conv + layers",
            "rowwise_mean_pos"),
           ("row-wise convs 1.., one digit, mean-corrected + layers", "rowwise_mean"),
           ("row-wise convs 1.. + layers", "rowwise"), ("convs + layers", "all"),
           ("convs 1.. + layers (first conv fp32)", "skip_first"), ("layers", "none"))
# the recipes that need calibration clips ("rowwise_mean_pos": quantize_posconv.py's ranges)
CALIBRATED = ("rowwise_mean_pos", "rowwise_mean", "all", "skip_first")


def layer_matmuls(model) -> list[str]:
    """Names of the transformer layers' MatMul nodes in `model` (an onnx.ModelProto).

    Found by position, so the TorchScript and the dynamo graphs (whose node names differ) are
    treated alike: the MatMuls with a constant weight come, in graph order, as the feature
    projection, PER_LAYER per layer, then the pooling attention's two (none with mean pooling);
    the head is a Gemm.
    Raises ValueError when the graph does not have that shape (then nothing is quantised)."""
    consts = {t.name for t in model.graph.initializer}
    consts |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    names = [n.name for n in model.graph.node
             if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in consts]
    # drop the feature projection (first) and the attentive pooling's two (last; mean pooling
    # has none: 1 + PER_LAYER * L MatMuls in all)
    pooling = (len(names) - 1) % PER_LAYER
    body = names[1:len(names) - pooling]
    if not body or pooling not in (0, 2) or not all(names):
        raise ValueError(f"{len(names)} constant-weight MatMuls; expected 1 + {PER_LAYER} per "
                         "layer + 2 (projection, layers, attentive pooling; 0 with mean "
                         "pooling), all named: export the Detector with export/onnx_export.py")
    return body


def quantize_file(src: Path, dst: Path, nodes: list[str] | None = None) -> list[str]:
    """onnxruntime quantize_dynamic of `nodes` (default: `layer_matmuls` of `src`), per channel,
    QInt8 weights; returns the nodes quantised. nodes=[] is refused (it would quantise all)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if nodes is None:
        nodes = layer_matmuls(onnx.load(str(src), load_external_data=False))
    if not nodes:
        raise ValueError("no nodes to quantise (onnxruntime would read [] as 'every node')")
    # the fused graph's q/k/v MatMuls feed a com.microsoft op, whose output types onnx's shape
    # inference cannot give: the quantiser is told they are float
    quantize_dynamic(str(src), str(dst), op_types_to_quantize=["MatMul"], per_channel=True,
                     weight_type=QuantType.QInt8, nodes_to_quantize=list(nodes),
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return list(nodes)


def gate_report(fp32: np.ndarray, int8: np.ndarray, gate: QuantGate) -> dict:
    """Spearman and decision agreement of int8 vs fp32 logits (N,), against `gate`."""
    from scipy.stats import spearmanr

    threshold = float(np.median(fp32)) if gate.threshold is None else float(gate.threshold)
    rho = float(spearmanr(fp32, int8).statistic) if len(fp32) > 1 else float("nan")
    agreement = float(np.mean((fp32 >= threshold) == (int8 >= threshold)))
    delta = int8 - fp32
    worst = float(np.max(np.abs(delta)))
    passed = bool(np.isfinite(rho) and rho >= gate.min_spearman
                  and agreement >= gate.min_agreement and worst <= gate.max_abs_dlogit)
    return {"clips": int(len(fp32)), "spearman": rho, "agreement": agreement,
            "threshold": threshold,
            "threshold_source": "median fp32 logit" if gate.threshold is None else "given",
            "max_abs_dlogit": worst, "max_abs_dlogit_bound": gate.max_abs_dlogit,
            "rms_dlogit": float(np.sqrt(np.mean(delta**2))),
            "fp32_logit_std": float(np.std(fp32)),  # spread the int8 error is judged against
            "min_spearman": gate.min_spearman, "min_agreement": gate.min_agreement,
            "passed": passed}


def kinds_report(fp32: np.ndarray, int8: np.ndarray, kinds: dict[str, slice],
                 gate: QuantGate) -> dict:
    """gate_report of each input kind (`kinds`: name -> its slice of the logits), judged apart;
    passed only when every kind with inputs passed. The top-level figures are the worst
    kind's (highest max and rms |delta|, lowest Spearman and agreement)."""
    reports = {k: gate_report(fp32[s], int8[s], gate) for k, s in kinds.items()
               if s.stop > s.start}
    worst = {"max_abs_dlogit": max, "rms_dlogit": max, "spearman": min, "agreement": min}
    return {**{key: pick((r[key] for r in reports.values()), default=float("nan"))
               for key, pick in worst.items()},
            "clips": int(len(fp32)), "max_abs_dlogit_bound": gate.max_abs_dlogit,
            "threshold": None if gate.threshold is None else float(gate.threshold),
            "threshold_source": ("median fp32 logit of each kind" if gate.threshold is None
                                 else "given"),
            "min_spearman": gate.min_spearman, "min_agreement": gate.min_agreement,
            "passed": bool(reports) and all(r["passed"] for r in reports.values()),
            "failed_kinds": [k for k, r in reports.items() if not r["passed"]],
            "kinds": reports}


def gate_clips(gate: QuantGate, front: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """The gate's prepared clips, lengths spread evenly over [min_s, max_s] (default: the
    front end's deploy range, front_end.json's min_s .. max_s)."""
    lo = float(front["min_s"] if gate.min_s is None else gate.min_s)
    hi = float(front["max_s"] if gate.max_s is None else gate.max_s)
    return probe.synthetic_clips(rng, gate.clips, lo, hi, front)


def long_recordings(gate: QuantGate, rng: np.random.Generator,
                    sources: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """gate.long_files recordings of gate.long_s s, (N,) float32 at 16 kHz: clips (`sources`,
    the bundle's gate clips, drawn at random; else synthetic probe.voice_like clips of 1-8 s),
    each at a random level (-35 .. -12 dBFS rms: recorded levels differ), joined with pauses
    of 0 .. gate.max_gap_s s, half digital silence, half a room floor (-70 .. -50 dBFS)."""
    n = int(gate.long_s * SAMPLE_RATE)
    out = []
    for _ in range(gate.long_files):
        parts, total = [], 0
        while total < n:
            clip = (sources[rng.integers(len(sources))] if sources else
                    probe.voice_like(rng, rng.uniform(1.0, 8.0), SAMPLE_RATE)).astype(np.float64)
            clip *= 10 ** (rng.uniform(-35, -12) / 20) / max(np.sqrt(np.mean(clip**2)), 1e-12)
            gap = int(rng.uniform(0, gate.max_gap_s) * SAMPLE_RATE)
            floor = 0.0 if rng.random() < 0.5 else 10 ** (rng.uniform(-70, -50) / 20)
            parts += [clip, floor * rng.standard_normal(gap)]
            total += len(clip) + gap
        out.append(np.concatenate(parts)[:n].astype(np.float32))
    return out


def long_file_windows(gate: QuantGate, front: dict, rng: np.random.Generator,
                      sources: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """The windows hearsay-score scores in long_recordings(gate, rng, sources): each written to
    a 16 kHz WAV and cut by hearsay.sound.windows.file_windows as hearsay-score cuts a file
    (trimmed once, windows of max_s every HOP_S, each band-limited and normalised over its own
    samples). A gate max_s (tests) cuts shorter windows."""
    import soundfile as sf

    from hearsay.sound.windows import HOP_S, file_windows

    win_s = float(front["max_s"] if gate.max_s is None else gate.max_s)
    out = []
    with tempfile.TemporaryDirectory(prefix="hearsay-gate-") as tmp:
        for k, x in enumerate(long_recordings(gate, rng, sources)):
            path = Path(tmp) / f"long{k}.wav"
            sf.write(path, x, SAMPLE_RATE, subtype="FLOAT")
            _, _, cut, _ = file_windows(path, win_s, min(HOP_S, win_s), top_db=front["top_db"],
                                        cutoff_hz=front["cutoff_hz"])
            out += [w.wave for w in cut]
    return out


def _recipe_convs(convs: list[str], which: str) -> list[str]:
    return {"rowwise_mean_pos": convs[1:], "rowwise_mean": convs[1:], "rowwise": convs[1:],
            "all": convs, "skip_first": convs[1:], "none": []}[which]


def write_recipe(src: Path, dst: Path, which: str, convs: list[str], nodes: list[str],
                 calib: list[np.ndarray], layers: Path) -> None:
    """`dst` = `src` with the layers' MatMuls (`nodes`) dynamic int8 and `convs` int8 the way
    recipe `which` says (RECIPES). `layers` is `src` with `nodes` already int8 (quantize_file),
    made once and read by every recipe that starts from it: "none" and the row-wise ones."""
    import shutil

    from hearsay.export import quantize_conv, quantize_posconv, quantize_rows

    if not convs:
        shutil.copyfile(layers, dst)
    elif which == "rowwise_mean_pos":  # the one-digit recipe, then the positional conv on it
        write_recipe(src, dst, "rowwise_mean", convs, nodes, calib, layers)
        quantize_posconv.quantize_positional_conv(src, dst, calib)  # ranges from the fp32 graph
    elif which in ("rowwise", "rowwise_mean"):
        means = (quantize_rows.conv_input_means(src, convs, calib, dst.parent)
                 if which == "rowwise_mean" else None)
        # on the int8 MatMuls, not before them: that quantiser cannot type these GEMMs
        quantize_rows.quantize_convs_rowwise(layers, dst, convs, means)
    else:  # static: QDQ convs on the fp32 graph, then the MatMuls
        tmp = dst.with_suffix(".step.onnx")
        try:
            quantize_conv.quantize_convs(src, tmp, convs, calib)
            quantize_file(tmp, dst, nodes)
        finally:
            tmp.unlink(missing_ok=True)


def quantize_int8(src: Path, dst: Path, gate: QuantGate, front: dict,
                  rng: np.random.Generator, calibration: Path | None = None) -> dict:
    """Write `dst` (int8) from `src` (fp32) and return its gate report (caller ships or drops).

    RECIPES are tried in turn, the first that passes is written to `dst`, and every attempt is
    in the report's "attempts". Without `calibration` (a bundle folder) the static conv recipes
    are skipped and the gate runs on synthetic clips over the deploy range. With it,
    `gate.calibration_clips` bundle clips calibrate the static recipes (quantize_conv.py) and
    the gate runs on up to `gate.clips` other bundle clips, topped up with synthetic ones."""
    import onnx

    from hearsay.engines.cpu_engine import make_session, run_logits
    from hearsay.export import quantize_conv

    graph = onnx.load(str(src), load_external_data=False)
    nodes = layer_matmuls(graph)
    try:
        convs, no_convs = quantize_conv.encoder_convs(graph), None
    except ValueError as err:  # a graph whose convs cannot be found keeps them fp32
        convs, no_convs = [], str(err)
    calib, real = [], []
    recipes = [r for r in RECIPES if r[1] not in CALIBRATED]
    if calibration is not None:
        calib, real = quantize_conv.bundle_clips(Path(calibration), front,
                                                 gate.calibration_clips, gate.clips, rng)
        recipes = list(RECIPES)
    recipes = [r for r in recipes if convs or r[1] == "none"]
    top_up = max(0, gate.clips - len(real))
    waves = real + (gate_clips(dataclasses.replace(gate, clips=top_up), front, rng)
                    if top_up else [])
    long_windows = long_file_windows(gate, front, rng, real)  # the deploy range: long files
    kinds = {"clips": slice(0, len(waves)),
             "long_windows": slice(len(waves), len(waves) + len(long_windows))}
    waves += long_windows
    fp32 = run_logits(make_session(src), waves)
    attempts = []
    layers = dst.with_suffix(".layers.onnx")  # the layers' MatMuls int8: once for every recipe
    try:
        quantize_file(src, layers, nodes)
        for label, which in recipes:
            chosen = _recipe_convs(convs, which)
            try:
                write_recipe(src, dst, which, chosen, nodes, calib, layers)
                report = kinds_report(fp32, run_logits(make_session(dst), waves), kinds, gate)
            except Exception as err:  # noqa: BLE001 - a recipe the quantiser cannot make: next
                if not chosen:
                    raise
                report = {"passed": False, "error": f"{type(err).__name__}: {str(err)[:500]}"}
            attempts.append({"recipe": label, "quantised_convs": len(chosen), **report})
            if report["passed"]:
                break
    finally:
        layers.unlink(missing_ok=True)
    best = attempts[-1]  # the one that passed, or else the last tried ("none": always tried)
    lengths = [len(w) / SAMPLE_RATE for w in waves]
    return {**best, "quantised_matmuls": len(nodes), "attempts": attempts,
            "conv_recipes_skipped": no_convs,
            "gate_clips_bundle": len(real),
            "gate_clips_synthetic": len(waves) - len(real) - len(long_windows),
            "calibration_clips": len(calib), "gate_windows_long": len(long_windows),
            "long_files": gate.long_files, "long_file_s": gate.long_s,
            "long_max_gap_s": gate.max_gap_s,
            "calibration": None if calibration is None else str(calibration),
            "lengths_s": [round(min(lengths), 3), round(max(lengths), 3)]}


def conv_sensitivity(src: Path, calib: list[np.ndarray], waves: list[np.ndarray], gate,
                     tmp: Path, threads: int = 0) -> list[dict]:
    """The int8 gate of each encoder conv quantised alone, then of all and of all but the
    first, against ORT fp32 of `src` on `waves` (the MatMuls stay fp32 here, so each row is the
    conv's own error). -> [{"quantised": label, **gate_report}]."""
    import onnx

    from hearsay.engines.cpu_engine import make_session, run_logits
    from hearsay.export import quantize_conv

    convs = quantize_conv.encoder_convs(onnx.load(str(src), load_external_data=False))
    fp32 = run_logits(make_session(src, threads), waves)
    sets = [(f"conv {i}", [c]) for i, c in enumerate(convs)]
    sets += [("all convs", convs), ("convs 1.. (first fp32)", convs[1:])]
    rows = []
    for label, nodes in sets:
        if not nodes:
            continue
        dst = tmp / "sensitivity.onnx"
        quantize_conv.quantize_convs(src, dst, nodes, calib)
        rows.append({"quantised": label,
                     **gate_report(fp32, run_logits(make_session(dst, threads), waves), gate)})
    return rows
