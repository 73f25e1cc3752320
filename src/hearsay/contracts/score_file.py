"""The score files (docs/INTERFACES.md, "Scores"), spelled once: every stage that names, writes,
reads or reuses a score CSV goes through these names.

    models/<stamp>/
      scores/                                the per-run files         per_run_dir(stamp)
        <key>_<split><suffix>.csv            one run, one split        file_name(key, split, aug)
        <key>_<split><suffix>.csv.meta.json  its sidecar               sidecar(csv)
    OUTPUTS/
      detector_scores/<name>.csv             the assembled file        assembled_path(OUTPUTS, name)

    key     fold0 .. fold4, full                  hearsay.contracts.protocol.RUN_KEYS
    split   inner_oof, holdout, test, probe       hearsay.contracts.protocol.SPLITS
    suffix  ""            clean rows              the sidecar's "augmented": False
            "_aug"        the augmented slice                                 True
            "_codecs"     the codec panel                                     "codecs"
            "_test_length"  test-length crops                                 "test_length"
            "_whole"      whole clips up to 14 s                              "whole"
    <key>_probe.csv: split probe, every run's scores of the probe set (fold probe's bona fide rows,
    e.g. In-the-Wild's; hearsay.evaluate.probe_set), never part of the assembled file

A box's `hearsay score-run --out RUN_DIR/scores` writes the same names; runner/collect.sh brings
them to models/<stamp>/scores/.

Columns (floats written %.9g, rows in manifest order): path, fold, split, score, logit (COLUMNS;
score = hearsay.detector.logits.expit(logit), high = synthetic); the augmented slice adds
augmentation, codec (AUG_COLUMNS); the codec panel adds codec; a windowed readout (hearsay score
--hop-s) adds windows, mean_logit. The assembled file has COLUMNS only: inner_oof, then holdout,
then test.

The sidecar (JSON, indent 2, sorted keys) records who scored what and how: run, weights_sha256,
bundle_tree_sha, split, fold, augmented, n_rows, config (the hearsay.evaluate.score.ScoreConfig:
max_s,
aug_seed, device, precision, ...), and where known job, run_fold, config_hash, device_name.

    from hearsay.contracts import score_file
    csv = score_file.per_run_dir(stamp) / score_file.file_name("fold3", "inner_oof", False)
    score_file.write(df, side, csv)                 # CSV, then sidecar, each atomic
    score_file.read(csv), score_file.read_sidecar(csv)
    score_file.parse_name("full_holdout_aug.csv")   # RunFile(key="full", split="holdout", aug=True)
    score_file.refusal(csv, score_file.wanted(weights_sha, tree_sha, "inner_oof", 3, False,
                                              max_s=8.0, aug_seed=20261130))  # None: reuse it

The reuse rule (`refusal`): a per-run file is reused only when its sidecar names the `wanted`
weights sha256, bundle tree-sha, split, fold, augmented, aug_seed and max_s. Device
and precision are recorded, not compared (parity B bounds that gap).

pandas (imported when a file is read) + stdlib + hearsay.util.files /
hearsay.contracts.protocol; never torch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

from hearsay.contracts.protocol import RUN_KEYS, SPLITS
from hearsay.util.files import write_atomic

COLUMNS = ["path", "fold", "split", "score", "logit"]
AUG_COLUMNS = ["augmentation", "codec"]  # after COLUMNS in the augmented slice
FLOAT_FORMAT = "%.9g"
SIDECAR = ".meta.json"  # appended to the CSV's whole name: fold3_inner_oof.csv.meta.json
SCORES = "scores"  # models/<stamp>/scores/: the per-run files
DETECTOR_SCORES = "detector_scores"  # OUTPUTS/detector_scores/<name>.csv: the assembled file

# the reuse rule in words (models/<stamp>/meta.json "scoring"), as `refusal` applies it
REUSE_RULE = ("sidecar: weights sha256, bundle tree-sha, split, fold, max_s, aug_seed (device "
              "and precision recorded, not compared)")
# the sidecar's "augmented" -> the file name's suffix
SUFFIXES = {False: "", True: "_aug", "codecs": "_codecs", "test_length": "_test_length",
            "whole": "_whole"}
_NAME = re.compile(rf"({'|'.join(RUN_KEYS)})_({'|'.join(SPLITS)})"
                   rf"({'|'.join(re.escape(s) for s in SUFFIXES.values())})\.csv")


class RunFile(NamedTuple):
    """What a per-run file's name says: run key, split and the sidecar's "augmented" value."""

    key: str
    split: str
    aug: bool | str


# --------------------------------------------------------------------------- names


def per_run_dir(stamp_dir: Path) -> Path:
    """models/<stamp>/scores/ (the pin file's folder + "scores")."""
    return Path(stamp_dir) / SCORES


def assembled_path(outputs: Path, name: str) -> Path:
    """OUTPUTS/detector_scores/<name>.csv (name: the pin file's "name")."""
    return Path(outputs) / DETECTOR_SCORES / f"{name}.csv"


def file_name(key: str, split: str, aug: bool | str = False) -> str:
    """("fold3", "inner_oof", False) -> "fold3_inner_oof.csv"; ("full", "holdout", True) ->
    "full_holdout_aug.csv"; ("full", "holdout", "whole") -> "full_holdout_whole.csv"."""
    if isinstance(aug, (bool, str)) and aug in SUFFIXES:
        return f"{key}_{split}{SUFFIXES[aug]}.csv"
    raise ValueError(f"augmented={aug!r}: one of {', '.join(map(repr, SUFFIXES))}")


def parse_name(name: str) -> RunFile | None:
    """A per-run file's name -> RunFile(key, split, aug); None for any other name."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    aug = next(a for a, s in SUFFIXES.items() if s == m.group(3))
    return RunFile(m.group(1), m.group(2), aug)


def sidecar(csv: Path) -> Path:
    """<csv>.meta.json beside the CSV."""
    return Path(str(csv) + SIDECAR)


# --------------------------------------------------------------------------- write and read


def write_csv(df, csv: Path) -> Path:
    """The frame as a score CSV (no index, floats %.9g), atomic
    (hearsay.util.files.write_atomic)."""
    csv = Path(csv)
    write_atomic(csv, df.to_csv(index=False, float_format=FLOAT_FORMAT))
    return csv


def write(df, side: dict, csv: Path) -> Path:
    """A per-run file: the CSV, then its sidecar, each atomic, so a sidecar never sits beside
    half a CSV it describes."""
    write_csv(df, csv)
    write_atomic(sidecar(csv), json.dumps(side, indent=2, sort_keys=True) + "\n")
    return Path(csv)


def read(csv: Path):
    """A score CSV as a frame: path and fold as strings, only an empty cell is missing."""
    import pandas as pd

    return pd.read_csv(csv, dtype={"path": str, "fold": str}, keep_default_na=False,
                       na_values=[""])


def read_sidecar(csv: Path) -> dict:
    """The sidecar of `csv` (FileNotFoundError when absent, ValueError when not JSON)."""
    return json.loads(sidecar(csv).read_text())


# --------------------------------------------------------------------------- reuse


def wanted(weights_sha: str, bundle_sha: str, split: str, fold: int | None, aug: bool | str,
           max_s: float, aug_seed: int) -> dict:
    """What a reusable file's sidecar must say (the reuse rule's keys, in the order `refusal`
    names them)."""
    return {"weights_sha256": weights_sha, "bundle_tree_sha": bundle_sha, "split": split,
            "fold": fold, "augmented": aug, "aug_seed": aug_seed, "max_s": max_s}


def refusal(csv: Path, want: dict) -> str | None:
    """None when `csv` may be reused (its sidecar says `want`), else why not, in words."""
    csv = Path(csv)
    if not csv.is_file():
        return "missing"
    if not sidecar(csv).is_file():
        return "no sidecar"
    try:
        have = read_sidecar(csv)
    except ValueError:
        return "sidecar unreadable"
    conf = have.get("config", {})
    have = {**have, "max_s": conf.get("max_s"), "aug_seed": conf.get("aug_seed")}
    bad = [f"{k} {have.get(k)!r} (want {v!r})" for k, v in want.items() if have.get(k) != v]
    return "sidecar names " + ", ".join(bad) if bad else None
