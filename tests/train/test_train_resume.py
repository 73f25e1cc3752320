"""hearsay.train.prepare and hearsay.train.checkpoint: a resumed run equals an uninterrupted one; a
resume into another bundle or config is refused."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch
from train_world import final_weights, smoke

from hearsay import train as tr
from hearsay.train import checkpoint as ckpt


def test_resume_after_epoch_one_equals_an_uninterrupted_run(bundle_dir, tmp_path, rclone_store):
    cfg = smoke(epochs=2, batches_per_epoch=3, grad_accum=2)
    whole = tr.run(cfg, bundle_dir, tmp_path / "whole")
    part = tr.run(cfg, bundle_dir, tmp_path / "part", store_uri=rclone_store, stop_after_epoch=1)
    assert part["epochs"] == 1 and not part["complete"]
    # the box died: a new box pulls from the store into an empty run dir
    resumed = tr.run(cfg, bundle_dir, tmp_path / "new_box", store_uri=rclone_store, resume=True)
    assert resumed["resumed_from_epoch"] == 1 and resumed["complete"]
    assert resumed["steps"] == whole["steps"]
    assert resumed["history"]["loss"] == whole["history"]["loss"]
    a, b = final_weights(tmp_path / "whole"), final_weights(tmp_path / "new_box")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ck_a = ckpt.read_checkpoint(tmp_path / "whole" / "checkpoints" / "epoch_0002")
    ck_b = ckpt.read_checkpoint(tmp_path / "new_box" / "checkpoints" / "epoch_0002")
    for idx, st in ck_a.optimizer["state"].items():
        for key, v in st.items():
            assert torch.equal(v, ck_b.optimizer["state"][idx][key])
    assert (tmp_path / "remote" / "campaign/fold0/final/model.safetensors").is_file()
    assert (tmp_path / "remote" / "campaign/fold0/run_meta.json").is_file()


def test_resume_refuses_another_bundle_or_config(bundle_dir, tmp_path, capsys):
    cfg = smoke(epochs=2, batches_per_epoch=2)
    tr.run(cfg, bundle_dir, tmp_path / "run", stop_after_epoch=1)
    other = tmp_path / "bundle2"
    shutil.copytree(bundle_dir, other)
    meta = json.loads((other / "bundle_meta.json").read_text())
    meta["tree_sha"] = "0" * 64
    (other / "bundle_meta.json").write_text(json.dumps(meta))
    args = ["--fold", "0", "--out", str(tmp_path / "run"), "--cpu-smoke", "--resume",
            "--no-verify-bundle"]
    (tmp_path / "cfg.json").write_text(json.dumps({"train": {"epochs": 2,
                                                              "batches_per_epoch": 2}}))
    assert tr.main(["--bundle", str(other), *args, "--config", str(tmp_path / "cfg.json")]) == 7
    assert "bundle_tree_sha" in capsys.readouterr().err
    (tmp_path / "cfg2.json").write_text(json.dumps({"train": {"epochs": 3,
                                                               "batches_per_epoch": 2}}))
    assert tr.main(["--bundle", str(bundle_dir), *args, "--config",
                    str(tmp_path / "cfg2.json")]) == 7
    assert "config_hash" in capsys.readouterr().err
    # and a fresh start over existing checkpoints is refused too
    assert tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "run"),
                    "--cpu-smoke", "--config", str(tmp_path / "cfg.json")]) == 7


def test_two_ranks_train_read_out_checkpoint_and_resume_exactly(bundle_dir, tmp_path):
    """Two real processes (torchrun, gloo): training, a validation readout each epoch (the
    shares of both ranks all-reduced), a checkpoint holding both ranks' RNG, and a resume that
    ends where the uninterrupted run ends, on both ranks. Every collective is checked by
    device_audit: a tensor that a GPU run would hold on the host fails the run."""
    import os
    import sys
    from pathlib import Path

    torchrun = Path(sys.executable).with_name("torchrun")
    worker = Path(__file__).with_name("ddp_worker.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    res = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2", str(worker),
                          str(bundle_dir), str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for rank, got in enumerate(ranks):
        assert got["whole"]["world_size"] == 2 and got["whole"]["steps"] == 4
        assert got["part"]["steps"] == 2 and got["resumed"]["steps"] == 4
        # each rank resumes with its own logs: its loss history and its rate log
        assert got["resumed"]["loss"] == got["whole"]["loss"], rank
        assert got["resumed"]["rates"] == got["whole"]["rates"], rank
        assert [v["step"] for v in got["whole"]["val"]] == [2, 4]
        assert got["resumed"]["val"] == got["whole"]["val"]
    assert ranks[0]["resumed"]["loss"] == ranks[0]["whole"]["loss"]
    assert ranks[0]["whole"]["loss"] != ranks[1]["whole"]["loss"]  # two ranks, two shards
    assert ranks[0]["whole"]["val"] == ranks[1]["whole"]["val"]  # the same AUC on both ranks
    a, b = final_weights(tmp_path / "whole"), final_weights(tmp_path / "part")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ck = ckpt.read_checkpoint(tmp_path / "part" / "checkpoints" / "epoch_0001")
    assert {k.split(".")[0] for k in ck.rng} == {"rank0", "rank1"}
    # per-rank seeds (seed + rank): the two ranks' dropout streams differ
    assert not torch.equal(ck.rng["rank0.torch_cpu"], ck.rng["rank1.torch_cpu"])
    assert ranks[0]["whole"]["rates"] != ranks[1]["whole"]["rates"]  # each rank its own clips
    assert ck.state["world_size"] == 2


@pytest.mark.parametrize("recorded", [0, 2])
def test_resume_refuses_a_checkpoint_whose_recorded_epoch_differs_from_its_folder(
        bundle_dir, tmp_path, capsys, recorded):
    cfg = smoke(epochs=2, batches_per_epoch=2)
    tr.run(cfg, bundle_dir, tmp_path / "run", stop_after_epoch=1)
    state = tmp_path / "run" / "checkpoints" / "epoch_0001" / "state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "epoch": recorded}))
    (tmp_path / "cfg.json").write_text(json.dumps({"train": {"epochs": 2,
                                                              "batches_per_epoch": 2}}))
    rc = tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "run"),
                  "--cpu-smoke", "--resume", "--no-verify-bundle", "--config",
                  str(tmp_path / "cfg.json")])
    assert rc == 7
    assert f"epoch_0001/state.json says epoch {recorded}" in capsys.readouterr().err
