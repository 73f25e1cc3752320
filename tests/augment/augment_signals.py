"""Signals the augmentation tests share, made in code."""


import numpy as np

from hearsay.sound import audio

SR = audio.SAMPLE_RATE


def speechlike(seconds, rng, amp=0.3):
    """Noise bursts under a 4 Hz syllable envelope: broadband, with quiet gaps."""
    n = int(seconds * SR)
    env = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * np.arange(n) / SR + rng.uniform(0, 6))
    return (amp * env * rng.standard_normal(n)).astype(np.float32)


def power_db(x):
    return 10 * np.log10(np.mean(np.square(x, dtype=np.float64)))
