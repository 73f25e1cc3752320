"""hearsay train refuses a bundle whose fold config was edited after its build (the fold config
decides which rows train; the hashed selection.json is the bundle's record of it)."""

from __future__ import annotations

import json
import shutil

from hearsay import train as tr
from hearsay.train import EXIT_USAGE


def test_train_refuses_a_bundle_whose_fold_config_was_edited(easy_bundle_dir, tmp_path, capsys):
    edited = shutil.copytree(easy_bundle_dir, tmp_path / "edited")
    meta = json.loads((edited / "bundle_meta.json").read_text())
    meta["folds"]["config"]["family_exclusion"]["full"] = ["voc"]  # fewer rows would train
    (edited / "bundle_meta.json").write_text(json.dumps(meta))
    args = ["--full", "--out", str(tmp_path / "run"), "--cpu-smoke"]
    for extra in ([], ["--no-verify-bundle"]):  # a cheap check: no re-hash needed to see it
        assert tr.main(["--bundle", str(edited), *args, *extra]) == EXIT_USAGE
        assert "'folds' differs from the hashed selection.json" in capsys.readouterr().err
    assert not (tmp_path / "run" / "checkpoints").exists()
