"""`hearsay assemble`'s whole job on hand-made runs, the model's scoring stood in for (what a
model scores is tests/test_score*.py's; the real chain, trained and scored, is
tests/test_assemble.py's): the pin against the bundle, each per-run file reused or scored here
and why, the written file read back and checked, what the report is handed, and the CLI's exit
codes, each with its message."""

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hearsay.contracts import pin as pins
from hearsay.contracts import run_dir, score_file
from hearsay.contracts.protocol import split_rows
from hearsay.detector.logits import sigmoid
from hearsay.evaluate import assemble, readouts, score_run
from hearsay.evaluate import score as scoring
from hearsay.util.hashing import sha256_file

SHA = "s" * 40
# path -> (fold, logit): two inner folds, one holdout and two test clips, one probe clip (scored by
# every run, never exported), and one extra row (train-only, never scored)
CLIPS = {"a0": ("0", 0.5), "a1": ("0", -1.0), "b0": ("1", 2.0), "b1": ("1", -0.25),
         "h0": ("holdout", 0.75), "t1": ("test", -2.0), "t0": ("test", 1.5), "p0": ("probe", 0.25)}
# the two fold runs' files (inner and probe) + the full run's
N_FILES = sum(len(score_run.jobs_of(key)) for key in ("fold0", "fold1", "full"))


def manifest():
    m = pd.DataFrame([(p, f) for p, (f, _) in CLIPS.items()], columns=["path", "fold"])
    extra = pd.DataFrame([("x0", "0", "extra")], columns=["path", "fold", "train_scope"])
    return pd.concat([m.assign(train_scope="core"), extra], ignore_index=True)


def bundle(tree_sha=SHA, n_folds=2):
    """What assemble reads of a bundle (hearsay.contracts.bundle.Bundle's fields)."""
    return SimpleNamespace(manifest=manifest(), tree_sha=tree_sha, n_folds=n_folds, root=None)


def stand_in_score_one(calls):
    """score_run.score_one as a box writes it: each clip's logit from CLIPS, and the sidecar a
    real scorer writes (the pinned run's weights hashed, this bundle, split, fold, settings)."""

    def score_one(bundle, run, split, fold, aug, cfg, workers=0, overlap=False):
        calls.append((run.name, split, aug))
        rows = split_rows(bundle.manifest, split, fold)
        logits = np.array([CLIPS[p][1] for p in rows["path"]])
        df = pd.DataFrame({"path": rows["path"], "fold": rows["fold"], "split": split,
                           "score": sigmoid(logits), "logit": logits})
        conf = dataclasses.asdict(cfg)
        if aug == "whole":
            conf["max_s"] = readouts.WHOLE_MAX_S
        side = {"weights_sha256": sha256_file(run_dir.weights(run)),
                "bundle_tree_sha": bundle.tree_sha, "split": split, "fold": fold,
                "augmented": aug, "config": conf}
        return df, side

    return score_one


def make_run(root, key):
    run = root / "runs" / key
    run_dir.final_dir(run).mkdir(parents=True)
    run_dir.weights(run).write_bytes(b"weights of " + key.encode())
    job, fold = ("full", None) if key == "full" else ("fold", int(key[4:]))
    run_dir.write_meta(run, {"job": job, "fold": fold, "config_hash": "cfg",
                             "bundle_tree_sha": SHA, "steps": 50, "complete": True})
    return run


@pytest.fixture
def campaign(tmp_path, monkeypatch):
    """A pin over three complete runs (fold0, fold1, full), no parity; scoring stood in for.
    Returns (pin path, outputs folder, the stand-in's calls)."""
    runs = {key: make_run(tmp_path, key) for key in ("fold0", "fold1", "full")}
    pin = tmp_path / "models" / "stamp1" / pins.FINAL
    pins.write(pin, name="stamp1", bundle_tree_sha=SHA, runs=runs, min_steps=50)
    calls: list = []
    monkeypatch.setattr(score_run, "score_one", stand_in_score_one(calls))
    return pin, tmp_path / "outputs", calls


def test_a_first_assemble_scores_every_file_here_and_says_why(campaign, capsys):
    pin, outputs, calls = campaign
    done = assemble.assemble(pin, bundle(), outputs)
    assert len(calls) == N_FILES
    sc = done["scoring"]
    assert sc["files_reused"] == 0
    assert sc["files_scored_here"] == {score_file.file_name(k, s, a): "missing"
                                       for k in ("fold0", "fold1", "full")
                                       for s, _, a in score_run.jobs_of(k)}
    # rows: 2 + 2 inner, the full run's 5 holdout files of 1 row and its test file of 2 rows,
    # and each of the three runs' probe file of 1 row
    assert sc["rescored_here"] == 2 + 2 + 5 * 1 + 2 + 3 * 1
    assert sc["device"] == "cpu" and sc["reuse_rule"] == score_file.REUSE_RULE
    err = capsys.readouterr().err
    assert "hearsay assemble: fold0: scoring fold0_inner_oof.csv here (missing)\n" in err
    assert err.count("hearsay assemble: full: scoring ") == len(score_run.jobs_of("full"))


def test_the_written_file_is_core_rows_in_order_each_scored_by_its_own_model(campaign):
    pin, outputs, _ = campaign
    done = assemble.assemble(pin, bundle(), outputs)
    assert done["scores_csv"] == score_file.assembled_path(outputs, "stamp1")
    back = score_file.read(done["scores_csv"])
    assert list(back["path"]) == ["a0", "a1", "b0", "b1", "h0", "t1", "t0"]  # no extra row
    assert list(back["split"]) == ["inner_oof"] * 4 + ["holdout"] + ["test"] * 2
    assert list(back["logit"]) == pytest.approx([CLIPS[p][1] for p in back["path"]])
    pd.testing.assert_frame_equal(done["scores"], back)
    assert done["parity"] is None
    assert {k: m["fold"] for k, m in done["metas"].items()} == {"fold0": 0, "fold1": 1,
                                                               "full": None}
    per_run = score_file.per_run_dir(pin.parent)
    assert done["files"]["fold1"] == {("inner_oof", False): per_run / "fold1_inner_oof.csv",
                                      ("probe", False): per_run / "fold1_probe.csv"}
    assert set(done["files"]["full"]) == {(s, a) for s, _, a in score_run.jobs_of("full")}
    assert done["pin"]["name"] == "stamp1"
    assert done["score_config"] == scoring.ScoreConfig()


def test_a_second_assemble_reuses_every_file(campaign):
    pin, outputs, calls = campaign
    first = assemble.assemble(pin, bundle(), outputs)
    calls.clear()
    again = assemble.assemble(pin, bundle(), outputs)
    assert calls == []
    assert again["scoring"] == {**first["scoring"], "rescored_here": 0, "files_scored_here": {},
                                "files_reused": N_FILES}
    pd.testing.assert_frame_equal(again["scores"], first["scores"])


def test_one_runs_files_are_reused_unless_forced(campaign):
    pin, outputs, calls = campaign
    assemble.assemble(pin, bundle(), outputs)
    calls.clear()
    doc, cfg = assemble.load_pin(pin), scoring.ScoreConfig()
    files = assemble.run_scores(bundle(), doc, "fold1", cfg)
    assert calls == [] and list(files) == [("inner_oof", False), ("probe", False)]
    scored: list = []
    assemble.run_scores(bundle(), doc, "fold1", cfg, True, scored)
    assert calls == [("fold1", "inner_oof", False), ("fold1", "probe", False)]
    assert scored == [("fold1_inner_oof.csv", "--rescore", 2), ("fold1_probe.csv", "--rescore", 1)]


def test_rescore_scores_every_file_here_again(campaign):
    pin, outputs, calls = campaign
    assemble.assemble(pin, bundle(), outputs)
    calls.clear()
    done = assemble.assemble(pin, bundle(), outputs, rescore=True)
    assert len(calls) == N_FILES
    assert set(done["scoring"]["files_scored_here"].values()) == {"--rescore"}


def test_a_file_of_other_weights_is_scored_here_again_and_the_rest_reused(campaign):
    pin, outputs, calls = campaign
    assemble.assemble(pin, bundle(), outputs)
    csv = score_file.per_run_dir(pin.parent) / "fold1_inner_oof.csv"
    side = score_file.read_sidecar(csv)
    score_file.write(score_file.read(csv), {**side, "weights_sha256": "0" * 64}, csv)
    calls.clear()
    done = assemble.assemble(pin, bundle(), outputs)
    assert calls == [("fold1", "inner_oof", False)]
    (why,) = done["scoring"]["files_scored_here"].values()
    assert why.startswith(f"sidecar names weights_sha256 '{'0' * 64}' (want '")
    assert done["scoring"]["rescored_here"] == 2
    assert done["scoring"]["files_reused"] == N_FILES - 1


def test_a_missing_pin_is_bad_input_and_a_pin_with_an_unknown_key_is_refused(campaign):
    pin, outputs, calls = campaign
    with pytest.raises(assemble.AssembleError, match=r"^pin file .*other.json not found \("):
        assemble.assemble(pin.with_name("other.json"), bundle(), outputs)
    pin.write_text(json.dumps({**json.loads(pin.read_text()), "note": "by hand"}))
    with pytest.raises(assemble.PinError, match=r"unknown keys \['note'\], missing keys \[\]"):
        assemble.assemble(pin, bundle(), outputs)
    assert calls == []


def test_a_bundle_of_another_tree_is_refused_before_any_scoring(campaign):
    pin, outputs, calls = campaign
    want = (rf"^bundle tree-sha {'u' * 40} differs from the pinned {SHA} \(assemble with the "
            r"bundle the runs used\)$")
    with pytest.raises(assemble.PinError, match=want):
        assemble.assemble(pin, bundle(tree_sha="u" * 40), outputs)
    assert calls == [] and not outputs.exists()


def test_a_pin_whose_runs_are_not_the_bundles_fold_count_is_refused(campaign):
    pin, outputs, calls = campaign
    want = (r"^the pin's runs \['fold0', 'fold1', 'full'\] are not this bundle's "
            r"\['fold0', 'fold1', 'fold2', 'full'\] \(its fold file has n_folds 3\)$")
    with pytest.raises(assemble.PinError, match=want):
        assemble.assemble(pin, bundle(n_folds=3), outputs)
    assert calls == []


def test_every_pinned_run_is_validated_before_any_scoring(campaign):
    pin, outputs, calls = campaign
    full = pin.parent.parent.parent / "runs" / "full"
    run_dir.write_meta(full, {**run_dir.read_meta(full), "steps": 49})
    with pytest.raises(assemble.PinError, match=r"^full \(.*\): steps 49 < min_steps 50$"):
        assemble.assemble(pin, bundle(), outputs)
    assert calls == []


def test_an_extra_row_in_a_fold_file_is_refused_before_anything_is_written(campaign):
    pin, outputs, calls = campaign
    assemble.assemble(pin, bundle(), outputs)
    out = score_file.assembled_path(outputs, "stamp1")
    out.unlink()
    csv = score_file.per_run_dir(pin.parent) / "fold0_inner_oof.csv"
    df = score_file.read(csv)
    leaked = pd.DataFrame({"path": ["x0"], "fold": ["0"], "split": ["inner_oof"],
                           "score": [0.5], "logit": [0.0]})
    score_file.write(pd.concat([df, leaked], ignore_index=True), score_file.read_sidecar(csv),
                     csv)
    with pytest.raises(scoring.ScoreRefused, match=r"^1 extra \(train-only\) row\(s\)"):
        assemble.assemble(pin, bundle(), outputs)
    assert not out.exists()


def test_the_checks_run_on_the_written_file(campaign):
    pin, outputs, _ = campaign
    assemble.assemble(pin, bundle(), outputs)
    csv = score_file.per_run_dir(pin.parent) / "fold1_inner_oof.csv"
    df = score_file.read(csv)
    score_file.write(df.assign(fold="0"), score_file.read_sidecar(csv), csv)  # a fold mislabelled
    with pytest.raises(assemble.CheckFailed, match=r"^F2: 2 inner row\(s\) carry a fold other"):
        assemble.assemble(pin, bundle(), outputs)
    assert score_file.assembled_path(outputs, "stamp1").is_file()  # written, then judged


def test_a_pin_that_requires_parity_is_held_to_its_record(campaign):
    pin, outputs, _ = campaign
    doc = json.loads(pin.read_text())
    pin.write_text(json.dumps({**doc, "parity": {"file": "export/parity.json",
                                                 "require": ["parity_b"]}}))
    with pytest.raises(assemble.CheckFailed, match=r"^F6: parity record .* missing"):
        assemble.assemble(pin, bundle(), outputs)
    record = {"parity_a": {"passed": True}, "parity_b": {"passed": True}}
    (pin.parent / "export").mkdir()
    (pin.parent / "export" / "parity.json").write_text(json.dumps(record))
    assert assemble.assemble(pin, bundle(), outputs)["parity"] == record


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def cli(campaign, monkeypatch, tmp_path):
    """main's arguments for the campaign, the bundle read as the stand-in and the report
    written as a record of what it was handed."""
    pin, outputs, _ = campaign
    handed = {}

    def load_bundle(path, verify):
        handed["verify"] = verify
        return bundle()

    monkeypatch.setattr(scoring, "load_bundle", load_bundle)
    from hearsay.evaluate import report

    def write_all(done, bundle_read, **kw):
        handed.update(done=done, bundle=bundle_read, **kw)
        return {"gate": {"outcome": "not measured"}, "report": "docs/reports/stamp1.md"}

    monkeypatch.setattr(report, "write_all", write_all)
    argv = ["--pinned", str(pin), "--bundle", str(tmp_path / "bundle"), "--outputs", str(outputs),
            "--reports", str(tmp_path / "reports"), "--ledger", str(tmp_path / "ledger.csv")]
    return argv, handed


def test_main_assembles_and_hands_the_report_its_inputs(cli, capsys, tmp_path):
    argv, handed = cli
    assert assemble.main(argv) == assemble.EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"hearsay assemble: rescored_here 14 rows in {N_FILES} file(s); "
                      "0 file(s) reused")
    assert out[1].endswith("(7 rows, F1-F6 passed); gate: not measured; report "
                           "docs/reports/stamp1.md")
    assert handed["bars"] == [] and handed["ablation"] is None and handed["ablation_md"] is None
    assert handed["extra_corpus"] is None  # no decision given and none cited by the runs
    assert handed["bundle"].tree_sha == SHA
    assert handed["done"]["score_config"] == scoring.ScoreConfig(device="cpu")
    assert handed["probe"] == handed["done"]["files"]["full"][("probe", False)]
    assert handed["fa_rate"] == 0.01
    assert handed["ledger"] == tmp_path / "ledger.csv"
    assert handed["reports"] == tmp_path / "reports"
    assert handed["verify"] is True


def test_main_rescores_on_request_and_skips_the_bundle_hash_on_request(cli, capsys):
    argv, handed = cli
    assert assemble.main(argv) == assemble.EXIT_OK
    capsys.readouterr()
    assert assemble.main(argv + ["--no-verify-bundle"]) == assemble.EXIT_OK
    assert handed["verify"] is False
    assert capsys.readouterr().out.startswith(
        f"hearsay assemble: rescored_here 0 rows in 0 file(s); {N_FILES} file(s) reused\n")
    assert assemble.main(argv + ["--rescore"]) == assemble.EXIT_OK
    assert set(handed["done"]["scoring"]["files_scored_here"].values()) == {"--rescore"}


def test_main_passes_the_bars_in_order_and_an_own_probe_file(cli, tmp_path):
    argv, handed = cli
    args = ["--bar", str(tmp_path / "bar"), "--bar2", str(tmp_path / "bar2"),
            "--probe", str(tmp_path / "probe.csv"), "--fa-rate", "0"]
    assert assemble.main(argv + args) == assemble.EXIT_OK
    assert handed["bars"] == [tmp_path / "bar", tmp_path / "bar2"]
    assert handed["probe"] == tmp_path / "probe.csv"
    assert handed["fa_rate"] == 0.0


def test_main_hands_the_report_the_ablation_and_the_corpus_decision_it_read(cli, monkeypatch,
                                                                            tmp_path):
    argv, handed = cli
    from hearsay.evaluate import compare, corpus_decision

    read = []
    monkeypatch.setattr(compare, "load_decision", lambda p: read.append(p) or {"chosen": "b"})
    monkeypatch.setattr(compare, "markdown", lambda d: f"chosen {d['chosen']}")
    monkeypatch.setattr(corpus_decision, "gate_check",
                        lambda p, metas: {"file": p, "runs": sorted(metas)})
    args = ["--ablation", str(tmp_path / "decision.json"),
            "--corpus-decision", str(tmp_path / "corpus.json")]
    assert assemble.main(argv + args) == assemble.EXIT_OK
    assert read == [tmp_path / "decision.json"]
    assert handed["ablation"] == {"chosen": "b"} and handed["ablation_md"] == "chosen b"
    assert handed["extra_corpus"] == {"file": tmp_path / "corpus.json",
                                      "runs": ["fold0", "fold1", "full"]}


def test_main_scores_on_the_device_named(cli, monkeypatch):
    argv, handed = cli
    monkeypatch.setattr(scoring, "device_problem", lambda d: None)
    assert assemble.main(argv + ["--device", "cuda:1"]) == assemble.EXIT_OK
    assert handed["done"]["score_config"].device == "cuda:1"
    assert handed["done"]["scoring"]["device"] == "cuda:1"


@pytest.mark.parametrize("args, message", [
    (["--bar2", "b"], "--bar2 needs --bar (the first bar is the one that gates)"),
    (["--fa-rate", "1"], "--fa-rate must lie in [0, 1)"),
    (["--fa-rate", "-0.01"], "--fa-rate must lie in [0, 1)"),
])
def test_main_refuses_usage_errors_with_exit_2(cli, capsys, args, message):
    argv, _ = cli
    with pytest.raises(SystemExit) as stop:
        assemble.main(argv + args)
    assert stop.value.code == assemble.EXIT_USAGE
    assert capsys.readouterr().err.rstrip().endswith(f"error: {message}")


def test_main_refuses_a_device_this_machine_lacks_with_exit_2(cli, capsys, monkeypatch):
    argv, _ = cli
    monkeypatch.setattr(scoring, "device_problem", lambda d: f"no {d} here")
    assert assemble.main(argv + ["--device", "cuda"]) == assemble.EXIT_USAGE
    assert capsys.readouterr().err == "hearsay assemble: no cuda here\n"


def test_main_exits_4_for_a_refused_run_and_3_for_a_missing_bundle(cli, capsys, monkeypatch,
                                                                    campaign):
    argv, _ = cli
    pin, *_ = campaign
    pin.write_text(json.dumps({**json.loads(pin.read_text()), "min_steps": 51}))
    assert assemble.main(argv) == assemble.EXIT_REFUSED
    err = capsys.readouterr().err
    assert err.startswith("hearsay assemble: refused: fold0 (") and "< min_steps 51" in err

    def no_bundle(path, verify):
        raise scoring.ScoreError(f"{path}: no bundle")

    monkeypatch.setattr(scoring, "load_bundle", no_bundle)
    assert assemble.main(argv) == assemble.EXIT_BAD_INPUT
    assert capsys.readouterr().err == f"hearsay assemble: {argv[3]}: no bundle\n"


def test_main_exits_5_when_a_check_fails_on_the_written_file(cli, capsys, campaign):
    argv, _ = cli
    pin, *_ = campaign
    assert assemble.main(argv) == assemble.EXIT_OK
    csv = score_file.per_run_dir(pin.parent) / "fold1_inner_oof.csv"
    df = score_file.read(csv)
    score_file.write(df.assign(fold="0"), score_file.read_sidecar(csv), csv)
    capsys.readouterr()
    assert assemble.main(argv) == assemble.EXIT_CHECK
    assert capsys.readouterr().err.startswith("hearsay assemble: check failed: F2: 2 inner row")
