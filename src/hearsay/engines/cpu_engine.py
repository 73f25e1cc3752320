"""The CPU engine: the CPUs this process may use, an onnxruntime CPU session, and logits for a
list of prepared waves batched by length. hearsay-score scores with it; the export's int8 gate,
its front-end probe and the CPU benchmarks measure the same engine through it.

    session = make_session(Path("model/model.onnx"))          # intra-op threads = allowed_cpus()
    logits = run_logits(session, [wave, ...], batch_size=8)   # (N,) float32, high = synthetic

numpy, onnxruntime and the torch-free hearsay.sound.audio (whose pad_batch makes the trainer's
batches too) only: the deploy image has no torch.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from hearsay.sound.audio import pad_batch  # the one padding: training's batches and these

# How a scoring machine gets onnxruntime: pyproject.toml's `score` extra (the one spelling; the
# model folder's format.json and the missing-runtime error both quote it).
SCORE_EXTRA = "score"
INSTALL_SCORER = f"pip install 'hearsay[{SCORE_EXTRA}]'"


class RuntimeMissing(ImportError):
    """onnxruntime is not installed in this Python; the message says how to install it."""


def allowed_cpus() -> int:
    """CPUs this process may use: affinity mask, capped by a cgroup v2/v1 CPU quota."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cgroup_quota()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPU quota in CPUs from cgroup v2 `cpu.max` ('max 100000' = none) or v1 cfs files."""
    try:
        v2 = root / "cpu.max"
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        q, p = root / "cpu" / "cpu.cfs_quota_us", root / "cpu" / "cpu.cfs_period_us"
        if q.is_file() and p.is_file():
            quota_us = int(q.read_text())
            return None if quota_us <= 0 else quota_us / int(p.read_text())
    except (OSError, ValueError):
        return None
    return None


def make_session(model_path: Path, threads: int = 0):
    """onnxruntime CPU session: all graph optimisations, intra-op threads = allowed CPUs."""
    try:
        import onnxruntime as ort
    except ImportError as err:
        raise RuntimeMissing(f"onnxruntime is not installed in this Python ({err}): "
                             f"{INSTALL_SCORER}") from None

    # onnxruntime's telemetry off: a scorer of people's audio reports to no one (in a read-only
    # container it would also warn that it cannot persist its device id)
    ort.disable_telemetry_events()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads or allowed_cpus()
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])


def run_logits(session, waves: list[np.ndarray], batch_size: int = 8) -> np.ndarray:
    """Logits (N,) for prepared waves, batched by length (sorted, so little padding)."""
    order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
    logits = np.empty(len(waves), dtype=np.float32)
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        x, mask = pad_batch([waves[i] for i in idx], [len(waves[i]) for i in idx])  # all valid
        out = session.run(["logits"], {"input_values": x, "attention_mask": mask})[0]
        logits[idx] = np.asarray(out, dtype=np.float32).reshape(-1)
    return logits
