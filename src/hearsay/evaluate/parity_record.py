"""Parity B's box side: after training, the full run's logits on the parity clips, in the
trainer's precision and in fp32 (TF32 off), one clip per forward call
(hearsay.engines.torch_engine, as the laptop's check runs it). The file and its rules:
hearsay.contracts.parity_b.

    parity_record.record(bundle, RUN_DIR, OUT.json, 50, cfg)     # hearsay score-run --parity-clips
"""

from __future__ import annotations

import json
from pathlib import Path

from hearsay.contracts import parity_b


def device_name(device: str) -> str:
    """The GPU's name on CUDA ("NVIDIA H200"), else the device string."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(device)
    return device


def record(bundle, run: Path, out: Path, n: int, cfg) -> dict:
    """Write the box's parity file for `run` (kept when it already names these weights, this
    bundle, the same clip count and this precision)."""
    import torch

    from hearsay.contracts import run_dir
    from hearsay.detector.model import load_detector
    from hearsay.engines.torch_engine import torch_logits
    from hearsay.util.hashing import sha256_file

    wfile = run_dir.weights_of(Path(run))
    sha = sha256_file(wfile)
    rows = parity_b.parity_rows(bundle.manifest, n)
    if out.is_file():
        have = json.loads(out.read_text())
        if parity_b.still_valid(have, sha, len(rows), cfg.precision, bundle.tree_sha):
            return have
    waves = parity_b.inputs(bundle, rows)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    det, _ = load_detector(wfile.parent, device=cfg.device)
    det.eval()
    z = torch_logits(det, waves, batched=False, device=cfg.device, bf16=cfg.precision == "bf16")
    z32 = torch_logits(det, waves, batched=False, device=cfg.device, bf16=False)
    data = {"checkpoint_sha256": sha, "bundle_tree_sha": bundle.tree_sha,
            "device": cfg.device, "device_name": device_name(cfg.device),
            "precision": cfg.precision, "max_s": parity_b.MAX_S, "min_s": parity_b.MIN_S,
            "clips": [{"id": str(r["id"]), "path": str(r["path"]), "n_samples": len(w),
                       "input_sha256": parity_b.wave_sha(w)}
                      for r, w in zip(rows.to_dict("records"), waves, strict=True)],
            "logits": [float(v) for v in z], "logits_fp32": [float(v) for v in z32],
            "versions": {"torch": torch.__version__}}
    parity_b.write(out, data)
    return {"kind": parity_b.KIND, **data}
