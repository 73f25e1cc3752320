"""Every malformed file of a model folder is refused before anything is scored, with exit 3 and
the file named: front_end.json and thresholds.json that match SHA256SUMS but are broken (with
--llr too), and a front_end.json edited with a remade SHA256SUMS, which the graph's own
metadata_props (stamped at export) contradict. hearsay.deploy.Scorer raises ModelError for the
same folders. Real onnxruntime on a tiny exported model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest
import test_deploy
from test_deploy import read_csv

from hearsay.contracts import model_dir
from hearsay.contracts.model_dir import FRONT_END, ONNX, THRESHOLDS, ModelError
from hearsay.deploy import Scorer, main
from hearsay.util.hashing import sha256_file

world = test_deploy.world  # the fixture: a tiny exported model and a folder of clips


def resummed(model: Path, dst: Path, name: str, text: str) -> Path:
    """A copy of `model` with `name` holding `text`, listed in a SHA256SUMS remade to match."""
    shutil.copytree(model, dst)
    (dst / name).write_text(text)
    model_dir.write_sums(dst, sorted({*model_dir.model_sums(dst), name}))
    return dst


FRONT = {"not_json": "{max_s: 8", "not_an_object": "[8.0]", "nan": None, "missing": None,
         "max_s_zero": None, "max_s_string": None, "top_db_bool": None, "unknown_key": None,
         "not_utf8": None}


def broken_front(model: Path, how: str) -> str:
    front = json.loads((model / FRONT_END).read_text())
    if FRONT[how] is not None:
        return FRONT[how]
    edit = {"nan": lambda f: {**f, "cutoff_hz": float("nan")},
            "missing": lambda f: {k: v for k, v in f.items() if k != "top_db"},
            "max_s_zero": lambda f: {**f, "max_s": 0},
            "max_s_string": lambda f: {**f, "max_s": "8"},
            "top_db_bool": lambda f: {**f, "top_db": True},
            "unknown_key": lambda f: {**f, "gain_db": 6.0},
            "not_utf8": None}[how]
    return "\udcff" if edit is None else json.dumps(edit(front))


@pytest.mark.parametrize("how", sorted(FRONT))
def test_a_broken_front_end_json_matching_its_sums_exits_3_naming_it(world, tmp_path, capsys,
                                                                     how):
    model, _, clips, _ = world
    text = broken_front(model, how)
    folder = tmp_path / "m"
    if how == "not_utf8":
        shutil.copytree(model, folder)
        (folder / FRONT_END).write_bytes(b"\xff{}")
        model_dir.write_sums(folder, sorted(model_dir.model_sums(folder)))
    else:
        resummed(model, folder, FRONT_END, text)
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(folder)]) == 3
    err = capsys.readouterr().err
    assert f"{folder / FRONT_END}" in err and "Traceback" not in err
    assert not out.with_name("s.csv.partial").exists()
    with pytest.raises(ModelError, match=FRONT_END):
        Scorer(folder)


def test_an_edited_front_end_with_a_remade_sums_is_refused_by_the_graphs_metadata(world,
                                                                                  tmp_path,
                                                                                  capsys):
    model, _, clips, _ = world
    front = json.loads((model / FRONT_END).read_text())
    folder = resummed(model, tmp_path / "m", FRONT_END,
                      json.dumps({**front, "top_db": front["top_db"] + 10}, indent=2))
    assert main([str(clips), "--model", str(folder)]) == 3
    err = capsys.readouterr().err
    assert (f"{folder / FRONT_END} differs from the front end {folder / ONNX} was exported "
            "with (its metadata_props: ['top_db'])") in err
    with pytest.raises(ModelError, match="metadata_props"):
        Scorer(folder)


def test_a_graph_without_its_front_end_metadata_is_refused(world, tmp_path, capsys):
    model, _, clips, _ = world
    folder = tmp_path / "m"
    shutil.copytree(model, folder)
    graph = onnx.load(str(folder / ONNX))
    kept = [(p.key, p.value) for p in graph.metadata_props if p.key != "hearsay.front_end"]
    del graph.metadata_props[:]
    for k, v in kept:
        graph.metadata_props.add(key=k, value=v)
    onnx.save(graph, str(folder / ONNX))
    model_dir.write_sums(folder, sorted(model_dir.model_sums(folder)))
    assert main([str(clips), "--model", str(folder)]) == 3
    assert "carries no hearsay.front_end in its metadata_props" in capsys.readouterr().err


THRESHOLD_DOCS = {
    "not_json": "{\"thresholds\": ",
    "not_an_object": "[]",
    "nan_literal": '{"thresholds": {"min_dcf": {"value": NaN}}}',
    "nan_string": '{"thresholds": {"min_dcf": {"value": "nan"}}}',
    "no_value": '{"thresholds": {"min_dcf": {}}}',
    "thresholds_a_list": '{"thresholds": [0.5]}',
    "calibration_string": '{"thresholds": {"min_dcf": {"value": 0.5}}, '
                          '"calibration": {"a": "2", "b": 1.0}}',
    "calibration_missing_b": '{"thresholds": {"min_dcf": {"value": 0.5}}, '
                             '"calibration": {"a": 2.0}}',
}


@pytest.mark.parametrize("llr", [[], ["--llr"]], ids=["plain", "llr"])
@pytest.mark.parametrize("how", sorted(THRESHOLD_DOCS))
def test_a_broken_thresholds_json_matching_its_sums_exits_3_naming_it(world, tmp_path, capsys,
                                                                      how, llr):
    model, _, clips, _ = world
    folder = resummed(model, tmp_path / "m", THRESHOLDS, THRESHOLD_DOCS[how])
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(folder), *llr]) == 3
    err = capsys.readouterr().err
    assert f"{folder / THRESHOLDS}" in err and "Traceback" not in err
    assert not out.with_name("s.csv.partial").exists()
    with pytest.raises(ModelError, match=THRESHOLDS):
        Scorer(folder, llr=bool(llr))


def test_a_threshold_of_inf_in_thresholds_json_is_a_threshold_no_logit_reaches(world, tmp_path):
    model, _, clips, _ = world
    folder = resummed(model, tmp_path / "m", THRESHOLDS,
                      '{"thresholds": {"min_dcf": {"value": "inf"}}, '
                      '"calibration": {"a": 1.0, "b": 0.0}}')
    out = tmp_path / "s.csv"
    assert main([str(clips), "-o", str(out), "--model", str(folder), "--llr"]) == 0
    scored = [r for r in read_csv(out) if r["logit"]]
    assert scored and {r["decision"] for r in scored} == {"bonafide"}
    assert all(r["llr"] == r["logit"] for r in scored)


def test_an_unreadable_listed_file_is_a_model_error_naming_it(world, tmp_path):
    model, _, _, _ = world
    folder = tmp_path / "m"
    shutil.copytree(model, folder)
    (folder / FRONT_END).unlink()
    (folder / FRONT_END).mkdir()  # listed, a folder now: reading it fails
    with pytest.raises(ModelError, match=FRONT_END):
        model_dir.verify(folder)
    assert sha256_file(folder / ONNX)  # the rest of the folder is intact
