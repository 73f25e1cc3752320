"""scripts/bench_cpu_inference.py --engines --tiny: the per-process CPU bench runs end to end on
the tiny config (each engine its own process, torch only in eager's), so it cannot rot between
the runs docs/BENCHMARKS.md ("CPU inference") records. No speed is asserted."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _script():
    spec = importlib.util.spec_from_file_location("bench_cpu_inference",
                                                  SCRIPTS / "bench_cpu_inference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_per_process_bench_times_every_engine_and_gates_int8(tmp_path, demo_bundle,
                                                            monkeypatch):
    out = tmp_path / "bench.json"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # its work folder goes here
    (tmp_path / "tmp").mkdir()
    argv = ["--engines", "eager,ort_fp32,ort_int8,ort_int8_layers,ort_int8_two_digit,"
            "ort_int8_one_digit,ort_int8_posconv", "--tiny",
            "--clips", "2", "--batch", "2", "--rounds", "2", "--gate-clips", "12",
            "--calibration", str(demo_bundle.root), "--json", str(out)]
    assert _script().main(argv) == 0
    res = json.loads(out.read_text())
    shipped = res["int8_export_gate"]["passed"]  # the tiny model may fail the export's gate
    if not shipped:
        assert res["ort_int8"]["errors"] == ["not shipped: every int8 recipe failed the "
                                             "export's gate"]
    for engine in ("eager", "ort_fp32") + (("ort_int8",) if shipped else ()):
        row = res[engine]
        assert row["errors"] == [] and row["clips_per_s"] > 0
        assert row["min"] <= row["clips_per_s"] <= row["max"]
        assert row["torch_loaded"] == (engine == "eager")  # the deploy side runs without torch
    assert res["eager"]["x_eager"] == 1.0
    assert res["ort_fp32"]["max_abs_dlogit_vs_eager"] <= 1e-4  # parity A of the shipped fp32
    assert res["fusion"]["used"]
    if shipped:  # the bench re-gates the shipped int8 on its own clips and reports the figures;
        # shipping was judged on the export's clips and long-file windows (int8_export_gate), and
        # on the tiny random model (logit spread ~0.09) a second sample of 12 clips can flip one
        # decision at the median: the re-gate is reported, not required to pass.
        regate = res["ort_int8"]["gate_vs_ort_fp32"]
        assert regate["clips"] == 12 and regate["max_abs_dlogit"] <= regate["max_abs_dlogit_bound"]
    layers = res["ort_int8_layers"]  # the layers-only recipe, timed and gated beside it
    assert layers["errors"] == [] and layers["clips_per_s"] > 0 and not layers["torch_loaded"]
    assert "spearman" in layers["gate_vs_ort_fp32"]
    two = res["ort_int8_two_digit"]  # the bundle-less row-wise recipe, beside it too
    assert two["errors"] == [] and two["clips_per_s"] > 0 and "spearman" in two["gate_vs_ort_fp32"]
    # the export's first two recipes (with and without the positional conv int8): timed and
    # gated whether or not their gate holds (a random-init model's may not), the graphs what
    # their names say
    for engine in ("ort_int8_one_digit", "ort_int8_posconv"):
        row = res[engine]
        assert row["errors"] == [] and row["clips_per_s"] > 0 and not row["torch_loaded"]
        assert "spearman" in row["gate_vs_ort_fp32"]
    assert res["int8_recipes"]["ort_int8_posconv"].endswith(
        "one digit, mean-corrected + 1 QLinearConv (the positional conv)")
    assert res["int8_recipes"]["ort_int8_one_digit"].endswith("one digit, mean-corrected")
    assert [a["recipe"] for a in res["int8_export_attempts"]][0] == \
        "row-wise convs 1.., one digit, mean-corrected + positional conv + layers"
    assert res["int8_gemm_peak_gops"] > 0 and len(res["loadavg_start"]) == 3
    # the models and clips are not left behind (torch keeps its own compile cache there)
    assert list((tmp_path / "tmp").glob("bench-engines-*")) == []


def test_per_process_bench_removes_its_work_folder_when_a_stage_fails(tmp_path, monkeypatch):
    bench, seen = _script(), []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def fails(args, threads, d):
        (d / "model.onnx").write_bytes(b"x" * 1024)
        seen.append(d)
        raise RuntimeError("export failed")

    monkeypatch.setattr(bench, "measure_engines", fails)
    with pytest.raises(RuntimeError, match="export failed"):
        bench.main(["--engines", "eager", "--tiny"])
    assert seen and not seen[0].exists()
    # --keep-work keeps what it worked on, where it was told
    with pytest.raises(RuntimeError):
        bench.main(["--engines", "eager", "--tiny", "--keep-work", str(tmp_path / "kept")])
    assert seen[1] == tmp_path / "kept" and (seen[1] / "model.onnx").exists()


def test_worker_refuses_an_unknown_engine(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_engine_worker.py"), "tpu",
                           str(tmp_path), str(tmp_path / "o.json")], capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "engine 'tpu' unknown" in proc.stderr
