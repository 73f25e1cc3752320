"""The model folder's rules at their edges (hearsay.contracts.model_dir), each refusal in its own
words: front_end.json one value on each side of each bound (check_front_end), the graph's stamp
of it (check_graph_front_end), a file that is not strict JSON (read_json), and every way a folder
fails `verify` (SHA256SUMS missing, malformed, unreadable; a file unlisted, missing, unreadable or
altered; the pin malformed or another folder's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hearsay.contracts import model_dir
from hearsay.contracts.model_dir import FRONT_END, INT8, ONNX, PIN, SUMS, THRESHOLDS, ModelError
from hearsay.util.hashing import sha256_file

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


# --------------------------------------------------------------------------- verify


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """A consistent folder of both variants, min_s left out of its front end (an older export)."""
    monkeypatch.delenv(PIN, raising=False)
    out = tmp_path / "model"
    out.mkdir()
    (out / ONNX).write_bytes(b"fp32 graph")
    (out / INT8).write_bytes(b"int8 graph")
    model_dir.write_front_end(out, {"max_s": 4.0, "cutoff_hz": None, "top_db": 30.0})
    model_dir.write_sums(out, [ONNX, INT8, FRONT_END])
    return out


def refused(folder, variant="fp32") -> str:
    with pytest.raises(ModelError) as err:
        model_dir.verify(folder, variant)
    return str(err.value)


def test_a_verified_folder_gives_its_variants_model_its_identity_and_front_end(folder):
    want = {"max_s": 4.0, "cutoff_hz": None, "top_db": 30.0, "min_s": 0.0}
    identity = sha256_file(folder / SUMS)
    assert model_dir.verify(folder) == (folder / ONNX, identity, want)
    assert model_dir.verify(folder, "int8") == (folder / INT8, identity, want)
    assert isinstance(model_dir.verify(folder)[2]["min_s"], float)


def test_a_folder_or_its_sums_missing_malformed_or_unreadable_names_the_fix(folder, tmp_path):
    assert refused(tmp_path / "nowhere") == (f"model folder {tmp_path / 'nowhere'} not found (pass "
                                             "--model DIR or set HEARSAY_MODEL_DIR)")
    sums = (folder / SUMS).read_bytes()
    (folder / SUMS).write_text("not a sums line\n")
    why = refused(folder)
    assert why.startswith(str(folder / SUMS)) and why.endswith(
        "; re-export the model (`hearsay export onnx`)")
    (folder / SUMS).write_bytes(b"\xff" + sums)
    why = refused(folder)
    assert why.startswith(f"{folder / SUMS} cannot be read ('utf-8' codec can't decode byte 0xff")
    assert why.endswith("): re-export or re-download the model folder")
    (folder / SUMS).unlink()
    assert refused(folder) == (f"{folder / SUMS} not found (export the model with "
                               "`hearsay export onnx`)")


def test_sums_that_cannot_be_read_name_the_systems_reason(folder, monkeypatch):
    def denied(path, **kw):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(model_dir, "read_sums", denied)
    assert refused(folder) == (f"{folder / SUMS} cannot be read (Permission denied): re-export or "
                               "re-download the model folder")


def test_a_listed_file_missing_unreadable_or_altered_is_named(folder, monkeypatch):
    model_dir.write_sums(folder, [ONNX, FRONT_END])  # an int8 that failed its gate: not listed
    assert refused(folder, "int8") == (f"{folder}: {INT8} is not listed in {SUMS} (for int8: it "
                                       "did not pass its parity gate; use --variant fp32)")
    model_dir.write_sums(folder, [ONNX, INT8, FRONT_END])
    (folder / INT8).write_bytes(b"int8 graph, edited")
    got, want = sha256_file(folder / INT8), model_dir.model_sums(folder)[INT8]
    assert refused(folder) == (f"{folder / INT8}: sha256 {got} does not match {SUMS} {want} "
                               "(re-export or re-download the model folder)")
    (folder / INT8).unlink()
    assert refused(folder) == f"{folder / INT8} listed in {SUMS} but missing"

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(model_dir, "sha256_file", denied)
    assert refused(folder) == (f"{folder / FRONT_END} listed in {SUMS} cannot be read (Permission "
                               "denied): make the model folder readable, or re-download it")


@pytest.mark.parametrize("pin", ["", "A" * 64, "a" * 63])
def test_a_pin_that_is_no_sha256_is_refused_even_when_empty(folder, monkeypatch, pin):
    monkeypatch.setenv(PIN, pin)
    assert refused(folder) == (f"{PIN} is set to {pin!r}, not a sha256 (64 lower-case hex): set it "
                               "to the model folder's SHA256SUMS sha, or unset it (an empty value "
                               "never switches the pin off)")


def test_another_folders_pin_is_refused_naming_both(folder, monkeypatch):
    monkeypatch.setenv(PIN, "0" * 64)
    assert refused(folder) == (f"{folder}/{SUMS}: sha256 {sha256_file(folder / SUMS)} is not the "
                               f"pinned {PIN} {'0' * 64} (wrong model folder mounted or baked)")
    monkeypatch.setenv(PIN, sha256_file(folder / SUMS))
    assert model_dir.verify(folder)[0] == folder / ONNX
