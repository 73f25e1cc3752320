"""Speech-shaped signals made in code, shared by the front end's and the bundle's guards."""

from __future__ import annotations

import numpy as np

from hearsay.sound import audio

SR = audio.SAMPLE_RATE


def speech_like(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """A voiced, speech-shaped wave: harmonics of a wandering f0 (110-190 Hz) under a 4 Hz
    syllable envelope, 10 ms fades at both ends. (N,) float32, RMS ~0.1."""
    t = np.arange(int(seconds * SR)) / SR
    f0 = 150 + 40 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, 2 * np.pi))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    x = sum(np.sin(k * phase) / k for k in range(1, 8))
    x *= 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t) ** 2
    fade = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.01)
    x *= fade
    return (0.1 * x / np.sqrt(np.mean(x**2))).astype(np.float32)


def with_room_noise(speech: np.ndarray, lead_s: float, tail_s: float, db_down: float,
                    rng: np.random.Generator) -> np.ndarray:
    """lead_s of room noise, the speech, tail_s of noise; the noise (db_down dB below the
    speech RMS) runs under the speech too, as a real room's does."""
    lead, tail = int(lead_s * SR), int(tail_s * SR)
    x = np.concatenate([np.zeros(lead), speech, np.zeros(tail)])
    rms = np.sqrt(np.mean(speech.astype(np.float64) ** 2))
    x += rng.standard_normal(len(x)) * rms * 10 ** (-db_down / 20)
    return x.astype(np.float32)
