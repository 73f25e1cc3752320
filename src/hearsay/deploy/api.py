"""The scorer as a Python API: hearsay-score's rows, for files and arrays, with Python values.

    from hearsay.deploy import Scorer
    scorer = Scorer("demo_out/export")                  # ModelError: folder missing or altered
    row = scorer.score_file("call.m4a")                  # {"path": "call.m4a", "score": 0.91, ...}
    if row["error"] is None and row["score"] > 0.5: ...
    rows = scorer.score_files(["a.wav", "b.flac"])       # one row each, in order, batched
    wave, rate = soundfile.read("call.wav", dtype="float32")
    row = scorer.score_array(wave, rate)                 # == score_file("call.wav") but "path"
    rows = scorer.score_arrays([w1, w2], 16_000)         # one row each (rates: one, or a list)
    row = scorer.score_file("call.m4a", per_window=True) # + row["window_rows"]: every window
    json.dumps(row)                                      # the line `--format jsonl` writes but path

A row is the row hearsay-score writes for that input (hearsay.deploy.io.COLUMNS), as Python
values (rowtypes.typed): score, logit, mean_logit, llr, duration_s, covered_s, peak_start_s,
peak_end_s and header_s are floats, windows and audio_tracks ints, and a value not set is None
(error is None when the input scored; decision is None when it failed or there is no
threshold). `path` is the path as given (str(path), unescaped: the CSV's leading ' and \\xNN
are the CSV's own), or score_array's `label`. Same options, same front end, same numbers:
score_file(p) is `hearsay-score p`'s row. With per_window=True each row also holds
"window_rows": [{"start_s", "end_s", "logit", "score"}, ...], the --windows-csv rows of that
input in order (file seconds; [] when it failed); first_window=True has no windows to list.

No un-prepared input reaches the model: score_array takes RAW audio and applies the model
folder's front end (mix-down, resampling to 16 kHz, trim, windows of front_end.json's max_s,
band-limit, normalisation) exactly as for a file. Its rate is a required argument in Hz, from
MIN_RATE to MAX_RATE (4-384 kHz): 44 (kHz typed for Hz) or 10_000_000 raise ValueError, as do
an empty array, integer samples and a (channels, frames) array, each naming the fix. Engine's
prepared_logits, the one call that takes model inputs, refuses what is not one (prepared.py).
A file or array that cannot be scored (silent, too short, undecodable) is a row with its reason
in `error`, as in hearsay-score's output; a model folder that fails its checks raises ModelError
from the constructor, before anything is scored.

A folder without thresholds.json (exported without --meta) and no `threshold` given leaves every
decision None: the constructor warns (NoThresholdWarning), and with require_threshold=True
raises ModelError instead.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from hearsay.contracts.model_dir import THRESHOLDS, ModelError
from hearsay.deploy import engine, memory, rowtypes
from hearsay.deploy.io import COLUMNS
from hearsay.deploy.memory import MAX_RATE, MIN_RATE  # noqa: F401 - the documented range


class NoThresholdWarning(UserWarning):
    """The model folder has no thresholds.json and no threshold was given: no decisions."""


class Scorer:
    """A model folder ready to score files and arrays as hearsay-score does (module docstring).

    Scorer(model_dir, threshold=None, llr=False, variant="fp32", first_window=False,
           hop_s=4.0, threads=0, batch_size=8, require_threshold=False): the options of
    hearsay-score's --threshold, --llr, --variant, --first-window, --hop-s, --threads and
    --batch-size; require_threshold=True turns NoThresholdWarning into ModelError."""

    def __init__(self, model_dir: str | os.PathLike, threshold: str | float | None = None,
                 llr: bool = False, variant: str = "fp32", first_window: bool = False,
                 hop_s: float = engine.ScoreConfig.hop_s, threads: int = 0,
                 batch_size: int = engine.ScoreConfig.batch_size,
                 require_threshold: bool = False):
        self.model_dir = Path(model_dir)
        self.cfg = engine.ScoreConfig.batched(batch_size, variant=variant, threads=threads,
                                              first_window=first_window, hop_s=hop_s)
        self.engine = engine.load_engine(self.model_dir, self.cfg)
        if not first_window and not 0 < hop_s <= self.engine.front["max_s"]:
            raise ValueError(f"hop_s {hop_s:g} must be in (0, {self.engine.front['max_s']:g}] "
                             "(the window length, front_end.json max_s)")
        self.decider = engine.load_decider(
            self.model_dir, None if threshold is None else str(threshold), llr, quiet=True)
        if self.decider.threshold is None:
            why = (f"{self.model_dir} has no {THRESHOLDS} and no threshold was given: every "
                   "row's decision is None (pass threshold=LOGIT, or export the folder with "
                   "`hearsay export onnx --meta models/<stamp>/meta.json`)")
            if require_threshold:
                raise ModelError(why)
            warnings.warn(why, NoThresholdWarning, stacklevel=2)

    @property
    def threshold(self) -> float | None:
        """The decision's threshold (a logit; None: the folder has none and none was given)."""
        return self.decider.threshold

    def _row(self, row: dict, name: str) -> dict:
        """The CSV's row (every column, in COLUMNS' order) typed, with `name` as its path."""
        return rowtypes.typed({c: row.get(c, "") for c in COLUMNS}) | {"path": name}

    def _rows(self, inputs: list, names: list[str], per_window: bool) -> list[dict]:
        """Typed rows of `inputs` (paths or memory.MemoryAudio), `path` set to `names`."""
        if per_window and self.cfg.first_window:
            raise ValueError("per_window needs windowed scoring: Scorer(..., first_window=False)"
                             " (the first-window mode scores one window, row's peak_*_s)")
        with np.errstate(all="ignore"):  # overflow is checked (isfinite), not warned about
            if not per_window:  # every input in one stream: onnxruntime calls shared
                rows = [r for c in engine.rows_of(None, inputs, self.engine, self.cfg)
                        for r in c]
                return [self._row(r, n)
                        for r, n in zip(self.decider.apply(rows), names, strict=True)]
            out = []
            for src, name in zip(inputs, names, strict=True):  # one input at a time: its windows
                wins: list[dict] = []
                [row] = [r for c in engine.rows_of(None, [src], self.engine, self.cfg,
                                                   wins.extend) for r in c]
                row = self._row(self.decider.apply([row])[0], name)
                row["window_rows"] = [] if row["error"] else [
                    {k: v for k, v in rowtypes.typed(w).items() if k != "path"} for w in wins]
                out.append(row)
            return out

    def score_files(self, paths: list[str | os.PathLike], per_window: bool = False
                    ) -> list[dict]:
        """One row per file, in order (onnxruntime calls shared between files)."""
        return self._rows([Path(p) for p in paths], [os.fspath(p) for p in paths], per_window)

    def score_file(self, path: str | os.PathLike, per_window: bool = False) -> dict:
        """The row of one file: decoded by its bytes (soundfile, else ffmpeg), as hearsay-score."""
        return self.score_files([path], per_window)[0]

    def score_arrays(self, waves: list, sample_rate: int | list[int],
                     labels: list[str] | None = None, per_window: bool = False) -> list[dict]:
        """One row per array of raw samples, in order, batched as score_files batches files.
        `sample_rate`: one rate (Hz) for all, or one per array; `labels`: each row's path
        (default "<array k>"). Every array is checked first: ValueError before any scoring."""
        rates = sample_rate if isinstance(sample_rate, list | tuple) else [sample_rate] * len(
            waves)
        labels = [f"<array {k}>" for k in range(len(waves))] if labels is None else labels
        if not len(rates) == len(labels) == len(waves):
            raise ValueError(f"{len(waves)} arrays, {len(rates)} rates and {len(labels)} "
                             "labels: pass one rate (or one per array) and one label per array")
        srcs = []
        for k, (wave, rate, label) in enumerate(zip(waves, rates, labels, strict=True)):
            try:
                srcs.append(memory.from_array(wave, rate, label))
            except ValueError as err:
                raise ValueError(f"array {k} ({label}): {err}") from None
        return self._rows(srcs, list(labels), per_window)

    def score_array(self, wave, sample_rate: int, label: str = "<array>",
                    per_window: bool = False) -> dict:
        """The row of raw samples `wave` ((frames,) or (frames, channels), float, -1..1) at
        `sample_rate` Hz (MIN_RATE..MAX_RATE); `label` is its path. ValueError for an array that
        cannot be a recording; duration_s is the length at 16 kHz; header_s is None."""
        src = memory.from_array(wave, sample_rate, label)
        return self._rows([src], [label], per_window)[0]
