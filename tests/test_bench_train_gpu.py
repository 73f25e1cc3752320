"""scripts/bench_train_gpu.py --dry-run: the GPU benchmark's logic on the CPU, so it cannot rot
before a GPU runs it (docs/BENCHMARKS.md, "Trainer throughput on a GPU")."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import torch

from hearsay.detector.model import ModelConfig
from hearsay.train import flops

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_train_gpu.py"
RATES = ("clips_per_s", "audio_s_per_s")  # what BENCHMARKS.md tabulates for (a) and (b)


def _script():
    """The script as a module: in-process, so torch and transformers are imported once."""
    spec = importlib.util.spec_from_file_location("bench_train_gpu", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _positive(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_dry_run_writes_raw_and_trainer_rates_and_their_ratio_per_variant(tmp_path):
    out = tmp_path / "bench.json"
    assert _script().main(["--dry-run", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["dry_run"] is True and res["device"] == "cpu"
    assert [f["variant"] for f in res["figures"]] == ["fine-tune", "frozen"]
    for fig in res["figures"]:
        for part in ("raw", "trainer"):
            for rate in RATES:
                assert _positive(fig[part][rate]), (fig["variant"], part, rate, fig[part])
            assert fig[part]["steps"] >= 1
        assert fig["raw"]["autocast"] == "bfloat16"  # the dry run went through bf16 autocast
        assert fig["trainer"]["gpu_augment"] is True  # the trainer's default: batched render
        assert fig["trainer"]["stream_records_max"] == 20000  # the shipped value, not a cut
        assert fig["trainer"]["stream_records_skipped_batches"] == 0
        assert 0 < fig["trainer"]["valid_share"] <= 1 and fig["trainer"]["batch_shapes"] >= 1
        ratio = fig["trainer"]["clips_per_s"] / fig["raw"]["clips_per_s"]
        assert math.isclose(fig["trainer_over_raw"], ratio, rel_tol=1e-9)
    assert res["config"]["shipped"] == {"file": "configs/train.json", "workers": 8,
                                        "stream_records_max": 20000}


def test_dry_run_raw_step_carries_the_analytic_flops_of_its_shapes(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert _script().main(["--dry-run", "--skip-trainer", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["bf16_matmul_tflops"] is None  # no card: no rate, no share
    for fig, cfg in zip(res["figures"], (ModelConfig.tiny(), ModelConfig.tiny(train_top=0)),
                        strict=True):
        raw = fig["raw"]  # the dry run: 4 clips of 1.0 s a step
        assert raw["flops_per_step"] == flops.step_flops(cfg, [16000] * 4)["total"]
        assert math.isclose(raw["model_tflops"],
                            raw["flops_per_step"] * raw["steps"] / raw["seconds"] / 1e12)
        assert raw["matmul_share"] is None
    assert "TFLOP a step" in capsys.readouterr().out


def test_without_cuda_and_without_dry_run_it_refuses_with_exit_3(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _script().main([]) == 3
    assert "--dry-run" in capsys.readouterr().err


def test_variants_pick_a_rerun_and_the_json_keeps_what_finished_before_a_crash(tmp_path):
    mod = _script()
    out = tmp_path / "bench.json"
    assert mod.main(["--dry-run", "--skip-trainer", "--variants", "frozen", "--json",
                     str(out)]) == 0
    assert [f["variant"] for f in json.loads(out.read_text())["figures"]] == ["frozen"]
    real, calls = mod.raw_step, []

    def second_one_dies(*a, **k):  # a timeout or crash during the second variant
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    mod.raw_step = second_one_dies
    try:
        mod.main(["--dry-run", "--skip-trainer", "--variants", "fine-tune,frozen", "--json",
                  str(out)])
    except KeyboardInterrupt:
        pass
    assert [f["variant"] for f in json.loads(out.read_text())["figures"]] == ["fine-tune"]
    assert mod.parse_variants("frozen+compile") == [("frozen", "compile")]
    assert mod.parse_variants("fine-tune, frozen+b128") == [("fine-tune", ""), ("frozen", "b128")]


def test_levers_time_the_raw_step_only_each_with_its_own_setting(tmp_path):
    out = tmp_path / "bench.json"
    assert _script().main(["--dry-run", "--levers", "--variants",
                           "fine-tune+cudnn,frozen+b128", "--json", str(out)]) == 0
    cudnn, b128 = json.loads(out.read_text())["figures"]
    assert cudnn["raw"]["cudnn_benchmark"] and "trainer" not in cudnn
    assert b128["raw"]["batch"] == 2 * cudnn["raw"]["batch"] and "trainer" not in b128
    assert not torch.backends.cudnn.benchmark  # put back as found


def test_trainer_levers_are_each_timed_off_and_on_raw_and_trainer(tmp_path, monkeypatch):
    """--levers' trainer rows: the same shapes with the lever's switches off, then on, and
    the forward given the lever's arguments (hearsay.train.levers) only on the "on" side;
    fp8's raw "on" side converts the kept layers' Linear layers (12 in the tiny config) and its
    trainer says so, both sides compiled as graphs'; flex's row says why the CPU skips it."""
    mod = _script()
    given = []  # the forward arguments the raw steps and trainers asked for
    real = mod.levers.forward_args
    monkeypatch.setattr(mod.levers, "forward_args",
                        lambda *a, **k: given.append(sorted(r := real(*a, **k))) or r)
    out = tmp_path / "bench.json"
    names = ",".join(mod.TRAIN_LEVERS)
    assert mod.main(["--dry-run", "--variants", names, "--json", str(out)]) == 0
    rows = {f["variant"]: f for f in json.loads(out.read_text())["figures"]}
    assert list(rows) == ["fine-tune + pack", "fine-tune + flex", "fine-tune + mask-free",
                          "fine-tune + graphs", "fine-tune + fp8"]
    for name in ("pack", "mask-free", "graphs", "fp8"):
        row = rows[f"fine-tune + {name}"]
        switches = mod.levers.SWITCHES[name]
        assert row["raw_off"]["switches"] == {} and row["raw"]["switches"] == switches
        assert row["trainer_off"]["switches"] == {} and row["trainer"]["switches"] == switches
        for ratio in ("raw_on_over_off", "trainer_on_over_off", "trainer_over_raw"):
            assert _positive(row[ratio]), (name, ratio)
        assert len(row["trainer"]["loss"]) == len(row["trainer_off"]["loss"]) > 0
        assert 0 <= row["loss_max_abs_diff"] < 0.05, name  # the same steps, draws and seed
    assert rows["fine-tune + pack"]["raw"]["mixed"] and rows["fine-tune + graphs"]["raw"][
        "compiled"]
    assert ["packed"] in given and ["mask_free"] in given and [] in given
    assert [rows[f"fine-tune + {n}"]["raw"]["forward_args"] for n in ("pack", "mask-free")] == [
        ["packed"], ["mask_free"]]
    assert rows["fine-tune + pack"]["raw_off"]["forward_args"] == []
    f8 = rows["fine-tune + fp8"]
    assert (f8["raw_off"]["fp8_layers"], f8["raw"]["fp8_layers"]) == (0, 12)
    assert f8["raw_off"]["compiled"] and f8["raw"]["compiled"]
    assert f8["trainer_off"]["fp8"] == "off (train.fp8 false)"
    assert "12 Linear layers of the kept transformer layers" in f8["trainer"]["fp8"]
    assert f8["raw"]["forward_args"] == []  # fp8 changes the model, not the forward's arguments
    assert f8["loss_max_abs_diff"] > 0  # the "on" trainer's matmuls were float8
    assert "CUDA only" in rows["fine-tune + flex"]["skipped"]


def test_the_fp8_row_is_skipped_saying_why_on_a_gpu_below_compute_capability_8_9(monkeypatch):
    """An A100 (8.0) has no float8 tensor cores: the row says so (hearsay.train.fp8's words)
    and times nothing; no GPU here, torch.cuda answers for one."""
    mod = _script()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100")
    row = mod._lever_row(None, None, None, ModelConfig.tiny().to_dict(), "fine-tune + fp8",
                         "fp8", torch.device("cuda"))
    assert row == {"variant": "fine-tune + fp8", "switches": {"fp8": True},
                   "skipped": mod.fp8.fp8_problem("cuda")}
    assert "this NVIDIA A100 is 8.0: set train.fp8 false" in row["skipped"]
