"""`hearsay train`'s per-step log: a line on stdout (so a box's train.log has it) and a row in
RUN_DIR/train_log.csv every `train.log_every` optimiser steps or `train.log_every_s` seconds
(whichever comes first; the first and the last step always), the latest row as
RUN_DIR/progress.json, pushed to the store at each line (what `runner/status.sh JOB` and
`runner/logs.sh JOB` print for a running box; the CSV goes with the checkpoints), and the same
figures as TensorBoard scalars in RUN_DIR/events.out.tfevents.* (`tensorboard --logdir runs/`:
one run per folder). Each validation readout is a line, a CSV row and scalars too.

    log = StepLog(r)           # rank 0 writes; the other ranks' StepLog does nothing
    log.batch(batch)           # each micro-batch: its clips, valid and padded samples (host ints)
    log.after_step(r, epoch)   # each optimiser step: maybe a line (progress.json pushed)
    log.readout(r, epoch, res) # each validation readout: a line, a row, the val/ scalars
    log.push(r.store)          # progress.json + train_log.csv into the store
    log.close()                # the event file flushed and closed

    hearsay train: fold3 step 120/1000 epoch 1/4 loss 0.4123 lr_backbone 9.80e-06 lr_head
      4.90e-04 grad_norm 1.23 clips/s 210.4 audio_s/s 1520.3 padded 12.3% gpu_mem 34.2 GiB eta 1h02m
    hearsay train: fold3 readout step 200/1000 epoch 1/4 auc 0.9731 eer 0.0712 min_dcf 0.2104 n 812

The run's name (fold3, full, pilot: run_name) starts every line, so the lines of runs that share
a terminal (the demo's six) stay apart. Columns (train_log.csv, one row per line; units in the
names): COLUMNS; `kind` is "step" or "readout", and a row leaves the other kind's columns empty.
loss and grad_norm are
the means over the steps whose values have landed on the host since the previous line (the loop
reads them a step late: hearsay.train.step.check_pending); lr_* are the learning rates the
optimiser used at this step (the backbone's top kept layer and the head; empty when the backbone
is frozen); clips_per_s and audio_s_per_s count every GPU's clips over the wall time since the
previous line (validation and checkpoints included); padded_share is the share of the samples
the model computed that are padding (after the loop's padding cut); gpu_mem_gib the peak
allocated on this GPU (empty on the CPU); eta_s the remaining steps at this run's mean wall time
per step so far. val_* are the readout's AUC, EER, minDCF (pi 0.3) and clip count
(hearsay.train.data.validate). TensorBoard tags: train/<column> for a step line's figures,
val/auc, val/eer, val/min_dcf for a readout, at the optimiser step.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import torch

from hearsay import store as stores
from hearsay.contracts import run_dir
from hearsay.util.progress import duration

COLUMNS = ("kind", "step", "total_steps", "epoch", "epochs", "loss", "lr_backbone", "lr_head",
           "grad_norm", "clips_per_s", "audio_s_per_s", "padded_share", "gpu_mem_gib", "eta_s",
           "wall_s", "val_auc", "val_eer", "val_min_dcf", "val_n")
SCALARS = ("loss", "lr_backbone", "lr_head", "grad_norm", "clips_per_s", "audio_s_per_s",
           "padded_share", "gpu_mem_gib", "eta_s")  # a step line's figures -> train/<name>
READOUT = ("auc", "eer", "min_dcf")  # a readout's figures -> val/<name> (and val_<name>)


def run_name(resolved: dict) -> str:
    """fold3, full or pilot: the run's campaign key (the demo's and the runner's run folder)."""
    return resolved["job"] + ("" if resolved["fold"] is None else str(resolved["fold"]))


def step_lrs(opt: torch.optim.Optimizer) -> tuple[float | None, float]:
    """(LR of the backbone's top kept layer or None when it is frozen, LR of the head): the
    optimiser groups' current "lr" (hearsay.train.step.optimizer_groups names them); an
    optimiser without names (a test's) gives its first group's LR as the head's."""
    named = {g.get("name"): g["lr"] for g in reversed(opt.param_groups)}
    return named.get("backbone_depth0"), named.get("head", opt.param_groups[0]["lr"])


class StepLog:
    def __init__(self, r):
        tc = r.plan.tc
        self.on = r.plan.rank == 0 and bool(tc.log_every or tc.log_every_s)
        self.every, self.every_s = tc.log_every, tc.log_every_s
        self.world, self.device = r.plan.world, r.plan.device
        self.csv = Path(r.plan.out) / run_dir.TRAIN_LOG
        self.latest = Path(r.plan.out) / run_dir.PROGRESS
        self.head = {"job": r.plan.resolved["job"], "fold": r.plan.resolved["fold"]}
        self.name = run_name(r.plan.resolved)
        self.store = getattr(r, "store", None)  # progress.json goes here at each line
        self.events = None  # the TensorBoard writer, opened at the first line
        self.t_first = self.t_last = time.time()
        self.step_first = self.step_last = r.progress.step  # steps done when this process started
        self.clips_last, self.audio_last = r.progress.clips, r.progress.audio_s
        self.n_loss = len(r.progress.hist["loss"])
        self.n_norm = len(r.progress.hist.get("grad_norm", []))
        self.valid = self.samples = 0  # samples since the previous line (host ints)
        self.computed_last = _computed(r)

    def batch(self, batch: dict) -> None:
        """A micro-batch's valid and total samples (the padded share's parts)."""
        self.valid += int(batch["lengths"].sum())
        self.samples += batch["input_values"].numel()

    def after_step(self, r, epoch: int) -> None:
        """After optimiser step r.progress.step (1-based: steps done): a line when one is due."""
        if not self.on:
            return
        now = time.time()
        due = (r.progress.step in (self.step_first + 1, r.data.total_steps)
               or (self.every and r.progress.step % self.every == 0)
               or (self.every_s and now - self.t_last >= self.every_s))
        if due:
            self.write(self.row(r, epoch, now))
            self.push(self.store, with_csv=False)

    def readout(self, r, epoch: int, res: dict) -> None:
        """A validation readout ({"auc", "eer", "min_dcf", "n", ...}: validate's result): its
        line on stdout, its train_log.csv row and its val/ scalars, at this optimiser step."""
        if not self.on:
            return
        row = {"kind": "readout", "step": r.progress.step, "total_steps": r.data.total_steps,
               "epoch": epoch, "epochs": r.plan.tc.epochs, "wall_s": time.time() - r.plan.t_start,
               **{f"val_{k}": res.get(k) for k in (*READOUT, "n")}}
        def num(v):
            return "-" if v is None or v != v else f"{v:.4f}"  # None / NaN: a class is missing
        print(f"hearsay train: {self.name} readout step {row['step']}/{row['total_steps']} "
              f"epoch {epoch}/{row['epochs']} "
              + " ".join(f"{k} {num(res.get(k))}" for k in READOUT) + f" n {res.get('n')}",
              flush=True)
        self._csv_row(row)
        self._scalars("val", {k: res.get(k) for k in READOUT}, row["step"])

    def row(self, r, epoch: int, now: float) -> dict:
        losses = r.progress.hist["loss"][self.n_loss:] or r.progress.hist["loss"][-1:]
        norms = r.progress.hist.get("grad_norm", [])
        norms = norms[self.n_norm:] or norms[-1:]
        hist = r.progress.hist
        self.n_loss, self.n_norm = len(hist["loss"]), len(hist.get("grad_norm", []))
        lr_backbone, lr_head = step_lrs(r.nets.opt)
        dt = max(now - self.t_last, 1e-9)
        # padding: of the samples the model computed (after the loop's padding cut, when it
        # makes one: run_meta "computed_audio_s"), else of the loader's batches
        computed = _computed(r) - self.computed_last
        if computed > 0:
            padded = max(0.0, 1 - (r.progress.audio_s - self.audio_last) / computed)
        else:
            padded = 1 - self.valid / self.samples if self.samples else None
        per_step = (now - self.t_first) / max(r.progress.step - self.step_first, 1)
        row = {"kind": "step", "step": r.progress.step, "total_steps": r.data.total_steps,
               "epoch": epoch, "epochs": r.plan.tc.epochs, "loss": _mean(losses),
               "lr_backbone": lr_backbone, "lr_head": lr_head, "grad_norm": _mean(norms),
               "clips_per_s": (r.progress.clips - self.clips_last) * self.world / dt,
               "audio_s_per_s": (r.progress.audio_s - self.audio_last) * self.world / dt,
               "padded_share": padded,
               "gpu_mem_gib": (torch.cuda.max_memory_allocated(self.device) / 2**30
                               if self.device.type == "cuda" else None),
               "eta_s": per_step * (r.data.total_steps - r.progress.step),
               "wall_s": now - r.plan.t_start,
               "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))}  # not a column
        self.t_last, self.clips_last, self.audio_last = now, r.progress.clips, r.progress.audio_s
        self.computed_last = _computed(r)
        self.valid = self.samples = 0
        return row

    def write(self, row: dict) -> None:
        """The line on stdout, the CSV row, the train/ scalars, progress.json (the latest line
        and its row)."""
        line = format_line(row, self.name)
        print(line, flush=True)
        self._csv_row(row)
        self._scalars("train", {k: row[k] for k in SCALARS}, row["step"])
        tmp = self.latest.with_suffix(".tmp")
        tmp.write_text(json.dumps({**self.head, "line": line, **row}, sort_keys=True) + "\n")
        tmp.replace(self.latest)

    def _csv_row(self, row: dict) -> None:
        new = not self.csv.exists() or self.csv.stat().st_size == 0
        with self.csv.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            if new:
                w.writeheader()
            w.writerow({k: _cell(row.get(k)) for k in COLUMNS})

    def _scalars(self, group: str, values: dict, step: int) -> None:
        """group/<name> scalars at `step` into RUN_DIR's event file (None and NaN left out)."""
        if self.events is None:
            from torch.utils.tensorboard import SummaryWriter  # the tensorboard package

            self.events = SummaryWriter(log_dir=str(self.csv.parent), flush_secs=30)
        for k, v in values.items():
            if v is not None and v == v:
                self.events.add_scalar(f"{group}/{k}", float(v), step)
        self.events.flush()  # a line is rare (every log_every steps): readable at once

    def close(self) -> None:
        """The event file closed (the run ended or aborted)."""
        if self.events is not None:
            self.events.close()
            self.events = None

    def push(self, store, with_csv: bool = True) -> None:
        """progress.json (and train_log.csv) into the store; a failed push is said, not fatal
        (progress reports, like the readout)."""
        if not self.on or store is None or not self.latest.exists():
            return
        try:
            store.push_file(self.latest, run_dir.PROGRESS)
            if with_csv:
                store.push_file(self.csv, run_dir.TRAIN_LOG)
        except stores.StoreError as err:
            print(f"hearsay train: progress not pushed ({err}); training goes on",
                  file=sys.stderr)


def format_line(row: dict, name: str) -> str:
    """The stdout line of one step row of the run `name` (module docstring)."""
    def num(v, spec):
        return "-" if v is None else format(v, spec)

    share = row["padded_share"]
    pct = num(None if share is None else 100 * share, ".1f")
    parts = [f"hearsay train: {name} step {row['step']}/{row['total_steps']}",
             f"epoch {row['epoch']}/{row['epochs']}", f"loss {num(row['loss'], '.4f')}",
             f"lr_backbone {num(row['lr_backbone'], '.2e')}",
             f"lr_head {num(row['lr_head'], '.2e')}",
             f"grad_norm {num(row['grad_norm'], '.3g')}",
             f"clips/s {row['clips_per_s']:.1f}", f"audio_s/s {row['audio_s_per_s']:.1f}",
             f"padded {pct}%"]
    if row["gpu_mem_gib"] is not None:
        parts.append(f"gpu_mem {row['gpu_mem_gib']:.1f} GiB")
    parts.append(f"eta {duration(row['eta_s'])}")
    return " ".join(parts)


def _computed(r) -> float:
    """Audio seconds the model computed so far (run_meta "computed_audio_s"; 0 without it)."""
    return getattr(r.progress, "meta", {}).get("computed_audio_s", 0.0)


def _mean(xs: list) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _cell(v):
    if v is None:
        return ""
    return float(f"{v:.8g}") if isinstance(v, float) else v  # 8 significant digits
