"""The int8 gate measures the deploy range: the full-length windows hearsay-score cuts from long
files, besides short clips up to max_s."""

from __future__ import annotations

import json

import numpy as np
import torch

from hearsay.detector.model import Detector, ModelConfig
from hearsay.export.onnx_export import ExportConfig, export_model
from hearsay.export.quantize import QuantGate, long_file_windows, long_recordings

FRONT = {"sample_rate": 16_000, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0, "min_s": 0.5}


def test_the_gate_windows_are_the_windows_the_scorer_cuts_from_long_files(tmp_path):
    """The recordings written as files and scored by hearsay-score's own windowing
    (hearsay.deploy.windowed.file_windows, the default hop): the gate's windows, in order."""
    from types import SimpleNamespace

    import soundfile as sf

    from hearsay.deploy import engine, windowed

    gate = QuantGate(long_files=2, long_s=40.0)
    got = long_file_windows(gate, FRONT, np.random.default_rng(5))
    scorer = SimpleNamespace(front=FRONT, min_samples=400)
    want = []
    for k, x in enumerate(long_recordings(gate, np.random.default_rng(5))):
        sf.write(tmp_path / f"{k}.wav", x, 16_000, subtype="FLOAT")
        want += [w.wave for w in windowed.file_windows(tmp_path / f"{k}.wav", {}, scorer,
                                                       engine.ScoreConfig())]
    assert len(got) == len(want) >= 2 * 8  # 40 s: windows every 4 s
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert max(len(w) for w in got) == 8 * 16_000  # full max_s windows, as deployed


def test_the_export_gate_reports_the_long_windows_it_measured(tmp_path):
    torch.manual_seed(0)
    det = Detector(ModelConfig.tiny()).eval()
    gate = QuantGate(clips=6, max_s=2.0, long_files=1, long_s=12.0)  # 2 s windows: quick
    report = export_model(det, tmp_path / "m", ExportConfig(gate=gate, parity_clips=2))["int8"]
    assert report["long_file_s"] == 12.0 and report["lengths_s"][1] == 2.0
    for attempt in report["attempts"]:  # every recipe judged on each kind apart
        assert attempt["kinds"]["clips"]["clips"] == 6
        assert attempt["kinds"]["long_windows"]["clips"] == report["gate_windows_long"] >= 3
    saved = json.loads((tmp_path / "m" / "parity.json").read_text())["int8"]
    assert saved["kinds"] == report["kinds"] and set(saved["kinds"]) == {"clips",
                                                                          "long_windows"}
