"""front_end.json's rule at its edges (hearsay.contracts.model_dir.check_front_end), one value on
each side of each bound, and the words of every refusal: the file, the graph's stamp of it
(check_graph_front_end), and a model folder file that is not strict JSON (read_json)."""

from __future__ import annotations

import json

import pytest

from hearsay.contracts import model_dir
from hearsay.contracts.model_dir import FRONT_END, SUMS, THRESHOLDS, ModelError

FIX = ": re-export the model folder (`hearsay export onnx`)"
BASE = {"max_s": 4.0, "cutoff_hz": 3000.0, "top_db": 30.0}  # sample_rate and min_s optional


def refusal(front: dict) -> str:
    with pytest.raises(ModelError) as err:
        model_dir.check_front_end(front, "f.json")
    return str(err.value)


@pytest.mark.parametrize("edit", [
    {"max_s": 0.5}, {"max_s": 3599.5}, {"min_s": 0.0}, {"min_s": 4.0}, {"top_db": 0.5},
    {"cutoff_hz": None}, {"cutoff_hz": 0.5}, {"cutoff_hz": 8000.0}, {"sample_rate": 16000},
    {"max_s": 0.5, "min_s": 0.5}])
def test_a_front_end_inside_every_bound_is_taken_as_it_is(edit):
    front = {**BASE, **edit}
    assert model_dir.check_front_end(front, "f.json") is front


def test_min_s_left_out_is_zero_under_the_shortest_window():
    assert model_dir.check_front_end({**BASE, "max_s": 0.5}, "f.json")["max_s"] == 0.5


@pytest.mark.parametrize("edit, why", [
    ({"max_s": 0}, "max_s 0 is not a window length in seconds (0 < max_s < 3600)"),
    ({"max_s": 3600.0}, "max_s 3600.0 is not a window length in seconds (0 < max_s < 3600)"),
    ({"min_s": -0.5}, "min_s -0.5 is not in 0..max_s"),
    ({"min_s": 4.5}, "min_s 4.5 is not in 0..max_s"),
    ({"top_db": 0}, "top_db 0 is not > 0"),
    ({"cutoff_hz": 0}, "cutoff_hz 0 is not in (0, 8000]"),
    ({"cutoff_hz": 8000.5}, "cutoff_hz 8000.5 is not in (0, 8000]"),
    ({"sample_rate": 22050}, "sample_rate 22050 != 16000"),
])
def test_a_value_past_a_bound_is_refused_in_its_own_words(edit, why):
    assert refusal({**BASE, **edit}) == f"f.json: {why}{FIX}"


@pytest.mark.parametrize("key, value", [("max_s", None), ("cutoff_hz", "7000"),
                                        ("top_db", True), ("min_s", float("inf"))])
def test_a_value_that_is_no_finite_number_is_named_whatever_key_comes_first(key, value):
    front = {k: v for k, v in {**BASE, key: value}.items()}  # no sample_rate: the first key absent
    assert refusal(front) == f"f.json: {key} {value!r} is not a finite number{FIX}"


def test_every_problem_is_listed_in_one_refusal():
    assert refusal({"max_s": 4.0, "hop_s": 1.0, "top_db": "30"}) == (
        f"f.json: unknown key 'hop_s'; no cutoff_hz; top_db '30' is not a finite number{FIX}")
    assert refusal([4.0]) == "f.json is not a JSON object: re-export the model folder"


def stamped(front: dict) -> dict:
    return {model_dir.GRAPH_FRONT_END: json.dumps(front)}


def test_the_graphs_stamp_is_judged_as_the_file_is_and_must_equal_it(tmp_path):
    front = model_dir.front_end(4.0, 3000.0, 30.0, 0.25)
    model_dir.write_front_end(tmp_path, front)
    graph = tmp_path / "model.onnx"
    model_dir.check_graph_front_end(tmp_path, graph, stamped(front))  # the same: taken
    cases = [
        ({}, f"{graph} carries no hearsay.front_end in its metadata_props, so "
             f"{tmp_path / FRONT_END} cannot be checked against it: re-export the model folder "
             "(`hearsay export onnx` stamps it)"),
        ({model_dir.GRAPH_FRONT_END: "{max_s"},
         f"{graph} hearsay.front_end is not JSON: re-export the model folder"),
        (stamped({**front, "top_db": 0}), f"{graph} hearsay.front_end: top_db 0 is not > 0{FIX}"),
        (stamped({**front, "max_s": 8.0, "top_db": 40.0}),
         f"{tmp_path / FRONT_END} differs from the front end {graph} was exported with (its "
         "metadata_props: ['max_s', 'top_db']): the model folder was edited; re-export or "
         "re-download it"),
    ]
    for metadata, why in cases:
        with pytest.raises(ModelError) as err:
            model_dir.check_graph_front_end(tmp_path, graph, metadata)
        assert str(err.value) == why


def test_a_file_that_is_not_strict_json_or_not_a_file_is_named_with_why(tmp_path):
    nan = tmp_path / "nan.json"
    nan.write_text('{"max_s": NaN}')
    with pytest.raises(ModelError) as err:
        model_dir.read_json(nan)
    assert str(err.value) == f"{nan} cannot be read as JSON (NaN is not strict JSON){FIX}"
    folder = tmp_path / "a_folder.json"
    folder.mkdir()
    with pytest.raises(ModelError) as err:
        model_dir.read_json(folder)
    assert str(err.value) == f"{folder} cannot be read as JSON (Is a directory){FIX}"


def test_a_thresholds_file_the_sums_do_not_list_names_the_fix(tmp_path):
    (tmp_path / SUMS).write_text("")
    model_dir.write_thresholds(tmp_path, {"thresholds": {}})
    with pytest.raises(ModelError) as err:
        model_dir.read_thresholds(tmp_path)
    assert str(err.value) == (f"{tmp_path / THRESHOLDS} is not listed in SHA256SUMS (re-export the "
                              "model folder with `hearsay export onnx --meta`)")
