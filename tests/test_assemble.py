"""hearsay.evaluate.assemble: pinned runs only, identities checked, F1-F6 bite on the written
files."""

import json
import os
import shutil
import time

import numpy as np
import pandas as pd
import pytest
from fakes.fake_runs import TREE_SHA, make_bundle, make_run

from hearsay.contracts import protocol, score_file
from hearsay.evaluate import assemble, bar, gate, readouts, score
from hearsay.util.hashing import sha256_file


def write_pin(stamp_dir, runs, min_steps=50, parity=None, name="camp", **extra):
    stamp_dir.mkdir(parents=True, exist_ok=True)
    pin = {"name": name, "bundle_tree_sha": TREE_SHA, "min_steps": min_steps, "parity": parity,
           "runs": {k: {"dir": os.path.relpath(d, stamp_dir), "config_hash": "cfg0",
                        "weights_sha256": sha256_file(d / "final" / "model.safetensors")}
                    for k, d in runs.items()}, **extra}
    path = stamp_dir / "final_runs.json"
    path.write_text(json.dumps(pin, indent=2))
    return path


@pytest.fixture(scope="module")
def camp(tmp_path_factory):
    root = tmp_path_factory.mktemp("camp")
    bundle = make_bundle(root / "bundle", n_per_fold=2, n_holdout=4, n_test=4)
    runs = {f"fold{k}": make_run(root / "runs" / f"fold{k}", fold=k, seed=k) for k in range(5)}
    runs["full"] = make_run(root / "runs" / "full", job="full", seed=9)
    pin = write_pin(root / "models" / "s1", runs)
    done = assemble.assemble(pin, bundle, root / "outputs")
    return root, bundle, runs, pin, done


def reread(done):
    return pd.read_csv(done["scores_csv"], dtype={"fold": str, "path": str})


def run_checks(df, camp, pin=None):
    _, bundle, _, pin0, done = camp
    m = bundle.manifest
    assemble.check_f1_counts(df, m)
    assemble.check_f2_inner_provenance(df, m, done["files"], done["metas"])
    assemble.check_f3_unique(df)
    assemble.check_f4_test_order(df, m)
    assemble.check_f5_scores(df)
    assemble.check_f6_parity(pin or assemble.load_pin(pin0))


def test_assembled_file_has_every_core_row_once_and_passes_f1_to_f6(camp):
    _, bundle, _, _, done = camp
    df = reread(done)
    assert list(df.columns) == score_file.COLUMNS
    m = bundle.manifest
    core = m[m["train_scope"] == "core"]
    assert sorted(df["path"]) == sorted(core["path"])  # extra rows never scored
    assert df["split"].value_counts().to_dict() == {"inner_oof": 10, "holdout": 4, "test": 4}
    run_checks(df, camp)


def test_f1_fails_when_a_row_is_missing(camp):
    df = reread(camp[4])
    with pytest.raises(assemble.CheckFailed, match="F1"):
        run_checks(df.drop(index=df.index[df["split"] == "holdout"][0]), camp)


def test_f2_fails_when_an_inner_row_is_scored_by_another_model(camp):
    df = reread(camp[4])
    i = df.index[df["split"] == "inner_oof"][0]
    df.loc[i, ["logit", "score"]] = [df.loc[i, "logit"] + 0.5, 0.0]
    df.loc[i, "score"] = 1 / (1 + pow(2.718281828459045, -df.loc[i, "logit"]))
    with pytest.raises(assemble.CheckFailed, match="F2.*not the fold model"):
        run_checks(df, camp)


def test_f2_fails_when_a_row_carries_the_wrong_fold(camp):
    df = reread(camp[4])
    i = df.index[df["split"] == "inner_oof"][0]
    df.loc[i, "fold"] = "4" if df.loc[i, "fold"] != "4" else "3"
    with pytest.raises(assemble.CheckFailed, match="F2"):
        run_checks(df, camp)


def test_f2_fails_when_the_model_that_trained_on_a_row_scored_it(camp, tmp_path):
    _, bundle, _, _, done = camp
    files = {k: dict(v) for k, v in done["files"].items()}
    # the fold-1 model's file claims a fold-0 row: that model trained on fold 0
    f0 = pd.read_csv(files["fold0"][("inner_oof", False)], dtype={"fold": str})
    f1 = pd.read_csv(files["fold1"][("inner_oof", False)], dtype={"fold": str})
    moved = f0.iloc[:1]
    f0.iloc[1:].to_csv(tmp_path / "f0.csv", index=False)
    pd.concat([f1, moved]).to_csv(tmp_path / "f1.csv", index=False)
    files["fold0"][("inner_oof", False)] = tmp_path / "f0.csv"
    files["fold1"][("inner_oof", False)] = tmp_path / "f1.csv"
    with pytest.raises(assemble.CheckFailed, match="F2.*trained on it"):
        assemble.check_f2_inner_provenance(reread(done), bundle.manifest, files, done["metas"])


def test_f3_fails_on_a_duplicate_path(camp):
    df = reread(camp[4])
    t = df.index[df["split"] == "test"]
    df.loc[t[1], "path"] = df.loc[t[0], "path"]
    with pytest.raises(assemble.CheckFailed, match="F3"):
        assemble.check_f3_unique(df)
    assemble.check_f3_unique(reread(camp[4]))


def test_f4_fails_when_test_rows_leave_manifest_order(camp):
    df = reread(camp[4])
    t = list(df.index[df["split"] == "test"])
    df.loc[[t[0], t[1]]] = df.loc[[t[1], t[0]]].to_numpy()
    with pytest.raises(assemble.CheckFailed, match="F4"):
        run_checks(df, camp)


@pytest.mark.parametrize("score_value, logit_shift", [(1.5, 0.0), (float("nan"), 0.0),
                                                      (None, 0.3)])
def test_f5_fails_on_bad_or_inconsistent_scores(camp, score_value, logit_shift):
    df = reread(camp[4])
    i = df.index[df["split"] == "test"][0]
    if score_value is not None:
        df.loc[i, "score"] = score_value
    df.loc[i, "logit"] += logit_shift
    with pytest.raises(assemble.CheckFailed, match="F5"):
        assemble.check_f5_scores(df)


def test_f6_requires_a_passed_parity_record_when_pinned(camp, tmp_path):
    pin = assemble.load_pin(camp[3])
    pin["parity"] = {"file": tmp_path / "parity.json", "require": ["parity_a"]}
    with pytest.raises(assemble.CheckFailed, match="F6.*missing"):
        assemble.check_f6_parity(pin)
    (tmp_path / "parity.json").write_text(json.dumps({"parity_a": {"passed": False}}))
    with pytest.raises(assemble.CheckFailed, match="F6.*not passed"):
        assemble.check_f6_parity(pin)
    (tmp_path / "parity.json").write_text(json.dumps({"parity_a": {"passed": True}}))
    assert assemble.check_f6_parity(pin) == {"parity_a": {"passed": True}}


def test_a_newer_shorter_diagnostic_run_never_replaces_a_pinned_one(camp, tmp_path):
    root, bundle, runs, pin, done = camp
    before = reread(done)
    diag = make_run(root / "runs" / "fold0_diag", fold=0, seed=77, steps=3)
    future = time.time() + 3600
    os.utime(diag / "run_meta.json", (future, future))
    os.utime(diag, (future, future))
    again = assemble.assemble(pin, bundle, tmp_path / "out")  # the same pin: the same scores
    pd.testing.assert_frame_equal(reread(again), before)
    # pinning the diagnostic run by hand is refused: too few steps
    spec = dict(runs, fold0=diag)
    bad_pin = write_pin(tmp_path / "models" / "s2", spec)
    with pytest.raises(assemble.PinError, match="steps 3 < min_steps"):
        assemble.assemble(bad_pin, bundle, tmp_path / "out2")
    # copying its weights over the pinned run's is caught by the pinned sha256
    shadow = tmp_path / "shadow"
    shutil.copytree(runs["fold0"], shadow)
    shutil.copy(diag / "final" / "model.safetensors", shadow / "final" / "model.safetensors")
    good = json.loads(pin.read_text())
    good["runs"]["fold0"]["dir"] = str(shadow)
    (tmp_path / "p.json").write_text(json.dumps(good))
    with pytest.raises(assemble.PinError, match="sha256"):
        assemble.assemble(tmp_path / "p.json", bundle, tmp_path / "out3")


@pytest.mark.parametrize("field, value, match", [
    ("config_hash", "other", "config_hash"),
    ("fold", 3, "fold 3"),
    ("bundle_tree_sha", "x" * 40, "bundle_tree_sha"),
    ("complete", False, "not complete"),
])
def test_pinned_run_identity_is_validated(camp, tmp_path, field, value, match):
    root, _, runs, pin, _ = camp
    run = tmp_path / "run"
    shutil.copytree(runs["fold0"], run)
    meta = json.loads((run / "run_meta.json").read_text())
    meta[field] = value
    (run / "run_meta.json").write_text(json.dumps(meta))
    p = assemble.load_pin(pin)
    p["runs"]["fold0"]["dir"] = run
    with pytest.raises(assemble.PinError, match=match):
        assemble.validate_run("fold0", p["runs"]["fold0"], p)


def test_pin_file_with_unknown_key_or_missing_run_is_refused(camp, tmp_path):
    pin = json.loads(camp[3].read_text())
    (tmp_path / "a.json").write_text(json.dumps({**pin, "latest": True}))
    with pytest.raises(assemble.PinError, match="unknown keys"):
        assemble.load_pin(tmp_path / "a.json")
    del pin["runs"]["fold3"]
    (tmp_path / "b.json").write_text(json.dumps(pin))
    with pytest.raises(assemble.PinError, match="runs must be exactly"):
        assemble.load_pin(tmp_path / "b.json")


def test_cached_run_scores_are_reused_only_when_their_sidecar_matches(camp):
    _, bundle, _, pin, done = camp
    csv = done["files"]["full"][("test", False)]
    side = json.loads(score_file.sidecar(csv).read_text())
    side["weights_sha256"] = "0" * 64
    score_file.sidecar(csv).write_text(json.dumps(side))
    p = assemble.load_pin(pin)
    assemble.run_scores(bundle, p, "full", score.ScoreConfig())  # rescored, sidecar rewritten
    assert json.loads(score_file.sidecar(csv).read_text())["weights_sha256"] == \
        p["runs"]["full"]["weights_sha256"]


def test_cli_assembles_and_reports(camp, tmp_path, monkeypatch, capsys):
    root, bundle, runs, pin, _ = camp
    monkeypatch.setattr(score, "load_bundle", lambda _p, verify: bundle)
    rc = assemble.main(["--pinned", str(pin), "--bundle", str(bundle.root),
                        "--outputs", str(tmp_path / "o"), "--reports", str(tmp_path / "r"),
                        "--ledger", str(tmp_path / "no_ledger.csv")])
    assert rc == 0, capsys.readouterr().err
    meta = json.loads((pin.parent / "meta.json").read_text())
    assert meta["gate"]["outcome"] == "not measured" and meta["spend"]["status"] == "unknown"
    for key, run in runs.items():  # each run's layer-weight readout, carried from its run_meta
        assert meta["layer_weights"][key] == json.loads(
            (run / "run_meta.json").read_text())["layer_weights"]
    assert (tmp_path / "r" / "s1.md").is_file()
    assert (tmp_path / "o" / "detector_scores" / "camp.csv").is_file()
    bad = json.loads(pin.read_text())
    bad["min_steps"] = 10**6
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    rc = assemble.main(["--pinned", str(tmp_path / "bad.json"), "--bundle", str(bundle.root),
                        "--outputs", str(tmp_path / "o"), "--reports", str(tmp_path / "r")])
    assert rc == 4


def test_assembly_refuses_a_bundle_other_than_the_pinned_one(camp, tmp_path, monkeypatch,
                                                             capsys):
    # every run's run_meta matches the pin; only the bundle handed to assemble is another one
    root, bundle, _, pin, _ = camp
    other = make_bundle(tmp_path / "other", n_per_fold=2, n_holdout=4, n_test=4, seed=5)
    other.tree_sha = other.meta["tree_sha"] = "u" * 40
    with pytest.raises(assemble.PinError, match="bundle tree-sha u{40} differs from the pinned"):
        assemble.assemble(pin, other, tmp_path / "out")
    assert not (tmp_path / "out" / "detector_scores").exists()
    monkeypatch.setattr(score, "load_bundle", lambda _p, verify: other)
    rc = assemble.main(["--pinned", str(pin), "--bundle", str(other.root),
                        "--outputs", str(tmp_path / "o"), "--reports", str(tmp_path / "r")])
    assert rc == assemble.EXIT_REFUSED
    assert "assemble with the bundle the runs used" in capsys.readouterr().err


def test_the_codec_readout_scores_every_codec_on_the_same_holdout_rows(camp):
    root, bundle, _, pin, done = camp
    panel = pd.read_csv(done["files"]["full"][("holdout", "codecs")], dtype={"fold": str})
    rows, codecs = readouts.codec_panel_rows(bundle.manifest)
    assert codecs == ["mp3"] and len(rows) == 4
    for c in codecs:
        assert sorted(panel.loc[panel["codec"] == c, "path"]) == sorted(rows["path"])
    clean = pd.read_csv(done["files"]["full"][("holdout", False)])
    assert not np.allclose(panel.sort_values("path")["logit"],
                           clean.sort_values("path")["logit"])  # the codec copies were scored
    # a row without every codec copy leaves the readout for all codecs alike
    m = bundle.manifest.copy()
    m.loc[m.index[m["fold"] == "holdout"][0], "codec_ids"] = ""
    assert len(readouts.codec_panel_rows(m)[0]) == 3


def test_a_campaign_folder_written_by_assemble_is_a_bar_for_the_next(camp, tmp_path,
                                                                     monkeypatch, capsys):
    root, bundle, _, pin, _ = camp
    monkeypatch.setattr(score, "load_bundle", lambda _p, verify: bundle)
    probe = tmp_path / "probe.csv"
    pd.DataFrame({"path": ["w0", "w1"], "logit": [-5.0, 5.0]}).to_csv(probe, index=False)
    common = ["--pinned", str(pin), "--bundle", str(bundle.root), "--probe", str(probe),
              "--outputs", str(tmp_path / "o"), "--reports", str(tmp_path / "r"),
              "--ledger", str(tmp_path / "no_ledger.csv")]
    assert assemble.main(common) == 0, capsys.readouterr().err
    first = json.loads((pin.parent / "meta.json").read_text())
    assert first["probe"]["set_sha256"] and first["probe"]["false_alarm_rate"] is not None
    shutil.copytree(pin.parent, tmp_path / "earlier")  # the earlier campaign's models/<stamp>/
    assert assemble.main(common + ["--bar", str(tmp_path / "earlier"),
                                   "--bar2", str(tmp_path / "earlier")]) == 0
    g = json.loads((pin.parent / "meta.json").read_text())["gate"]
    assert [b["name"] for b in g["bars"]] == ["camp", "camp"]
    # the same scores are no better than themselves; the probe rate equals the bar's own
    assert g["bars"][0]["stages"]["holdout"]["outcome"] == "fail"
    assert g["bars"][0]["probe"]["outcome"] == "pass" and g["outcome"] == "fail"
    with pytest.raises(SystemExit) as exit_:
        assemble.main(common + ["--bar2", str(tmp_path / "earlier")])
    assert exit_.value.code == 2


def test_an_assembled_score_file_becomes_a_bar_picked_by_its_train_field(camp, tmp_path):
    root, bundle, _, _, done = camp
    earlier = tmp_path / "earlier" / "camp"
    earlier.mkdir(parents=True)
    (earlier / "meta.json").write_text(json.dumps({"name": "camp", "train": "demo-folds",
                                                   "scores_csv": str(done["scores_csv"])}))
    made = bar.build([tmp_path / "earlier"], "train", "demo-folds", bundle.manifest,
                     tmp_path / "bar")
    assert made["holdout"]["n"] == 4 and made["inner"]["n"] == 10
    loaded = gate.load_bar(tmp_path / "bar")
    assert loaded["why"] is None
    assert sorted(loaded["scores"]["path"]) == sorted(
        done["scores"].loc[done["scores"]["split"] != "test", "path"])


def test_the_holdout_is_also_scored_at_test_length_crops_and_whole_up_to_14s(camp):
    root, bundle, _, pin, done = camp
    full = done["files"]["full"]
    clean = pd.read_csv(full[("holdout", False)])
    for variant in ("test_length", "whole"):
        df = pd.read_csv(full[("holdout", variant)])
        assert list(df["path"]) == list(clean["path"])
    side = json.loads(score_file.sidecar(full[("holdout", "whole")]).read_text())
    assert side["config"]["max_s"] == readouts.WHOLE_MAX_S == 14.0
    rows = protocol.split_rows(bundle.manifest, "holdout")
    test = protocol.split_rows(bundle.manifest, "test")["duration"].astype(float).to_numpy()
    a = readouts.test_length_inputs(bundle.root, rows, test)
    b = readouts.test_length_inputs(bundle.root, rows, test)  # fixed seed: the same crops
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert max(len(x) for x in a) <= int(round(test.max() * 16000)) + 1
    c = readouts.test_length_inputs(bundle.root, rows, test, seed=1)
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize("spec", [{}, {"require": None}, {"require": []},
                                  {"require": ["parity_b"]}])
def test_a_pin_without_parity_a_in_its_require_list_still_needs_parity_a(tmp_path, spec):
    pin = {"parity": {"file": tmp_path / "parity.json", **spec},
           "runs": {"full": {"weights_sha256": "a" * 64}}}
    (tmp_path / "parity.json").write_text(json.dumps({"parity_b": {"passed": True}}))
    with pytest.raises(assemble.CheckFailed, match="F6.*parity_a absent or not passed"):
        assemble.check_f6_parity(pin)
    (tmp_path / "parity.json").write_text(json.dumps({"parity_a": {"passed": False},
                                                      "parity_b": {"passed": True}}))
    with pytest.raises(assemble.CheckFailed, match="F6.*parity_a absent or not passed"):
        assemble.check_f6_parity(pin)
    ok = {"parity_a": {"passed": True}, "parity_b": {"passed": True}}
    (tmp_path / "parity.json").write_text(json.dumps(ok))
    assert assemble.check_f6_parity(pin) == ok
