"""The scorer as a Python API: the rows hearsay-score writes, for files and arrays.

    from hearsay.deploy import Scorer
    scorer = Scorer("demo_out/export")                 # ModelError: folder missing or altered
    row = scorer.score_file("call.m4a")                 # {"path": "call.m4a", "score": ..., ...}
    rows = scorer.score_files(["a.wav", "b.flac"])      # one row each, in order, batched
    wave, rate = soundfile.read("call.wav", dtype="float32")
    row = scorer.score_array(wave, rate)                # == score_file("call.wav") but "path"

A row is hearsay-score's row for that input (hearsay.deploy.io.COLUMNS: every value a string as
in the CSV, "" when not set; `path` the path as given, or score_array's `label`), with the
model folder's decision (and llr) at `threshold`. Same options, same front end, same numbers:
score_file(p) is the row `hearsay-score p` writes.

No un-prepared input reaches the model: score_array takes RAW audio at any rate and applies the
model folder's front end (mix-down, resampling to 16 kHz, trim, windows of front_end.json's
max_s, band-limit, normalisation) exactly as for a file; the rate is a required argument (there
is no default to forget), and an array that cannot be a recording (integer samples, (channels,
frames), a rate that is not a positive integer) raises ValueError naming the fix. Engine's
prepared_logits, the one call that takes model inputs, refuses a wave that is not one.
A file or array that cannot be scored (silent, too short, undecodable) is a row with its reason
in `error`, as in hearsay-score's output; a model folder that fails its checks raises ModelError
from the constructor, before anything is scored.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hearsay.deploy import engine, memory


class Scorer:
    """A model folder ready to score files and arrays as hearsay-score does (module docstring).

    Scorer(model_dir, threshold=None, llr=False, variant="fp32", first_window=False,
           hop_s=4.0, threads=0, batch_size=8): the options of hearsay-score's --threshold,
    --llr, --variant, --first-window, --hop-s, --threads and --batch-size."""

    def __init__(self, model_dir: str | os.PathLike, threshold: str | float | None = None,
                 llr: bool = False, variant: str = "fp32", first_window: bool = False,
                 hop_s: float = engine.ScoreConfig.hop_s, threads: int = 0,
                 batch_size: int = engine.ScoreConfig.batch_size):
        self.model_dir = Path(model_dir)
        self.cfg = engine.ScoreConfig(batch_size=batch_size, chunk=4 * batch_size,
                                      variant=variant, threads=threads,
                                      first_window=first_window, hop_s=hop_s,
                                      window_chunk=4 * batch_size)
        self.engine = engine.load_engine(self.model_dir, self.cfg)
        if not first_window and not 0 < hop_s <= self.engine.front["max_s"]:
            raise ValueError(f"hop_s {hop_s:g} must be in (0, {self.engine.front['max_s']:g}] "
                             "(the window length, front_end.json max_s)")
        self.decider = engine.load_decider(
            self.model_dir, None if threshold is None else str(threshold), llr, quiet=True)

    @property
    def threshold(self) -> float | None:
        """The decision's threshold (a logit; None: the folder has none and none was given)."""
        return self.decider.threshold

    def _rows(self, inputs: list) -> list[dict]:
        with np.errstate(all="ignore"):  # overflow is checked (isfinite), not warned about
            rows = [r for c in engine.rows_of(None, inputs, self.engine, self.cfg) for r in c]
        return self.decider.apply(rows)

    def score_files(self, paths: list[str | os.PathLike]) -> list[dict]:
        """One row per file, in order (onnxruntime calls shared between files)."""
        return self._rows([Path(p) for p in paths])

    def score_file(self, path: str | os.PathLike) -> dict:
        """The row of one file: decoded by its bytes (soundfile, else ffmpeg), as hearsay-score."""
        return self.score_files([path])[0]

    def score_array(self, wave, sample_rate: int, label: str = "<array>") -> dict:
        """The row of raw samples `wave` ((frames,) or (frames, channels), float, -1..1) at
        `sample_rate` Hz; `label` goes in its path column. ValueError for an array that cannot
        be a recording; duration_s is the length at 16 kHz; header_s stays empty."""
        return self._rows([memory.from_array(wave, sample_rate, label)])[0]
