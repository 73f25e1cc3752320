"""hearsay.export.quantize's steps without a model (about a second): `quantize_file` run by
onnxruntime's quantiser on hand-made graphs of a few MatMuls (which nodes, per channel, int8
weights, the graph still runs), and `write_recipe` and `conv_sensitivity` with the conv
quantisers and onnxruntime stood in for (which quantiser each recipe calls, on which graph, with
which convs and clips; the step file removed even when a step fails). The quantisers themselves
are run for real by the slow tests in this folder."""

from pathlib import Path

import numpy as np
import pytest

from hearsay.export import quantize, quantize_conv, quantize_posconv, quantize_rows
from hearsay.export.quantize import QuantGate

RNG = np.random.default_rng(7)


def chain(tmp_path, n: int, width: int = 4) -> Path:
    """x (1, width) through `n` MatMuls mm0..mm<n-1>, each with a (width, width) initializer
    weight, to y; written to tmp_path/chain.onnx."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, x = [], [], "x"
    for i in range(n):
        w = RNG.standard_normal((width, width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        out = "y" if i == n - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [out], name=f"mm{i}"))
        x = out
    io = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, width]) for v in ("x", "y")]
    model = helper.make_model(helper.make_graph(nodes, "chain", io[:1], io[1:], inits),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "chain.onnx"
    onnx.save(model, str(path))
    return path


def quantised(path: Path) -> tuple[set[str], dict]:
    """(names of the fp32 MatMuls left, {initializer name: array}) of an ONNX file."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    left = {n.name for n in model.graph.node if n.op_type == "MatMul"}
    return left, {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def test_quantize_file_makes_only_the_named_matmuls_int8_per_channel(tmp_path):
    src, dst = chain(tmp_path, 3), tmp_path / "int8.onnx"
    assert quantize.quantize_file(src, dst, ("mm1",)) == ["mm1"]
    left, inits = quantised(dst)
    assert left == {"mm0", "mm2"}
    assert sorted(k for k, v in inits.items() if v.dtype == np.int8) == ["w1_quantized",
                                                                         "w1_zero_point"]
    assert inits["w1_quantized"].shape == (4, 4)
    assert not [v for v in inits.values() if v.dtype == np.uint8]       # QInt8, not QUInt8
    assert inits["w1_scale"].shape == (4,)                              # one scale per column
    from hearsay.engines.cpu_engine import make_session

    x = RNG.standard_normal((1, 4)).astype(np.float32)
    fp32 = make_session(src).run(None, {"x": x})[0]
    got = make_session(dst).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, fp32, rtol=0.05, atol=0.05 * float(np.abs(fp32).max()))


def test_quantize_file_by_default_takes_the_layers_matmuls_of_the_graph(tmp_path):
    src, dst = chain(tmp_path, 1 + quantize.PER_LAYER), tmp_path / "int8.onnx"
    want = [f"mm{i}" for i in range(1, 1 + quantize.PER_LAYER)]  # the projection left fp32
    assert quantize.quantize_file(src, dst) == want
    assert quantised(dst)[0] == {"mm0"}


# --------------------------------------------------------------------------- write_recipe


class Steps:
    """The conv quantisers and quantize_file stood in for: each call recorded, each output file
    written with the name of the step that made it."""

    def __init__(self, monkeypatch, fail: str | None = None):
        self.calls, self.fail = [], fail
        monkeypatch.setattr(quantize_rows, "conv_input_means", self.means)
        monkeypatch.setattr(quantize_rows, "quantize_convs_rowwise", self.rowwise)
        monkeypatch.setattr(quantize_conv, "quantize_convs", self.static)
        monkeypatch.setattr(quantize, "quantize_file", self.layers)
        monkeypatch.setattr(quantize_posconv, "quantize_positional_conv", self.posconv)

    def _step(self, name, dst, *args):
        self.calls.append((name, *args))
        if name == self.fail:
            raise RuntimeError(f"{name} broke")
        Path(dst).write_text(name)

    def means(self, src, convs, calib, dst_dir):
        self.calls.append(("means", src, list(convs), len(calib), dst_dir))
        return {"c1": "mean frame"}

    def rowwise(self, src, dst, convs, means):
        self._step("rowwise", dst, src, dst, list(convs), means)

    def static(self, src, dst, convs, calib):
        self._step("static", dst, src, dst, list(convs), len(calib))

    def layers(self, src, dst, nodes):
        self._step("layers", dst, src, dst, list(nodes))

    def posconv(self, fp32, graph, calib):
        assert Path(graph).read_text() == "rowwise"  # on the one-digit recipe's graph
        self._step("posconv", graph, fp32, graph, len(calib))
        return "posconv"


@pytest.fixture
def files(tmp_path):
    """(src, dst, layers): the fp32 graph, the recipe's output, the layers-only int8 graph."""
    src, layers = tmp_path / "model.onnx", tmp_path / "int8.layers.onnx"
    src.write_text("fp32")
    layers.write_text("layers int8")
    return src, tmp_path / "int8.onnx", layers


CALIB = [np.zeros(16_000)] * 3


@pytest.mark.parametrize("which", ["none", "rowwise", "all"])
def test_a_recipe_without_convs_ships_the_layers_graph_as_it_is(monkeypatch, files, which):
    steps = Steps(monkeypatch)
    src, dst, layers = files
    quantize.write_recipe(src, dst, which, [], ["m1"], CALIB, layers)
    assert dst.read_text() == "layers int8" and steps.calls == []


def test_the_row_wise_recipe_quantises_the_convs_on_the_layers_graph(monkeypatch, files):
    steps = Steps(monkeypatch)
    src, dst, layers = files
    quantize.write_recipe(src, dst, "rowwise", ["c1", "c2"], ["m1"], CALIB, layers)
    assert steps.calls == [("rowwise", layers, dst, ["c1", "c2"], None)]
    assert dst.read_text() == "rowwise"


def test_the_mean_corrected_recipe_takes_the_calibration_means_from_the_fp32_graph(monkeypatch,
                                                                                  files):
    steps = Steps(monkeypatch)
    src, dst, layers = files
    quantize.write_recipe(src, dst, "rowwise_mean", ["c1"], ["m1"], CALIB, layers)
    assert steps.calls == [("means", src, ["c1"], 3, dst.parent),
                           ("rowwise", layers, dst, ["c1"], {"c1": "mean frame"})]


def test_the_positional_conv_recipe_adds_it_to_the_mean_corrected_recipe_s_graph(monkeypatch,
                                                                                   files):
    steps = Steps(monkeypatch)
    src, dst, layers = files
    quantize.write_recipe(src, dst, "rowwise_mean_pos", ["c1"], ["m1"], CALIB, layers)
    assert steps.calls == [("means", src, ["c1"], 3, dst.parent),
                           ("rowwise", layers, dst, ["c1"], {"c1": "mean frame"}),
                           ("posconv", src, dst, 3)]  # its ranges from the fp32 graph
    assert dst.read_text() == "posconv"


@pytest.mark.parametrize("which", ["all", "skip_first"])
def test_a_static_recipe_quantises_the_convs_first_then_the_layers(monkeypatch, files, which):
    steps = Steps(monkeypatch)
    src, dst, layers = files
    step = dst.with_suffix(".step.onnx")
    quantize.write_recipe(src, dst, which, ["c0", "c1"], ["m1", "m2"], CALIB, layers)
    assert steps.calls == [("static", src, step, ["c0", "c1"], 3),
                           ("layers", step, dst, ["m1", "m2"])]
    assert dst.read_text() == "layers"
    assert sorted(p.name for p in dst.parent.iterdir()) == sorted(
        [src.name, dst.name, layers.name])                       # the step file removed


@pytest.mark.parametrize("step", ["static", "layers"])
def test_a_static_recipe_leaves_no_step_file_and_its_own_error_when_a_step_fails(monkeypatch,
                                                                               files, step):
    Steps(monkeypatch, fail=step)                 # "static": the step file was never written
    src, dst, layers = files
    with pytest.raises(RuntimeError, match=f"^{step} broke$"):
        quantize.write_recipe(src, dst, "all", ["c0"], ["m1"], CALIB, layers)
    assert not dst.with_suffix(".step.onnx").exists()


# --------------------------------------------------------------------------- conv_sensitivity


def sensitivity(monkeypatch, tmp_path, convs, offsets, **threads_arg):
    """conv_sensitivity over stood-in convs: the int8 logits are fp32's plus the offset of the
    set of convs quantised. Returns (rows, the quantiser's calls, the sessions' threads)."""
    import onnx

    from hearsay.engines import cpu_engine

    calls, threads = [], []
    src = tmp_path / "model.onnx"

    def load(path, load_external_data=True):
        assert (path, load_external_data) == (str(src), False)  # names only, not the weights
        return "graph"

    def encoder_convs(graph):
        assert graph == "graph"
        return list(convs)

    monkeypatch.setattr(onnx, "load", load)
    monkeypatch.setattr(quantize_conv, "encoder_convs", encoder_convs)

    def quantize_convs(src, dst, nodes, calib):
        calls.append((src, dst, list(nodes), len(calib)))
        Path(dst).write_text(" ".join(nodes))

    def make_session(path, n_threads):
        threads.append(n_threads)
        return Path(path).read_text()

    def run_logits(session, waves):
        base = np.linspace(-1.0, 1.0, len(waves))
        return base if session == "fp32" else base + offsets[session]

    monkeypatch.setattr(quantize_conv, "quantize_convs", quantize_convs)
    monkeypatch.setattr(cpu_engine, "make_session", make_session)
    monkeypatch.setattr(cpu_engine, "run_logits", run_logits)
    src.write_text("fp32")
    waves = [np.zeros(16_000)] * 10
    rows = quantize.conv_sensitivity(src, CALIB, waves, QuantGate(max_abs_dlogit=0.1), tmp_path,
                                     **threads_arg)
    return rows, calls, threads


def test_each_conv_is_judged_alone_then_all_then_all_but_the_first(monkeypatch, tmp_path):
    offsets = {"c0": 0.5, "c1": 0.0, "c2": 0.05, "c0 c1 c2": 0.6, "c1 c2": 0.05}
    rows, calls, threads = sensitivity(monkeypatch, tmp_path, ["c0", "c1", "c2"], offsets,
                                       threads=2)
    assert [r["quantised"] for r in rows] == ["conv 0", "conv 1", "conv 2", "all convs",
                                              "convs 1.. (first fp32)"]
    assert [r["passed"] for r in rows] == [False, True, True, False, True]
    assert [r["max_abs_dlogit"] for r in rows] == pytest.approx([0.5, 0.0, 0.05, 0.6, 0.05])
    assert all(r["clips"] == 10 and r["max_abs_dlogit_bound"] == 0.1 for r in rows)
    dst = tmp_path / "sensitivity.onnx"
    assert calls == [(tmp_path / "model.onnx", dst, nodes, 3)
                     for nodes in (["c0"], ["c1"], ["c2"], ["c0", "c1", "c2"], ["c1", "c2"])]
    assert threads == [2] * 6  # fp32 once, then each set


def test_a_graph_of_one_conv_has_no_all_but_the_first_row(monkeypatch, tmp_path):
    rows, calls, threads = sensitivity(monkeypatch, tmp_path, ["c0"], {"c0": 0.0})
    assert [r["quantised"] for r in rows] == ["conv 0", "all convs"]
    assert [c[2] for c in calls] == [["c0"], ["c0"]]
    assert threads == [0] * 3  # by default, onnxruntime's own choice (every allowed CPU)
