"""The exported model folder, spelled once (hearsay.contracts.model_dir): its manifest, its strict
check,
its front end and its parity record (tests/test_artefact_layout.py: no other module spells its
file names)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf

from hearsay import deploy
from hearsay.contracts import model_dir
from hearsay.contracts.model_dir import FRONT_END, INT8, ONNX, PARITY, SUMS, ModelError
from hearsay.sound import audio, decoder
from hearsay.util.hashing import sha256_file

SRC = Path(__file__).resolve().parents[1] / "src" / "hearsay"


@pytest.fixture
def folder(tmp_path) -> Path:
    """A consistent model folder (the model file's bytes are a stand-in: nothing runs it)."""
    out = tmp_path / "model"
    out.mkdir()
    (out / ONNX).write_bytes(b"fp32 graph")
    (out / INT8).write_bytes(b"int8 graph")
    # not the export defaults, so an argument taken from anywhere else shows
    model_dir.write_front_end(out, model_dir.front_end(4.0, 3_000.0, 30.0, 0.25))
    model_dir.write_parity(out, {"checkpoint_sha256": "c" * 64, "parity_a": {"passed": True}})
    model_dir.write_sums(out, [ONNX, INT8, FRONT_END])
    return out


def test_sums_round_trip_in_sha256sum_format(folder):
    sums = model_dir.model_sums(folder)
    assert sums == {n: sha256_file(folder / n) for n in (ONNX, INT8, FRONT_END)}
    assert (folder / SUMS).read_text() == "".join(
        f"{sha256_file(folder / n)}  {n}\n" for n in sorted(sums))  # what sha256sum -c reads
    path, identity, _ = model_dir.verify(folder, "int8")
    assert path == folder / INT8 and identity == sha256_file(folder / SUMS)


@pytest.mark.parametrize("damage", ["tampered", "missing", "unlisted", "no_sums", "malformed",
                                    "pin", "sample_rate"])
def test_a_folder_that_is_not_what_its_manifest_says_is_refused(folder, damage, monkeypatch):
    if damage == "tampered":
        (folder / ONNX).write_bytes(b"fp32 graph, one byte changed")
    elif damage == "missing":
        (folder / INT8).unlink()
    elif damage == "unlisted":
        model_dir.write_sums(folder, [INT8, FRONT_END])
    elif damage == "no_sums":
        (folder / SUMS).unlink()
    elif damage == "malformed":
        (folder / SUMS).write_text("not a sha  model.onnx\n")
    elif damage == "pin":
        monkeypatch.setenv(model_dir.PIN, "f" * 64)
    elif damage == "sample_rate":
        front = json.loads((folder / FRONT_END).read_text())
        model_dir.write_front_end(folder, {**front, "sample_rate": 8_000})
        model_dir.write_sums(folder, [ONNX, INT8, FRONT_END])
    with pytest.raises(ModelError):
        model_dir.verify(folder)


def test_the_pinned_identity_is_accepted(folder, monkeypatch):
    monkeypatch.setenv(model_dir.PIN, sha256_file(folder / SUMS))
    assert model_dir.verify(folder)[1] == sha256_file(folder / SUMS)


def test_front_end_arguments_are_the_ones_the_scorer_prepares_with(folder, tmp_path, monkeypatch):
    front = model_dir.read_front_end(folder)
    args = model_dir.prepare_args(front)
    assert args == {"max_s": 4.0, "cutoff_hz": 3_000.0, "top_db": 30.0}
    assert model_dir.SAMPLE_RATE == audio.SAMPLE_RATE == front["sample_rate"]
    stamped = {"hearsay.front_end": json.dumps(front, sort_keys=True)}  # as the export stamps
    session = SimpleNamespace(get_modelmeta=lambda: SimpleNamespace(
        custom_metadata_map=stamped))  # no graph runs here: only its metadata is read
    monkeypatch.setattr(deploy.engine, "make_session", lambda path, threads=0: session)
    scorer = deploy.load_engine(folder)
    assert scorer.front == args and scorer.min_samples == 0.25 * audio.SAMPLE_RATE
    rng = np.random.default_rng(0)
    t = np.arange(6 * audio.SAMPLE_RATE) / audio.SAMPLE_RATE
    wave = (0.3 * np.sin(2 * np.pi * 200 * t) * (t > 0.5) + 0.001 * rng.standard_normal(len(t)))
    sf.write(tmp_path / "a.wav", wave.astype(np.float32), audio.SAMPLE_RATE)
    got = deploy.model_input(tmp_path / "a.wav", {}, scorer)
    want = audio.prepare(decoder.decode(tmp_path / "a.wav")[0], **args)
    assert len(want) == 4 * audio.SAMPLE_RATE  # front_end.json's max_s, not a default's 8 s
    np.testing.assert_array_equal(got, want)


def test_parity_updates_keep_the_record_and_the_identity(folder):
    identity = (folder / SUMS).read_bytes()
    model_dir.update_parity(folder, {"parity_b": {"passed": True}})
    assert model_dir.read_parity(folder) == {"checkpoint_sha256": "c" * 64,
                                             "parity_a": {"passed": True},
                                             "parity_b": {"passed": True}}
    assert (folder / PARITY).read_text().startswith('{\n  "checkpoint_sha256"')  # indent 2
    assert not model_dir.refresh_sum(folder, PARITY)  # not listed: nothing rewritten
    assert (folder / SUMS).read_bytes() == identity


def test_an_older_export_listing_parity_json_gets_its_line_refreshed(folder):
    model_dir.write_sums(folder, [ONNX, FRONT_END, PARITY])
    model_dir.update_parity(folder, {"parity_b": {"passed": False}})
    with pytest.raises(ModelError, match="does not match"):
        model_dir.verify(folder)
    assert model_dir.refresh_sum(folder, PARITY)
    model_dir.verify(folder)


def test_clear_removes_what_an_export_writes(folder):
    model_dir.clear(folder)
    assert sorted(p.name for p in folder.iterdir()) == [FRONT_END]  # rewritten first by export


def test_model_dir_imports_the_standard_library_and_two_hearsay_leaves_only():
    code = ("import sys, hearsay.contracts.model_dir; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('hearsay', 'numpy', 'torch', 'onnxruntime', 'soundfile', 'soxr'))))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.split()
    assert set(out) == {"hearsay", "hearsay.contracts", "hearsay.contracts.model_dir",
                        "hearsay.util", "hearsay.util.files", "hearsay.util.hashing"}


# ---------------------------------------------------------------- thresholds.json


THRESHOLDS_DOC = {"default": "min_dcf",
                  "thresholds": {"min_dcf": {"value": 1.25}, "eer": {"value": -0.5},
                                 "fa_rate": {"value": "inf"}},
                  "calibration": {"a": 0.5, "b": -1.0}}


def test_the_thresholds_file_is_part_of_the_folders_identity(folder):
    before = sha256_file(folder / SUMS)
    model_dir.write_thresholds(folder, THRESHOLDS_DOC)
    model_dir.write_sums(folder, [ONNX, INT8, FRONT_END, model_dir.THRESHOLDS])
    assert model_dir.THRESHOLDS in model_dir.model_sums(folder)
    assert sha256_file(folder / SUMS) != before  # another decision, another identity
    assert model_dir.read_thresholds(folder) == THRESHOLDS_DOC
    doc = {**THRESHOLDS_DOC, "thresholds": {"min_dcf": {"value": 9.0}}}
    model_dir.write_thresholds(folder, doc)  # a threshold changed after export
    with pytest.raises(ModelError, match="thresholds.json: sha256"):
        model_dir.verify(folder)


def test_a_thresholds_file_outside_the_manifest_is_refused_and_none_is_none(folder):
    assert model_dir.read_thresholds(folder) is None  # exported without --meta
    model_dir.write_thresholds(folder, THRESHOLDS_DOC)  # dropped in by hand
    with pytest.raises(ModelError, match="not listed in SHA256SUMS"):
        model_dir.read_thresholds(folder)


def test_a_threshold_is_a_name_in_the_file_or_a_logit():
    assert model_dir.threshold(THRESHOLDS_DOC, "min_dcf") == ("min_dcf", 1.25)
    assert model_dir.threshold(THRESHOLDS_DOC, "eer") == ("eer", -0.5)
    assert model_dir.threshold(THRESHOLDS_DOC, "fa_rate") == ("fa_rate", float("inf"))
    assert model_dir.threshold(THRESHOLDS_DOC, "-2.5") == ("value", -2.5)
    assert model_dir.threshold(None, "0") == ("value", 0.0)
    with pytest.raises(ModelError, match=r"it has \['eer', 'fa_rate', 'min_dcf'\]"):
        model_dir.threshold(THRESHOLDS_DOC, "mindcf")
    with pytest.raises(ModelError, match="has no thresholds.json"):
        model_dir.threshold(None, "min_dcf")


def test_the_folders_json_files_are_two_space_indented_lines_people_can_diff(folder):
    # their bytes are in SHA256SUMS: another layout would be another model folder's identity
    assert (folder / FRONT_END).read_text() == (
        '{\n  "sample_rate": 16000,\n  "max_s": 4.0,\n  "cutoff_hz": 3000.0,\n  "top_db": 30.0,\n'
        '  "min_s": 0.25\n}\n')
    model_dir.write_thresholds(folder, {"thresholds": {"eer": {"value": -0.5}}})
    assert (folder / model_dir.THRESHOLDS).read_text() == (
        '{\n  "thresholds": {\n    "eer": {\n      "value": -0.5\n    }\n  }\n}\n')


def test_strict_jsons_infinities_are_thresholds_both_ways_and_nothing_else_spelled_is():
    doc = {"thresholds": {"never": {"value": "-inf"}, "always": {"value": "inf"}}}
    assert model_dir.check_thresholds(doc, "t.json") is doc
    assert model_dir.threshold(doc, "never") == ("never", float("-inf"))
    for spelling in ("Infinity", "-INF", "nan", "1.5"):  # a string is a logit only as "inf"/"-inf"
        with pytest.raises(ModelError, match="has no value that is a logit"):
            model_dir.check_thresholds({"thresholds": {"x": {"value": spelling}}}, "t.json")


def test_a_thresholds_doc_is_judged_whole_and_its_refusals_name_the_fix():
    fix = ": re-export the model folder with `hearsay export onnx --meta`"
    with pytest.raises(ModelError) as err:
        model_dir.check_thresholds(["min_dcf"], "m/thresholds.json")
    assert str(err.value) == "m/thresholds.json is not a JSON object" + fix
    with pytest.raises(ModelError) as err:
        model_dir.check_thresholds({"thresholds": {"a": {"value": None}, "b": 1.0},
                                    "calibration": {"a": 1.0}}, "t.json")
    assert str(err.value) == ("t.json: thresholds.a {'value': None} has no value that is a logit; "
                              "thresholds.b 1.0 has no value that is a logit; calibration "
                              "{'a': 1.0} is not {\"a\": number, \"b\": number}" + fix)
    calibration_only = {"calibration": {"a": 0.5, "b": -1.0}}  # no thresholds: none to choose
    assert model_dir.check_thresholds(calibration_only, "t.json") is calibration_only
    with pytest.raises(ModelError, match=r"thresholds \[\] is not an object"):
        model_dir.check_thresholds({"thresholds": []}, "t.json")


def test_a_threshold_spec_that_is_neither_a_logit_nor_a_name_says_what_to_pass():
    with pytest.raises(ValueError) as err:
        model_dir.threshold(THRESHOLDS_DOC, "nan")
    assert str(err.value) == ("threshold 'nan' is not a finite logit: pass a number such as 0.5, "
                              "or a name in thresholds.json")
    with pytest.raises(ModelError) as err:
        model_dir.threshold(None, "mindcf")
    assert str(err.value) == ("threshold 'mindcf': pass a number (a logit) or a name; this model "
                              "folder has no thresholds.json (export with `hearsay export onnx "
                              "--meta models/<stamp>/meta.json`)")
