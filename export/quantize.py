"""int8 variant of an exported model: dynamic quantisation of MatMul only, shipped behind a gate.

    (called by `hearsay export onnx`; see export/onnx_export.py)

Only MatMul weights are quantised (per output channel, signed int8, activations quantised on the
fly): the conv feature encoder of XLS-R is known to break under int8, and it is a small share of
the FLOPs. The gate compares onnxruntime int8 against onnxruntime fp32 on the same clips:

  * Spearman rank correlation of the logits >= 0.995 (the ranking, i.e. every threshold's ROC);
  * the decision at the threshold agrees on >= 99% of clips. The threshold is the fold's
    calibrated one when given (`--threshold`), else the median fp32 logit of the gate clips --
    the place where the most decisions can flip, so the strictest choice without a calibration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from export import parity


@dataclass(frozen=True)
class QuantGate:
    clips: int = 100  # gate clips (synthetic, mixed lengths)
    min_s: float = 0.6  # shortest gate clip (seconds)
    max_s: float = 3.0  # longest gate clip (seconds)
    min_spearman: float = 0.995  # Spearman(int8, fp32) must reach this
    min_agreement: float = 0.99  # share of clips whose decision at the threshold agrees
    threshold: float | None = None  # decision threshold (logit); None = median fp32 logit


def quantize_file(src: Path, dst: Path) -> None:
    """onnxruntime quantize_dynamic: MatMul only, per channel, QInt8 weights."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), op_types_to_quantize=["MatMul"], per_channel=True,
                     weight_type=QuantType.QInt8)


def gate_report(fp32: np.ndarray, int8: np.ndarray, gate: QuantGate) -> dict:
    """Spearman and decision agreement of int8 vs fp32 logits (N,), against `gate`."""
    from scipy.stats import spearmanr

    threshold = float(np.median(fp32)) if gate.threshold is None else float(gate.threshold)
    rho = float(spearmanr(fp32, int8).statistic) if len(fp32) > 1 else float("nan")
    agreement = float(np.mean((fp32 >= threshold) == (int8 >= threshold)))
    passed = bool(np.isfinite(rho) and rho >= gate.min_spearman
                  and agreement >= gate.min_agreement)
    return {"clips": int(len(fp32)), "spearman": rho, "agreement": agreement,
            "threshold": threshold,
            "threshold_source": "median fp32 logit" if gate.threshold is None else "given",
            "max_abs_dlogit": float(np.max(np.abs(fp32 - int8))),
            "fp32_logit_std": float(np.std(fp32)),  # spread the int8 error is judged against
            "min_spearman": gate.min_spearman, "min_agreement": gate.min_agreement,
            "passed": passed}


def quantize_int8(src: Path, dst: Path, gate: QuantGate, front: dict,
                  rng: np.random.Generator) -> dict:
    """Write `dst` (int8) from `src` (fp32) and return its gate report (caller ships or drops)."""
    from hearsay.deploy import make_session, run_logits

    quantize_file(src, dst)
    waves = parity.synthetic_clips(rng, gate.clips, gate.min_s, gate.max_s, front)
    fp32 = run_logits(make_session(src), waves)
    int8 = run_logits(make_session(dst), waves)
    return gate_report(fp32, int8, gate)
