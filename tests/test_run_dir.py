"""hearsay.contracts.run_dir: the run directory's layout, spelled once, and the errors that name
the fix."""

import pytest

from hearsay.contracts import run_dir


def test_layout_names_match_the_documented_tree(tmp_path):
    assert run_dir.meta_path(tmp_path) == tmp_path / "run_meta.json"
    assert run_dir.config_path(tmp_path) == tmp_path / "config.json"
    assert run_dir.weights(tmp_path) == tmp_path / "final" / "model.safetensors"
    assert run_dir.checkpoint_dir(tmp_path, 3) == tmp_path / "checkpoints" / "epoch_0003"


def test_meta_round_trip_and_find_from_below(tmp_path):
    run_dir.write_meta(tmp_path, {"job": "fold", "fold": 2})
    assert run_dir.read_meta(tmp_path) == {"fold": 2, "job": "fold"}
    (tmp_path / "final").mkdir()
    assert run_dir.find_meta(tmp_path / "final")["fold"] == 2


def test_missing_files_are_named_with_the_fix(tmp_path):
    with pytest.raises(run_dir.RunDirError, match="no run_meta.json in .*hearsay train"):
        run_dir.read_meta(tmp_path)
    with pytest.raises(run_dir.RunDirError, match="is the run complete"):
        run_dir.weights_of(tmp_path)


def test_weights_of_takes_a_run_dir_or_the_folder_itself(tmp_path):
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "model.safetensors").write_bytes(b"w")
    assert run_dir.weights_of(tmp_path) == tmp_path / "final" / "model.safetensors"
    assert run_dir.weights_of(tmp_path / "final") == tmp_path / "final" / "model.safetensors"
