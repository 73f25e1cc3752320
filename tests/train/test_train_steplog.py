"""hearsay.train.steplog: the per-step log on stdout, in RUN_DIR/train_log.csv and as
progress.json pushed to the store, with the real learning rates and the grad norms."""

from __future__ import annotations

import csv
import json
import time
import types
from pathlib import Path

import pytest
import torch
from train_world import smoke

from hearsay import train as tr
from hearsay.contracts import run_dir
from hearsay.train import steplog
from hearsay.train.step import lr_multiplier
from hearsay.util import progress


def _rows(run: Path, kind: str = "step") -> list[dict]:
    with (run / run_dir.TRAIN_LOG).open() as f:
        return [r for r in csv.DictReader(f) if r["kind"] == kind]


def _scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} of the TensorBoard event files in `run`, as TensorBoard
    reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run))
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_a_run_logs_every_n_steps_with_the_real_learning_rates(bundle_dir, tmp_path, capsys,
                                                               rclone_store):
    # 2 epochs x 4 steps; a line at the first step, every 3rd step and the last one
    cfg = smoke(log_every=3, log_every_s=0.0, lr_floor=0.1)
    run = tmp_path / "run"
    meta = tr.run(cfg, bundle_dir, run, store_uri=rclone_store)
    out = capsys.readouterr().out.splitlines()
    lines = [x for x in out if x.startswith("hearsay train: fold0 step")]  # the run's name
    assert [x.split()[4] for x in lines] == ["1/8", "3/8", "6/8", "8/8"]
    rows = _rows(run)
    assert tuple(rows[0]) == steplog.COLUMNS
    assert [int(r["step"]) for r in rows] == [1, 3, 6, 8]
    tc = cfg["train"]
    for r in rows:  # the optimiser's LR at that step: peak x schedule, not the schedule factor
        mult = lr_multiplier(int(r["step"]) - 1, 8, tc["warmup_frac"], tc["lr_floor"])
        assert float(r["lr_head"]) == pytest.approx(tc["lr_head"] * mult)
        assert float(r["lr_backbone"]) == pytest.approx(tc["lr_backbone"] * mult)
        assert float(r["clips_per_s"]) > 0 and float(r["audio_s_per_s"]) > 0
        assert 0 <= float(r["padded_share"]) < 1 and r["gpu_mem_gib"] == ""  # CPU run
    assert f"lr_head {tc['lr_head'] * 0.1:.2e}" in lines[-1]  # the floor at the last step
    assert float(rows[-1]["eta_s"]) == 0 and float(rows[0]["eta_s"]) > 0
    # loss and grad norm: the means of the steps landed since the previous line (a step's
    # values land at the next step: the line at step 8 has steps 6 and 7, indices 5 and 6)
    hist = meta["history"]
    assert len(hist["grad_norm"]) == len(hist["loss"]) == 8
    assert float(rows[-1]["loss"]) == pytest.approx(sum(hist["loss"][5:7]) / 2, abs=1e-5)
    assert float(rows[-1]["grad_norm"]) == pytest.approx(sum(hist["grad_norm"][5:7]) / 2,
                                                         abs=1e-5)
    assert hist["lr"][0] == pytest.approx(float(rows[0]["lr_head"]))  # run_meta: real LRs too
    # the latest line, as pushed to the store beside the readout
    pushed = Path(rclone_store.replace("r2:", str(tmp_path / "remote") + "/"))
    latest = json.loads((pushed / run_dir.PROGRESS).read_text())
    assert latest["line"] == lines[-1] and latest["step"] == 8 and latest["job"] == "fold"
    assert (pushed / run_dir.TRAIN_LOG).read_text() == (run / run_dir.TRAIN_LOG).read_text()


def test_each_validation_readout_is_a_line_a_csv_row_and_tensorboard_scalars(
        bundle_dir, tmp_path, capsys):
    # 2 epochs x 4 steps, val_every 0: a readout at each epoch end (steps 4 and 8)
    run = tmp_path / "run"
    meta = tr.run(smoke(log_every=3, log_every_s=0.0), bundle_dir, run)
    val = meta["history"]["val"]
    assert [v["step"] for v in val] == [4, 8]
    lines = [x for x in capsys.readouterr().out.splitlines()
             if x.startswith("hearsay train: fold0 readout")]
    assert [x.split()[5] for x in lines] == ["4/8", "8/8"]
    assert f"auc {val[-1]['auc']:.4f} eer {val[-1]['eer']:.4f}" in lines[-1]
    rows = _rows(run, "readout")
    assert [int(r["step"]) for r in rows] == [4, 8]
    for row, v in zip(rows, val, strict=True):
        for k in ("auc", "eer", "min_dcf"):
            assert float(row[f"val_{k}"]) == pytest.approx(v[k], rel=1e-6)
        assert int(row["val_n"]) == v["n"] and row["loss"] == ""
    tb = _scalars(run)  # beside train_log.csv, read back by TensorBoard's own reader
    for k in ("auc", "eer", "min_dcf"):
        assert [s for s, _ in tb[f"val/{k}"]] == [4, 8]
        assert [x for _, x in tb[f"val/{k}"]] == pytest.approx([v[k] for v in val], rel=1e-6)
    steps = _rows(run)
    assert [s for s, _ in tb["train/lr_head"]] == [int(r["step"]) for r in steps] == [1, 3, 6, 8]
    assert [x for _, x in tb["train/lr_head"]] == pytest.approx(
        [float(r["lr_head"]) for r in steps], rel=1e-6)
    # the loss of step 1 has not landed at its line (read a step late): no point, not a 0
    assert [(s, pytest.approx(x, rel=1e-6)) for s, x in tb["train/loss"]] == [
        (int(r["step"]), float(r["loss"])) for r in steps if r["loss"]]
    assert "train/gpu_mem_gib" not in tb  # empty on the CPU: no point written


def test_progress_json_is_pushed_at_each_step_line(tmp_path, capsys):
    r = _fake_run(tmp_path, log_every=2)
    pushed = []
    r.store = types.SimpleNamespace(push_file=lambda path, name: pushed.append(
        (name, json.loads(Path(path).read_text())["step"])))
    log = steplog.StepLog(r)
    for _ in range(5):
        r.progress.step += 1
        log.after_step(r, 1)
    log.close()
    assert pushed == [(run_dir.PROGRESS, 1), (run_dir.PROGRESS, 2), (run_dir.PROGRESS, 4)]


def test_both_triggers_off_means_no_log(bundle_dir, tmp_path, capsys):
    run = tmp_path / "run"
    tr.run(smoke(epochs=1, log_every=0, log_every_s=0.0), bundle_dir, run)
    assert "hearsay train: fold0" not in capsys.readouterr().out
    assert not (run / run_dir.TRAIN_LOG).exists() and not (run / run_dir.PROGRESS).exists()
    assert not list(run.glob("events.out.tfevents.*"))


def _fake_run(tmp_path, **train) -> types.SimpleNamespace:
    lin = torch.nn.Linear(2, 1)
    opt = torch.optim.AdamW([{"params": [lin.weight], "lr": 2e-4, "name": "head"},
                             {"params": [lin.bias], "lr": 3e-6, "name": "backbone_depth0"},
                             {"params": [], "lr": 1e-6, "name": "backbone_depth1"}])
    tc = types.SimpleNamespace(log_every=train.get("log_every", 0),
                               log_every_s=train.get("log_every_s", 0.0), epochs=2)
    ns = types.SimpleNamespace
    return ns(plan=ns(tc=tc, rank=0, world=1, device=torch.device("cpu"), out=tmp_path,
                      resolved={"job": "full", "fold": None}, t_start=0.0),
              data=ns(total_steps=10), nets=ns(opt=opt),
              progress=ns(step=0, clips=0.0, audio_s=0.0, hist={"loss": [], "grad_norm": []}))


def test_the_time_trigger_logs_when_the_interval_has_passed(tmp_path, capsys, monkeypatch):
    clock = iter([100.0, 101.0, 102.0, 103.5, 104.5])  # construction, then one per step
    # steplog's own clock only (the TensorBoard writer keeps the real one)
    monkeypatch.setattr(steplog, "time", types.SimpleNamespace(
        time=lambda: next(clock), strftime=time.strftime, gmtime=time.gmtime))
    r = _fake_run(tmp_path, log_every_s=3.0)
    log = steplog.StepLog(r)
    for _ in range(4):
        r.progress.step += 1
        log.after_step(r, 1)
    # step 1 always; then 1 s and 2.5 s after that line are not due, 3.5 s after it is
    assert [int(x["step"]) for x in _rows(tmp_path)] == [1, 4]


def test_the_padded_share_counts_padding_samples_of_the_batches(tmp_path, capsys):
    r = _fake_run(tmp_path, log_every=1)
    log = steplog.StepLog(r)
    # (2, 100) batch with 100 + 50 valid samples, then (2, 50) with 50 + 50: 50 of 300 padding
    log.batch({"input_values": torch.zeros(2, 100), "lengths": torch.tensor([100, 50])})
    log.batch({"input_values": torch.zeros(2, 50), "lengths": torch.tensor([50, 50])})
    r.progress.step = 1
    log.after_step(r, 1)
    assert float(_rows(tmp_path)[0]["padded_share"]) == pytest.approx(50 / 300)
    assert "padded 16.7%" in capsys.readouterr().out


def test_step_lrs_reads_the_top_backbone_layer_and_the_head(tmp_path):
    assert steplog.step_lrs(_fake_run(tmp_path).nets.opt) == (3e-6, 2e-4)
    frozen = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.1,
                               "name": "head"}])
    assert steplog.step_lrs(frozen) == (None, 0.1)


@pytest.mark.parametrize(("s", "text"), [(9.4, "9s"), (75, "1m15s"), (3725, "1h02m")])
def test_duration_reads_as_hours_minutes_seconds(s, text):
    assert progress.duration(s) == text


def test_the_padded_share_is_of_the_samples_computed_after_the_padding_cut(tmp_path, capsys):
    r = _fake_run(tmp_path, log_every=1)
    r.progress.meta = {"computed_audio_s": 10.0}  # before this line: not counted
    log = steplog.StepLog(r)
    log.batch({"input_values": torch.zeros(2, 100), "lengths": torch.tensor([10, 10])})
    p = r.progress
    p.audio_s, p.meta["computed_audio_s"], p.step = 3.0, 14.0, 1  # 3 s valid of 4 s computed
    log.after_step(r, 1)
    assert float(_rows(tmp_path)[0]["padded_share"]) == pytest.approx(0.25)


@pytest.mark.parametrize("world", [1, 2, 8])
def test_clips_per_second_counts_every_gpu_as_world_size_times_rank_0s_clips(tmp_path, monkeypatch,
                                                                              world):
    """Rank 0 alone writes the line and sees its own clips: 64 clips and 128 s of audio in 2 s
    on each of `world` GPUs read 32 x world clips/s and 64 x world audio_s/s."""
    clock = iter([100.0, 102.0])  # construction, then the step
    # steplog's own clock only (the TensorBoard writer keeps the real one)
    monkeypatch.setattr(steplog, "time", types.SimpleNamespace(
        time=lambda: next(clock), strftime=time.strftime, gmtime=time.gmtime))
    r = _fake_run(tmp_path, log_every=1)
    r.plan.world = world
    log = steplog.StepLog(r)
    r.progress.step, r.progress.clips, r.progress.audio_s = 1, 64.0, 128.0
    log.after_step(r, 1)
    row = _rows(tmp_path)[0]
    assert float(row["clips_per_s"]) == pytest.approx(32.0 * world)
    assert float(row["audio_s_per_s"]) == pytest.approx(64.0 * world)
