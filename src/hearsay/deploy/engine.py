"""The scoring engine of hearsay-score and hearsay.deploy.Scorer: a checked model folder and its
onnxruntime session (Engine), the first-window mode's scoring, the rows of a list of inputs
in either mode (rows_of: windowed.py for the default mode), and the decision the folder's
thresholds.json makes of a row's logit (Decider). numpy, onnxruntime and hearsay's torch-free
modules only.

    engine = load_engine(Path("demo_out/export"))          # ModelError before anything scores
    decider = load_decider(Path("demo_out/export"), "min_dcf", llr=True)   # ModelError too
    for rows in rows_of(root, files, engine, ScoreConfig()):  # one list per finished chunk
        rows = decider.apply(rows)                          # fills decision (+ llr)

decision = "spoof" when the row's logit >= the threshold, else "bonafide" (the key's labels;
hearsay.metrics' rule: a tie is called synthetic); empty for a file that failed. The threshold is
a name in thresholds.json ("min_dcf", the default: the out-of-fold minDCF threshold at pi 0.3;
"eer"; "fa_rate") or a logit given as a number. A folder without thresholds.json (exported
without --meta) leaves `decision` empty unless a number is given, and says so on stderr.
llr = a * logit + b, the calibration thresholds.json holds (natural log; with --llr only). The
thresholds file is read through hearsay.contracts.model_dir, which owns its name and checks that
SHA256SUMS lists it (a decision comes from the folder's identity).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hearsay.contracts.model_dir import (
    THRESHOLDS,
    ModelError,
    check_graph_front_end,
    read_thresholds,
)
from hearsay.contracts.model_dir import threshold as named_threshold
from hearsay.contracts.model_dir import verify as verify_model_dir
from hearsay.deploy import inputs, io, memory, prepared, windowed
from hearsay.deploy.inputs import find_audio
from hearsay.deploy.io import new_row
from hearsay.engines.cpu_engine import RuntimeMissing, make_session, run_logits
from hearsay.sound import decoder, windows
from hearsay.sound.audio import SAMPLE_RATE

DEFAULT_THRESHOLD = "min_dcf"  # --threshold when none is given
MIN_SAMPLES = 400  # one frame of the CNN front end (25 ms @ 16 kHz)


@dataclass(frozen=True)
class ScoreConfig:
    batch_size: int = 8  # clips per onnxruntime call (sorted by length, so padding stays small)
    chunk: int = 32  # files decoded, scored and written together (rows stream per chunk)
    variant: str = "fp32"  # "fp32" -> model.onnx, "int8" -> model.int8.onnx
    threads: int = 0  # onnxruntime intra-op threads; 0 = the CPUs this process may use
    first_window: bool = False  # True: only the first max_s of each trimmed file (campaign)
    hop_s: float = windows.HOP_S  # window hop (s); windows are max_s long (front_end.json)
    window_chunk: int = 32  # windows cut ahead of scoring (32 x 8 s = 16 MB): bounds memory;
    #                         hearsay-score sets 4 x --batch-size, as chunk (batched)
    max_decode_s: float = decoder.MAX_DECODE_S  # per file and decode pass: longer fails the file
    max_decode_mb: int = decoder.MAX_DECODE_MB  # ffmpeg's address space: more fails the file

    @classmethod
    def batched(cls, batch_size: int, **options) -> ScoreConfig:
        """hearsay-score's and the Scorer's config: files and windows cut 4 batches ahead."""
        return cls(batch_size=batch_size, chunk=4 * batch_size, window_chunk=4 * batch_size,
                   **options)


# --------------------------------------------------------------------------- the engine


@dataclass(frozen=True)
class Engine:
    """A checked model folder, ready to score: the ORT session and the front end it expects.
    It scores model inputs (prepared windows); files and arrays go through hearsay.deploy.Scorer."""

    session: object  # onnxruntime.InferenceSession
    model_sha: str  # the model folder's identity (sha256 of SHA256SUMS), in every row
    front: dict  # prepare()'s kwargs: max_s, cutoff_hz, top_db
    min_samples: int  # shorter model inputs are refused (16 kHz samples)
    variant: str = "fp32"  # the model file that scores (fp32 / int8): every row names it

    def logits(self, waves: list[np.ndarray], batch_size: int = 8) -> np.ndarray:
        """run_logits on this engine's session, unchecked: the scorer's own windows only."""
        return run_logits(self.session, waves, batch_size)

    def prepared_logits(self, waves: list[np.ndarray], sample_rate: int,
                        batch_size: int = 8) -> np.ndarray:
        """(B,) logits of PREPARED model inputs at `sample_rate` (16000: the front end applied,
        one window, band-limited, normalised); ValueError for a wave that is not one
        (prepared.not_prepared: raw audio, or audio at another rate, would give another logit
        with no error: score it with Scorer.score_array or score_file instead)."""
        for k, w in enumerate(waves):
            why = prepared.not_prepared(w, sample_rate, self.front, self.min_samples)
            if why:
                raise ValueError(f"wave {k} is not a prepared model input ({why}): score audio "
                                 "with hearsay.deploy.Scorer(model).score_array(wave, "
                                 "sample_rate) or .score_file(path), which prepare it")
        return run_logits(self.session, waves, batch_size)


def load_engine(model_dir: Path, cfg: ScoreConfig = ScoreConfig()) -> Engine:
    """verify_model_dir + an onnxruntime session whose graph carries front_end.json's front end;
    raises ModelError (naming the file) before anything is scored."""
    model_path, model_sha, front = verify_model_dir(model_dir, cfg.variant)
    # at least min_s, and never under one CNN frame (400 samples = 25 ms) or the model has no input
    min_samples = max(int(round(front.pop("min_s") * SAMPLE_RATE)), MIN_SAMPLES)
    try:
        session = make_session(model_path, cfg.threads)
    except RuntimeMissing as err:  # the folder is fine: this Python lacks the runtime
        raise ModelError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own types for a bad graph
        why = str(err).splitlines()[0] if str(err) else repr(err)
        raise ModelError(f"{model_path} matches {model_dir}/SHA256SUMS but onnxruntime cannot "
                         f"load it ({why}): re-export the model folder") from None
    # the graph's own metadata_props name the front end it was exported with
    check_graph_front_end(model_dir, model_path, session.get_modelmeta().custom_metadata_map)
    return Engine(session, model_sha, front, min_samples, cfg.variant)


# --------------------------------------------------------------------------- first-window mode


def model_input(path: Path | memory.MemoryAudio, row: dict, scorer: Engine,
                cfg: ScoreConfig = ScoreConfig()) -> np.ndarray | None:
    """(N,) float32 model input of one file (or array), or None with the reason in row["error"].

    It is the first window of the windowed mode (windowed.file_windows: pass 1 keeps only the
    frame energies to find the trim span, pass 2 decodes up to the first window's end and
    stops), i.e. audio.prepare(whole wave, max_s) sample for sample, without the whole wave in
    memory: a 5-s call followed by hours of silence holds one window, not hours of samples."""
    one = replace(cfg, hop_s=scorer.front["max_s"])  # one window: any hop <= max_s cuts it
    try:
        lazy = windowed.file_windows(path, row, scorer, one)  # duration_s, header_s; too short
        with closing(lazy):  # ends the decode (and ffmpeg) after the first window
            first = next(lazy)
        windowed.first_window_span(row, first)
        return first.wave
    except Exception as err:  # noqa: BLE001 - any per-file failure is that file's error
        row["error"] = io.failure_reason(err)
    return None


def set_logit(row: dict, logit: float) -> bool:
    """score/logit of a one-window row; a non-finite logit fails the row instead (False)."""
    if not np.isfinite(logit):
        row["error"] = f"the model gave a non-finite logit ({logit}) for this file"
        return False
    row["logit"] = f"{logit:.6f}"
    row["score"] = f"{windowed.sigmoid(logit):.6f}"
    row["mean_logit"] = row["logit"]  # one window
    return True


def score_chunk(root: Path | None, paths: list, scorer: Engine, cfg: ScoreConfig) -> list[dict]:
    """Rows of `paths`, in their order: decode all, then one ORT pass batched by length.
    `root` None: each row's path is the path as given (a file, a list of files, an array)."""
    rows, waves, slots = [], [], []
    for path in paths:
        row = new_row(root, path, scorer.model_sha, scorer.variant)
        with np.errstate(all="ignore"):  # overflow is checked (isfinite), not warned about
            x = model_input(path, row, scorer, cfg)
        if x is not None:
            waves.append(x)
            slots.append(len(rows))
        rows.append(row)
    if waves:
        logits = run_logits(scorer.session, waves, cfg.batch_size)
        for slot, logit in zip(slots, logits, strict=True):
            if not set_logit(rows[slot], float(logit)):
                for k in ("windows", "covered_s", "peak_start_s", "peak_end_s"):
                    rows[slot].pop(k, None)
    return rows


def iter_chunks(root: Path | None, files, scorer: Engine,
                cfg: ScoreConfig = ScoreConfig()) -> Iterator[list[dict]]:
    """Rows of `files` (any iterable, taken lazily) in input order, one list per chunk of
    cfg.chunk files, as each finishes."""
    it = iter(files)
    while chunk := list(itertools.islice(it, cfg.chunk)):
        yield score_chunk(root, chunk, scorer, cfg)


def rows_of(root: Path | None, files: list, engine: Engine, cfg: ScoreConfig,
            on_windows=None, on_audio=None, on_file=None) -> Iterator[list[dict]]:
    """The chunks of rows of `files` in cfg's mode (first window, or windows: the default),
    each row bound to its file's identity (inputs.bound_rows: a file that changed while scored
    is an error row; `on_file(path, identity)` hears each)."""

    def chunks_of(paths):
        return (iter_chunks(root, paths, engine, cfg) if cfg.first_window else
                windowed.iter_window_chunks(root, paths, engine, cfg, on_windows, on_audio))

    return inputs.bound_rows(chunks_of, files, on_file)


def score_folder(root: Path, model_dir: Path, cfg: ScoreConfig = ScoreConfig()) -> list[dict]:
    """One row dict per audio file under `root` (COLUMNS); raises ModelError before scoring."""
    engine = load_engine(model_dir, cfg)
    files, _ = find_audio(root)
    chunks = rows_of(root, files, engine, cfg)
    return load_decider(model_dir, None, quiet=True).apply([r for c in chunks for r in c])


# --------------------------------------------------------------------------- the decision


@dataclass(frozen=True)
class Decider:
    name: str | None  # "min_dcf", "eer", "fa_rate", "value"; None: no threshold to decide at
    threshold: float | None  # logit
    calibration: dict | None  # {"a", "b"} when --llr

    def apply(self, rows: list[dict]) -> list[dict]:
        """`rows` with decision (and llr) set from each row's logit; the same list."""
        for row in rows:
            logit = row.get("logit") or ""
            if not logit or row.get("error"):
                row["decision"], row["llr"] = "", ""
                continue
            x = float(logit)
            row["decision"] = "" if self.threshold is None else \
                ("spoof" if x >= self.threshold else "bonafide")
            row["llr"] = "" if self.calibration is None else \
                f"{self.calibration['a'] * x + self.calibration['b']:.6f}"
        return rows


def load_decider(folder: Path, spec: str | None, llr: bool = False,
                 quiet: bool = False) -> Decider:
    """The decider of `folder` for --threshold `spec` (None: the default, min_dcf)."""
    thresholds = read_thresholds(folder)
    if llr and not (thresholds or {}).get("calibration"):
        raise ModelError(f"{folder}: --llr needs the calibration in {THRESHOLDS}, "
                         "which this folder does not ship (export it with `hearsay export onnx "
                         "--meta models/<stamp>/meta.json`)")
    cal = thresholds["calibration"] if llr else None
    if spec is None and thresholds is None:
        if not quiet:
            print(f"hearsay-score: {folder} has no {THRESHOLDS}: the decision column "
                  "stays empty (pass --threshold LOGIT, or export with --meta)", file=sys.stderr)
        return Decider(None, None, cal)
    name, value = named_threshold(thresholds, spec or DEFAULT_THRESHOLD)
    if not quiet:
        print(f"hearsay-score: decision = spoof at logit >= {value:g} ({name} threshold)",
              file=sys.stderr)
    return Decider(name, value, cal)


def add_decision_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--threshold", default=None, metavar="NAME|LOGIT",
                    help=f"the `decision` column's threshold: a name in the model folder's "
                    f"{THRESHOLDS} (min_dcf, the default: out-of-fold minDCF at pi "
                    "0.3; eer; fa_rate) or a logit")
    ap.add_argument("--llr", action="store_true",
                    help=f"fill the `llr` column: the calibrated log-likelihood ratio "
                    f"(a * logit + b from {THRESHOLDS})")
