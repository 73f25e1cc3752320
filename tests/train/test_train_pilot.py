"""The pilot's readouts (fold-4 minDCF at pi 0.3, EER, AUC per readout, in run_meta and pushed to
the store as readout.json) and the rule that turns them into the finals' epoch count
(hearsay.evaluate.pilot)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from train_world import smoke

from hearsay import metrics
from hearsay import train as tr
from hearsay.evaluate import pilot as pil
from hearsay.train import data as tdata


def test_pilot_readouts_carry_min_dcf_eer_and_auc_into_run_meta_and_the_store(bundle_dir,
                                                                             tmp_path):
    cfg = smoke(job="pilot", fold=None, epochs=2, val_every=3, batches_per_epoch=4)
    meta = tr.run(cfg, bundle_dir, tmp_path / "run", store_uri=str(tmp_path / "store"))
    vals = meta["history"]["val"]
    # a readout at step 3 (val_every) and one per epoch end (steps 4 and 8), each with all three
    assert [(v["step"], v["epoch"], v["epoch_end"]) for v in vals] == [
        (3, 1, False), (4, 1, True), (6, 2, False), (8, 2, True)]
    for v in vals:
        assert v["pi"] == metrics.PI_OF_RECORD
        assert 0 <= v["auc"] <= 1 and 0 <= v["eer"] <= 1 and v["min_dcf"] >= 0
    on_disk = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    assert on_disk["history"]["val"] == vals
    pushed = json.loads((tmp_path / "store" / "readout.json").read_text())
    assert pushed == {"job": "pilot", "fold": None, "tripwire_auc": None, **vals[-1]}


def test_readout_metrics_are_hearsay_metrics_of_the_validation_scores():
    rng = np.random.default_rng(0)
    is_spoof = np.arange(40) % 2 == 0
    scores = rng.normal(size=40) + is_spoof
    got = tdata.readout_metrics(scores, is_spoof)
    ref = metrics.compute(scores, is_spoof)
    assert got["auc"] == pytest.approx(ref["auc"])
    assert got["eer"] == pytest.approx(ref["eer"])
    assert got["min_dcf"] == pytest.approx(ref["min_dcf"])
    assert got["n"] == 40


def _pilot(dcfs, aucs=None, **meta):
    val = [{"step": 10 * e, "epoch": e, "epoch_end": True, "min_dcf": d, "eer": 0.1,
            "auc": (aucs or {}).get(e, 0.9), "pi": 0.3} for e, d in enumerate(dcfs, 1)]
    val.insert(1, {"step": 15, "epoch": 2, "epoch_end": False, "min_dcf": 0.0, "eer": 0.0,
                   "auc": 1.0, "pi": 0.3})  # a mid-epoch readout never chooses
    return {"job": "pilot", "complete": True, "epochs": len(dcfs), "config_hash": "c",
            "bundle_tree_sha": "b", "history": {"val": val}, **meta}


def test_e_is_the_first_epoch_within_tol_of_the_lowest_min_dcf():
    meta = _pilot([0.60, 0.41, 0.40, 0.45])
    assert pil.choose_epochs(meta, tol=0.0)["epochs"] == 3
    got = pil.choose_epochs(meta, tol=0.01)
    assert (got["best_epoch"], got["chosen_epoch"], got["epochs"]) == (3, 2, 2)
    assert pil.choose_epochs(meta, tol=0.01, factor=1.25)["epochs"] == 3  # ceil(2 x 1.25)


def test_e_is_refused_for_a_non_pilot_an_incomplete_run_or_a_flipped_auc():
    with pytest.raises(pil.PilotRefused, match="'fold' run"):
        pil.choose_epochs(_pilot([0.5], job="fold"))
    with pytest.raises(pil.PilotError, match="not complete"):
        pil.choose_epochs(_pilot([0.5], complete=False))
    with pytest.raises(pil.PilotRefused, match="AUC 0.4"):
        pil.choose_epochs(_pilot([0.3, 0.6], aucs={1: 0.4}))
    with pytest.raises(pil.PilotError, match="no epoch-end readout"):
        pil.choose_epochs({"job": "pilot", "complete": True, "history": {"val": []}})


def test_cli_prints_e_and_writes_the_choice(tmp_path, capsys):
    (tmp_path / "run_meta.json").write_text(json.dumps(_pilot([0.6, 0.4, 0.39])))
    assert pil.main([str(tmp_path), "--json", str(tmp_path / "e.json")]) == 0
    assert capsys.readouterr().out == "2\n"
    assert json.loads((tmp_path / "e.json").read_text())["rule"] == pil.RULE
    assert pil.main([str(tmp_path / "nowhere")]) == pil.EXIT_BAD_INPUT
