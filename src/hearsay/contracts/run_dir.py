"""The run directory `hearsay train --out RUN_DIR` writes (docs/INTERFACES.md, "Run directory"),
spelled once: every stage that reads or writes a run goes through these names.

    RUN_DIR/
      config.json             the resolved training config + its hash     config_path(run)
      run_meta.json           job, fold, bundle, steps, history, complete  meta_path(run)
      state.json              resume state (rank logs, RNG)
      readout.json            the last validation readout (what `runner/status.sh --why` shows)
      train_log.csv           the per-step log's rows (hearsay.train.steplog)
      progress.json           its latest line (what `runner/status.sh JOB` shows)
      events.out.tfevents.*   the same figures for TensorBoard (hearsay.train.steplog)
      checkpoints/epoch_NNNN/ model.safetensors, optimizer.safetensors,    checkpoint_dir(run, n)
                              state.json (the sha256 of both)
      final/                  model.safetensors + config.json              final_dir(run)

    from hearsay.contracts import run_dir
    meta = run_dir.read_meta(run)                   # dict; RunDirError names what is missing
    run_dir.weights(run)                            # RUN_DIR/final/model.safetensors
    run_dir.write_meta(run, meta)                   # atomic (hearsay.util.files.write_json)
    run_dir.is_complete(run)                        # the one completeness rule (below)
    run_dir.identity(run)                           # Identity(job, fold, bundle_tree_sha)
    run_dir.identity_problems(run, "fold3", sha)    # [] or what differs from fold3 of that bundle

The rules, once (assemble, pilot-epochs and `hearsay run check`, which runner/collect.sh and
runner/collect_ablation.sh ask, all judge through them):
  complete   run_meta.json says "complete": true (the trainer sets it after final/ is written)
             AND final/model.safetensors is a non-empty file; `meta_says_complete(meta)` is the
             first half alone, for a run brought back without its weights (the pilot's meta)
  identity   run_meta.json's (job, fold, bundle_tree_sha); a campaign key "fold3" wants
             ("fold", 3, <the bundle's tree-sha>), "full" wants ("full", None, ...)

`hearsay run` (main below) is the runner's way to ask, never re-spelling these names or rules:
    hearsay run check RUN_DIR [--key fold3] [--bundle SHA]   complete, and that run of that bundle?
    hearsay run readout FILE|-     readout.json as the line runner/status.sh --why prints
    hearsay run progress FILE|-    progress.json likewise

Stdlib only (plus hearsay.util.files).

Exit codes: 0 the run is complete (and is the run asked for) / the line printed; 2 usage;
3 not complete (why on stderr: no run_meta.json, it does not say complete, no final weights),
or a readout/progress file that is not JSON; 4 complete but another run (job, fold or bundle
differ from --key/--bundle; each difference named).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple

from hearsay.util.files import write_json

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
COMPLETE = "complete"  # run_meta.json's key: true once final/ is written


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


# --------------------------------------------------------------------------- rules


def meta_says_complete(meta: dict) -> bool:
    """run_meta.json's own word: "complete" is exactly true (a string "true" is not)."""
    return meta.get(COMPLETE) is True


def incomplete(run: Path) -> str | None:
    """Why the run at `run` is not complete (None when it is): the module docstring's rule."""
    if not meta_path(run).is_file():
        return f"no {META}"
    try:
        meta = read_meta(run)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return f"{META} is not JSON (a copy cut short?)"
    if not isinstance(meta, dict) or not meta_says_complete(meta):
        return f"{META} does not say {COMPLETE}"
    w = weights(run)
    if not w.is_file() or w.stat().st_size == 0:
        return f"no {FINAL}/{WEIGHTS} (or it is empty)"
    return None


def is_complete(run: Path) -> bool:
    """True when the run is complete (run_meta.json says so and final/ holds the weights)."""
    return incomplete(run) is None


class Identity(NamedTuple):
    job: str | None
    fold: int | None
    bundle_tree_sha: str | None


def identity(run_or_meta: Path | dict) -> Identity:
    """(job, fold, bundle_tree_sha) from a run dir's run_meta.json, or from its parsed dict."""
    meta = run_or_meta if isinstance(run_or_meta, dict) else read_meta(run_or_meta)
    return Identity(meta.get("job"), meta.get("fold"), meta.get("bundle_tree_sha"))


def wanted(key: str, bundle_tree_sha: str | None) -> Identity:
    """The identity a campaign key stands for: "fold3" -> ("fold", 3, sha), "full" -> ("full",
    None, sha). ValueError names the keys when `key` is none of them."""
    from hearsay.contracts.protocol import run_job

    job, fold = run_job(key)
    return Identity(job, fold, bundle_tree_sha)


def identity_problems(run_or_meta: Path | dict, key: str,
                      bundle_tree_sha: str | None) -> list[str]:
    """What differs between the run's identity and the one `key` of that bundle wants ([] when
    none). `bundle_tree_sha` None skips the bundle (a caller that checks it apart)."""
    got, want = identity(run_or_meta), wanted(key, bundle_tree_sha)
    problems = []
    if got.job != want.job:
        problems.append(f"job {got.job!r} (want {want.job!r})")
    if got.fold != want.fold:
        problems.append(f"fold {got.fold!r} (want {want.fold!r})")
    if bundle_tree_sha is not None and got.bundle_tree_sha != bundle_tree_sha:
        problems.append(f"bundle_tree_sha {got.bundle_tree_sha!r} (want {bundle_tree_sha!r})")
    return problems


# --------------------------------------------------------------------------- hearsay run

EXIT_OK, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_IDENTITY = 0, 2, 3, 4  # `hearsay run` (its help)


def _r(x):
    """A readout figure as runner/status.sh showed it: 4 decimals, null when absent."""
    return "null" if x is None else round(x, 4) if isinstance(x, float) else x


def readout_line(d: dict) -> str:
    """readout.json (the trainer's last validation readout) as one line."""
    end = " (epoch end)" if d.get("epoch_end") else ""
    return (f"READOUT epoch {d.get('epoch')} step {d.get('step')}{end}: minDCF(pi {d.get('pi')}) "
            f"{_r(d.get('min_dcf'))} EER {_r(d.get('eer'))} AUC {_r(d.get('auc'))} on "
            f"{d.get('n')} validation clips")


def progress_line(d: dict) -> str:
    """progress.json (the per-step log's latest line) as one line."""
    return f"PROGRESS {str(d.get('line', '')).removeprefix('hearsay train: ')} (at {d.get('at')})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="hearsay run", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("check", help="is RUN_DIR complete, and the run --key of --bundle?")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--key", help="the campaign key it must be: fold0..fold4 or full")
    c.add_argument("--bundle", help="the bundle tree-sha it must have trained on")
    for verb in ("readout", "progress"):
        s = sub.add_parser(verb, help=f"print {verb}.json as runner/status.sh --why shows it")
        s.add_argument("file", help="the file, or - for stdin")
    args = ap.parse_args(argv)
    if args.verb in ("readout", "progress"):
        try:
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
            d = json.loads(text)
        except (OSError, json.JSONDecodeError) as err:
            print(f"hearsay run {args.verb}: {args.file}: {err}", file=sys.stderr)
            return EXIT_INCOMPLETE
        print(readout_line(d) if args.verb == "readout" else progress_line(d))
        return EXIT_OK
    why = incomplete(args.run_dir)
    if why is not None:
        print(f"hearsay run check: {args.run_dir}: not complete: {why}", file=sys.stderr)
        return EXIT_INCOMPLETE
    if args.key is not None or args.bundle is not None:
        try:
            problems = identity_problems(args.run_dir, args.key or identity_key(args.run_dir),
                                         args.bundle)
        except ValueError as err:
            ap.error(str(err))
        if problems:
            print(f"hearsay run check: {args.run_dir}: another run: " + "; ".join(problems),
                  file=sys.stderr)
            return EXIT_IDENTITY
    return EXIT_OK


def identity_key(run: Path) -> str:
    """The campaign key of a run's own identity ("fold3", "full"); ValueError for a pilot."""
    from hearsay.contracts.protocol import run_key

    got = identity(run)
    return run_key(str(got.job), got.fold)
