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
LONG = 2  # the stand-in long-file windows (the last inputs of the gate)


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
    gate = QuantGate(long_files=1, long_s=12.0, max_s=4.0, max_gap_s=0.0)
    got = quantize.long_file_windows(gate, FRONT, np.random.default_rng(1))
    assert len(got) == 3 and max(len(w) for w in got) == 4 * 16_000   # 12 s: 0, 4, 8 s


def test_long_file_windows_are_the_windows_hearsay_score_cuts_from_the_recordings():
    """Written to a file and cut by windows.file_windows: the same windows as the in-memory cut
    of the same recording, with the front end's top_db and cutoff_hz and the hop's overlaps."""
    from hearsay.sound.windows import wave_windows

    t = np.arange(16_000) / 16_000
    loud = 0.5 * np.sin(2 * np.pi * 300 * t) + 0.3 * np.sin(2 * np.pi * 6_000 * t)
    src = [loud.astype(np.float32), (0.03 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)]
    front = {**FRONT, "top_db": 20.0, "cutoff_hz": 4_000.0}
    gate = QuantGate(long_files=2, long_s=30.0)
    got = quantize.long_file_windows(gate, front, np.random.default_rng(0), src)
    recs = quantize.long_recordings(gate, np.random.default_rng(0), src)
    want = [w.wave for x in recs for w in wave_windows(x, 8.0, 4.0, top_db=20.0,
                                                         cutoff_hz=4_000.0)]
    assert len(got) == len(want) >= 2 * 5
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    # each setting changes the windows on its own, so the test holds each of them
    for other in (wave_windows(recs[0], 8.0, 4.0, cutoff_hz=4_000.0),
                  wave_windows(recs[0], 8.0, 4.0, top_db=20.0),
                  wave_windows(recs[0], 8.0, 8.0, top_db=20.0, cutoff_hz=4_000.0)):
        other = [w.wave for w in other]
        assert len(other) != len(want) // 2 or not all(
            np.array_equal(a, b) for a, b in zip(other, want, strict=False))


def test_long_recordings_join_clips_at_several_levels_with_pauses():
    src = [np.full(16_000, 0.1 * (k + 1), np.float32) for k in range(3)]  # constant clips
    gate = QuantGate(long_files=2, long_s=60.0)
    recs = quantize.long_recordings(gate, np.random.default_rng(2), src)
    assert [len(x) for x in recs] == [60 * 16_000] * 2 and recs[0].dtype == np.float32
    x = recs[0]
    values, counts = np.unique(x, return_counts=True)
    levels = values[(counts >= 8_000) & (values != 0)]   # each clip is one constant level
    db = 20 * np.log10(levels)
    assert len(levels) >= 5 and db.min() >= -35.01 and db.max() <= -11.99
    zero_runs = np.diff(np.flatnonzero(np.diff((x == 0).astype(int))))
    assert zero_runs.max() > 4 * 4_000      # digital silence longer than a quarter window
    floor = x[(x != 0) & ~np.isin(x, levels)]
    assert len(floor) > 16_000 and floor.std() < 10 ** (-49 / 20)  # and a room floor, not zeros
    none = quantize.long_recordings(QuantGate(long_files=1, long_s=20.0, max_gap_s=0.0),
                                    np.random.default_rng(2), src)[0]
    assert np.isin(none, levels).all() or (np.abs(none) > 0.01).all()  # back to back: no pause


def test_each_kind_is_judged_apart_and_every_kind_must_pass():
    fp32 = np.linspace(-1.0, 1.0, 30)
    int8 = fp32.copy()
    int8[20:] += 0.06  # the long windows drift past the bound; the clips hold
    kinds = {"clips": slice(0, 20), "long_windows": slice(20, 30)}
    r = quantize.kinds_report(fp32, int8, kinds, QuantGate())
    assert r["passed"] is False and r["failed_kinds"] == ["long_windows"]
    assert r["kinds"]["clips"]["passed"] is True and r["kinds"]["clips"]["clips"] == 20
    assert r["kinds"]["long_windows"]["max_abs_dlogit"] == pytest.approx(0.06)
    assert r["max_abs_dlogit"] == pytest.approx(0.06) and r["clips"] == 30  # the worst kind
    held = quantize.kinds_report(fp32, fp32 + 0.01, kinds, QuantGate())
    assert held["passed"] is True and held["failed_kinds"] == []
    empty = quantize.kinds_report(fp32, fp32, {"clips": slice(0, 30),
                                               "long_windows": slice(30, 30)}, QuantGate())
    assert list(empty["kinds"]) == ["clips"] and empty["passed"] is True
    assert quantize.kinds_report(fp32[:0], fp32[:0], {"clips": slice(0, 0)},
                                 QuantGate())["passed"] is False  # nothing judged: no pass


@pytest.mark.parametrize("which, want", [("rowwise_mean_pos", CONVS[1:]),
                                         ("rowwise_mean", CONVS[1:]), ("rowwise", CONVS[1:]),
                                         ("all", CONVS), ("skip_first", CONVS[1:]),
                                         ("none", [])])
def test_each_recipe_quantises_its_convs(which, want):
    assert quantize._recipe_convs(CONVS, which) == want


class Stand:
    """onnx, onnxruntime and the quantisers stood in for: each recipe's int8 logits are fp32's
    plus that recipe's offset (or its error). What each stand-in is handed is recorded: `calls`
    by name (the graph, the bundle's clips, the long files, the layers' step) and `written`
    (each recipe's which, convs and calibration clips). The bundle gives two clips of 0.6234375
    and 1 s, and the long files one window of 7.1234375 s (lengths whose rounding shows)."""

    def __init__(self, monkeypatch, offsets: dict, convs=CONVS, layers_error=None):
        self.offsets, self.written, self.calls = offsets, [], {}
        self.real = [np.zeros(9_975), np.zeros(16_000)]
        import onnx

        from hearsay.engines import cpu_engine
        from hearsay.export import quantize_conv

        def load(path, load_external_data=True):
            self.calls["load"] = (path, load_external_data)
            return "graph"

        def layer_matmuls(graph):
            assert graph == "graph"
            return ["m1", "m2"]

        def encoder_convs(graph):
            assert graph == "graph"
            if convs is None:
                raise ValueError("no encoder convs found")
            return list(convs)

        def bundle_clips(root, front, n_cal, n_gate, rng):
            self.calls["bundle_clips"] = (root, front, n_cal, n_gate, rng)
            return [np.zeros(10)] * n_cal, self.real

        def quantize_file(src, dst, nodes):
            self.calls["quantize_file"] = (src, dst, nodes)
            if layers_error is not None:
                raise layers_error
            Path(dst).write_text("layers")

        def long_file_windows(gate, front, rng, real):
            self.calls["long_file_windows"] = (gate, front, rng, real)
            return [np.zeros(113_975)] * LONG

        monkeypatch.setattr(onnx, "load", load)
        monkeypatch.setattr(quantize, "layer_matmuls", layer_matmuls)
        monkeypatch.setattr(quantize_conv, "encoder_convs", encoder_convs)
        monkeypatch.setattr(quantize_conv, "bundle_clips", bundle_clips)
        monkeypatch.setattr(quantize, "quantize_file", quantize_file)
        monkeypatch.setattr(quantize, "write_recipe", self.write_recipe)
        monkeypatch.setattr(quantize, "long_file_windows", long_file_windows)
        monkeypatch.setattr(cpu_engine, "make_session", lambda path: Path(path).read_text())
        monkeypatch.setattr(cpu_engine, "run_logits", self.run_logits)

    def write_recipe(self, src, dst, which, convs, nodes, calib, layers):
        self.calls.setdefault("write_recipe", []).append((src, dst, nodes, layers))
        self.written.append((which, list(convs), len(calib)))
        if isinstance(self.offsets.get(which), Exception):
            raise self.offsets[which]
        Path(dst).write_text(which)

    def run_logits(self, session, waves):
        base = np.linspace(-1.0, 1.0, len(waves))
        if session == "fp32":
            return base
        offset = self.offsets[session]  # one offset, or (clips', long windows') offsets
        clips, long = offset if isinstance(offset, tuple) else (offset, offset)
        return base + np.r_[np.full(len(waves) - LONG, clips), np.full(LONG, long)]


def _run(tmp_path, calibration=None, gate=QuantGate(clips=4), rng=None):
    src = tmp_path / "model.onnx"
    src.write_text("fp32")
    return quantize.quantize_int8(src, tmp_path / "int8.onnx", gate, FRONT,
                                  rng or np.random.default_rng(0), calibration)


def test_each_step_is_handed_the_graph_the_clips_and_the_layers_file(monkeypatch, tmp_path):
    stand = Stand(monkeypatch, {w: 0.5 for _, w in quantize.RECIPES} | {"none": 0.0})
    gate, rng = QuantGate(clips=5, calibration_clips=3), np.random.default_rng(0)
    _run(tmp_path, calibration=str(tmp_path / "bundle"), gate=gate, rng=rng)
    src, dst = tmp_path / "model.onnx", tmp_path / "int8.onnx"
    layers = tmp_path / "int8.layers.onnx"
    assert stand.calls["load"] == (str(src), False)         # the graph's names, not its weights
    assert stand.calls["bundle_clips"] == (tmp_path / "bundle", FRONT, 3, 5, rng)
    assert stand.calls["long_file_windows"] == (gate, FRONT, rng, stand.real)
    assert stand.calls["quantize_file"] == (src, layers, ["m1", "m2"])
    assert stand.calls["write_recipe"] == [(src, dst, ["m1", "m2"], layers)] * 6


def test_bundle_clips_enough_for_the_gate_are_not_topped_up(monkeypatch, tmp_path):
    Stand(monkeypatch, {w: 0.0 for _, w in quantize.RECIPES})
    r = _run(tmp_path, calibration=tmp_path / "bundle", gate=QuantGate(clips=2))
    assert r["gate_clips_bundle"] == 2 and r["gate_clips_synthetic"] == 0
    assert r["lengths_s"] == [0.623, 7.123]          # 0.6234375 and 7.1234375 s, to the ms


def test_the_layers_step_failing_leaves_its_error_not_another(monkeypatch, tmp_path):
    Stand(monkeypatch, {"none": 0.0}, layers_error=RuntimeError("layers step broke"))
    with pytest.raises(RuntimeError, match="^layers step broke$"):
        _run(tmp_path)


def test_without_calibration_the_row_wise_recipe_is_tried_first_and_shipped(monkeypatch,
                                                                            tmp_path):
    stand = Stand(monkeypatch, {"rowwise": 0.0, "none": 0.0})
    r = _run(tmp_path)
    assert [w[0] for w in stand.written] == ["rowwise"]
    assert r["recipe"] == "row-wise convs 1.. + layers" and r["passed"] is True
    assert r["quantised_convs"] == 2 and r["quantised_matmuls"] == 2
    assert r["gate_clips_bundle"] == 0 and r["gate_clips_synthetic"] == 4
    assert r["gate_windows_long"] == LONG and r["calibration_clips"] == 0
    assert r["calibration"] is None and r["conv_recipes_skipped"] is None
    assert r["long_files"] == 1 and r["long_file_s"] == 300.0 and r["long_max_gap_s"] == 6.0
    assert set(r["kinds"]) == {"clips", "long_windows"} and r["failed_kinds"] == []
    assert r["kinds"]["long_windows"]["clips"] == LONG
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


def test_a_recipe_that_drifts_only_on_long_windows_is_not_shipped(monkeypatch, tmp_path):
    stand = Stand(monkeypatch, {"rowwise": (0.0, 0.06), "none": (0.0, 0.01)})
    r = _run(tmp_path)
    assert [w[0] for w in stand.written] == ["rowwise", "none"]
    first = r["attempts"][0]
    assert first["passed"] is False and first["failed_kinds"] == ["long_windows"]
    assert first["kinds"]["clips"]["passed"] is True
    assert r["recipe"] == "layers" and r["passed"] is True
    assert (tmp_path / "int8.onnx").read_text() == "none"


def test_when_no_recipe_passes_the_last_attempt_is_reported_and_not_passed(monkeypatch,
                                                                          tmp_path):
    Stand(monkeypatch, {"rowwise": 0.5, "none": 0.3})
    r = _run(tmp_path)
    assert r["recipe"] == "layers" and r["passed"] is False and len(r["attempts"]) == 2
    assert r["max_abs_dlogit"] == pytest.approx(0.3)
    offsets = {"rowwise_mean_pos": 0.05, "rowwise_mean": 0.1, "rowwise": 0.2, "all": 0.3,
               "skip_first": 0.4, "none": 0.5}
    Stand(monkeypatch, offsets)
    r = _run(tmp_path, calibration=tmp_path / "bundle")     # six attempts: the sixth reported
    assert r["recipe"] == "layers" and r["max_abs_dlogit"] == pytest.approx(0.5)


def test_with_calibration_every_recipe_is_tried_in_order_with_the_calibration_clips(
        monkeypatch, tmp_path):
    stand = Stand(monkeypatch, {w: 0.5 for _, w in quantize.RECIPES})
    r = _run(tmp_path, calibration=tmp_path / "bundle", gate=QuantGate(clips=5,
                                                                       calibration_clips=3))
    assert [w[0] for w in stand.written] == ["rowwise_mean_pos", "rowwise_mean", "rowwise",
                                             "all", "skip_first", "none"]
    assert [w[1] for w in stand.written] == [CONVS[1:], CONVS[1:], CONVS[1:], CONVS,
                                             CONVS[1:], []]
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


@pytest.mark.parametrize("given, want_thr, want_agreement, source", [
    # fp32 median 2 (the clip at 2 counts as synthetic on both sides); int8's median is 3.5:
    # at 2 the int8 logit 1.5 + 1 = 2.5 flips one clip (4 of 5 agree), at 3.5 two would
    (None, 2.0, 0.8, "median fp32 logit"),
    (2.0, 2.0, 0.8, "given"),
    (3.5, 3.5, 0.6, "given"),  # the int8 median, only when asked for
])
def test_without_a_threshold_agreement_is_judged_at_the_fp32_median_not_the_int8_one(
        given, want_thr, want_agreement, source):
    fp32 = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    int8 = fp32 + 1.5  # median 3.5
    r = gate_report(fp32, int8, QuantGate(threshold=given))
    assert (r["threshold"], r["agreement"], r["threshold_source"]) == (want_thr, want_agreement,
                                                                       source)
