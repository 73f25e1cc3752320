"""The parity B logits file (`full_parity_logits.json`): the box writes it after training
(hearsay.evaluate.parity_record, `hearsay score-run --parity-clips N`), the laptop checks the
exported model against it (hearsay.export.parity_box, `hearsay parity --box-logits`). This
module is its one speller and judge: which clips, their inputs' identity, the file's kind and
the gate.

The clips (`parity_rows`): test core rows of the bundle in manifest order, those of at least
MIN_S (3 s) first, topped up with the shorter ones when the test split has fewer than N long
ones; each is the model input hearsay score builds at max_s = MAX_S (8 s) (`inputs`). So the box
and the laptop rebuild the same input from the same bundle file; each input's length and sha256
are in the file, and the laptop says whether its own inputs are bit-identical.

The file (JSON): kind, checkpoint_sha256 (the run's final/model.safetensors), bundle_tree_sha,
device ("cpu" or "cuda"), device_name, precision (the trainer's: bf16 on CUDA, fp32 on CPU),
max_s, min_s, clips [{id, path, n_samples, input_sha256}], logits (in that precision),
logits_fp32 (TF32 off), versions.

The gate: Spearman > 0.99 and max |dlogit| < 0.05 between the box's logits and onnxruntime's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MIN_S, MAX_S = 3.0, 8.0  # parity clip lengths, seconds (hearsay parity's 3-8 s)
SPEARMAN_MIN, DLOGIT_MAX = 0.99, 0.05  # the parity B gate
KIND = "hearsay parity-b box logits"
FILE = "full_parity_logits.json"  # in the full run's scores folder on the store


def parity_rows(manifest, n: int):
    """The first `n` test core rows of at least MIN_S s in manifest order, then shorter ones."""
    from hearsay.contracts import protocol

    rows = protocol.split_rows(manifest, "test")
    # (len(rows),) bool; a manifest without durations has every row count as long
    long = (rows["duration"].astype(float).to_numpy() >= MIN_S if "duration" in rows.columns
            else np.ones(len(rows), dtype=bool))
    picked = list(rows.index[long][:n])
    picked += list(rows.index.difference(picked, sort=False)[: n - len(picked)])
    if len(picked) < 2:
        raise ValueError(f"{len(picked)} test clip(s): parity B needs at least 2 (a rank "
                         "correlation)")
    return rows.loc[picked]


@dataclass(frozen=True)
class _Cap:
    max_s: float = MAX_S  # what bundle_inputs.model_input reads of a score config


def inputs(bundle, rows) -> list[np.ndarray]:
    """The clips' model inputs as hearsay score builds them at max_s = MAX_S."""
    from hearsay.sound.bundle_inputs import model_input

    return [model_input(Path(bundle.root), rec, "none", _Cap())
            for rec in rows.to_dict("records")]


def wave_sha(w: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(w, dtype=np.float32).tobytes()).hexdigest()


def gate(a: np.ndarray, ort: np.ndarray) -> dict:
    from scipy.stats import spearmanr

    rho = float(spearmanr(a, ort).statistic)
    return {"spearman": rho, "max_abs_dlogit": float(np.max(np.abs(a - ort)))}


def passed(g: dict) -> bool:
    return bool(g["spearman"] > SPEARMAN_MIN and g["max_abs_dlogit"] < DLOGIT_MAX)


def read(path: Path) -> dict:
    """The box's file; ValueError when it is not one."""
    box = json.loads(Path(path).read_text())
    if box.get("kind") != KIND:
        raise ValueError(f"{path} is not a box parity file (hearsay score-run --parity-clips "
                         f"writes {FILE})")
    return box


def still_valid(have: dict, sha: str, n_clips: int, precision: str, tree_sha: str) -> bool:
    """A file already written for these weights, this many clips, this precision and bundle."""
    return (have.get("kind") == KIND and have.get("checkpoint_sha256") == sha
            and len(have.get("clips", [])) == n_clips and have.get("precision") == precision
            and have.get("bundle_tree_sha") == tree_sha)


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"kind": KIND, **data}, indent=2) + "\n")
