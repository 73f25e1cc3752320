"""hearsay score-run: a run scores its own rows (the box's files are assemble's, byte for byte),
assemble reuses them (rescored_here 0), refuses a file of other weights or another bundle,
--rescore scores all; parity B from the box's recorded logits; every box's probe set (its own
fold, never exported), the full box's read by assemble's gate."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from fakes.fake_runs import make_bundle, make_run
from test_assemble import write_pin

from hearsay.contracts import parity_b, score_file
from hearsay.evaluate import assemble, bar, gate, parity_record, probe_set, score, score_run
from hearsay.export import parity
from hearsay.export.onnx_export import main as export_main
from hearsay.util.hashing import sha256_file

KEYS = ("fold0", "fold1", "fold2", "fold3", "fold4", "full")


@pytest.fixture(scope="module")
def boxes(tmp_path_factory):
    """Six runs, each scored "on its box" by score-run into its own RUN/scores/, then gathered
    into models/box/scores/ as runner/collect.sh does; a second stamp assembled from nothing."""
    root = tmp_path_factory.mktemp("boxes")
    bundle = make_bundle(root / "bundle", n_per_fold=2, n_holdout=4, n_test=4, n_probe=4)
    runs = {f"fold{k}": make_run(root / "runs" / f"fold{k}", fold=k, seed=k) for k in range(5)}
    runs["full"] = make_run(root / "runs" / "full", job="full", seed=9)
    (root / "models" / "box" / "scores").mkdir(parents=True)
    for key, run in runs.items():
        argv = ["--run", str(run), "--bundle", str(bundle.root), "--out", str(run / "scores")]
        if key == "full":
            argv += ["--parity-clips", "4"]
        with pytest.MonkeyPatch.context() as mp:  # the hand-made bundle, as loaded
            mp.setattr(score, "load_bundle", lambda _p, verify=False: bundle)
            assert score_run.main(argv) == 0
        for f in (run / "scores").iterdir():
            shutil.copy(f, root / "models" / "box" / "scores" / f.name)
    return root, bundle, runs


@pytest.fixture(autouse=True)
def real_bundle_loader(boxes, monkeypatch):
    monkeypatch.setattr(score, "load_bundle", lambda _p, verify=False: boxes[1])
    monkeypatch.setattr("hearsay.contracts.bundle.load_bundle", lambda _p, verify=False: boxes[1])


def test_box_files_are_byte_for_byte_what_assemble_writes_and_are_reused(boxes):
    root, bundle, runs = boxes
    here = assemble.assemble(write_pin(root / "models" / "laptop", runs), bundle, root / "o1")
    assert here["scoring"]["rescored_here"] > 0 and here["scoring"]["files_reused"] == 0
    box = assemble.assemble(write_pin(root / "models" / "box", runs), bundle, root / "o2")
    assert box["scoring"]["rescored_here"] == 0 and box["scoring"]["files_scored_here"] == {}
    assert box["scoring"]["files_reused"] == 17  # two per fold run, seven of the full run
    m, df = bundle.manifest, box["scores"]
    assert "probe" not in set(df["split"])  # the probe is its own fold, never exported
    assert df.loc[df["split"] == "test", "path"].tolist() == \
        m.loc[m["fold"] == "test", "path"].tolist()  # the sponsor's test set, in its order
    for key in KEYS:
        for (split, aug), csv in here["files"][key].items():
            other = box["files"][key][(split, aug)]
            assert csv.read_bytes() == other.read_bytes(), csv.name
            a, b = (json.loads(score_file.sidecar(p).read_text()) for p in (csv, other))
            assert {**a, "run": ""} == {**b, "run": ""}, csv.name
            assert b["config"]["device"] == "cpu" and b["config"]["precision"] == "fp32"


def test_a_box_file_of_other_weights_or_bundle_is_refused_and_rescored_saying_why(boxes, capsys):
    root, bundle, runs = boxes
    stamp = root / "models" / "tampered"
    shutil.copytree(root / "models" / "box" / "scores", stamp / "scores")
    for name, field in (("full_test.csv", "weights_sha256"), ("fold3_inner_oof.csv",
                                                              "bundle_tree_sha")):
        side = score_file.sidecar(stamp / "scores" / name)
        side.write_text(json.dumps({**json.loads(side.read_text()), field: "0" * 40}))
    done = assemble.assemble(write_pin(stamp, runs), bundle, root / "o3")
    got = done["scoring"]["files_scored_here"]
    assert set(got) == {"full_test.csv", "fold3_inner_oof.csv"}
    assert "weights_sha256 '0000" in got["full_test.csv"]
    assert "bundle_tree_sha '0000" in got["fold3_inner_oof.csv"]
    assert done["scoring"]["rescored_here"] == 4 + 2  # 4 test rows, 2 rows of fold 3
    assert "scoring full_test.csv here (sidecar names weights_sha256" in capsys.readouterr().err


def test_rescore_scores_every_file_here_and_meta_json_counts_them(boxes, tmp_path, capsys):
    root, bundle, runs = boxes
    stamp = root / "models" / "forced"
    shutil.copytree(root / "models" / "box" / "scores", stamp / "scores")
    common = ["--pinned", str(write_pin(stamp, runs)), "--bundle", str(bundle.root),
              "--outputs", str(tmp_path / "o"), "--reports", str(tmp_path / "r"),
              "--ledger", str(tmp_path / "none.csv")]
    assert assemble.main(common) == 0
    assert json.loads((stamp / "meta.json").read_text())["rescored_here"] == 0
    assert "rescored_here 0 rows in 0 file(s); 17 file(s) reused" in capsys.readouterr().out
    assert assemble.main([*common, "--rescore"]) == 0
    meta = json.loads((stamp / "meta.json").read_text())
    assert meta["rescored_here"] > 0 and len(meta["scoring"]["files_scored_here"]) == 17
    assert set(meta["scoring"]["files_scored_here"].values()) == {"--rescore"}


def test_a_relaunched_box_keeps_its_scores_and_a_pilot_is_refused(boxes, tmp_path, capsys):
    root, bundle, runs = boxes
    out = runs["fold2"] / "scores"
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert score_run.main(["--run", str(runs["fold2"]), "--bundle", str(bundle.root),
                           "--out", str(out)]) == 0
    assert "0 file(s) scored (0 rows), 2 kept" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    pilot = make_run(tmp_path / "pilot", job="pilot", fold=4)
    assert score_run.main(["--run", str(pilot), "--bundle", str(bundle.root),
                           "--out", str(tmp_path / "s")]) == score_run.EXIT_REFUSED


def test_the_trainer_device_and_precision_are_the_scorers(tmp_path):
    run = make_run(tmp_path / "r", job="full")
    assert (score_run.trainer_config(run).device, score_run.trainer_config(run).precision) == \
        ("cpu", "fp32")
    meta = json.loads((run / "run_meta.json").read_text())
    (run / "run_meta.json").write_text(json.dumps({**meta, "device": "NVIDIA H200"}))
    conf = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**conf, "train": {"bf16": True}}))
    cfg = score_run.trainer_config(run)
    assert (cfg.device, cfg.precision) == ("cuda", "bf16")
    (run / "config.json").write_text(json.dumps({**conf, "train": {"bf16": False}}))
    assert score_run.trainer_config(run).precision == "fp32"


@pytest.fixture(scope="module")
def exported(boxes, tmp_path_factory):
    root, _, runs = boxes
    out = tmp_path_factory.mktemp("export") / "model"
    assert export_main(["onnx", str(runs["full"]), "--out", str(out), "--no-int8"]) == 0
    return out


def test_parity_b_from_the_box_logits_passes_and_is_written(boxes, exported, capsys):
    root, bundle, _ = boxes
    box = root / "models" / "box" / "scores" / score_run.PARITY_FILE
    data = json.loads(box.read_text())
    assert data["precision"] == "fp32" and data["device"] == "cpu" and len(data["clips"]) == 4
    rc = parity.main([str(exported), "--box-logits", str(box), "--bundle", str(bundle.root)])
    assert rc == parity.EXIT_OK, capsys.readouterr().err
    got = json.loads((exported / "parity.json").read_text())["parity_b"]
    assert got["passed"] is True and got["clips"] == 4 and got["inputs_identical"] == 4
    assert got["box_precision"] == "fp32" and got["box_vs_ort"]["max_abs_dlogit"] < 1e-3


def test_parity_b_from_box_logits_fails_on_a_gap_and_refuses_another_checkpoint(
        boxes, exported, tmp_path, capsys):
    root, bundle, _ = boxes
    data = json.loads((root / "models" / "box" / "scores" / score_run.PARITY_FILE).read_text())
    bad = {**data, "logits": list(np.asarray(data["logits"]) + [0.0, 0.0, 0.0, 0.1])}
    (tmp_path / "gap.json").write_text(json.dumps(bad))
    argv = [str(exported), "--bundle", str(bundle.root), "--box-logits"]
    assert parity.main([*argv, str(tmp_path / "gap.json")]) == parity.EXIT_GATE
    assert json.loads((exported / "parity.json").read_text())["parity_b"]["passed"] is False
    (tmp_path / "other.json").write_text(json.dumps({**data, "checkpoint_sha256": "f" * 64}))
    assert parity.main([*argv, str(tmp_path / "other.json")]) == parity.EXIT_MODEL
    assert "export the run the box scored" in capsys.readouterr().err


def test_parity_clips_are_the_long_test_rows_first_in_manifest_order(boxes):
    _, bundle, _ = boxes
    m = bundle.manifest.copy()
    test = m.index[m["fold"] == "test"]
    m.loc[test, "duration"] = [1.0, 4.0, 2.0, 5.0]
    got = list(parity_b.parity_rows(m, 3)["id"])
    assert got == list(m.loc[test[[1, 3, 0]], "id"])


def test_f6_checks_the_export_is_of_the_pinned_full_run_and_honours_a_waiver(boxes, tmp_path):
    root, _, runs = boxes
    pin = assemble.load_pin(write_pin(tmp_path / "s", runs))
    pin["parity"] = {"file": tmp_path / "parity.json", "require": ["parity_a", "parity_b"]}
    ok = {"parity_a": {"passed": True}, "parity_b": {"passed": True}}
    (tmp_path / "parity.json").write_text(json.dumps({**ok, "checkpoint_sha256": "e" * 64}))
    with pytest.raises(assemble.CheckFailed, match="F6.*not the pinned full run"):
        assemble.check_f6_parity(pin)
    want = pin["runs"]["full"]["weights_sha256"]
    (tmp_path / "parity.json").write_text(json.dumps({**ok, "checkpoint_sha256": want}))
    assert assemble.check_f6_parity(pin)["checkpoint_sha256"] == want
    pin["parity"] = {"waived": "operator: --no-parity"}
    assert assemble.check_f6_parity(pin) == {"waived": "operator: --no-parity"}


def test_a_box_logits_file_scored_on_another_bundle_is_refused(boxes, exported, tmp_path,
                                                               capsys):
    root, bundle, _ = boxes
    data = json.loads((root / "models" / "box" / "scores" / score_run.PARITY_FILE).read_text())
    before = json.loads((exported / "parity.json").read_text()).get("parity_b")
    (tmp_path / "b.json").write_text(json.dumps({**data, "bundle_tree_sha": "0" * 40}))
    rc = parity.main([str(exported), "--bundle", str(bundle.root), "--box-logits",
                      str(tmp_path / "b.json")])
    assert rc == parity.EXIT_MODEL
    assert f"was scored on bundle {'0' * 40}, this bundle is {bundle.tree_sha}" in \
        capsys.readouterr().err
    assert json.loads((exported / "parity.json").read_text()).get("parity_b") == before


def test_a_box_parity_record_of_another_precision_or_bundle_is_not_reused(boxes, tmp_path):
    root, bundle, runs = boxes
    data = json.loads((root / "models" / "box" / "scores" / score_run.PARITY_FILE).read_text())
    cfg = score_run.trainer_config(runs["full"])
    assert cfg.precision == "fp32"
    out = tmp_path / score_run.PARITY_FILE
    marked = {**data, "logits": [9.0] * len(data["logits"])}  # a reused file keeps the 9s
    out.write_text(json.dumps(marked))
    assert parity_record.record(bundle, runs["full"], out, 4, cfg)["logits"] == marked["logits"]
    for stale in ({"precision": "bf16"}, {"bundle_tree_sha": "0" * 40}):
        out.write_text(json.dumps({**marked, **stale}))
        got = parity_record.record(bundle, runs["full"], out, 4, cfg)
        assert got["logits"] == pytest.approx(data["logits"]) and got["precision"] == "fp32"
        assert got["bundle_tree_sha"] == bundle.tree_sha
        assert json.loads(out.read_text()) == got


# --------------------------------------------------------------------------- the probe set


@pytest.mark.parametrize("key", KEYS)
def test_every_box_scores_the_probe_folds_bona_fide_clips_with_its_own_model(boxes, key):
    root, bundle, runs = boxes
    csv = root / "models" / "box" / "scores" / probe_set.file_name(key)
    assert csv.name == f"{key}_probe.csv"
    probe, side = score_file.read(csv), score_file.read_sidecar(csv)
    m = bundle.manifest
    want = m.loc[(m["fold"] == "probe") & (m["label"] == "bonafide"), "path"].tolist()
    assert probe["path"].tolist() == want and len(want) == 2  # bona fide only, manifest order
    assert set(probe["split"]) == {"probe"} and not set(want) & set(
        m.loc[m["fold"] == "test", "path"])  # its own fold: the test split is untouched
    assert side["set_sha256"] == gate.probe_set_sha(probe)
    assert side["augmented"] is False and side["split"] == "probe" and side["n_rows"] == 2
    assert side["sources"] == m.loc[m["path"].isin(want), "source"].value_counts().to_dict()
    assert side["weights_sha256"] == sha256_file(runs[key] / "final" / "model.safetensors")
    # the out-of-fold front end: the logits `hearsay score` gives the same rows with this run
    same, _ = score.score_split(bundle, runs[key], "probe", None, score.ScoreConfig())
    same = same.set_index("path").loc[want, "logit"].to_numpy()
    np.testing.assert_allclose(probe["logit"].to_numpy(), same, rtol=0, atol=1e-5)


def test_assemble_reads_the_box_probe_by_default_and_the_gate_measures_it(boxes, tmp_path):
    root, bundle, runs = boxes
    stamp = tmp_path / "models" / "gated"
    shutil.copytree(root / "models" / "box" / "scores", stamp / "scores")
    pin = write_pin(stamp, runs)
    done = assemble.assemble(pin, bundle, tmp_path / "o0")
    earlier = tmp_path / "earlier" / "old"  # a stand-in earlier detector: our scores, shifted
    earlier.mkdir(parents=True)
    probe_csv = stamp / "scores" / probe_set.file_name()
    old = pd.concat([done["scores"], score_file.read(probe_csv)]).drop_duplicates("path")
    old.assign(logit=old["logit"] + 0.5).to_csv(earlier / "scores.csv", index=False)
    (earlier / "meta.json").write_text(json.dumps({"train": "old"}))
    bar.build([tmp_path / "earlier"], "train", "old", bundle.manifest, tmp_path / "bar1",
              probe=probe_csv)
    common = ["--pinned", str(pin), "--bundle", str(bundle.root), "--outputs",
              str(tmp_path / "o"), "--reports", str(tmp_path / "r"), "--ledger",
              str(tmp_path / "none.csv"), "--bar", str(tmp_path / "bar1")]
    assert assemble.main(common) == 0  # no --probe: the box's file
    meta = json.loads((stamp / "meta.json").read_text())
    assert meta["probe"]["file"] == str(probe_csv) and meta["probe"]["n"] == 2
    checked = meta["gate"]["bars"][0]["probe"]
    assert checked["outcome"] in ("pass", "fail"), checked["why"]
    assert checked["set_sha256"] == score_file.read_sidecar(probe_csv)["set_sha256"]
    noise = meta["gate"]["noise"]  # the margin read against its paired bootstrap and the band
    assert noise["verdict"] in ("within noise", "beyond noise") and noise["band"] == 0.15
    report_md = (tmp_path / "r" / "gated.md").read_text()
    assert f"**Margin against noise: {noise['verdict']}**" in report_md


def test_a_probe_file_cut_after_scoring_is_refused_naming_the_fix(boxes, tmp_path):
    root, _, _ = boxes
    csv = tmp_path / probe_set.file_name()
    shutil.copy(root / "models" / "box" / "scores" / csv.name, csv)
    shutil.copy(score_file.sidecar(root / "models" / "box" / "scores" / csv.name),
                score_file.sidecar(csv))
    assert len(probe_set.read(csv)) == 2
    score_file.write_csv(score_file.read(csv).iloc[:1], csv)
    with pytest.raises(ValueError, match="its sidecar names the probe set .*score it again"):
        probe_set.read(csv)
