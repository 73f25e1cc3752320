"""hearsay demo's assemble stage: its gate reads the probe set that the full run scored as a box
scores it (full_probe.csv, with its set sha256), against the bar that `hearsay bar` makes
from the stand-in earlier detector; the probe is measured, never "not measured".

Hand-made runs (tiny random-init models) on a hand-made bundle stand in for the demo's training
stage: what is under test is how the stage wires the probe, not what the models learned."""

import json

from fakes.fake_runs import make_bundle, make_run

from hearsay import demo
from hearsay.contracts import score_file


def test_the_demo_gate_measures_the_probe_the_full_run_scored(tmp_path, monkeypatch):
    bundle = make_bundle(tmp_path / "bundle", n_per_fold=2, n_holdout=4, n_test=4, n_probe=4)
    for k in range(5):
        make_run(tmp_path / "runs" / f"fold{k}", fold=k, seed=k)
    make_run(tmp_path / "runs" / "full", job="full", seed=9)
    monkeypatch.setattr("hearsay.contracts.bundle.load_bundle", lambda _p, verify=False: bundle)
    ctx: dict = {}
    demo.stage_assemble(tmp_path, ctx)
    meta = json.loads(ctx["model_meta"].read_text())
    probe = tmp_path / "models" / "demo" / "scores" / "full_probe.csv"
    assert meta["probe"]["file"] == str(probe) and meta["probe"]["n"] == 2
    checked = meta["gate"]["bars"][0]["probe"]
    assert checked["outcome"] in ("pass", "fail"), checked["why"]
    side = score_file.read_sidecar(probe)
    assert checked["set_sha256"] == checked["bar_set_sha256"] == side["set_sha256"]
    bar = json.loads((tmp_path / "models" / "demo" / "bar_duration" / "meta.json").read_text())
    assert bar["picked_by"] == {"field": "train", "value": demo.LENGTH_TRAIN}
    report = ctx["report"].read_text()
    assert "probe false alarms ours" in report
    assert "probe: " not in report  # every "probe: <why>" line is a not-measured one
