"""Where the conv encoder's int8 error comes from: weights or activations, per tensor or per row.

    .venv/bin/python scripts/conv_int8_error.py demo_out/runs/full --bundle demo_out/bundle

Simulates int8 of the encoder convs but the first (the MatMuls stay fp32) in PyTorch, by
rounding the conv's inputs and weights to the int8 grid and running the conv in fp32 on the
rounded values (what an integer GEMM computes, up to the order of the fp32 sums), and reports
the logits' change against the fp32 model on bundle clips, each fed alone at its own length, as
the export's int8 gate judges them (Spearman, agreement at the median fp32 logit, max and rms
|delta logit|). Schemes:

    weights      weights int8 per output channel, activations fp32
    acts-tensor  weights fp32, activations uint8 with one range per tensor
    acts-row     weights fp32, activations uint8 with one range per GEMM row (output frame)
    rows         weights int8, activations per row
    rows-2digit  two-digit int8 weights (export/quantize_rows.py), activations per row

A measurement, not a test: quote its figures with the command and date
(export/quantize_rows.py, docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

SCHEMES = ("weights", "acts-tensor", "acts-row", "rows", "rows-2digit")


def round_weights(w: torch.Tensor, digits: int) -> torch.Tensor:
    """(K, N) -> the same weights on the int8 grid, per column; two digits: the residual too."""
    s1 = w.abs().amax(dim=0).clamp(min=1e-12) / 127
    w1 = torch.round(w / s1).clamp(-127, 127) * s1
    if digits == 1:
        return w1
    s2 = s1 / 254
    return w1 + torch.round((w - w1) / s2).clamp(-127, 127) * s2


def round_acts(cols: torch.Tensor, per_row: bool) -> torch.Tensor:
    """(B, T', K) -> uint8 grid with its own zero point, one range per row or per tensor."""
    dims = dict(dim=-1, keepdim=True) if per_row else {}
    lo = (cols.amin(**dims) if per_row else cols.amin()).clamp(max=0)
    hi = (cols.amax(**dims) if per_row else cols.amax()).clamp(min=0)
    scale = ((hi - lo) / 255).clamp(min=1e-12)
    zero = torch.round(-lo / scale)
    return (torch.round(cols / scale + zero).clamp(0, 255) - zero) * scale


def rounded_conv(layer, scheme: dict):
    """forward() for a transformers Wav2Vec2LayerNormConvLayer whose conv runs on rounded
    values as `scheme` says ({"name": ...}, read at call time); "fp32" leaves it alone."""
    conv = layer.conv

    def forward(x):  # (B, C, T)
        name = scheme["name"]
        if name == "fp32":
            y = conv(x)
        else:
            k, s = conv.kernel_size[0], conv.stride[0]
            cols = x.unfold(2, k, s).permute(0, 2, 3, 1).reshape(x.shape[0], -1, k * x.shape[1])
            w = conv.weight.permute(2, 1, 0).reshape(k * x.shape[1], -1)  # (k*C, N) tap-major
            if name in ("weights", "rows", "rows-2digit"):
                w = round_weights(w, 2 if name == "rows-2digit" else 1)
            if name != "weights":
                cols = round_acts(cols, per_row=name != "acts-tensor")
            y = (cols @ w + conv.bias).transpose(1, 2)
        h = layer.layer_norm(y.transpose(-2, -1)).transpose(-2, -1)
        return layer.activation(h)

    return forward


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", type=Path, help="run dir or checkpoint dir (load_detector)")
    ap.add_argument("--bundle", type=Path, required=True, help="bundle whose clips are scored")
    ap.add_argument("--clips", type=int, default=100, help="bundle clips (default 100)")
    ap.add_argument("--schemes", default=",".join(SCHEMES), help="comma list of " +
                    ", ".join(SCHEMES))
    ap.add_argument("--seed", type=int, default=1, help="which bundle clips (their draw)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    schemes = args.schemes.split(",")
    if unknown := sorted(set(schemes) - set(SCHEMES)):
        ap.error(f"unknown scheme(s) {unknown}: use {', '.join(SCHEMES)}")

    from scipy.stats import spearmanr

    from hearsay.contracts.model_dir import front_end
    from hearsay.detector.model import load_detector
    from hearsay.export.onnx_export import ExportConfig
    from hearsay.export.quantize_conv import bundle_clips

    model, _ = load_detector(args.checkpoint)
    model.eval()
    scheme = {"name": "fp32"}
    for layer in model.backbone.feature_extractor.conv_layers[1:]:  # the first conv stays fp32
        layer.forward = rounded_conv(layer, scheme)
    cfg = ExportConfig()  # clips prepared as the export's gate prepares them
    front = front_end(cfg.max_s, cfg.cutoff_hz, cfg.top_db, cfg.min_s)
    _, waves = bundle_clips(args.bundle, front, 0, args.clips, np.random.default_rng(args.seed))

    def logits() -> np.ndarray:
        with torch.no_grad():
            return np.array([model(torch.from_numpy(w)[None].float(),
                                   torch.ones(1, len(w), dtype=torch.int64)).item()
                             for w in waves])

    ref = logits()
    threshold = float(np.median(ref))
    rows = []
    print(f"{len(waves)} clips of {min(map(len, waves)) / 16000:.1f}-"
          f"{max(map(len, waves)) / 16000:.1f} s, fp32 logit std {ref.std():.4f}")
    for name in schemes:
        scheme["name"] = name
        got = logits()
        d = got - ref
        row = {"scheme": name, "spearman": float(spearmanr(ref, got).statistic),
               "agreement": float(np.mean((ref >= threshold) == (got >= threshold))),
               "max_abs_dlogit": float(np.abs(d).max()),
               "rms_dlogit": float(np.sqrt(np.mean(d**2)))}
        rows.append(row)
        print(f"{name:12s} Spearman {row['spearman']:.5f}  agreement {row['agreement']:.2f}  "
              f"max |dlogit| {row['max_abs_dlogit']:.4f}  rms {row['rms_dlogit']:.5f}",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps({"fp32_logit_std": float(ref.std()), "rows": rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
