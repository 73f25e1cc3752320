"""`hearsay export onnx` and `hearsay parity`: tiny random-init detector, real torch + ORT."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from hearsay.contracts.model_dir import ModelError, model_sums, verify
from hearsay.detector.model import Detector, ModelConfig, save_detector
from hearsay.export import onnx_export, parity, probe
from hearsay.export.onnx_export import ExportConfig, export_model
from hearsay.export.quantize import QuantGate, gate_report, layer_matmuls, quantize_file
from hearsay.sound.audio import pad_batch
from hearsay.util.hashing import sha256_file


def tiny_detector(seed: int = 0) -> Detector:
    torch.manual_seed(seed)
    return Detector(ModelConfig.tiny()).eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Detector, Path, dict]:
    out = tmp_path_factory.mktemp("export") / "model"
    det = tiny_detector()
    return det, out, export_model(det, out, ExportConfig(gate=QuantGate(clips=24, long_s=40.0)))


def test_export_writes_the_interface_folder_with_a_true_manifest(exported):
    _, out, report = exported
    sums = model_sums(out)
    assert {"model.onnx", "front_end.json"} <= set(sums)
    assert set(sums) <= {"model.onnx", "model.int8.onnx", "model.portable.onnx",
                         "front_end.json", "front_end.onnx", "format.json",
                         "README.md"}  # parity.json: beside
    for name, digest in sums.items():
        assert sha256_file(out / name) == digest
    front = json.loads((out / "front_end.json").read_text())
    assert front == {"sample_rate": 16000, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0,
                     "min_s": 0.5}
    assert json.loads((out / "parity.json").read_text())["parity_a"] == report["parity_a"]
    assert report["exporter"] == "torchscript"


def test_onnx_graph_has_mask_input_and_dynamic_batch_and_sample_axes(exported):
    _, out, _ = exported
    graph = onnx.load(str(out / "model.onnx")).graph
    inputs = {i.name: i.type.tensor_type for i in graph.input}
    assert set(inputs) == {"input_values", "attention_mask"}
    assert inputs["input_values"].elem_type == onnx.TensorProto.FLOAT
    assert inputs["attention_mask"].elem_type == onnx.TensorProto.INT64
    for t in inputs.values():
        dims = t.shape.dim
        assert len(dims) == 2 and all(d.dim_param and not d.dim_value for d in dims)
    (out_t,) = graph.output
    assert out_t.name == "logits" and len(out_t.type.tensor_type.shape.dim) == 1


def test_parity_a_holds_on_mixed_lengths_and_a_padded_batch(exported):
    det, out, report = exported
    a = report["parity_a"]
    assert a["passed"] and a["max_abs_dlogit"] <= 1e-4
    assert len(set(a["lengths_s"])) == a["clips"] >= 4  # mixed lengths
    # independently: a fresh padded batch with lengths the export never saw (incl. > 3 s)
    rng = np.random.default_rng(7)
    waves = [rng.standard_normal(n).astype(np.float32) for n in (5_000, 23_456, 61_000)]
    x, mask = pad_batch(waves, [len(w) for w in waves])
    with torch.no_grad():
        want = det(torch.from_numpy(x), torch.from_numpy(mask)).numpy()
    got = probe.ort_logits(out / "model.onnx", waves, batched=True)
    assert np.max(np.abs(want - got)) <= 1e-4
    assert len(np.unique(np.round(got, 4))) == 3  # the clips really give different logits


class _TraceSkew(Detector):
    """A model whose traced graph differs from its eager forward: parity A must catch it."""

    def forward(self, input_values, attention_mask):
        logits = super().forward(input_values, attention_mask)
        return logits + 1e-3 if torch.jit.is_tracing() else logits


def test_failed_parity_leaves_no_manifest_so_the_scorer_refuses(tmp_path):
    torch.manual_seed(0)
    det = _TraceSkew(ModelConfig.tiny()).eval()
    report = export_model(det, tmp_path, ExportConfig(exporter="torchscript", int8=False))
    assert report["exporter"] is None and not report["parity_a"]["passed"]
    assert report["attempts"][0]["max_abs_dlogit"] == pytest.approx(1e-3, rel=1e-2)
    assert not (tmp_path / "SHA256SUMS").exists()
    with pytest.raises(ModelError, match="SHA256SUMS"):
        verify(tmp_path)


def test_int8_is_shipped_exactly_when_its_gate_passes(exported, tmp_path):
    _, out, report = exported  # default gate: shipped or not, the folder must agree
    q = report["int8"]
    assert (out / "model.int8.onnx").exists() == q["passed"] == ("model.int8.onnx" in
                                                                 model_sums(out))
    short = {"clips": 12, "max_s": 3.0, "long_s": 12.0}  # shipping logic only: any lengths
    lenient = ExportConfig(gate=QuantGate(**short, min_spearman=0.5, min_agreement=0.5,
                                          max_abs_dlogit=10.0))
    r = export_model(tiny_detector(), tmp_path / "ok", lenient)
    assert r["int8"]["passed"] and "model.int8.onnx" in model_sums(tmp_path / "ok")
    ops = {n.op_type for n in onnx.load(str(tmp_path / "ok" / "model.int8.onnx")).graph.node}
    assert "MatMulInteger" in ops or "DynamicQuantizeMatMul" in ops  # MatMuls quantised …
    assert "ConvInteger" not in ops and "Conv" in ops  # … the conv front end is not
    strict = ExportConfig(gate=QuantGate(**short, min_spearman=1.01))  # unattainable
    r = export_model(tiny_detector(), tmp_path / "no", strict)
    assert not r["int8"]["passed"]
    assert not (tmp_path / "no" / "model.int8.onnx").exists()
    assert "model.int8.onnx" not in model_sums(tmp_path / "no")


def test_int8_quantises_the_layers_matmuls_and_keeps_projection_pool_and_head_fp32(
        exported, tmp_path):
    _, out, _ = exported
    graph = onnx.load(str(out / "model.onnx")).graph
    layers = ModelConfig.tiny().keep_layers
    weights = {t.name for t in graph.initializer}
    in_layers = [n.name for n in graph.node if n.op_type == "MatMul" and "/layers." in n.name
                 and n.input[1] in weights]  # TorchScript names nodes after their modules
    assert layer_matmuls(onnx.load(str(out / "model.onnx"))) == in_layers
    assert len(in_layers) == 6 * layers
    quantize_file(out / "model.onnx", tmp_path / "int8.onnx")
    nodes = onnx.load(str(tmp_path / "int8.onnx")).graph.node
    assert sum(n.op_type == "MatMulInteger" for n in nodes) == 6 * layers
    fp32 = {n.name for n in nodes if n.op_type in ("MatMul", "Gemm")}
    assert {"/feature_projection/projection/MatMul", "/pool/attn/attn.0/MatMul",
            "/pool/attn/attn.2/MatMul"} <= fp32
    assert any(n.startswith("/head/Gemm") for n in fp32)  # ORT may rewrite it as MatMul + Add


def test_int8_refuses_a_graph_it_cannot_place_and_an_empty_node_list(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="a"),
             helper.make_node("MatMul", ["y", "w"], ["z"], name="b")]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "z")]
    model = helper.make_model(helper.make_graph(nodes, "g", vi[:1], vi[1:], [w]))
    with pytest.raises(ValueError, match="expected 1 \\+ 6 per layer"):
        layer_matmuls(model)  # two MatMuls: no transformer layer between projection and pool
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(ValueError, match="every node"):
        quantize_file(tmp_path / "m.onnx", tmp_path / "q.onnx", nodes=[])


def test_int8_gate_counts_decision_flips_at_the_threshold():
    fp32 = np.linspace(-0.02, 0.02, 100)  # the spread of a random-init model's logits
    int8 = fp32.copy()
    int8[49] = 0.005  # just below the median -> above: one flip, ranking barely moves
    r = gate_report(fp32, int8, QuantGate())
    assert r["agreement"] == pytest.approx(0.99) and r["spearman"] > 0.995 and r["passed"]
    int8[48] = 0.006  # a second flip: 98% < 99%
    r = gate_report(fp32, int8, QuantGate())
    assert r["agreement"] == pytest.approx(0.98) and not r["passed"]
    r = gate_report(fp32, -fp32, QuantGate(threshold=5.0))  # all agree, ranking reversed
    assert r["agreement"] == 1.0 and r["spearman"] < 0 and not r["passed"]


def test_dynamo_exporter_also_passes_parity(tmp_path):
    report = export_model(tiny_detector(), tmp_path,
                          ExportConfig(exporter="dynamo", int8=False, parity_clips=4))
    assert report["exporter"] == "dynamo" and report["parity_a"]["passed"], report["attempts"]


def test_export_cli_exit_codes(tmp_path, capsys):
    run = tmp_path / "run"
    save_detector(tiny_detector(), run / "final")
    out = tmp_path / "model"
    rc = onnx_export.main(["onnx", str(run), "--out", str(out), "--no-int8",
                           "--parity-clips", "4"])
    assert rc == 0 and (out / "SHA256SUMS").exists()
    verify(out)
    assert onnx_export.main(["onnx", str(tmp_path / "nope"), "--out", str(out)]) == 3
    assert onnx_export.main(["tflite", str(run), "--out", str(out)]) == 2
    assert "only format is onnx" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this box has CUDA: parity B would run")
def test_parity_b_refuses_without_cuda(tmp_path, capsys):
    rc = parity.main([str(tmp_path), "--random-init", "tiny"])
    assert rc == parity.EXIT_NO_CUDA == 4
    assert "no CUDA device" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written, nothing claimed


def test_a_quantiser_crash_ships_fp32_and_records_why(tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("shape inference differs")  # what ORT does on some dynamo graphs

    monkeypatch.setattr(onnx_export, "quantize_int8", crash)
    report = export_model(tiny_detector(), tmp_path, ExportConfig(parity_clips=3))
    assert report["int8"] == {"passed": False, "error": "RuntimeError: shape inference differs"}
    assert set(model_sums(tmp_path)) == {"model.onnx", "model.portable.onnx", "front_end.json",
                                         "front_end.onnx", "format.json", "README.md"}
    assert not (tmp_path / "model.int8.onnx").exists()


def test_parity_b_comparison_runs_on_cpu_autocast(exported):
    """The CUDA-only command cannot run here; its comparison function can, with CPU bf16."""
    det, out, _ = exported
    waves = probe.synthetic_clips(np.random.default_rng(5), 6, 0.6, 2.0,
                                   json.loads((out / "front_end.json").read_text()))
    r = parity.parity_b(det, out / "model.onnx", waves, device="cpu")
    assert r["clips"] == 6 and r["device"] == "cpu"
    assert r["fp32_vs_ort"]["max_abs_dlogit"] <= 1e-4  # fp32 on both sides: export parity
    # bf16 really ran in reduced precision: far further from ORT fp32 than fp32 is
    assert r["bf16_vs_ort"]["max_abs_dlogit"] > 10 * max(r["fp32_vs_ort"]["max_abs_dlogit"], 1e-7)
    assert r["passed"] == (r["bf16_vs_ort"]["spearman"] > 0.99
                           and r["bf16_vs_ort"]["max_abs_dlogit"] < 0.05)


# ---------------------------------------------------------------- attention fusion (export/fuse.py)


def fused_tiny(tmp_path: Path, multi_head: bool = False) -> tuple[Detector, Path, dict]:
    from hearsay.export import fuse

    det = tiny_detector()
    onnx_export.export_onnx(fuse.fusable_copy(det), tmp_path / "fusable.onnx", "torchscript")
    ops = fuse.fuse_file(tmp_path / "fusable.onnx", tmp_path / "fused.onnx",
                         det.cfg.num_heads, det.cfg.hidden_size, multi_head)
    return det, tmp_path / "fused.onnx", ops


@pytest.mark.parametrize("multi_head", [False, True])
def test_fused_graph_has_one_attention_per_layer_and_holds_parity_a_padded(tmp_path, multi_head):
    det, path, ops = fused_tiny(tmp_path, multi_head)
    kind = "MultiHeadAttention" if multi_head else "Attention"
    assert ops[kind] == det.cfg.keep_layers  # the fuser did fuse: not skipped while claimed
    graph = onnx.load(str(path)).graph
    assert sum(n.op_type == kind for n in graph.node) == det.cfg.keep_layers
    assert sum(n.op_type == "SkipLayerNormalization" for n in graph.node) >= det.cfg.keep_layers
    assert not any(n.name.endswith("_fuse_hide") for n in graph.node)  # fusing-only nodes gone
    front = {"sample_rate": 16000, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0}
    waves = probe.synthetic_clips(np.random.default_rng(0), 6, 0.6, 3.0, front)
    report = probe.parity_a(det, path, waves, 1e-4)  # singles and one padded batch
    assert report["passed"], report


def test_parity_a_catches_a_fused_graph_that_ignores_the_padding_mask(tmp_path):
    det, path, _ = fused_tiny(tmp_path)
    m = onnx.load(str(path))
    for n in m.graph.node:
        if n.op_type == "Attention":
            n.input[3] = ""  # drop mask_index: padded frames are attended to
    onnx.save(m, str(path))
    front = {"sample_rate": 16000, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0}
    waves = probe.synthetic_clips(np.random.default_rng(0), 6, 0.6, 3.0, front)
    report = probe.parity_a(det, path, waves, 1e-4)
    assert report["max_abs_dlogit_single"] <= 1e-4  # one clip per call: nothing is padded
    assert report["max_abs_dlogit_batch"] > 1e-4 and not report["passed"], report


def test_parity_json_binds_the_checkpoint_and_parity_refuses_another(tmp_path, capsys):
    run, other = tmp_path / "run", tmp_path / "other"
    save_detector(tiny_detector(0), run / "final")
    save_detector(tiny_detector(1), other / "final")
    out = tmp_path / "model"
    assert onnx_export.main(["onnx", str(run), "--out", str(out), "--no-int8",
                             "--parity-clips", "3"]) == 0
    recorded = json.loads((out / "parity.json").read_text())["checkpoint_sha256"]
    assert recorded == sha256_file(run / "final" / "model.safetensors")
    before, identity = (out / "parity.json").read_text(), (out / "SHA256SUMS").read_bytes()
    assert parity.main([str(out), "--checkpoint", str(other), "--device", "cpu"]) == 3
    err = capsys.readouterr().err
    assert "are not the checkpoint" in err and recorded in err
    assert (out / "parity.json").read_text() == before  # nothing measured, nothing written
    assert parity.main([str(out), "--checkpoint", str(run), "--device", "cpu", "--clips", "3"]) \
        in (0, 1)  # the export's own checkpoint is accepted: the CPU check runs
    data = json.loads((out / "parity.json").read_text())
    assert data["parity_b_cpu_check"]["clips"] == 3 and data["checkpoint_sha256"] == recorded
    verify(out)
    assert (out / "SHA256SUMS").read_bytes() == identity  # a pin taken at export still holds


def test_parity_refuses_a_checkpoint_against_a_folder_built_in_code(exported, tmp_path, capsys):
    _, out, _ = exported
    save_detector(tiny_detector(0), tmp_path / "run" / "final")  # same weights, but unrecorded
    assert parity.main([str(out), "--checkpoint", str(tmp_path / "run"), "--device", "cpu"]) == 3
    assert "records no checkpoint_sha256" in capsys.readouterr().err


def test_int8_gate_bounds_the_largest_logit_move_even_when_ranks_hold():
    fp32 = np.linspace(-1.0, 1.0, 100)
    int8 = fp32.copy()
    int8[-1] += 0.2  # the top clip moves far up: no rank changes, no decision flips
    r = gate_report(fp32, int8, QuantGate())
    assert r["spearman"] == pytest.approx(1.0) and r["agreement"] == 1.0
    assert r["max_abs_dlogit"] == pytest.approx(0.2) and r["max_abs_dlogit_bound"] == 0.05
    assert not r["passed"]
    int8[-1] = fp32[-1] + 0.04
    assert gate_report(fp32, int8, QuantGate())["passed"]


def test_int8_gate_runs_on_the_deploy_range_of_lengths(exported):
    _, out, report = exported
    q, front = report["int8"], json.loads((out / "front_end.json").read_text())
    assert q["lengths_s"] == [pytest.approx(front["min_s"], abs=0.01),
                              pytest.approx(front["max_s"], abs=0.01)]
    recorded = json.loads((out / "parity.json").read_text())["int8"]
    for key in ("spearman", "agreement", "max_abs_dlogit", "max_abs_dlogit_bound", "lengths_s"):
        assert recorded[key] == q[key]


def test_the_demos_export_names_its_checkpoint_so_parity_accepts_it(tmp_path, monkeypatch,
                                                                    capsys):
    from hearsay import demo

    real = onnx_export.export_model  # the demo's call, with fewer clips (speed) and no int8
    monkeypatch.setattr(onnx_export, "export_model", lambda model, out, cfg, **kw: real(
        model, out, ExportConfig(int8=False, parity_clips=3), **kw))
    save_detector(tiny_detector(0), tmp_path / "runs" / "full" / "final")
    demo.stage_export(tmp_path, {})
    export = tmp_path / "export"
    recorded = json.loads((export / "parity.json").read_text())["checkpoint_sha256"]
    assert recorded == sha256_file(tmp_path / "runs" / "full" / "final" / "model.safetensors")
    identity = (export / "SHA256SUMS").read_bytes()
    rc = parity.main([str(export), "--checkpoint", str(tmp_path / "runs" / "full"), "--device",
                      "cpu", "--clips", "3"])
    assert rc == 0, capsys.readouterr().err
    assert (export / "SHA256SUMS").read_bytes() == identity


# ---------------------------------------------------------------- what the folder ships for others


def campaign_meta(path: Path, weights_sha: str) -> Path:
    """A meta.json as `hearsay assemble` writes it, cut to what the export reads."""
    from hearsay.metrics import calibration
    from hearsay.util.files import jsonable

    rng = np.random.default_rng(0)
    y = rng.random(200) < 0.5
    logit = rng.normal(0, 1, 200) + 1.5 * y
    meta = {"name": "tiny", "stamp": "2026-12-04",
            "decision": calibration.decision_record(logit, y, 0.05),
            "metrics": {"out-of-fold": {"n_bonafide": 100, "n_spoof": 100, "eer": 0.2,
                                        "min_dcf": 0.5, "auc": 0.85, "cllr": 0.8}},
            "uncertainty": {"bootstrap": {"out-of-fold": {"level": 0.95, "eer": [0.15, 0.25],
                                                          "min_dcf": [0.4, 0.6]}}},
            "gate": {"outcome": "pass", "why": "beats the bar"},
            "identity": {"runs": {"full": {"weights_sha256": weights_sha}}}}
    path.write_text(json.dumps(jsonable(meta)))
    return path


def test_export_with_meta_ships_thresholds_card_format_and_portable_graph(tmp_path):
    meta = campaign_meta(tmp_path / "meta.json", "a" * 64)
    out = tmp_path / "model"
    report = export_model(tiny_detector(), out, ExportConfig(int8=False, parity_clips=3,
                                                             meta=str(meta)),
                          checkpoint_sha256="a" * 64)
    sums = model_sums(out)
    assert {"thresholds.json", "format.json", "README.md", "model.portable.onnx"} <= set(sums)
    verify(out)  # every listed file is what SHA256SUMS says
    shipped = json.loads((out / "thresholds.json").read_text())
    recorded = json.loads(meta.read_text())["decision"]
    assert shipped["thresholds"] == recorded["thresholds"]  # copied, not refitted
    assert shipped["calibration"] == recorded["calibration"] and shipped["default"] == "min_dcf"
    assert shipped["from"]["meta_json_sha256"] == sha256_file(meta)
    fmt = json.loads((out / "format.json").read_text())
    assert fmt["format"] == "hearsay-detector-onnx" and fmt["thresholds"] == "thresholds.json"
    assert fmt["graphs"]["model.portable.onnx"] == {"domains": [""], "portable": True}
    assert not fmt["graphs"]["model.onnx"]["portable"]  # fused: onnxruntime's own operators
    assert "com.microsoft" in fmt["graphs"]["model.onnx"]["domains"]
    assert report["portable"]["parity_a"]["passed"] and report["parity_a"]["passed"]  # both
    for graph in ("model.onnx", "model.portable.onnx"):  # the facts travel with each graph
        props = {p.key: p.value for p in onnx.load(str(out / graph)).metadata_props}
        assert props["hearsay.checkpoint_sha256"] == "a" * 64
        assert props["hearsay.thresholds"] == ",".join(sorted(recorded["thresholds"]))
        assert props["hearsay.format"] == fmt["format"]
        assert props["hearsay.format_version"] == str(fmt["format_version"])
        assert json.loads(props["hearsay.front_end"]) == json.loads(
            (out / "front_end.json").read_text())
    card = (out / "README.md").read_text()
    t = recorded["thresholds"]["min_dcf"]
    for text in (f"| min_dcf | {t['value']:.4f} |", "## Gate: pass", "0.2000 (0.1500 - 0.2500)",
                 "physical replay", "simulated", "hearsay-score clips/"):
        assert text in card, text


def test_export_refuses_the_meta_of_another_checkpoint(tmp_path, capsys):
    run = tmp_path / "run"
    save_detector(tiny_detector(0), run / "final")
    meta = campaign_meta(tmp_path / "meta.json", "b" * 64)
    rc = onnx_export.main(["onnx", str(run), "--out", str(tmp_path / "m"), "--no-int8",
                           "--parity-clips", "2", "--meta", str(meta)])
    assert rc == 2
    assert "not this checkpoint's" in capsys.readouterr().err
    assert not (tmp_path / "m" / "SHA256SUMS").exists()


def test_without_threshold_the_int8_agreement_is_judged_at_the_fp32_median():
    fp32 = np.exp(np.linspace(0.0, 3.0, 101))  # skewed: median e^1.5 ~ 4.48, mean ~ 6.4, all > 0
    med = float(np.median(fp32))
    r = gate_report(fp32, fp32.copy(), QuantGate())
    assert r["threshold"] == med and r["threshold_source"] == "median fp32 logit"
    int8 = fp32.copy()
    int8[49] = med + 0.01  # the clip just below the median crosses it: one flip of 101
    assert gate_report(fp32, int8, QuantGate())["agreement"] == pytest.approx(100 / 101)
    int8 = fp32.copy()
    int8[-5:] *= 1.001  # moves near the mean (and far from the median) flip nothing
    int8[:5] = -int8[:5]  # nor do sign changes around 0
    r = gate_report(fp32, int8, QuantGate(max_abs_dlogit=10.0))
    assert r["agreement"] == 1.0
    r = gate_report(fp32, int8, QuantGate(threshold=0.0, max_abs_dlogit=10.0))
    assert r["agreement"] == pytest.approx(96 / 101) and r["threshold_source"] == "given"


def test_the_threshold_option_reaches_the_int8_gate(tmp_path):
    run = tmp_path / "run"
    save_detector(tiny_detector(), run / "final")
    common = ["onnx", str(run), "--parity-clips", "3", "--int8-clips", "6", "--no-fuse"]
    assert onnx_export.main([*common, "--out", str(tmp_path / "given"), "--threshold",
                             "0.125"]) in (0, 1)
    q = json.loads((tmp_path / "given" / "parity.json").read_text())["int8"]
    assert (q["threshold"], q["threshold_source"]) == (0.125, "given")
    assert onnx_export.main([*common, "--out", str(tmp_path / "median")]) in (0, 1)
    q = json.loads((tmp_path / "median" / "parity.json").read_text())["int8"]
    assert q["threshold_source"] == "median fp32 logit of each kind" and q["threshold"] is None
    assert {k: r["threshold_source"] for k, r in q["kinds"].items()} == {
        "clips": "median fp32 logit", "long_windows": "median fp32 logit"}
