"""The run directory `hearsay train --out RUN_DIR` writes (docs/INTERFACES.md, "Run directory"),
spelled once: every stage that reads or writes a run goes through these names.

    RUN_DIR/
      config.json             the resolved training config + its hash     config_path(run)
      run_meta.json           job, fold, bundle, steps, history, complete  meta_path(run)
      state.json              resume state (rank logs, RNG)
      readout.json            the last validation readout (what `runner/status.sh --why` shows)
      train_log.csv           the per-step log's rows (hearsay.train.steplog)
      progress.json           its latest line (what `runner/status.sh JOB` shows)
      checkpoints/epoch_NNNN/ model.safetensors, optimizer.safetensors,    checkpoint_dir(run, n)
                              state.json (the sha256 of both)
      final/                  model.safetensors + config.json              final_dir(run)

    from hearsay.contracts import run_dir
    meta = run_dir.read_meta(run)                   # dict; RunDirError names what is missing
    run_dir.weights(run)                            # RUN_DIR/final/model.safetensors
    run_dir.write_meta(run, meta)                   # atomic (hearsay.files.write_json)

Stdlib only (plus hearsay.files).
"""

from __future__ import annotations

import json
from pathlib import Path

from hearsay.files import write_json

CONFIG = "config.json"
META = "run_meta.json"
STATE = "state.json"
READOUT = "readout.json"
TRAIN_LOG = "train_log.csv"  # the per-step log (hearsay.train.steplog)
PROGRESS = "progress.json"  # the per-step log's latest line
CHECKPOINTS = "checkpoints"
FINAL = "final"
WEIGHTS = "model.safetensors"   # inside final/ and inside every checkpoint
OPTIMIZER = "optimizer.safetensors"  # a checkpoint's optimiser tensors + RNG states


class RunDirError(FileNotFoundError):
    """A run directory lacks a file the caller needs; the message names it and the fix."""


def meta_path(run: Path) -> Path:
    return Path(run) / META


def config_path(run: Path) -> Path:
    return Path(run) / CONFIG


def final_dir(run: Path) -> Path:
    return Path(run) / FINAL


def weights(run: Path) -> Path:
    """RUN_DIR/final/model.safetensors (the file a pin hashes)."""
    return final_dir(run) / WEIGHTS


def checkpoint_name(epoch: int) -> str:
    """epoch 3 -> "epoch_0003" (the store's folder and marker names use it too)."""
    return f"epoch_{epoch:04d}"


def checkpoint_dir(run: Path, epoch: int) -> Path:
    return Path(run) / CHECKPOINTS / checkpoint_name(epoch)


def read_meta(run: Path) -> dict:
    p = meta_path(run)
    if not p.is_file():
        raise RunDirError(f"no {META} in {run} (pass a run dir written by hearsay train)")
    return json.loads(p.read_text())


def write_meta(run: Path, meta: dict) -> None:
    write_json(meta_path(run), meta)


def find_meta(path: Path) -> dict:
    """run_meta.json of a run dir, or of the run above a final/ or checkpoint dir."""
    path = Path(path)
    for where in (path, path.parent, path.parent.parent):
        if meta_path(where).is_file():
            return json.loads(meta_path(where).read_text())
    raise RunDirError(f"no {META} at or above {path} (pass a run dir written by hearsay train)")


def weights_of(path: Path) -> Path:
    """The weights of a run dir (final/model.safetensors) or of a checkpoint/final dir itself."""
    path = Path(path)
    for p in (weights(path), path / WEIGHTS):
        if p.is_file():
            return p
    raise RunDirError(f"no {FINAL}/{WEIGHTS} under {path} (is the run complete? pass a run dir "
                      "with final/ or a checkpoint dir)")
