"""hearsay.evaluate.pilot's direction tripwire at its boundary: the chosen epoch's fold-4 AUC must
be
above 0.5; exactly 0.5 (a model that ranks at chance) is refused. No torch needed."""

import json

import pytest

from hearsay.evaluate import pilot as pil


def pilot_meta(aucs):
    val = [{"step": 10 * e, "epoch": e, "epoch_end": True, "min_dcf": 0.9 - 0.1 * e,
            "eer": 0.2, "auc": a, "pi": 0.3} for e, a in enumerate(aucs, 1)]
    return {"job": "pilot", "complete": True, "epochs": len(aucs), "history": {"val": val}}


@pytest.mark.parametrize("auc", [0.5, 0.4999, 0.0, None])
def test_a_pilot_readout_auc_of_at_most_one_half_is_refused_by_the_direction_tripwire(auc):
    with pytest.raises(pil.PilotRefused, match=f"AUC {auc}: the model ranks spoof at or below"):
        pil.choose_epochs(pilot_meta([0.9, auc]))


def test_a_pilot_readout_auc_just_above_one_half_chooses_its_epoch():
    assert pil.choose_epochs(pilot_meta([0.9, 0.5001]))["chosen_epoch"] == 2


def test_the_cli_refuses_a_pilot_at_chance_with_exit_4(tmp_path, capsys):
    (tmp_path / "run_meta.json").write_text(json.dumps(pilot_meta([0.9, 0.5])))
    assert pil.main([str(tmp_path)]) == pil.EXIT_REFUSED == 4
    assert "refused: epoch 2 reads fold-4 AUC 0.5" in capsys.readouterr().err
