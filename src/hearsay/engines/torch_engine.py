"""The torch engine: a detector's logits for a list of prepared waves, one clip per forward call
or all as one padded batch, fp32 or under bf16 autocast. Parity A (export) and parity B (the
box's record and the laptop's check) call it, so both sides run the model the same way.

    z = torch_logits(det, waves, batched=False, device="cuda", bf16=True)   # (N,) float32

The CPU engine, onnxruntime's, is hearsay.engines.cpu_engine.
"""

from __future__ import annotations

import numpy as np

from hearsay.sound.audio import pad_batch


def torch_logits(model, waves: list[np.ndarray], *, batched: bool, device: str = "cpu",
                 bf16: bool = False) -> np.ndarray:
    """Logits (N,) from the PyTorch model: one clip per call, or all clips as one padded batch."""
    import torch

    groups = [waves] if batched else [[w] for w in waves]
    out = []
    with torch.no_grad():
        for group in groups:
            padded = pad_batch(group, [len(w) for w in group])  # every sample valid
            x, mask = (torch.from_numpy(a).to(device) for a in padded)
            with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16,
                                enabled=bf16):
                out.append(model(x, mask).float().cpu().numpy().reshape(-1))
    return np.concatenate(out)
