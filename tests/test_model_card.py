"""What the model folder tells a new user before any code runs: format.json's install line (the
real pyproject extra), the error a Python without onnxruntime gets, and the card's Hub front
matter as huggingface_hub.ModelCard reads it. Real onnx, real huggingface_hub, real onnxruntime."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import onnx
import pytest
import test_deploy
from huggingface_hub import ModelCard
from onnx import TensorProto, helper

from hearsay.deploy import main
from hearsay.engines.cpu_engine import INSTALL_SCORER, SCORE_EXTRA
from hearsay.export import model_card

world = test_deploy.world  # a tiny exported model folder and clips
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def identity_graph(path: Path) -> Path:
    """A one-node standard-ONNX graph: enough for format.json to describe."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_the_install_line_names_the_pyproject_extra_that_brings_onnxruntime(tmp_path):
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert SCORE_EXTRA in extras, f"pyproject.toml has no [{SCORE_EXTRA}] extra: {list(extras)}"
    assert any(d.startswith("onnxruntime") for d in extras[SCORE_EXTRA])
    assert INSTALL_SCORER == f"pip install 'hearsay[{SCORE_EXTRA}]'"
    identity_graph(tmp_path / "model.onnx")
    fmt = model_card.config_file(tmp_path, ["model.onnx"], {"sample_rate": 16000}, False)
    assert INSTALL_SCORER in fmt["scorer"]
    assert INSTALL_SCORER in model_card.card(None, fmt, None)  # the card's Use section too


def test_a_python_without_onnxruntime_is_told_how_to_install_it(world, tmp_path, capsys,
                                                                 monkeypatch):
    model, _, clips, _ = world
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` -> ImportError
    assert main([str(clips), "-o", str(tmp_path / "s.csv"), "--model", str(model)]) == 3
    err = capsys.readouterr().err
    assert "onnxruntime is not installed" in err and INSTALL_SCORER in err
    assert "re-export" not in err  # the folder is fine; the Python is not


def campaign_meta(datasets: list[str] | None) -> dict:
    """The parts of a read_meta() dict the card reads."""
    decision = {"thresholds": {"min_dcf": {"value": 0.1, "p_miss": 0.2, "p_fa": 0.1}},
                "calibration": {"formula": "llr = a * logit + b", "a": 1.0, "b": 0.0,
                                "cllr_before": 0.9, "cllr_after": 0.8},
                "set": {"name": "out-of-fold", "n_bonafide": 10, "n_spoof": 10}}
    meta = {"name": "tiny", "decision": decision, "_sha256": "c" * 64,
            "metrics": {"holdout": {"n_bonafide": 10, "n_spoof": 10, "eer": 0.2}}}
    return meta if datasets is None else {**meta, "datasets": datasets}


@pytest.mark.parametrize("datasets", [None, ["ASVspoof2019-LA", "MLAAD"]])
@pytest.mark.parametrize("with_meta", [False, True])
def test_huggingface_hub_reads_the_cards_front_matter(tmp_path, datasets, with_meta):
    identity_graph(tmp_path / "model.onnx")
    fmt = model_card.config_file(tmp_path, ["model.onnx"], {"sample_rate": 16000}, with_meta)
    text = model_card.card(campaign_meta(datasets) if with_meta else None, fmt, None)
    data = ModelCard(text).data.to_dict()
    assert data["library_name"] == "onnx" and data["pipeline_tag"] == "audio-classification"
    assert data["license"] == model_card.LICENSE_PLACEHOLDER  # named, never a guessed licence
    assert {"audio-deepfake-detection", "anti-spoofing"} <= set(data["tags"])
    assert data["metrics"] == ["eer", "min_dcf", "auc", "cllr"]
    named = datasets if with_meta and datasets else [model_card.DATASETS_PLACEHOLDER]
    assert data["datasets"] == named
    body = ModelCard(text).text
    assert body.lstrip().startswith("# hearsay speech-deepfake detector")
    assert json.dumps(model_card.LICENSE_PLACEHOLDER) not in body  # the metadata stays on top
