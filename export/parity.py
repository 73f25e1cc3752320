"""Parity of an exported model. A (CI, CPU) runs inside `hearsay export onnx`; B is this command.

    hearsay parity MODEL_DIR --checkpoint RUN_DIR            # on a CUDA box, after training
    hearsay parity MODEL_DIR --random-init xlsr300m-12       # XLS-R-300M shape, 12 layers
    hearsay parity MODEL_DIR --random-init tiny --device cpu # checks the command, no figure

Parity A (export correctness): PyTorch fp32 on CPU vs onnxruntime fp32, clips of mixed lengths,
one by one and as one padded batch: max |delta logit| <= 1e-4.

Parity B (training numerics): the model's bf16 logits on the GPU (autocast, as in training) vs
onnxruntime fp32 on CPU over 50 clips of 3-8 s: Spearman > 0.99 and max |delta logit| < 0.05.
GPU fp32 (TF32 off) vs onnxruntime is measured too, to tell precision from export bugs. The
result is written into MODEL_DIR/parity.json ("parity_b") and SHA256SUMS is refreshed for it.
With --random-init the model is built in code, exported to MODEL_DIR first (no int8), then
compared: parity of the numerics before any training.

--device cpu runs the same comparison under CPU bf16 autocast (scripts/device_check.sh's dry
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
import platform
import sys
from pathlib import Path

import numpy as np

from hearsay.audio import AudioError, prepare

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_MODEL, EXIT_NO_CUDA = 0, 1, 2, 3, 4
SHAPES = ("tiny", "xlsr300m-12")


def versions(torch) -> dict:
    import onnx
    import onnxruntime

    return {"torch": torch.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "python": platform.python_version()}


def synthetic_clips(rng: np.random.Generator, n: int, min_s: float, max_s: float,
                    front: dict) -> list[np.ndarray]:
    """`n` prepared model inputs of lengths spread over [min_s, max_s] s (16 kHz), made in code:
    a random harmonic tone with vibrato, amplitude modulation and coloured noise per clip, run
    through hearsay.audio.prepare with the model folder's front end (trim, band-limit, cap,
    normalise) -- the same path as scoring."""
    sr = int(front.get("sample_rate", 16_000))
    kwargs = {"max_s": front["max_s"], "cutoff_hz": front["cutoff_hz"], "top_db": front["top_db"]}
    lengths = np.linspace(min_s, max_s, n) if n > 1 else np.array([max_s])
    clips = []
    for seconds in rng.permutation(lengths):
        try:
            clips.append(prepare(voice_like(rng, seconds, sr), **kwargs))
        except AudioError:  # cannot happen for these signals; keep the count honest if it does
            continue
    return clips


def voice_like(rng: np.random.Generator, seconds: float, sr: int = 16_000) -> np.ndarray:
    """(N,) float32: a random harmonic tone with vibrato, amplitude modulation, coloured noise."""
    t = np.arange(int(seconds * sr)) / sr
    f0 = rng.uniform(90, 300) * (1 + 0.05 * np.sin(2 * np.pi * rng.uniform(3, 7) * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    tone = sum(rng.uniform(0.1, 1) / k * np.sin(k * phase) for k in range(1, 8))
    env = 0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(2, 6) * t + rng.uniform(0, 6.28))
    noise = np.cumsum(rng.standard_normal(len(t))) * rng.uniform(0.001, 0.02)
    return (tone * env + noise - noise.mean()).astype(np.float32)


def window_clips(rng: np.random.Generator, seconds: float, front: dict,
                 hop_s: float = 4.0) -> list[np.ndarray]:
    """The windows hearsay-score cuts from one synthetic recording of `seconds` s
    (hearsay.windows.wave_windows: max_s long every hop_s, each band-limited and normalised
    alone; the last one shorter and padded in a batch) -- parity A of windowed scoring."""
    from hearsay.windows import wave_windows

    wave = voice_like(rng, seconds, int(front.get("sample_rate", 16_000)))
    return [w.wave for w in wave_windows(wave, front["max_s"], hop_s, top_db=front["top_db"],
                                         cutoff_hz=front["cutoff_hz"])]


def checkpoint_weights(directory: Path) -> Path:
    """The weights file hearsay.model.load_detector reads (run dir or checkpoint dir); its sha256
    is what parity.json records."""
    from hearsay.model import checkpoint_weights as weights_of

    return weights_of(directory)


def check_checkpoint(model_dir: Path, checkpoint: Path) -> str:
    """sha256 of `checkpoint`'s weights; ValueError unless parity.json names that very sha."""
    from hearsay.hashing import sha256_file

    got = sha256_file(checkpoint_weights(checkpoint))
    want = json.loads((Path(model_dir) / "parity.json").read_text()).get("checkpoint_sha256")
    if want is None:
        raise ValueError(f"{model_dir}/parity.json records no checkpoint_sha256 (exported from a "
                         "model built in code): re-export it with `hearsay export onnx "
                         f"{checkpoint} --out {model_dir}`")
    if got != want:
        raise ValueError(f"{checkpoint}: weights sha256 {got} are not the checkpoint "
                         f"{model_dir} was exported from ({want}); pass that checkpoint, or "
                         "re-export this one")
    return got


def torch_logits(model, waves: list[np.ndarray], *, batched: bool, device: str = "cpu",
                 bf16: bool = False) -> np.ndarray:
    """Logits (N,) from the PyTorch model: one clip per call, or all clips as one padded batch."""
    import torch

    from hearsay.deploy import pad_batch

    groups = [waves] if batched else [[w] for w in waves]
    out = []
    with torch.no_grad():
        for group in groups:
            x, mask = (torch.from_numpy(a).to(device) for a in pad_batch(group))
            with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16,
                                enabled=bf16):
                out.append(model(x, mask).float().cpu().numpy().reshape(-1))
    return np.concatenate(out)


def ort_logits(model_path: Path, waves: list[np.ndarray], *, batched: bool) -> np.ndarray:
    from hearsay.deploy import make_session, pad_batch

    session = make_session(model_path)
    groups = [waves] if batched else [[w] for w in waves]
    out = []
    for group in groups:
        x, mask = pad_batch(group)
        out.append(session.run(["logits"], {"input_values": x, "attention_mask": mask})[0])
    return np.concatenate([np.asarray(o, dtype=np.float32).reshape(-1) for o in out])


def parity_a(model, onnx_path: Path, waves: list[np.ndarray], tol: float = 1e-4,
             windows: list[np.ndarray] | None = None) -> dict:
    """PyTorch fp32 CPU vs ORT fp32, singles and one padded batch -> report with `passed`.

    `windows` (window_clips) are compared the same way, reported under "windows"; `passed`
    and max_abs_dlogit then cover both."""
    if windows:
        report = parity_a(model, onnx_path, waves, tol)
        report["windows"] = parity_a(model, onnx_path, windows, tol)
        report["max_abs_dlogit"] = max(report["max_abs_dlogit"],
                                       report["windows"]["max_abs_dlogit"])
        report["passed"] = report["passed"] and report["windows"]["passed"]
        return report
    t_single = torch_logits(model, waves, batched=False)
    t_batch = torch_logits(model, waves, batched=True)
    o_single = ort_logits(onnx_path, waves, batched=False)
    o_batch = ort_logits(onnx_path, waves, batched=True)
    d_single = float(np.max(np.abs(t_single - o_single)))
    d_batch = float(np.max(np.abs(t_batch - o_batch)))
    worst = max(d_single, d_batch)
    return {"clips": len(waves), "lengths_s": sorted(round(len(w) / 16_000, 3) for w in waves),
            "max_abs_dlogit_single": d_single, "max_abs_dlogit_batch": d_batch,
            "max_abs_dlogit": worst, "tolerance": tol,
            # padded-batch vs one-by-one inside PyTorch: the model's own masking (information)
            "torch_padding_max_abs_dlogit": float(np.max(np.abs(t_batch - t_single))),
            "passed": bool(np.isfinite(worst) and worst <= tol)}


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
    from hearsay.model import Detector, ModelConfig

    cfg = (ModelConfig.tiny() if shape == "tiny"
           else ModelConfig(init="random", keep_layers=12, hidden_dropout=0.0,
                            attention_dropout=0.0))
    import torch

    torch.manual_seed(0)  # random init, reproducible across runs of this command
    return Detector(cfg).eval()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay parity", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path, help="exported model folder (parity.json updated)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", type=Path, help="run dir / checkpoint the folder came from")
    src.add_argument("--random-init", choices=SHAPES,
                     help="build this shape in code and export it to MODEL_DIR first")
    ap.add_argument("--clips", type=int, default=50, help="clips, lengths spread over 3-8 s")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed of the synthetic clips")
    ap.add_argument("--device", default="cuda",
                    help="torch device of the bf16/fp32 side: cuda (default), cuda:N, or cpu "
                    "(CPU bf16: checks the command only, recorded as parity_b_cpu_check)")
    args = ap.parse_args(argv)
    import torch

    on_gpu = args.device != "cpu"
    if on_gpu and not torch.cuda.is_available():
        print("hearsay parity: no CUDA device here, parity B cannot be measured (run it on a "
              "GPU box after training; parity A runs in `hearsay export onnx`)", file=sys.stderr)
        return EXIT_NO_CUDA
    from hearsay.deploy import ModelError, read_sums, sha256_file, verify_model_dir
    from hearsay.hashing import format_sums

    try:
        if args.random_init:
            from export.onnx_export import ExportConfig, export_model

            model = _build(args.random_init)
            export_model(model, args.model_dir, ExportConfig(int8=False))
        else:
            from hearsay.model import load_detector

            verify_model_dir(args.model_dir)
            check_checkpoint(args.model_dir, args.checkpoint)  # before the (slow) load
            model, _ = load_detector(args.checkpoint)
        onnx_path, _, front = verify_model_dir(args.model_dir)
    except (ModelError, OSError, ValueError) as err:
        print(f"hearsay parity: {err}", file=sys.stderr)
        return EXIT_MODEL
    front = {**front, "sample_rate": 16_000}
    waves = synthetic_clips(np.random.default_rng(args.seed), args.clips, 3.0, 8.0, front)
    report = parity_b(model, onnx_path, waves, device=args.device)
    report["versions"] = versions(torch)
    pj = args.model_dir / "parity.json"
    data = json.loads(pj.read_text())
    data["parity_b" if on_gpu else "parity_b_cpu_check"] = report
    pj.write_text(json.dumps(data, indent=2) + "\n")
    sums = read_sums(args.model_dir)
    sums["parity.json"] = sha256_file(pj)
    (args.model_dir / "SHA256SUMS").write_text(format_sums(sums))
    print(json.dumps(report, indent=2))
    return EXIT_OK if report["passed"] else EXIT_GATE


if __name__ == "__main__":
    sys.exit(main())
