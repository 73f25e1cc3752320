"""What export and parity share (a leaf: it imports neither): the probe clips made in code, the
checkpoint's weights file and its check, the logits of onnxruntime (torch's:
hearsay.engines.torch_engine), and parity A.

    from hearsay.export import probe
    waves = probe.synthetic_clips(np.random.default_rng(0), 12, 0.5, 6.0, front)
    report = probe.parity_a(model, out / "model.onnx", waves, tol=1e-4)   # export correctness

Parity A (export correctness): PyTorch fp32 on CPU vs onnxruntime fp32, clips of mixed lengths,
one by one and as one padded batch: max |delta logit| <= 1e-4. Parity B is hearsay.export.parity.
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np

from hearsay.contracts.model_dir import PARITY, prepare_args, read_parity
from hearsay.engines.torch_engine import torch_logits
from hearsay.sound.audio import SAMPLE_RATE, AudioError, pad_batch, prepare


def versions(torch) -> dict:
    import onnx
    import onnxruntime

    return {"torch": torch.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "python": platform.python_version()}


def synthetic_clips(rng: np.random.Generator, n: int, min_s: float, max_s: float,
                    front: dict) -> list[np.ndarray]:
    """`n` prepared model inputs of lengths spread over [min_s, max_s] s (16 kHz), made in code:
    a random harmonic tone with vibrato, amplitude modulation and coloured noise per clip, run
    through hearsay.sound.audio.prepare with the model folder's front end (trim, band-limit, cap,
    normalise) -- the same path as scoring."""
    sr = int(front.get("sample_rate", SAMPLE_RATE))
    kwargs = prepare_args(front)
    lengths = np.linspace(min_s, max_s, n) if n > 1 else np.array([max_s])
    clips = []
    for seconds in rng.permutation(lengths):
        try:
            clips.append(prepare(voice_like(rng, seconds, sr), **kwargs))
        except AudioError:  # cannot happen for these signals; keep the count honest if it does
            continue
    return clips


def voice_like(rng: np.random.Generator, seconds: float, sr: int = SAMPLE_RATE) -> np.ndarray:
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
    (hearsay.sound.windows.wave_windows: max_s long every hop_s, each band-limited and normalised
    alone; the last one shorter and padded in a batch) -- parity A of windowed scoring."""
    from hearsay.sound.windows import wave_windows

    wave = voice_like(rng, seconds, int(front.get("sample_rate", SAMPLE_RATE)))
    return [w.wave for w in wave_windows(wave, front["max_s"], hop_s, top_db=front["top_db"],
                                         cutoff_hz=front["cutoff_hz"])]


def checkpoint_weights(directory: Path) -> Path:
    """The weights file hearsay.detector.model.load_detector reads (run dir or checkpoint dir);
    its sha256 is what parity.json records."""
    from hearsay.detector.model import checkpoint_weights as weights_of

    return weights_of(directory)


def check_checkpoint(model_dir: Path, checkpoint: Path) -> str:
    """sha256 of `checkpoint`'s weights; ValueError unless parity.json names that very sha."""
    from hearsay.util.hashing import sha256_file

    got = sha256_file(checkpoint_weights(checkpoint))
    want = read_parity(model_dir).get("checkpoint_sha256")
    if want is None:
        raise ValueError(f"{model_dir}/{PARITY} records no checkpoint_sha256 (exported from a "
                         "model built in code): re-export it with `hearsay export onnx "
                         f"{checkpoint} --out {model_dir}`")
    if got != want:
        raise ValueError(f"{checkpoint}: weights sha256 {got} are not the checkpoint "
                         f"{model_dir} was exported from ({want}); pass that checkpoint, or "
                         "re-export this one")
    return got


def ort_logits(model_path: Path, waves: list[np.ndarray], *, batched: bool) -> np.ndarray:
    from hearsay.engines.cpu_engine import make_session

    session = make_session(model_path)
    groups = [waves] if batched else [[w] for w in waves]
    out = []
    for group in groups:
        x, mask = pad_batch(group, [len(w) for w in group])
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
    return {"clips": len(waves), "lengths_s": sorted(round(len(w) / SAMPLE_RATE, 3) for w in waves),
            "max_abs_dlogit_single": d_single, "max_abs_dlogit_batch": d_batch,
            "max_abs_dlogit": worst, "tolerance": tol,
            # padded-batch vs one-by-one inside PyTorch: the model's own masking (information)
            "torch_padding_max_abs_dlogit": float(np.max(np.abs(t_batch - t_single))),
            "passed": bool(np.isfinite(worst) and worst <= tol)}
