"""`hearsay train --resume auto`: what a rented box runs for every launch of a job. The first
launch starts fresh, a relaunch continues from the store's latest complete checkpoint; the bare
`--resume` keeps refusing a store with no checkpoint (exit 7)."""

from __future__ import annotations

import json

from hearsay import train as tr
from hearsay.train import config as tcfg


def _args(bundle, out, store, resume):
    return ["--bundle", str(bundle), "--fold", "0", "--out", str(out), "--store", str(store),
            "--cpu-smoke", "--no-verify-bundle", *resume]


def test_resume_auto_starts_fresh_then_continues_a_killed_run(demo_bundle, tmp_path, capsys):
    store = tmp_path / "store"
    assert tr.main(_args(demo_bundle.root, tmp_path / "box1", store, ["--resume"])) == 7
    assert "no checkpoint" in capsys.readouterr().err
    assert tr.main(_args(demo_bundle.root, tmp_path / "box1", store, ["--resume", "auto"])) == 0
    first = json.loads((tmp_path / "box1" / "run_meta.json").read_text())
    assert first["complete"] and first["resumed_from_epoch"] is None

    # a box killed after epoch 1 of another job's store; the relaunch resumes it
    cfg = tcfg.resolve_config("fold", 0, cpu_smoke=True)
    tr.run(cfg, demo_bundle.root, tmp_path / "box2", store_uri=str(tmp_path / "store2"),
           verify_bundle=False, stop_after_epoch=1)
    out = tmp_path / "box3"
    assert tr.main(_args(demo_bundle.root, out, tmp_path / "store2", ["--resume", "auto"])) == 0
    meta = json.loads((out / "run_meta.json").read_text())
    assert meta["complete"] and meta["resumed_from_epoch"] == 1
    assert meta["steps"] == first["steps"]
