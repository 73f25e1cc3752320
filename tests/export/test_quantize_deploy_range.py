"""The int8 gate measures the deploy range: the full-length windows hearsay-score cuts from long
files, besides short clips up to max_s."""

from __future__ import annotations

import numpy as np
import torch

from hearsay.export import probe
from hearsay.export.onnx_export import ExportConfig, export_model
from hearsay.export.quantize import QuantGate, long_file_windows
from hearsay.model import Detector, ModelConfig
from hearsay.sound import windows

FRONT = {"sample_rate": 16_000, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0, "min_s": 0.5}


def test_the_gate_windows_are_the_windows_the_scorer_cuts_from_long_files():
    gate = QuantGate(long_files=2, long_s=20.0)
    got = long_file_windows(gate, FRONT, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    want = [w.wave for _ in range(2) for w in windows.wave_windows(
        probe.voice_like(rng, 20.0), 8.0, windows.HOP_S, top_db=40.0, cutoff_hz=7250.0)]
    assert len(got) == len(want) >= 2 * 4  # 20 s: windows at 0, 4, 8, 12 s
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert max(len(w) for w in got) == 8 * 16_000  # full max_s windows, as deployed


def test_the_export_gate_reports_the_long_windows_it_measured(tmp_path):
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny()).eval()
    gate = QuantGate(clips=6, max_s=2.0, long_files=1, long_s=6.0)  # 2 s windows: quick
    report = export_model(det, tmp_path / "m", ExportConfig(gate=gate, parity_clips=2))["int8"]
    assert report["gate_windows_long"] == 3 and report["long_file_s"] == 6.0  # 0, 2, 4 s
    assert report["lengths_s"][1] == 2.0
