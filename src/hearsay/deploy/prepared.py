"""What Engine.prepared_logits accepts: a model input exactly as the front end leaves it.

    why = not_prepared(wave, 16_000, front, min_samples)   # "" for a prepared input, else why

A prepared input (hearsay.sound.audio.prepare, or a window hearsay.sound.windows cuts) is
(N,) float32 at 16 kHz, min_samples <= N <= max_s * 16000, finite, band-limited at the front
end's cutoff_hz and normalised (mean 0, std 1). Raw audio fails the normalisation (in -1..1 its
std is far under 1), or, normalised by hand, most often the band-limit (16 kHz audio has
energy above 7.25 kHz, which the front end's FIR removes: MAX_STOP_POWER). Samples carry no
rate, so the caller states it: anything but 16000 is refused (audio at another rate gives
another logit, with no error). numpy only.
"""

from __future__ import annotations

import numpy as np

from hearsay.sound.audio import SAMPLE_RATE

# prepare() gives every input mean 0 and std sqrt(v / (v + 1e-7)) for a slice of variance v,
# i.e. >= 0.99 above -63 dBFS rms; raw audio in -1..1 has std well under 1.
PREPARED_STD = (0.99, 1.001)
PREPARED_MEAN = 1e-3
# The band-limit's stop band: cutoff_hz + STOP_GUARD_HZ and up, past the 129-tap Blackman FIR's
# transition (audio.band_limit). Measured 2026-12-06 on 140 clips of the demo corpus: their
# prepared windows keep at most 8.5e-7 of their power there, the raw clips a median 8.5e-5
# (60 % of them over 1e-5; a clip already band-limited at the source, e.g. 8 kHz audio, keeps
# none and is caught only by the normalisation check). Judged at 1e-5: 12x the prepared worst.
STOP_GUARD_HZ = 500.0
MAX_STOP_POWER = 1e-5


def stop_band_power(w: np.ndarray, cutoff_hz: float) -> float:
    """Share (0..1) of `w`'s power at cutoff_hz + STOP_GUARD_HZ and above (16 kHz samples)."""
    power = np.abs(np.fft.rfft(w.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(w), 1 / SAMPLE_RATE)
    total = float(power.sum())
    return float(power[freqs >= cutoff_hz + STOP_GUARD_HZ].sum()) / total if total else 0.0


def not_prepared(w, sample_rate, front: dict, min_samples: int) -> str:
    """Why `w` at `sample_rate` is not a prepared model input for `front` ("" when it is)."""
    if isinstance(sample_rate, bool) or sample_rate != SAMPLE_RATE:
        return (f"sample_rate {sample_rate!r}: model inputs are {SAMPLE_RATE} Hz (resampled by "
                "the front end)")
    w = np.asarray(w)
    if w.ndim != 1 or w.dtype != np.float32:
        return "not a (samples,) float32 array"
    if len(w) < min_samples:
        return f"{len(w)} samples, under the model's {min_samples}"
    max_s = front.get("max_s")
    if max_s is not None and len(w) > int(round(max_s * SAMPLE_RATE)):
        return f"{len(w)} samples, over one {max_s:g} s window"
    if not np.isfinite(w).all():
        return "not finite"
    mean, std = float(w.mean()), float(w.std())
    if abs(mean) > PREPARED_MEAN or not PREPARED_STD[0] <= std <= PREPARED_STD[1]:
        return f"mean {mean:.3g}, std {std:.3g} (prepare() gives 0 and 1)"
    cutoff = front.get("cutoff_hz")
    if cutoff is not None and cutoff + STOP_GUARD_HZ < SAMPLE_RATE / 2:
        share = stop_band_power(w, cutoff)
        if share > MAX_STOP_POWER:
            return (f"{share:.2g} of its power above {cutoff + STOP_GUARD_HZ:g} Hz: not "
                    f"band-limited at {cutoff:g} Hz as prepare() leaves it")
    return ""
