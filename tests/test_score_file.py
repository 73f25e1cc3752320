"""hearsay.contracts.score_file: the score CSV + sidecar layout, its names, and the reuse rule."""

import json

import numpy as np
import pandas as pd
import pytest

from hearsay.contracts import score_file

SIDE = {"run": "/runs/fold3", "weights_sha256": "w" * 64, "bundle_tree_sha": "t" * 40,
        "split": "inner_oof", "fold": 3, "augmented": False, "n_rows": 3,
        "config": {"max_s": 8.0, "aug_seed": 20261130, "device": "cpu", "precision": "fp32"}}


def frame() -> pd.DataFrame:
    logit = np.array([-3.25, 0.0, 1e-7])
    return pd.DataFrame({"path": ["a/1.wav", "NA", "007"], "fold": ["3", "3", "3"],
                         "split": "inner_oof", "score": 1 / (1 + np.exp(-logit)), "logit": logit})


def want(**changes) -> dict:
    w = score_file.wanted("w" * 64, "t" * 40, "inner_oof", 3, False, max_s=8.0,
                          aug_seed=20261130)
    return {**w, **changes}


def test_write_then_read_round_trips_the_frame_and_the_sidecar(tmp_path):
    csv = score_file.write(frame(), SIDE, tmp_path / "scores" / "fold3_inner_oof.csv")
    back = score_file.read(csv)
    assert list(back.columns) == score_file.COLUMNS
    assert list(back["path"]) == ["a/1.wav", "NA", "007"]  # strings, never NaN or 7
    assert list(back["fold"]) == ["3", "3", "3"]
    assert np.allclose(back["logit"], frame()["logit"], rtol=1e-8, atol=0)
    assert score_file.read_sidecar(csv) == SIDE
    assert score_file.sidecar(csv) == tmp_path / "scores" / "fold3_inner_oof.csv.meta.json"
    assert score_file.sidecar(csv).read_text() == json.dumps(SIDE, indent=2, sort_keys=True) + "\n"
    assert csv.read_text().splitlines()[1] == "a/1.wav,3,inner_oof,0.0373268873,-3.25"  # %.9g
    assert sorted(p.name for p in csv.parent.iterdir()) == [
        "fold3_inner_oof.csv", "fold3_inner_oof.csv.meta.json"]  # no temporary file left


@pytest.mark.parametrize("key, split, aug, name", [
    ("fold3", "inner_oof", False, "fold3_inner_oof.csv"),
    ("full", "holdout", False, "full_holdout.csv"),
    ("full", "holdout", True, "full_holdout_aug.csv"),
    ("full", "holdout", "codecs", "full_holdout_codecs.csv"),
    ("full", "holdout", "test_length", "full_holdout_test_length.csv"),
    ("full", "holdout", "whole", "full_holdout_whole.csv"),
    ("full", "test", False, "full_test.csv"),
])
def test_file_name_and_parse_name_are_inverse(key, split, aug, name):
    assert score_file.file_name(key, split, aug) == name
    assert score_file.parse_name(name) == (key, split, aug)
    assert type(score_file.parse_name(name).aug) is type(aug)  # True, not a "_aug" string


@pytest.mark.parametrize("name", ["fold5_inner_oof.csv", "pilot_inner_oof.csv",
                                  "fold3_inner_oof.csv.meta.json", "fold3_train.csv",
                                  "full_holdout_noise.csv", "xfold3_inner_oof.csv",
                                  "fold3_inner_oof.csv.partial", "scores.csv"])
def test_parse_name_refuses_any_other_name(name):
    assert score_file.parse_name(name) is None


def test_file_name_refuses_an_unknown_readout():
    with pytest.raises(ValueError, match="augmented='noise'"):
        score_file.file_name("full", "holdout", "noise")


def test_layout_folders():
    assert score_file.per_run_dir("models/s1") == score_file.Path("models/s1/scores")
    assert score_file.assembled_path("outputs", "s1") == score_file.Path(
        "outputs/detector_scores/s1.csv")


def test_a_matching_sidecar_allows_reuse(tmp_path):
    csv = score_file.write(frame(), SIDE, tmp_path / "fold3_inner_oof.csv")
    assert score_file.refusal(csv, want()) is None


@pytest.mark.parametrize("changes, said", [
    ({"weights_sha256": "x" * 64}, "weights_sha256 'wwww"),
    ({"bundle_tree_sha": "u" * 40}, "bundle_tree_sha 'tttt"),
    ({"split": "holdout"}, "split 'inner_oof' (want 'holdout')"),
    ({"fold": 2}, "fold 3 (want 2)"),
    ({"augmented": True}, "augmented False (want True)"),
    ({"max_s": 14.0}, "max_s 8.0 (want 14.0)"),
    ({"aug_seed": 1}, "aug_seed 20261130 (want 1)"),
])
def test_a_sidecar_mismatch_refuses_reuse_and_names_it(tmp_path, changes, said):
    csv = score_file.write(frame(), SIDE, tmp_path / "fold3_inner_oof.csv")
    why = score_file.refusal(csv, want(**changes))
    assert why is not None and why.startswith("sidecar names ") and said in why


def test_device_and_precision_are_recorded_not_compared(tmp_path):
    side = {**SIDE, "config": {**SIDE["config"], "device": "cuda", "precision": "bf16"},
            "device_name": "NVIDIA H200"}
    csv = score_file.write(frame(), side, tmp_path / "fold3_inner_oof.csv")
    assert score_file.refusal(csv, want()) is None


def test_refusal_without_a_file_or_a_readable_sidecar(tmp_path):
    csv = tmp_path / "fold3_inner_oof.csv"
    assert score_file.refusal(csv, want()) == "missing"
    frame().to_csv(csv, index=False)
    assert score_file.refusal(csv, want()) == "no sidecar"
    score_file.sidecar(csv).write_text("{not json")
    assert score_file.refusal(csv, want()) == "sidecar unreadable"


@pytest.mark.parametrize("aug", [1, 0, None, 1.0, "_aug"])
def test_file_name_refuses_a_readout_that_only_compares_equal_to_one_and_names_the_choices(aug):
    with pytest.raises(ValueError) as err:
        score_file.file_name("full", "holdout", aug)
    assert str(err.value) == (f"augmented={aug!r}: one of False, True, 'codecs', "
                              "'test_length', 'whole'")


def test_every_mismatch_is_named_in_the_reuse_rules_order(tmp_path):
    csv = score_file.write(frame(), SIDE, tmp_path / "fold3_inner_oof.csv")
    assert score_file.refusal(csv, want(fold=2, weights_sha256="x", max_s=14.0)) == (
        f"sidecar names weights_sha256 {'w' * 64!r} (want 'x'), fold 3 (want 2), "
        "max_s 8.0 (want 14.0)")


def test_a_sidecar_without_its_config_names_max_s_and_aug_seed_as_none(tmp_path):
    side = {k: v for k, v in SIDE.items() if k != "config"}
    csv = score_file.write(frame(), side, tmp_path / "fold3_inner_oof.csv")
    assert score_file.refusal(csv, want()) == (
        "sidecar names aug_seed None (want 20261130), max_s None (want 8.0)")


def test_a_sidecar_that_is_a_folder_is_no_sidecar(tmp_path):
    csv = tmp_path / "fold3_inner_oof.csv"
    frame().to_csv(csv, index=False)
    score_file.sidecar(csv).mkdir()
    assert score_file.refusal(csv, want()) == "no sidecar"
    assert score_file.refusal(tmp_path, want()) == "missing"  # a folder is no score file


def test_only_an_empty_cell_reads_as_missing(tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("path,fold,split,score,logit\nNA,,test,0.5,\nnan,3,test,NA,0\n")
    back = score_file.read(csv)
    assert back["path"].tolist() == ["NA", "nan"] and back["fold"].isna().tolist() == [True, False]
    assert back["logit"].isna().tolist() == [True, False]
    assert back["score"].tolist()[1] == "NA"  # kept as written, never read as missing


def test_paths_and_folds_that_look_like_numbers_read_back_as_written(tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("path,fold,split,score,logit\n007,03,test,0.5,0\n1e3,3,test,0.5,0\n")
    back = score_file.read(csv)
    assert back["path"].tolist() == ["007", "1e3"] and back["fold"].tolist() == ["03", "3"]
