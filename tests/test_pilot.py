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


def readout(epoch, min_dcf, auc=0.9, end=True):
    return {"epoch": epoch, "epoch_end": end, "min_dcf": min_dcf, "eer": 0.1, "auc": auc}


def meta_of(val, **extra):
    return {"job": "pilot", "complete": True, "epochs": 4, "config_hash": "cfg",
            "bundle_tree_sha": "sha", "history": {"val": val}, **extra}


def test_only_epoch_end_readouts_with_a_minDCF_count_the_last_of_a_repeated_epoch_wins():
    val = [readout(2, 0.5), readout(1, 0.7), readout(1, 0.6, end=False), readout(3, None),
           readout(2, 0.4, auc=0.8)]
    assert pil.epoch_readouts(meta_of(val)) == [
        {"epoch": 1, "min_dcf": 0.7, "eer": 0.1, "auc": 0.9},
        {"epoch": 2, "min_dcf": 0.4, "eer": 0.1, "auc": 0.8}]
    assert pil.epoch_readouts({}) == [] and pil.epoch_readouts({"history": {"val": None}}) == []


def test_the_first_epoch_within_tol_of_the_lowest_is_chosen_tol_inclusive_and_factor_rounds_up():
    val = [readout(1, 0.5), readout(2, 0.3), readout(3, 0.2), readout(4, 0.2)]
    got = pil.choose_epochs(meta_of(val), tol=0.1, factor=1.25)
    assert got == {"rule": pil.RULE, "tol": 0.1, "factor": 1.25, "pilot_epochs": 4,
                   "per_epoch": pil.epoch_readouts(meta_of(val)), "best_epoch": 3,
                   "chosen_epoch": 2, "epochs": 3, "config_hash": "cfg",
                   "bundle_tree_sha": "sha"}  # 0.3 <= 0.2 + 0.1; ceil(2 x 1.25) = 3
    assert pil.choose_epochs(meta_of(val), tol=0.0999)["chosen_epoch"] == 3
    assert pil.choose_epochs(meta_of(val))["epochs"] == 3  # tol 0.01, factor 1.0 by default
    assert pil.choose_epochs(meta_of(val), tol=0.1, factor=1.5)["epochs"] == 3  # exactly 3.0
    assert pil.how(got) == (f"epoch 2 of 4 (best 3), tol 0.1, factor 1.25: {pil.RULE}")


@pytest.mark.parametrize("tol, factor, ok", [(0, 1, True), (-0.001, 1, False), (0, 0.999, False),
                                             (float("nan"), 1, False)])
def test_tol_must_be_at_least_zero_and_factor_at_least_one(tol, factor, ok):
    meta = meta_of([readout(1, 0.5)])
    if ok:
        assert pil.choose_epochs(meta, tol=tol, factor=factor)["epochs"] == 1
    else:
        with pytest.raises(ValueError, match=f"tol={tol} must be >= 0 and factor={factor} >= 1"):
            pil.choose_epochs(meta, tol=tol, factor=factor)


def test_another_job_an_incomplete_pilot_or_no_readout_gives_no_E():
    with pytest.raises(pil.PilotRefused) as err:
        pil.choose_epochs(meta_of([readout(1, 0.5)], job="full"))
    assert str(err.value) == ("run_meta.json is a 'full' run: E comes from the pilot (hearsay "
                              "train --pilot; runner/launch.sh pilot)")
    with pytest.raises(pil.PilotError) as err:
        pil.choose_epochs(meta_of([readout(1, 0.5)], complete="true"))
    assert str(err.value) == ("the pilot run is not complete: wait for DONE (runner/status.sh "
                              "--why pilot), then bring run_meta.json back")
    with pytest.raises(pil.PilotError) as err:
        pil.choose_epochs(meta_of([readout(1, None)]))
    assert not isinstance(err.value, pil.PilotRefused)
    assert str(err.value) == ("no epoch-end readout with a minDCF in run_meta.json history.val: "
                              "train the pilot with this hearsay (its readouts carry min_dcf)")


def test_pilot_epochs_prints_E_and_writes_the_json_and_how_lines(tmp_path, capsys):
    (tmp_path / "run_meta.json").write_text(json.dumps(meta_of([readout(1, 0.5),
                                                                readout(2, 0.2)])))
    args = [str(tmp_path), "--tol", "0.3", "--factor", "1.5"]
    assert pil.main(args + ["--json", str(tmp_path / "e.json"), "--how",
                            str(tmp_path / "how.txt")]) == pil.EXIT_OK
    assert capsys.readouterr().out == "2\n"  # epoch 1 within 0.3 of 0.2; ceil(1.5) = 2
    doc = json.loads((tmp_path / "e.json").read_text())
    assert (doc["chosen_epoch"], doc["epochs"], doc["tol"]) == (1, 2, 0.3)
    assert (tmp_path / "e.json").read_text().endswith("}\n")
    assert (tmp_path / "how.txt").read_text() == pil.how(doc) + "\n"
    assert pil.main([str(tmp_path)]) == 0 and capsys.readouterr().out == "2\n"


def test_pilot_epochs_exit_codes_name_the_fix(tmp_path, capsys):
    assert pil.main([str(tmp_path)]) == pil.EXIT_BAD_INPUT == 3
    assert capsys.readouterr().err == (f"hearsay pilot-epochs: {tmp_path / 'run_meta.json'}: not "
                                       "found (bring the pilot's run_meta.json back from the "
                                       "store)\n")
    (tmp_path / "run_meta.json").write_text("{")
    assert pil.main([str(tmp_path)]) == 3
    assert capsys.readouterr().err.startswith("hearsay pilot-epochs: Expecting")
    for bad in (["--tol", "-1"], ["--factor", "0.5"]):
        with pytest.raises(SystemExit) as e:
            pil.main([str(tmp_path), *bad])
        assert e.value.code == pil.EXIT_USAGE
        assert "must be >= 0 and --factor" in capsys.readouterr().err


def test_pilot_epochs_help_is_the_module_docstring_and_each_line_its_own_text(capsys,
                                                                             monkeypatch):
    import re

    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        pil.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: hearsay pilot-epochs [-h]")
    assert "    hearsay pilot-epochs runs/pilot                       # prints E" in out  # as is
    for pattern in (r"run_dir\s+the pilot's run dir \(its run_meta.json\)",
                    r"--tol TOL\s+minDCF within this of the lowest counts as the lowest "
                    r"\(default 0.01\)",
                    r"--factor FACTOR\s+safety factor on the chosen epoch, >= 1 \(default 1.0\)",
                    r"--json JSON\s+write the choice as JSON here",
                    r"--how HOW\s+write how E was chosen as one line here \(runner/epochs.sh "
                    r"records it\)"):
        assert re.search(rf"^\s+{pattern}$", out, re.M), (pattern, out)


def test_pilot_epochs_takes_tol_zero_and_writes_its_json_two_spaces_indented(tmp_path, capsys):
    (tmp_path / "run_meta.json").write_text(json.dumps(meta_of([readout(1, 0.5)])))
    assert pil.main([str(tmp_path), "--tol", "0", "--json", str(tmp_path / "e.json")]) == 0
    assert (tmp_path / "e.json").read_text().startswith('{\n  "rule": ')
