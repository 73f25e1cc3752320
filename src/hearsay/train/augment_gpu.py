"""Batched torch rendering of hearsay.sound.augment's wave types and of the finish step (the
GPU path).

The numpy path (hearsay.sound.example.training_example) is the reference; this module renders
the same thing for a whole padded batch on the trainer's device, from the same per-clip
parameters that `hearsay.sound.example.plan_example` drew with numpy in the data-loader worker.
What moves to the GPU is the deterministic, heavy part: FFT convolutions (reverb, RawBoost), the
FIR low-passes (3.4/4 kHz band-limit and the 7.25 kHz front-end band-limit) and the masked
normalisation.
tests/augment/test_augment_gpu.py checks that both paths agree.

Usage (in the trainer)::

    from hearsay.sound import example
    from hearsay.sound.audio import pad_batch
    from hearsay.train import augment_gpu
    # worker, per clip (numpy):
    crop, n_valid, params = example.plan_example(x, name, n_samples, rng, cfg)
    # main process, per batch:
    values, mask = pad_batch(crops_, n_valids)
    values = augment_gpu.train_batch(torch.from_numpy(values).cuda(),
                                     torch.from_numpy(mask).cuda(), names, params)

Rows are computed in float32 on the tensor's device; padding (mask 0) comes out exactly zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from scipy import fft as sp_fft

from hearsay.sound import audio
from hearsay.sound.augment import WAVE_TYPES


def _fft_len(n: int) -> int:
    """A size >= n with only small prime factors (fast in cuFFT / pocketfft); zeros pad."""
    return sp_fft.next_fast_len(n, real=True)


@lru_cache(maxsize=8)
def fir_taps(cutoff_hz: float) -> np.ndarray:
    """hearsay.sound.audio.band_limit's FIR at `cutoff_hz`, read off as its impulse response."""
    impulse = np.zeros(audio.FIR_TAPS, dtype=np.float32)
    impulse[audio.FIR_TAPS // 2] = 1.0
    return audio.band_limit(impulse, cutoff_hz).astype(np.float32)  # symmetric taps


_TAPS: dict = {}  # (cutoff_hz, device) -> FIR taps on that device: uploaded once per run


def _device_taps(cutoff_hz: float, device) -> torch.Tensor:
    key = (float(cutoff_hz), str(device))
    if key not in _TAPS:
        _TAPS[key] = torch.from_numpy(fir_taps(float(cutoff_hz))).to(device)
    return _TAPS[key]


def _lowpass(values: torch.Tensor, cutoff_hz: float) -> torch.Tensor:
    """(B, T) -> (B, T): the zero-phase FIR of audio.band_limit ("same" alignment).

    Done as an FFT convolution, not conv1d: cuDNN convolutions may run in TF32 on the GPU
    (torch.backends.cudnn.allow_tf32 defaults to True), cuFFT stays float32.
    """
    taps = _device_taps(cutoff_hz, values.device)
    half = (len(taps) - 1) // 2  # the FIR's delay, removed as np.convolve(mode="same") does
    n_fft = _fft_len(values.shape[1] + len(taps) - 1)
    full = torch.fft.irfft(torch.fft.rfft(values, n_fft) * torch.fft.rfft(taps, n_fft), n_fft)
    return full[:, half: half + values.shape[1]]


def _masked_power(values: torch.Tensor, mask: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """(B,) mean square over valid samples."""
    return (values.square() * mask).sum(1) / n.clamp(min=1)


def _keep_rms(y: torch.Tensor, p_in: torch.Tensor, mask: torch.Tensor,
              n: torch.Tensor) -> torch.Tensor:
    p_out = _masked_power(y, mask, n)
    gain = torch.where(p_out > 0, torch.sqrt(p_in / p_out.clamp(min=1e-30)), torch.ones_like(p_out))
    return y * gain[:, None]


def _stack(arrays: Sequence[np.ndarray], width: int) -> np.ndarray:
    """Zero-padded (len(arrays), width) float32 host array."""
    out = np.zeros((len(arrays), width), dtype=np.float32)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a
    return out


class _Upload:
    """Host arrays gathered per batch, sent to the device as ONE float32 transfer (pinned and
    non-blocking on CUDA): a dozen small pageable copies would each make the host wait."""

    def __init__(self):
        self.arrays: list[np.ndarray] = []

    def add(self, a) -> int:
        self.arrays.append(np.asarray(a, dtype=np.float32))
        return len(self.arrays) - 1

    def send(self, device) -> list[torch.Tensor]:
        if not self.arrays:
            return []
        flat = torch.from_numpy(np.concatenate([a.ravel() for a in self.arrays]))
        if torch.device(device).type == "cuda":
            flat = flat.pin_memory()
        flat = flat.to(device, non_blocking=True)
        out, at = [], 0
        for a in self.arrays:
            out.append(flat[at: at + a.size].view(a.shape))
            at += a.size
        return out


def _plan(name: str, params: list[dict], up: _Upload) -> dict:
    """Host side of type `name`: its parameter arrays queued on `up` (slot numbers kept)."""
    if name == "noise":
        return {"noise": up.add(_stack([p["noise"] for p in params], max(len(p["noise"])
                                                                          for p in params))),
                "snr": up.add([p["snr_db"] for p in params])}
    if name == "bandlimit":
        cut = [p["cutoff_hz"] for p in params]
        return {"cutoffs": {c: up.add([float(x == c) for x in cut]) for c in sorted(set(cut))}}
    if name == "gain_clip":
        return {"drive": up.add([p["drive_db"] for p in params]),
                "ceiling": up.add([p["ceiling"] for p in params])}
    if name == "reverb":
        return {"h": up.add(_stack([p["h"] for p in params], max(len(p["h"]) for p in params)))}
    if name == "rawboost":
        width = max(len(b) for p in params for b in p["filters"])
        return {"filters": [up.add(_stack([p["filters"][i] for p in params], width))
                            for i in range(len(params[0]["filters"]))]}
    raise ValueError(f"augment_gpu: no batched renderer for {name!r} "
                     f"(wave types: {WAVE_TYPES})")


def _render(name: str, x: torch.Tensor, mask: torch.Tensor, n: torch.Tensor, plan: dict,
            dev: list[torch.Tensor]) -> torch.Tensor:
    """Rows `x` (b, T), all of type `name`, with their uploaded params -> rendered rows."""
    if name == "noise":
        noise = dev[plan["noise"]][:, : x.shape[1]]
        if noise.shape[1] < x.shape[1]:
            noise = F.pad(noise, (0, x.shape[1] - noise.shape[1]))
        scale = torch.sqrt(_masked_power(x, mask, n) / 10 ** (dev[plan["snr"]] / 10))
        return x + noise * scale[:, None]
    if name == "bandlimit":
        out = x
        for cutoff, slot in plan["cutoffs"].items():  # rows of this cutoff: a 0/1 column
            sel = dev[slot][:, None]
            out = out * (1 - sel) + _lowpass(x, cutoff) * mask * sel
        return out
    if name == "gain_clip":
        drive, ceiling = dev[plan["drive"]], dev[plan["ceiling"]]
        peak = x.abs().amax(1)
        gain = torch.where(peak > 0, ceiling / peak.clamp(min=1e-30) * 10 ** (drive / 20),
                           torch.ones_like(peak))
        y = x * gain[:, None]
        return torch.maximum(torch.minimum(y, ceiling[:, None]), -ceiling[:, None])
    if name == "reverb":
        y = _fft_conv(x, dev[plan["h"]]) * mask
        return _keep_rms(y, _masked_power(x, mask, n), mask, n)
    # rawboost
    peak = x.abs().amax(1)
    xn = x / torch.where(peak > 0, peak, torch.ones_like(peak))[:, None]
    filters = [dev[slot] for slot in plan["filters"]]
    n_fft = _fft_len(x.shape[1] + filters[0].shape[1] - 1)
    acc, power = None, torch.ones_like(xn)
    for b in filters:
        power = power * xn
        term = torch.fft.rfft(power, n_fft) * torch.fft.rfft(b, n_fft)
        acc = term if acc is None else acc + term
    y = torch.fft.irfft(acc, n_fft)[:, : x.shape[1]] * mask
    y = (y - (y.sum(1) / n.clamp(min=1))[:, None]) * mask
    return _keep_rms(y, _masked_power(x, mask, n), mask, n)


def _fft_conv(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Causal linear convolution of each row, cut to x's width: (B, T) * (B, L) -> (B, T)."""
    n_fft = _fft_len(x.shape[1] + h.shape[1] - 1)
    y = torch.fft.irfft(torch.fft.rfft(x, n_fft) * torch.fft.rfft(h, n_fft), n_fft)
    return y[:, : x.shape[1]]


def render_batch(values: torch.Tensor, attention_mask: torch.Tensor, names: Sequence[str],
                 params: Sequence[dict | None]) -> torch.Tensor:
    """Apply each row's wave-domain type (from plan_example) to a (B, T) batch; others pass.

    Rows named "none", "codec:<c>" or "trim_jitter" (already applied on the CPU) are unchanged.
    Every parameter (and each type's row numbers) reaches the device in one transfer; rows
    are gathered and scattered with index tensors, never boolean masks (no host sync).
    """
    if not len(names) == len(params) == values.shape[0]:
        raise ValueError(f"render_batch: {values.shape[0]} rows, {len(names)} names, "
                         f"{len(params)} params (need one of each per row)")
    out = values.to(torch.float32).clone()
    mask = attention_mask.to(out.dtype)
    n = mask.sum(1)
    up, plans = _Upload(), []
    for name in WAVE_TYPES:
        idx = [i for i, nm in enumerate(names) if nm == name]
        if not idx:
            continue
        if any(params[i] is None for i in idx):
            raise ValueError(f"render_batch: a {name!r} row has no params (use plan_example)")
        plans.append((name, up.add(idx), _plan(name, [params[i] for i in idx], up)))
    dev = up.send(out.device)
    for name, rows_slot, plan in plans:
        rows = dev[rows_slot].long()  # (b,) row numbers: exact in float32 below 2**24
        rendered = _render(name, out.index_select(0, rows), mask.index_select(0, rows),
                           n.index_select(0, rows), plan, dev)
        out = out.index_copy(0, rows, rendered)
    return out


def finish_batch(values: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """hearsay.sound.example.finish for a batch: band-limit 7.25 kHz, then normalise valid
    samples."""
    mask = attention_mask.to(torch.float32)
    n = mask.sum(1).clamp(min=1)
    y = _lowpass(values.to(torch.float32) * mask, audio.BAND_LIMIT_HZ) * mask
    mean = y.sum(1) / n
    var = ((y - mean[:, None]).square() * mask).sum(1) / n
    return (y - mean[:, None]) / torch.sqrt(var + 1e-7)[:, None] * mask


def train_batch(values: torch.Tensor, attention_mask: torch.Tensor, names: Sequence[str],
                params: Sequence[dict | None]) -> torch.Tensor:
    """render_batch then finish_batch: the model input, as
    hearsay.sound.example.training_example per row."""
    return finish_batch(render_batch(values, attention_mask, names, params), attention_mask)
