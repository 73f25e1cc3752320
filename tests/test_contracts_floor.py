"""The artefact floor's rules and the verbs the runner asks: a run's completeness and identity
(`hearsay run check`), the pin (`hearsay pin write|check|keys`), the ledger (`hearsay ledger sum`,
and the report's spend, which reads it the same way), the fold count and what a model trains on."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from hearsay import cli
from hearsay.contracts import folds, ledger, pin, protocol, run_dir, status
from hearsay.evaluate import assemble, report

SHA = "b" * 64


def make_run(root: Path, key: str = "fold3", complete=True, weights: bytes = b"w",
             bundle: str = SHA) -> Path:
    """A run dir shaped as hearsay train leaves it (run_meta.json + final/model.safetensors)."""
    job, fold = protocol.run_job(key)
    run = root / key
    run_dir.final_dir(run).mkdir(parents=True)
    run_dir.weights(run).write_bytes(weights)
    run_dir.write_meta(run, {"job": job, "fold": fold, "complete": complete, "steps": 20,
                             "bundle_tree_sha": bundle, "config_hash": f"cfg-{key}"})
    return run


# --------------------------------------------------------------------------- run: complete


def test_a_run_is_complete_when_its_meta_says_true_and_its_weights_are_there(tmp_path):
    assert run_dir.is_complete(make_run(tmp_path))


@pytest.mark.parametrize("complete", [False, "true", 1, None])
def test_a_meta_that_does_not_say_exactly_true_is_not_complete(tmp_path, complete):
    run = make_run(tmp_path, complete=complete)
    assert run_dir.incomplete(run) == "run_meta.json does not say complete"


def test_empty_or_missing_final_weights_are_not_complete_one_byte_is(tmp_path):
    assert not run_dir.is_complete(make_run(tmp_path / "a", weights=b""))
    run = make_run(tmp_path / "b")
    run_dir.weights(run).unlink()
    assert run_dir.incomplete(run) == "no final/model.safetensors (or it is empty)"
    assert run_dir.is_complete(make_run(tmp_path / "c", weights=b"x"))
    assert run_dir.incomplete(tmp_path / "nothing") == "no run_meta.json"


# --------------------------------------------------------------------------- run: identity


def test_identity_is_job_fold_and_bundle_and_each_difference_is_named(tmp_path):
    run = make_run(tmp_path, "fold3")
    assert run_dir.identity(run) == ("fold", 3, SHA)
    assert run_dir.identity_problems(run, "fold3", SHA) == []
    assert run_dir.identity_problems(run, "fold2", SHA) == ["fold 3 (want 2)"]
    assert run_dir.identity_problems(run, "full", "c" * 64) == [
        "job 'fold' (want 'full')", "fold 3 (want None)",
        f"bundle_tree_sha '{SHA}' (want '{'c' * 64}')"]
    assert run_dir.identity_problems(make_run(tmp_path / "f", "full"), "full", SHA) == []


def test_hearsay_run_check_exit_codes(tmp_path, capsys):
    run = make_run(tmp_path, "fold1")
    assert cli.main(["run", "check", str(run), "--key", "fold1", "--bundle", SHA]) == 0
    assert cli.main(["run", "check", str(run)]) == 0
    assert cli.main(["run", "check", str(run), "--key", "fold2", "--bundle", SHA]) == 4
    assert "another run: fold 1 (want 2)" in capsys.readouterr().err
    assert cli.main(["run", "check", str(make_run(tmp_path / "x", complete=False))]) == 3
    assert "not complete: run_meta.json does not say complete" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "check", str(run), "--key", "fold9"])
    assert e.value.code == 2


def test_hearsay_run_readout_prints_the_line_status_shows(tmp_path, capsys):
    (tmp_path / "r.json").write_text(json.dumps(
        {"step": 8, "epoch": 2, "epoch_end": True, "auc": 0.81234567, "eer": 0.2,
         "min_dcf": 0.41, "pi": 0.3, "n": 40}))
    assert cli.main(["run", "readout", str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr().out == ("READOUT epoch 2 step 8 (epoch end): minDCF(pi 0.3) 0.41 "
                                       "EER 0.2 AUC 0.8123 on 40 validation clips\n")
    (tmp_path / "bad.json").write_text("{")
    assert cli.main(["run", "readout", str(tmp_path / "bad.json")]) == 3


# --------------------------------------------------------------------------- fold count


def test_trains_on_follows_the_fold_files_count():
    assert folds.trains_on("fold2", 3) == ("0", "1", "extra")
    assert folds.trains_on("full", 2) == ("0", "1", "extra")
    assert folds.trains_on("pilot", 5) == ("0", "1", "2", "3", "extra")
    assert folds.trains_on("fold0", 5) == ("1", "2", "3", "4", "extra")
    with pytest.raises(folds.FoldError, match="fold3"):
        folds.trains_on("fold3", 3)  # a 3-fold campaign has fold0..fold2


def test_run_keys_come_from_the_fold_count():
    assert protocol.run_keys(3) == ("fold0", "fold1", "fold2", "full")
    assert protocol.run_keys() == protocol.RUN_KEYS and len(protocol.RUN_KEYS) == 6


# --------------------------------------------------------------------------- pin


def campaign(tmp_path: Path, n: int = 5) -> dict[str, Path]:
    return {k: make_run(tmp_path / "runs", k) for k in protocol.run_keys(n)}


def test_a_written_pin_reads_back_strictly_with_dirs_resolved(tmp_path):
    runs = campaign(tmp_path)
    doc = pin.write(tmp_path / "m" / pin.FINAL, name="c", bundle_tree_sha=SHA, runs=runs,
                    min_steps=18, parity=pin.parity_record("scores/x.json"))
    assert doc["runs"]["fold3"] == {"dir": "../runs/fold3", "config_hash": "cfg-fold3",
                                    "weights_sha256": doc["runs"]["fold3"]["weights_sha256"]}
    got = pin.read(tmp_path / "m" / pin.FINAL)
    assert got["runs"]["full"]["dir"] == runs["full"].resolve()
    assert got["parity"]["file"] == (tmp_path / "m" / "export" / "parity.json").resolve()


def test_a_pin_of_three_folds_is_a_campaign_two_is_the_least_one_is_refused(tmp_path):
    for n, ok in ((3, True), (2, True), (1, False)):
        runs = {k: make_run(tmp_path / f"r{n}", k) for k in protocol.run_keys(n)}
        if ok:
            pin.write(tmp_path / f"{n}.json", name="c", bundle_tree_sha=SHA, runs=runs,
                      min_steps=1)
            assert pin.fold_count(pin.read(tmp_path / f"{n}.json")["runs"]) == n
        else:
            with pytest.raises(pin.PinError, match="runs must be exactly"):
                pin.write(tmp_path / f"{n}.json", name="c", bundle_tree_sha=SHA, runs=runs,
                          min_steps=1)


def test_a_gap_in_the_folds_or_an_unknown_key_is_refused_strictly_and_read_laxly(tmp_path):
    runs = campaign(tmp_path)
    doc = pin.write(tmp_path / "p.json", name="c", bundle_tree_sha=SHA, runs=runs, min_steps=1)
    del doc["runs"]["fold3"]
    (tmp_path / "gap.json").write_text(json.dumps(doc))
    with pytest.raises(pin.PinError, match="runs must be exactly"):
        pin.read(tmp_path / "gap.json")
    assert set(pin.read(tmp_path / "gap.json", strict=False)["runs"]) == {
        "fold0", "fold1", "fold2", "fold4", "full"}
    (tmp_path / "extra.json").write_text(json.dumps({**doc, "latest": True}))
    with pytest.raises(pin.PinError, match="unknown keys"):
        pin.read(tmp_path / "extra.json")


def test_an_ablation_pin_is_read_laxly_and_refused_strictly(tmp_path):
    runs = {"fold0": make_run(tmp_path, "fold0")}
    pin.write(tmp_path / pin.ABLATION, name="r", recipe="r", bundle_tree_sha=SHA, runs=runs)
    assert pin.read(tmp_path / pin.ABLATION, strict=False)["recipe"] == "r"
    with pytest.raises(pin.PinError):
        pin.read(tmp_path / pin.ABLATION)


def test_hearsay_pin_write_refuses_an_incomplete_run_and_writes_no_pin(tmp_path, capsys):
    runs = campaign(tmp_path)
    args = ["pin", "write", str(tmp_path / "p.json"), "--name", "c", "--bundle", SHA,
            "--min-steps", "5", *[f"--run={k}={d}" for k, d in runs.items()]]
    run_dir.write_meta(runs["fold2"], {**run_dir.read_meta(runs["fold2"]), "complete": False})
    assert cli.main(args) == 3
    assert "fold2: not complete" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()
    run_dir.write_meta(runs["fold2"], {**run_dir.read_meta(runs["fold2"]), "complete": True})
    assert cli.main(args) == 0 and cli.main(["pin", "check", str(tmp_path / "p.json")]) == 0
    assert cli.main(["pin", "check", str(tmp_path / "none.json")]) == 3


def test_hearsay_pin_keys_reads_the_fold_count_the_bundle_recorded(tmp_path, capsys):
    (tmp_path / "m.json").write_text(json.dumps({"folds": {"config": {"n_folds": 3}}}))
    assert cli.main(["pin", "keys", str(tmp_path / "m.json")]) == 0
    assert capsys.readouterr().out.split() == ["fold0", "fold1", "fold2", "full"]
    (tmp_path / "old.json").write_text(json.dumps({"tree_sha": SHA}))
    assert cli.main(["pin", "keys", str(tmp_path / "old.json")]) == 4
    assert "records no folds.config.n_folds" in capsys.readouterr().err


def test_assemble_refuses_a_pin_whose_runs_are_not_the_bundles_fold_count(tmp_path):
    runs = campaign(tmp_path)
    pin.write(tmp_path / "p.json", name="c", bundle_tree_sha=SHA, runs=runs, min_steps=1)
    bundle = types.SimpleNamespace(tree_sha=SHA, n_folds=3)
    with pytest.raises(assemble.PinError, match=r"its fold file has n_folds 3"):
        assemble.assemble(tmp_path / "p.json", bundle, tmp_path / "out")


# --------------------------------------------------------------------------- ledger

HEAD = ",".join(ledger.HEADER) + "\n"
CLOSED = "1,fold,g1,9,2.0,2026-11-30T00:00:00Z,2026-11-30T01:30:00Z,1.5000,3.0000\n"


def test_a_closing_row_with_an_empty_cost_is_unknown_never_zero(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text(HEAD + CLOSED + "2,full,g2,9,1.0,2026-11-30T00:00:00Z,,,\n"
                 "2,full,g2,9,1.0,2026-11-30T00:00:00Z,2026-11-30T01:00:00Z,1.0000,\n")
    s = ledger.summary(p)
    assert s["status"] == "incomplete" and s["unknown_cost_ids"] == ["2"]
    assert s["total_usd"] == 3.0 and s["open_ids"] == [] and "unknown cost" in s["note"]
    assert report.spend(p) == s  # the report reads the ledger through the same rule


def test_a_closing_row_whose_cost_is_zero_is_a_known_zero(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text(HEAD + CLOSED + "2,full,g2,9,0,2026-11-30T00:00:00Z,2026-11-30T01:00:00Z,1,0\n")
    s = ledger.summary(p)
    assert s["status"] == "complete" and s["total_usd"] == 3.0 and s["closed"] == 2


def test_rows_with_and_without_later_columns_read_alike(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text(HEAD.strip() + ",gpu,cpu_cores\n" + CLOSED
                 + CLOSED.replace("1,fold", "3,fold").strip() + ",H100,16\n")
    got = {r.id: r for r in ledger.rows(p)}
    assert got["1"].cost == got["3"].cost == 3.0 and got["1"].extra == {}
    assert got["3"].extra == {"gpu": "H100", "cpu_cores": "16"}
    assert ledger.summary(p)["status"] == "complete"


def test_a_reopened_rental_is_open_until_its_next_closing_row_which_replaces_the_first(tmp_path):
    # a box judged gone (closed at 01:30), seen running again (re-opened), ended at 03:00
    opened = "1,fold,g1,9,2.0,2026-11-30T00:00:00Z,,,,A100,32,13.0,REOPENED 2026-11-30T02:00:00Z\n"
    again = ("1,fold,g1,9,2.0,2026-11-30T00:00:00Z,2026-11-30T03:00:00Z,3.0000,6.0000,"
             "A100,32,13.0,DONE\n")
    p = tmp_path / "l.csv"
    p.write_text(",".join(ledger.WRITTEN) + "\n" + CLOSED + opened)
    s = ledger.summary(p)
    assert s["open_ids"] == ["1"] and s["status"] == "incomplete" and s["rows"] == 1
    p.write_text(",".join(ledger.WRITTEN) + "\n" + CLOSED + opened + again)
    s = ledger.summary(p)
    assert s["open_ids"] == [] and s["status"] == "complete" and s["rows"] == 1
    assert s["total_usd"] == 6.0 and s["hours"] == 3.0
    assert ledger.rows(p)[0].extra["reason"] == "DONE"
    # without a re-open row, a second closing row changes nothing: the first one counts
    p.write_text(",".join(ledger.WRITTEN) + "\n" + CLOSED + again)
    assert ledger.summary(p)["total_usd"] == 3.0


def test_a_row_cut_short_is_malformed_and_named_by_line(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text(HEAD + CLOSED + "4,full,g4,9\n")
    s = ledger.summary(p)
    assert s["malformed_lines"] == [3] and s["status"] == "incomplete"


def test_hearsay_ledger_sum_exit_codes(tmp_path, capsys):
    p = tmp_path / "l.csv"
    p.write_text(HEAD + CLOSED)
    assert cli.main(["ledger", "sum", str(p)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "total    rentals   1  hours    1.5000  spend $   3.0000")
    p.write_text(HEAD + CLOSED + "2,full,g2,9,1.0,2026-11-30T00:00:00Z,,,\n")
    assert cli.main(["ledger", "sum", str(p)]) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "open     1 row(s) not confirmed destroyed: 2"
    (tmp_path / "x.csv").write_text("a,b\n")
    assert cli.main(["ledger", "sum", str(tmp_path / "x.csv")]) == 2


# --------------------------------------------------------------------------- STATUS


def test_a_status_line_counts_only_for_its_own_generation():
    assert status.parse("g-7 TRAINING 1796000000\n") == ("g-7", "TRAINING", 1796000000)
    assert status.phase_of("g-7 DONE 1\n", "g-7") == "DONE"
    assert status.phase_of("g-8 DONE 1\n", "g-7") is None
    assert status.phase_of("g-7\n", "g-7") is None and status.phase_of("", "g-7") is None
    assert status.line("g-7", "DONE", 5) == "g-7 DONE 5\n"
    with pytest.raises(ValueError):
        status.line("g-7", "DONNE", 5)


@pytest.mark.parametrize("text, want", [
    ("g-7 TRAINING\n", ("g-7", "TRAINING", None)),  # no epoch: a status all the same
    ("g-7 TRAINING x\n", ("g-7", "TRAINING", None)),  # an epoch that is not a number
    ("g-7 TRAINING 12 more\n", ("g-7", "TRAINING", 12)),
    ("g-7  TRAINING 12\n", ("g-7", "", None)),  # split on each space, as the bash reader does
    ("g-7 \n", ("g-7", "", None)),
    ("g-7\n", None), (" TRAINING 12\n", None), ("", None), ("  \n", None),
])
def test_a_status_line_is_split_on_single_spaces_and_needs_a_generation_and_a_second_field(
        text, want):
    assert status.parse(text) == want


@pytest.mark.parametrize("text, want", [
    ("g-7 SMOKE 12 beats=yes\n", True), ("g-7 SMOKE 12 beats=no\n", False),
    ("g-7 SMOKE 12\n", None),  # an image older than the field: says nothing
    ("g-8 SMOKE 12 beats=yes\n", None),  # another generation's word is not this box's
    ("g-7 beats=yes\n", None), ("g-7 SMOKE beats=yes\n", None),  # only after the epoch
    ("g-7 SMOKE 12 other beats=yes\n", True), ("g-7 SMOKE 12 beats=maybe\n", None),
    ("g-7 SMOKE 12\nx y z beats=yes\n", None), ("", None),
])
def test_a_box_says_whether_it_beats_after_the_epoch_of_its_own_status_line(text, want):
    assert status.beats_of(text, "g-7") is want


def test_the_box_line_carries_its_word_on_beating_only_when_given():
    assert status.line("g-7", "SMOKE", 5, beats=True) == "g-7 SMOKE 5 beats=yes\n"
    assert status.line("g-7", "SMOKE", 5, beats=False) == "g-7 SMOKE 5 beats=no\n"
    assert status.parse(status.line("g-7", "SMOKE", 5, beats=True)) == ("g-7", "SMOKE", 5)


def test_a_phase_not_in_the_list_is_refused_naming_the_list():
    with pytest.raises(ValueError) as err:
        status.line("g-7", "DONNE", 5)
    assert str(err.value) == ("phase 'DONNE' is not one of STARTED, SMOKE, TRAINING, PUSHING, "
                              "SCORING, DONE, FAIL")


def test_done_and_fail_are_the_terminal_phases_and_every_phase_before_them_is_live():
    assert status.TERMINAL == ("DONE", "FAIL")
    assert status.PHASES[-2:] == status.TERMINAL  # the phases in order: the last two end a job
    assert not set(status.PHASES[:-2]) & set(status.TERMINAL)


# --- the parity B file (hearsay.contracts.parity_b): its clips, its inputs' identity, the gate


def parity_manifest(durations, folds=None):
    import pandas as pd

    n = len(durations)
    return pd.DataFrame({"id": [f"c{i}" for i in range(n)], "fold": folds or ["test"] * n,
                         "duration": durations})


def test_parity_clips_are_the_long_test_rows_first_then_the_short_ones_in_manifest_order():
    from hearsay.contracts import parity_b

    m = parity_manifest([1.0, 3.0, 2.9999, 8.0, 0.5], ["test", "test", "test", "test", "holdout"])
    assert list(parity_b.parity_rows(m, 2)["id"]) == ["c1", "c3"]  # exactly 3 s is long enough
    assert list(parity_b.parity_rows(m, 3)["id"]) == ["c1", "c3", "c0"]
    assert list(parity_b.parity_rows(m, 9)["id"]) == ["c1", "c3", "c0", "c2"]  # test rows only


def test_parity_clips_topped_up_are_in_manifest_order_whatever_the_frames_index():
    from hearsay.contracts import parity_b

    m = parity_manifest([1.0, 5.0, 2.0, 1.5]).set_axis([9, 4, 7, 1])
    assert list(parity_b.parity_rows(m, 4)["id"]) == ["c1", "c0", "c2", "c3"]


def test_parity_clips_without_durations_are_the_test_rows_in_manifest_order():
    from hearsay.contracts import parity_b

    m = parity_manifest([1.0, 1.0, 1.0]).drop(columns="duration")
    assert list(parity_b.parity_rows(m, 2)["id"]) == ["c0", "c1"]


def test_parity_b_needs_at_least_two_clips_for_a_rank_correlation():
    from hearsay.contracts import parity_b

    assert len(parity_b.parity_rows(parity_manifest([5.0, 5.0]), 2)) == 2
    with pytest.raises(ValueError) as err:
        parity_b.parity_rows(parity_manifest([5.0, 5.0]), 1)
    assert str(err.value) == "1 test clip(s): parity B needs at least 2 (a rank correlation)"
    with pytest.raises(ValueError, match="^0 test clip"):
        parity_b.parity_rows(parity_manifest([5.0], ["holdout"]), 4)


def test_an_inputs_sha_is_of_its_float32_samples_whatever_the_array_it_came_in():
    import hashlib

    import numpy as np

    from hearsay.contracts import parity_b

    w = np.array([0.5, -0.25, 0.125], dtype=np.float32)
    want = hashlib.sha256(w.tobytes()).hexdigest()
    assert parity_b.wave_sha(w) == want
    assert parity_b.wave_sha(w.astype(np.float64)) == want
    assert parity_b.wave_sha(np.array([0.5, 0.0, -0.25, 0.0, 0.125], dtype=np.float32)[::2]) == want
    assert parity_b.wave_sha(w[:2]) != want


def test_the_parity_b_gate_passes_only_strictly_inside_both_bounds():
    import numpy as np

    from hearsay.contracts import parity_b

    a = np.array([0.0, 1.0, 2.0, 3.0])
    g = parity_b.gate(a, a + np.array([0.0, -0.03, 0.0, 0.04]))
    assert g == {"spearman": 1.0, "max_abs_dlogit": pytest.approx(0.04)}
    assert parity_b.passed(g)
    assert not parity_b.passed({"spearman": 0.99, "max_abs_dlogit": 0.0})  # not > 0.99
    assert parity_b.passed({"spearman": 0.9901, "max_abs_dlogit": 0.0})
    assert not parity_b.passed({"spearman": 1.0, "max_abs_dlogit": 0.05})  # not < 0.05
    assert parity_b.passed({"spearman": 1.0, "max_abs_dlogit": 0.0499})
    assert parity_b.passed(g) is True and parity_b.passed({"spearman": 0.5,
                                                          "max_abs_dlogit": 1}) is False
    swapped = parity_b.gate(a, a[::-1].copy())
    assert swapped["spearman"] == pytest.approx(-1.0) and swapped["max_abs_dlogit"] == 3.0


def test_a_parity_file_is_written_with_its_kind_read_back_and_anything_else_refused(tmp_path):
    from hearsay.contracts import parity_b

    path = tmp_path / "full" / "scores" / parity_b.FILE  # both folders made
    parity_b.write(path, {"checkpoint_sha256": SHA, "clips": []})
    assert path.read_text().startswith('{\n  "kind": "hearsay parity-b box logits",\n')
    assert parity_b.read(path) == {"kind": parity_b.KIND, "checkpoint_sha256": SHA, "clips": []}
    (tmp_path / "other.json").write_text(json.dumps({"kind": "something else"}))
    with pytest.raises(ValueError) as err:
        parity_b.read(tmp_path / "other.json")
    assert str(err.value) == (f"{tmp_path / 'other.json'} is not a box parity file (hearsay "
                              "score-run --parity-clips writes full_parity_logits.json)")


def test_a_parity_file_is_still_valid_only_for_its_weights_clip_count_precision_and_bundle():
    from hearsay.contracts import parity_b

    have = {"kind": parity_b.KIND, "checkpoint_sha256": SHA, "clips": [{}, {}],
            "precision": "bf16", "bundle_tree_sha": "t"}
    assert parity_b.still_valid(have, SHA, 2, "bf16", "t") is True
    assert not parity_b.still_valid({**have, "kind": "x"}, SHA, 2, "bf16", "t")
    assert not parity_b.still_valid(have, "c" * 64, 2, "bf16", "t")
    assert not parity_b.still_valid(have, SHA, 3, "bf16", "t")
    assert not parity_b.still_valid(have, SHA, 2, "fp32", "t")
    assert not parity_b.still_valid(have, SHA, 2, "bf16", "u")
    assert not parity_b.still_valid({k: v for k, v in have.items() if k != "clips"}, SHA, 2,
                                    "bf16", "t")
    assert parity_b.still_valid({k: v for k, v in have.items() if k != "clips"}, SHA, 0,
                                "bf16", "t")
