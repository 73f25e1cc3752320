"""Padded batches: clips of different lengths stacked into one (B, T) array and its mask.

The one padding of the project: the trainer's batches (hearsay.train.data), the in-process
scorer (hearsay.evaluate.score), the CPU scorer (hearsay.cpu_engine) and the export probes.
Padding is zeros, never a repeat of the clip. numpy only (no torch).

    from hearsay.sound.padding import pad_batch
    input_values, attention_mask = pad_batch([x, ...], [n_valid, ...])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pad_batch(waves: Sequence[np.ndarray],
              n_valids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Stack clips -> (input_values (B, T) float32, attention_mask (B, T) int64; 1 = valid).

    T is the longest wave. Samples at or past each clip's n_valid are zero in input_values.
    """
    if len(waves) != len(n_valids) or not waves:
        raise ValueError(f"pad_batch: {len(waves)} waves vs {len(n_valids)} n_valids "
                         "(need the same non-zero count)")
    t = max(len(w) for w in waves)
    values = np.zeros((len(waves), t), dtype=np.float32)
    mask = np.zeros((len(waves), t), dtype=np.int64)
    for i, (w, n) in enumerate(zip(waves, n_valids, strict=True)):
        n = int(n)
        if not 0 <= n <= len(w):
            raise ValueError(f"pad_batch: clip {i} n_valid={n} outside [0, {len(w)}]")
        values[i, :n] = w[:n]
        mask[i, :n] = 1
    return values, mask
