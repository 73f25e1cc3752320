"""Parity of an exported model. A (CI, CPU) runs inside `hearsay export onnx`; B is this command.

    hearsay parity MODEL_DIR --checkpoint RUN_DIR            # on a CUDA box, after training
    hearsay parity MODEL_DIR --random-init xlsr300m-12       # XLS-R-300M shape, 12 layers
    hearsay parity MODEL_DIR --random-init tiny --device cpu # checks the command, no figure
    hearsay parity MODEL_DIR --box-logits models/S/scores/full_parity_logits.json --bundle B
                                                             # on the laptop, after collect

Parity A (export correctness): PyTorch fp32 on CPU vs onnxruntime fp32, clips of mixed lengths,
one by one and as one padded batch: max |delta logit| <= 1e-4.

Parity B (training numerics): the model's bf16 logits on the GPU (autocast, as in training) vs
onnxruntime fp32 on CPU over 50 clips of 3-8 s: Spearman > 0.99 and max |delta logit| < 0.05.
GPU fp32 (TF32 off) vs onnxruntime is measured too, to tell precision from export bugs.
--box-logits FILE (with --bundle) needs no GPU: the full job's box recorded its logits on 50 test
clips after training (hearsay score-run --parity-clips, hearsay.contracts.parity_b), and
onnxruntime fp32 on this CPU is compared with them, same gate; the record says the box's
device and precision (a CPU box, as in the rehearsal, trains and records in fp32). The
result is written into MODEL_DIR/parity.json ("parity_b"). parity.json is not listed in
SHA256SUMS, so the folder's identity (the sha256 of SHA256SUMS, which a deploy pin holds) is the
same before and after (a folder exported before that rule lists it: its line is refreshed, and
the command says that the identity changed).
With --random-init the model is built in code, exported to MODEL_DIR first (no int8), then
compared: parity of the numerics before any training.

--device cpu runs the same comparison under CPU bf16 autocast (scripts/gpu_check.sh's dry
mode uses it to prove the command end to end without a GPU). CPU bf16 is not the training
numerics: that report goes into parity.json as "parity_b_cpu_check", never as "parity_b".

--checkpoint must be the checkpoint the folder was exported from: the sha256 of its
model.safetensors must equal parity.json's "checkpoint_sha256" (written by `hearsay export
onnx`), else the command refuses (exit 3) before loading anything.

Exit codes: 0 parity B passed (with --device cpu: the CPU check passed), 1 a gate failed,
2 usage, 3 model folder or checkpoint unusable or not the export's, 4 no CUDA device: parity B
cannot be measured here (never reported as a pass).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from hearsay.contracts.model_dir import PARITY, SUMS, ModelError, refresh_sum, update_parity, verify
from hearsay.engines.torch_engine import torch_logits
from hearsay.export.probe import check_checkpoint, ort_logits, synthetic_clips, versions
from hearsay.sound.audio import SAMPLE_RATE

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_MODEL, EXIT_NO_CUDA = 0, 1, 2, 3, 4
SHAPES = ("tiny", "xlsr300m-12")


def parity_b(model, onnx_path: Path, waves: list[np.ndarray], device: str = "cuda") -> dict:
    """GPU bf16 and GPU fp32 (TF32 off) vs ORT fp32 CPU, one clip per call -> report.
    (`device="cpu"` runs the same comparison with CPU bf16 autocast: how the tests exercise it.)"""
    import torch
    from scipy.stats import spearmanr

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = model.to(device).eval()
    ort = ort_logits(onnx_path, waves, batched=False)
    bf16 = torch_logits(model, waves, batched=False, device=device, bf16=True)
    fp32 = torch_logits(model, waves, batched=False, device=device, bf16=False)

    def compare(a: np.ndarray) -> dict:
        return {"spearman": float(spearmanr(a, ort).statistic),
                "max_abs_dlogit": float(np.max(np.abs(a - ort)))}

    b, f = compare(bf16), compare(fp32)
    passed = bool(b["spearman"] > 0.99 and b["max_abs_dlogit"] < 0.05)
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else device
    return {"clips": len(waves), "device": name,
            "bf16_vs_ort": b, "fp32_vs_ort": f, "gate": "spearman > 0.99, max|dlogit| < 0.05",
            "passed": passed}


def _build(shape: str):
    from hearsay.detector.model import Detector, ModelConfig

    cfg = (ModelConfig.tiny() if shape == "tiny"
           else ModelConfig(init="random", keep_layers=12, hidden_dropout=0.0,
                            attention_dropout=0.0))
    import torch

    torch.manual_seed(0)  # random init, reproducible across runs of this command
    return Detector(cfg).eval()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay parity", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path, help=f"exported model folder ({PARITY} updated)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", type=Path, help="run dir / checkpoint the folder came from")
    src.add_argument("--random-init", choices=SHAPES,
                     help="build this shape in code and export it to MODEL_DIR first")
    src.add_argument("--box-logits", type=Path, metavar="FILE",
                     help="the full job's full_parity_logits.json: compare ONNX with them here")
    ap.add_argument("--bundle", type=Path, help="with --box-logits: the bundle of the runs")
    ap.add_argument("--clips", type=int, default=50, help="clips, lengths spread over 3-8 s")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed of the synthetic clips")
    ap.add_argument("--device", default="cuda",
                    help="torch device of the bf16/fp32 side: cuda (default), cuda:N, or cpu "
                    "(CPU bf16: checks the command only, recorded as parity_b_cpu_check)")
    args = ap.parse_args(argv)
    if args.box_logits is not None:
        if args.bundle is None:
            ap.error("--box-logits needs --bundle (the clips are rebuilt from it)")
        return from_box(args.model_dir, args.box_logits, args.bundle)
    import torch

    on_gpu = args.device != "cpu"
    if on_gpu and not torch.cuda.is_available():
        print("hearsay parity: no CUDA device here, parity B cannot be measured (run it on a "
              "GPU box after training; parity A runs in `hearsay export onnx`)", file=sys.stderr)
        return EXIT_NO_CUDA
    try:
        if args.random_init:
            from hearsay.export.onnx_export import ExportConfig, export_model

            model = _build(args.random_init)
            export_model(model, args.model_dir, ExportConfig(int8=False))
        else:
            from hearsay.detector.model import load_detector

            verify(args.model_dir)
            check_checkpoint(args.model_dir, args.checkpoint)  # before the (slow) load
            model, _ = load_detector(args.checkpoint)
        onnx_path, _, front = verify(args.model_dir)
    except (ModelError, OSError, ValueError) as err:
        print(f"hearsay parity: {err}", file=sys.stderr)
        return EXIT_MODEL
    front = {**front, "sample_rate": SAMPLE_RATE}
    waves = synthetic_clips(np.random.default_rng(args.seed), args.clips, 3.0, 8.0, front)
    report = parity_b(model, onnx_path, waves, device=args.device)
    report["versions"] = versions(torch)
    update_parity(args.model_dir, {"parity_b" if on_gpu else "parity_b_cpu_check": report})
    if refresh_sum(args.model_dir, PARITY):  # exported before parity.json left the identity
        print(f"hearsay parity: {args.model_dir}/{SUMS} lists {PARITY} (an older "
              "export): refreshed, so the folder's identity changed; re-export to keep it "
              "fixed", file=sys.stderr)
    print(json.dumps(report, indent=2))
    return EXIT_OK if report["passed"] else EXIT_GATE


def from_box(model_dir: Path, box_file: Path, bundle_dir: Path) -> int:
    """--box-logits: parity_b from the box's logits, written into MODEL_DIR/parity.json."""
    from hearsay.contracts.bundle import BundleError, load_bundle
    from hearsay.export import parity_box

    try:
        bundle = load_bundle(bundle_dir)
        report = parity_box.compare(model_dir, box_file, bundle)
    except (ModelError, BundleError, OSError, ValueError, KeyError) as err:
        print(f"hearsay parity: {err}", file=sys.stderr)
        return EXIT_MODEL
    update_parity(model_dir, {"parity_b": report})
    print(json.dumps(report, indent=2))
    return EXIT_OK if report["passed"] else EXIT_GATE


if __name__ == "__main__":
    sys.exit(main())
