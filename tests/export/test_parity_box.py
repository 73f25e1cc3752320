"""hearsay.export.parity_box: the exported model's onnxruntime logits on this CPU against the box's
parity file, on a hand-made bundle and one random-init full run (one export, no training). Each
refusal names the file and the fix; the report says which logits were compared and how."""

import json

import numpy as np
import pytest
from fakes.fake_runs import make_bundle, make_run

from hearsay.contracts import parity_b
from hearsay.evaluate import parity_record
from hearsay.evaluate import score as scoring
from hearsay.export import parity_box
from hearsay.export.onnx_export import main as export_main


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(bundle, exported model folder, the box's parity file as written, its JSON)."""
    root = tmp_path_factory.mktemp("parity-box")
    bundle = make_bundle(root / "bundle", n_per_fold=1, n_holdout=2, n_test=4)
    run = make_run(root / "runs" / "full", job="full", fold=None, seed=3)
    box = root / "box" / parity_b.FILE
    box.parent.mkdir()
    parity_record.record(bundle, run, box, 4, scoring.ScoreConfig())
    model = root / "model"
    assert export_main(["onnx", str(run), "--out", str(model), "--no-int8"]) == 0
    return bundle, model, box, json.loads(box.read_text())


def _edited(tmp_path, data, **changes):
    path = tmp_path / "edited.json"
    path.write_text(json.dumps({**data, **changes}))
    return path


def test_the_exported_model_matches_the_box_and_the_report_says_what_was_compared(setup):
    bundle, model, box, data = setup
    got = parity_box.compare(model, box, bundle)
    assert got["passed"] is True and got["clips"] == 4 and got["inputs_identical"] == 4
    assert got["source"] == "box logits" and got["box_logits"] == str(box)
    assert got["device"] == "cpu" and got["box_device"] == "cpu" and got["box_precision"] == "fp32"
    assert got["checkpoint_sha256"] == data["checkpoint_sha256"]
    assert got["gate"] == "spearman > 0.99, max|dlogit| < 0.05"
    for key in ("box_vs_ort", "box_fp32_vs_ort"):
        assert got[key]["max_abs_dlogit"] < 1e-3 and got[key]["spearman"] > 0.99


def test_the_box_logits_and_the_fp32_ones_are_compared_each_on_its_own(setup, tmp_path):
    # a bf16 box records two sets of logits: a gap in the fp32 ones alone is an export
    # question, and it shows in box_fp32_vs_ort only; the gate reads the trainer's precision
    bundle, model, _, data = setup
    fp32 = list(np.asarray(data["logits_fp32"]) + [0.0, 0.0, 0.0, 0.2])
    got = parity_box.compare(model, _edited(tmp_path, data, logits_fp32=fp32), bundle)
    assert got["box_fp32_vs_ort"]["max_abs_dlogit"] == pytest.approx(0.2, abs=1e-3)
    assert got["box_vs_ort"]["max_abs_dlogit"] < 1e-3 and got["passed"] is True
    logits = list(np.asarray(data["logits"]) + [0.0, 0.0, 0.0, 0.2])
    got = parity_box.compare(model, _edited(tmp_path, data, logits=logits), bundle)
    assert got["box_vs_ort"]["max_abs_dlogit"] == pytest.approx(0.2, abs=1e-3)
    assert got["passed"] is False


def test_an_input_built_otherwise_on_the_box_is_counted_as_not_identical(setup, tmp_path):
    bundle, model, _, data = setup
    clips = [dict(c) for c in data["clips"]]
    clips[1]["input_sha256"] = "0" * 64
    got = parity_box.compare(model, _edited(tmp_path, data, clips=clips), bundle)
    assert got["inputs_identical"] == 3 and got["clips"] == 4


def test_a_file_of_another_checkpoint_names_both_and_the_fix(setup, tmp_path):
    bundle, model, _, data = setup
    path = _edited(tmp_path, data, checkpoint_sha256="f" * 64)
    with pytest.raises(ValueError, match="^" + ("f" * 64).join([
            f"{path} holds logits of checkpoint ", f", {model} was exported from "
            f"{data['checkpoint_sha256']}: export the run the box scored$"])):
        parity_box.compare(model, path, bundle)


def test_a_file_of_another_bundle_names_both_and_the_fix(setup, tmp_path):
    bundle, model, _, data = setup
    path = _edited(tmp_path, data, bundle_tree_sha="0" * 40)
    with pytest.raises(ValueError) as err:
        parity_box.compare(model, path, bundle)
    assert str(err.value) == (f"{path} was scored on bundle {'0' * 40}, this bundle is "
                              f"{bundle.tree_sha}: pass the bundle the runs trained on")


def test_a_clip_the_bundle_lacks_is_named(setup, tmp_path):
    bundle, model, _, data = setup
    clips = [dict(c) for c in data["clips"]]
    clips[2]["id"] = "ghost"
    with pytest.raises(ValueError) as err:
        parity_box.compare(model, _edited(tmp_path, data, clips=clips), bundle)
    assert str(err.value) == "1 parity clip(s) not in the bundle, e.g. ghost"


def test_an_input_of_another_length_is_refused_naming_the_clip(setup, tmp_path):
    bundle, model, _, data = setup
    clips = [dict(c) for c in data["clips"]]
    clips[3]["n_samples"] += 1
    n = clips[3]["n_samples"]
    with pytest.raises(ValueError) as err:
        parity_box.compare(model, _edited(tmp_path, data, clips=clips), bundle)
    assert str(err.value) == (f"clip {clips[3]['id']}: {n - 1} input samples here, {n} on the "
                              "box (another front end or bundle)")
