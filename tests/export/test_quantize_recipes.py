"""hearsay.export.quantize without a model (milliseconds): the gate's bounds are inclusive, which
convs each recipe quantises, the recipes tried in turn (the first that passes is shipped, a recipe
the quantiser cannot make is passed over) and what the report counts. onnxruntime and the
quantisers are stood in for here; the slow tests in this folder run them for real."""

from pathlib import Path

import numpy as np
import pytest

from hearsay.export import quantize
from hearsay.export.quantize import QuantGate, gate_report

FRONT = {"sample_rate": 16_000, "min_s": 0.5, "max_s": 8.0, "cutoff_hz": 7250.0, "top_db": 40.0}
CONVS = ["conv0", "conv1", "conv2"]


def test_each_gate_bound_is_met_when_reached_exactly():
    fp32 = np.linspace(-1.0, 1.0, 100)
    int8 = fp32 + 0.05  # every logit moved by exactly the bound; the ranking unchanged
    at = gate_report(fp32, int8, QuantGate(max_abs_dlogit=0.05 + 1e-12, threshold=5.0))
    assert at["passed"] and at["agreement"] == 1.0 and at["spearman"] == pytest.approx(1.0)
    over = gate_report(fp32, int8 + 1e-6, QuantGate(max_abs_dlogit=0.05 + 1e-12, threshold=5.0))
    assert not over["passed"]
    rho = gate_report(fp32, int8[::-1].copy(), QuantGate())["spearman"]   # whatever it is
    assert gate_report(fp32, int8[::-1].copy(), QuantGate(min_spearman=rho, min_agreement=0.0,
                                                          max_abs_dlogit=9.0))["passed"]
    assert not gate_report(fp32, int8[::-1].copy(), QuantGate(
        min_spearman=np.nextafter(rho, 2.0), min_agreement=0.0, max_abs_dlogit=9.0))["passed"]


def test_the_report_holds_the_figures_and_the_bounds_they_were_judged_by():
    fp32 = np.array([-2.0, -1.0, 1.0, 2.0])
    int8 = np.array([-2.0, -1.0, 1.0, 2.3])
    gate = QuantGate(min_spearman=0.9, min_agreement=0.75, max_abs_dlogit=0.5, threshold=0.5)
    r = gate_report(fp32, int8, gate)
    assert r == {"clips": 4, "spearman": pytest.approx(1.0), "agreement": 1.0, "threshold": 0.5,
                 "threshold_source": "given", "max_abs_dlogit": pytest.approx(0.3),
                 "max_abs_dlogit_bound": 0.5, "rms_dlogit": pytest.approx(0.15),
                 "fp32_logit_std": pytest.approx(float(np.std(fp32))), "min_spearman": 0.9,
                 "min_agreement": 0.75, "passed": True}


def test_agreement_and_the_largest_move_pass_at_their_bounds_exactly():
    fp32 = np.linspace(-1.0, 1.0, 100)
    int8 = fp32.copy()
    int8[49] = 0.3                                   # one decision flips at the median
    r = gate_report(fp32, int8, QuantGate(max_abs_dlogit=9.0))
    at = QuantGate(min_agreement=r["agreement"], max_abs_dlogit=r["max_abs_dlogit"],
                   min_spearman=0.0)
    assert r["threshold_source"] == "median fp32 logit" and gate_report(fp32, int8, at)["passed"]
    assert not gate_report(fp32, int8, QuantGate(min_agreement=np.nextafter(r["agreement"], 2),
                                                 max_abs_dlogit=9.0, min_spearman=0.0))["passed"]
    assert not gate_report(fp32, int8, QuantGate(
        min_agreement=0.0, min_spearman=0.0,
        max_abs_dlogit=np.nextafter(r["max_abs_dlogit"], 0)))["passed"]


def test_two_clips_have_a_rank_correlation():
    r = gate_report(np.array([0.0, 1.0]), np.array([0.0, 1.0]), QuantGate())
    assert r["spearman"] == pytest.approx(1.0)


def test_one_clip_has_no_rank_correlation_and_never_passes():
    r = gate_report(np.array([0.1]), np.array([0.1]), QuantGate())
    assert np.isnan(r["spearman"]) and r["clips"] == 1 and not r["passed"]


def test_the_gate_clips_span_the_deploy_range_unless_the_gate_names_its_own():
    lengths = [len(w) / 16_000 for w in quantize.gate_clips(QuantGate(clips=5), FRONT,
                                                             np.random.default_rng(0))]
    assert len(lengths) == 5 and max(lengths) <= 8.0 and max(lengths) > 7.0
    lengths = [len(w) / 16_000 for w in quantize.gate_clips(
        QuantGate(clips=3, min_s=1.0, max_s=2.0), FRONT, np.random.default_rng(0))]
    assert len(lengths) == 3 and max(lengths) <= 2.0 and max(lengths) > 1.5
    assert min(lengths) >= 0.9   # trimming may shave a little off the shortest, 1 s


def test_long_file_windows_are_max_s_long_and_a_gate_max_s_cuts_shorter_ones():
    gate = QuantGate(long_files=1, long_s=12.0, max_s=4.0)
    got = quantize.long_file_windows(gate, FRONT, np.random.default_rng(1))
    assert len(got) == 3 and max(len(w) for w in got) == 4 * 16_000   # 12 s: 0, 4, 8 s


def test_long_files_built_from_bundle_clips_repeat_them_to_the_file_length():
    src = [np.full(16_000, 0.1 * (k + 1), np.float32) for k in range(3)]  # 3 s of clips
    gate = QuantGate(long_files=2, long_s=10.0)
    got = quantize.long_file_windows(gate, FRONT, np.random.default_rng(2), src)
    one = quantize.long_file_windows(QuantGate(long_files=1, long_s=10.0), FRONT,
                                     np.random.default_rng(2), src)
    assert len(got) == 2 * len(one) and max(len(w) for w in got) == 8 * 16_000


@pytest.mark.parametrize("which, want", [("rowwise_mean", CONVS[1:]), ("rowwise", CONVS[1:]),
                                         ("all", CONVS), ("skip_first", CONVS[1:]),
                                         ("none", [])])
def test_each_recipe_quantises_its_convs(which, want):
    assert quantize._recipe_convs(CONVS, which) == want


class Stand:
    """onnx, onnxruntime and the quantisers stood in for: each recipe's int8 logits are fp32's
    plus that recipe's offset (or its error)."""

    def __init__(self, monkeypatch, offsets: dict, convs=CONVS):
        self.offsets, self.written = offsets, []
        import onnx

        from hearsay import cpu_engine
        from hearsay.export import quantize_conv

        monkeypatch.setattr(onnx, "load", lambda *_a, **_k: "graph")
        monkeypatch.setattr(quantize, "layer_matmuls", lambda _g: ["m1", "m2"])

        def encoder_convs(_g):
            if convs is None:
                raise ValueError("no encoder convs found")
            return list(convs)

        monkeypatch.setattr(quantize_conv, "encoder_convs", encoder_convs)
        monkeypatch.setattr(quantize_conv, "bundle_clips",
                            lambda _b, _f, n_cal, n_gate, _r: ([np.zeros(10)] * n_cal,
                                                              [np.zeros(16_000)] * 2))
        monkeypatch.setattr(quantize, "quantize_file",
                            lambda src, dst, nodes: Path(dst).write_text("layers"))
        monkeypatch.setattr(quantize, "write_recipe", self.write_recipe)
        monkeypatch.setattr(quantize, "long_file_windows",
                            lambda gate, front, rng, real: [np.zeros(8 * 16_000)])
        monkeypatch.setattr(cpu_engine, "make_session", lambda path: Path(path).read_text())
        monkeypatch.setattr(cpu_engine, "run_logits", self.run_logits)

    def write_recipe(self, src, dst, which, convs, nodes, calib, layers):
        self.written.append((which, list(convs), len(calib)))
        if isinstance(self.offsets.get(which), Exception):
            raise self.offsets[which]
        Path(dst).write_text(which)

    def run_logits(self, session, waves):
        base = np.linspace(-1.0, 1.0, len(waves))
        return base if session == "fp32" else base + self.offsets[session]


def _run(tmp_path, calibration=None, gate=QuantGate(clips=4)):
    src = tmp_path / "model.onnx"
    src.write_text("fp32")
    return quantize.quantize_int8(src, tmp_path / "int8.onnx", gate, FRONT,
                                  np.random.default_rng(0), calibration)


def test_without_calibration_the_row_wise_recipe_is_tried_first_and_shipped(monkeypatch,
                                                                            tmp_path):
    stand = Stand(monkeypatch, {"rowwise": 0.0, "none": 0.0})
    r = _run(tmp_path)
    assert [w[0] for w in stand.written] == ["rowwise"]
    assert r["recipe"] == "row-wise convs 1.. + layers" and r["passed"] is True
    assert r["quantised_convs"] == 2 and r["quantised_matmuls"] == 2
    assert r["gate_clips_bundle"] == 0 and r["gate_clips_synthetic"] == 4
    assert r["gate_windows_long"] == 1 and r["calibration_clips"] == 0
    assert r["calibration"] is None and r["conv_recipes_skipped"] is None
    assert r["long_files"] == 4 and r["long_file_s"] == 30.0
    assert r["lengths_s"][1] == 8.0 and r["lengths_s"][0] < 8.0
    assert (tmp_path / "int8.onnx").read_text() == "rowwise"
    assert not (tmp_path / "int8.layers.onnx").exists()   # the shared step is cleaned up


def test_a_failing_recipe_passes_to_the_next_and_every_attempt_is_reported(monkeypatch,
                                                                         tmp_path):
    stand = Stand(monkeypatch, {"rowwise": 0.5, "none": 0.0})
    r = _run(tmp_path)
    assert [w[0] for w in stand.written] == ["rowwise", "none"]
    assert [a["recipe"] for a in r["attempts"]] == ["row-wise convs 1.. + layers", "layers"]
    assert [a["passed"] for a in r["attempts"]] == [False, True]
    assert r["recipe"] == "layers" and r["quantised_convs"] == 0


def test_when_no_recipe_passes_the_last_attempt_is_reported_and_not_passed(monkeypatch,
                                                                          tmp_path):
    Stand(monkeypatch, {"rowwise": 0.5, "none": 0.3})
    r = _run(tmp_path)
    assert r["recipe"] == "layers" and r["passed"] is False and len(r["attempts"]) == 2
    assert r["max_abs_dlogit"] == pytest.approx(0.3)


def test_with_calibration_every_recipe_is_tried_in_order_with_the_calibration_clips(
        monkeypatch, tmp_path):
    stand = Stand(monkeypatch, {w: 0.5 for _, w in quantize.RECIPES})
    r = _run(tmp_path, calibration=tmp_path / "bundle", gate=QuantGate(clips=5,
                                                                       calibration_clips=3))
    assert [w[0] for w in stand.written] == ["rowwise_mean", "rowwise", "all", "skip_first",
                                             "none"]
    assert [w[1] for w in stand.written] == [CONVS[1:], CONVS[1:], CONVS, CONVS[1:], []]
    assert {w[2] for w in stand.written} == {3}
    assert r["calibration"] == str(tmp_path / "bundle") and r["calibration_clips"] == 3
    assert r["gate_clips_bundle"] == 2 and r["gate_clips_synthetic"] == 3   # topped up to 5


def test_a_recipe_the_quantiser_cannot_make_is_passed_over_naming_the_error(monkeypatch,
                                                                           tmp_path):
    Stand(monkeypatch, {"rowwise": RuntimeError("x" * 600), "none": 0.0})
    r = _run(tmp_path)
    first = r["attempts"][0]
    assert first["passed"] is False and first["error"] == "RuntimeError: " + "x" * 500
    assert r["recipe"] == "layers"


def test_the_layers_alone_failing_to_build_is_an_error_not_a_report(monkeypatch, tmp_path):
    Stand(monkeypatch, {"rowwise": 0.5, "none": RuntimeError("quantiser broke")})
    with pytest.raises(RuntimeError, match="quantiser broke"):
        _run(tmp_path)
    assert not (tmp_path / "int8.layers.onnx").exists()


def test_a_graph_whose_convs_cannot_be_found_tries_the_layers_alone_and_says_why(monkeypatch,
                                                                                tmp_path):
    stand = Stand(monkeypatch, {"none": 0.0}, convs=None)
    r = _run(tmp_path, calibration=tmp_path / "bundle")
    assert [w[0] for w in stand.written] == ["none"]
    assert r["conv_recipes_skipped"] == "no encoder convs found" and r["passed"] is True


def _graph(n_const: int, extra=()):
    """An onnx graph of `n_const` MatMuls with a constant weight (initializers, the first
    `extra` of them from Constant nodes instead) and one MatMul of two activations."""
    import onnx
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1], [1.0])
    nodes, inits = [], []
    for i in range(n_const):
        if i in extra:
            nodes.append(helper.make_node("Constant", [], [f"c{i}"], value=w))
            nodes.append(helper.make_node("MatMul", ["x", f"c{i}"], [f"y{i}"], name=f"mm{i}"))
        else:
            inits.append(helper.make_tensor(f"w{i}", TensorProto.FLOAT, [1, 1], [1.0]))
            nodes.append(helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"], name=f"mm{i}"))
    nodes.append(helper.make_node("MatMul", ["x", "x"], ["xx"], name="activations"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])
    return onnx.helper.make_model(helper.make_graph(nodes, "g", [x], [x], inits))


def test_the_layers_matmuls_are_found_by_position_projection_and_pooling_left_out():
    # projection, 2 layers of 6, attentive pooling's 2: the 12 in between, in graph order;
    # a weight from a Constant node counts as constant, a product of two activations does not
    names = quantize.layer_matmuls(_graph(1 + 12 + 2, extra=(3,)))
    assert names == [f"mm{i}" for i in range(1, 13)]
    assert quantize.layer_matmuls(_graph(1 + 12)) == [f"mm{i}" for i in range(1, 13)]  # mean


@pytest.mark.parametrize("n", [1, 1 + 12 + 1, 1 + 12 + 3])
def test_a_graph_of_another_shape_is_refused_naming_the_exporter(n):
    with pytest.raises(ValueError, match="^" + str(n) + r" constant-weight MatMuls; expected 1 \+ "
                       r"6 per layer \+ 2 \(projection, layers, attentive pooling; 0 with mean "
                       r"pooling\), all named: export the Detector with export/onnx_export.py$"):
        quantize.layer_matmuls(_graph(n))


def test_an_unnamed_matmul_is_refused():
    g = _graph(1 + 6)
    g.graph.node[3].name = ""
    with pytest.raises(ValueError, match="all named"):
        quantize.layer_matmuls(g)


def test_an_empty_node_list_is_refused_before_onnxruntime_reads_it_as_every_node(tmp_path):
    with pytest.raises(ValueError, match=r"^no nodes to quantise \(onnxruntime would read \[\] "
                       r"as 'every node'\)$"):
        quantize.quantize_file(tmp_path / "a.onnx", tmp_path / "b.onnx", [])
