"""hearsay-score's windowed scoring: every window of every file, one row per file, in order.

    hearsay-score calls/ -o calls.csv --windows-csv calls.windows.csv     # the default mode
    hearsay-score clips/ -o clips.csv --first-window                     # campaign behaviour

Each file is streamed through hearsay.sound.windows.file_windows (decoded in blocks, trimmed once,
windows of front_end.json's max_s every --hop-s, each band-limited and normalised over its own
samples, timestamps in the file's time). Windows of consecutive files share onnxruntime calls;
at most ScoreConfig.window_chunk windows wait to be scored, so memory does not grow with a
file's length. The file's row gets:

    score, logit   the highest window logit (and its sigmoid): the synthetic part may be
                   anywhere, and a mean over a long call dilutes a few seconds of it away
    mean_logit     the mean window logit
    windows        the number of windows;  covered_s  the trimmed seconds they cover
    peak_start_s, peak_end_s   the highest window, in the original file's seconds

and --windows-csv FILE gets one WINDOW_COLUMNS row per window, in the same order.

numpy, onnxruntime (through hearsay.deploy), hearsay.sound.windows and hearsay.contracts.model_dir
only: never torch.
"""

from __future__ import annotations

import argparse
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hearsay.contracts.model_dir import FRONT_END
from hearsay.deploy import memory
from hearsay.deploy.io import RowSink, failure_reason, new_row, note_decode
from hearsay.detector.logits import sigmoid  # both modes of hearsay-score use it
from hearsay.sound import windows
from hearsay.sound.audio import SAMPLE_RATE, AudioError

WINDOW_COLUMNS = ["path", "start_s", "end_s", "logit", "score"]  # --windows-csv, one row a window


@dataclass
class _FileWindows:
    """One file's windows while they wait for their logits."""

    row: dict
    spans: list = field(default_factory=list)  # (start, end) samples in file time, per window
    logits: list = field(default_factory=list)  # float per window; None until scored
    cut: bool = False  # every window of the file has been cut (or the file failed)
    written: int = 0  # windows already handed to on_windows (--windows-csv)


def windowed_rows(root: Path, files: list[Path], scorer, cfg,
                  on_windows: Callable[[list[dict]], None] | None = None,
                  on_audio: Callable[[float], None] | None = None) -> Iterator[dict]:
    """Yield one row per file, in `files` order, from all of its windows (module docstring).

    `scorer` is a hearsay.deploy.Engine, `cfg` its ScoreConfig; a row is yielded once its
    file's last window is scored. `on_windows` gets window rows after every onnxruntime pass,
    in file and window order (a long file's windows reach --windows-csv batch by batch, before
    its row). `on_audio(s)` hears of every pass: the trimmed seconds it newly covered."""
    if scorer.front.get("max_s") is None:
        raise ValueError(f"{FRONT_END} has no max_s: windows need the deploy length")
    waiting: deque[_FileWindows] = deque()
    pending: list[tuple[_FileWindows, int, np.ndarray]] = []  # (file, window index, wave)

    def score_pending() -> None:
        if pending:
            logits = scorer.logits([w for _, _, w in pending], cfg.batch_size)
            new = 0  # samples first covered by these windows (overlaps counted once)
            for (fw, k, _), logit in zip(pending, logits, strict=True):
                fw.logits[k] = float(logit)
                new += fw.spans[k][1] - (fw.spans[k - 1][1] if k else fw.spans[k][0])
            pending.clear()
            write_windows()
            if on_audio is not None:
                on_audio(new / SAMPLE_RATE)

    def write_windows() -> None:
        rows = []
        for fw in waiting:  # in file order: a later file's windows wait for the earlier file's
            k = fw.written
            while k < len(fw.logits) and fw.logits[k] is not None:
                k += 1
            rows += window_rows(fw, fw.written, k)
            fw.written = max(fw.written, k)
            if not fw.cut or fw.written < len(fw.logits):
                break
        if rows and on_windows is not None:
            on_windows(rows)

    def finished() -> Iterator[dict]:
        while waiting and waiting[0].cut and None not in waiting[0].logits:
            yield finish_file(waiting.popleft())

    for path in files:
        fw = _FileWindows(new_row(root, path, scorer.model_sha, scorer.variant))
        waiting.append(fw)
        try:
            for w in file_windows(path, fw.row, scorer, cfg):
                fw.spans.append((w.start, w.end))
                fw.logits.append(None)
                pending.append((fw, len(fw.logits) - 1, w.wave))
                if len(pending) >= cfg.window_chunk:
                    score_pending()
                    yield from finished()  # earlier files done while a long one is cut
        except Exception as err:  # noqa: BLE001 - any per-file failure is that file's error
            fw.row["error"] = failure_reason(err)
            fw.spans.clear()
            fw.logits.clear()
            pending[:] = [p for p in pending if p[0] is not fw]
        fw.cut = True
        yield from finished()
    score_pending()
    yield from finished()


def file_windows(path: Path | memory.MemoryAudio, row: dict, scorer, cfg
                 ) -> Iterator[windows.Window]:
    """The windows of one file or array (lazy); duration_s goes into `row`, a too-short one
    raises."""
    front = scorer.front
    cut = memory.file_windows if isinstance(path, memory.MemoryAudio) else windows.file_windows
    n, (lo, hi), lazy, info = cut(path, front["max_s"], cfg.hop_s,
                                                   top_db=front["top_db"],
                                                   cutoff_hz=front["cutoff_hz"],
                                                   max_s=cfg.max_decode_s,
                                                   max_mb=cfg.max_decode_mb)
    note_decode(row, n, info)  # duration_s: decoded; header_s, audio_tracks: see io
    if hi - lo < scorer.min_samples:
        raise AudioError(path, f"too short after trimming ({(hi - lo) / SAMPLE_RATE:.3f} s < "
                         f"{scorer.min_samples / SAMPLE_RATE:g} s)")
    return lazy


def window_rows(fw: _FileWindows, a: int, b: int) -> list[dict]:
    """--windows-csv rows of fw's windows a..b-1 (all scored)."""
    return [{"path": fw.row["path"], "start_s": f"{s / SAMPLE_RATE:.3f}",
             "end_s": f"{e / SAMPLE_RATE:.3f}", "logit": f"{z:.6f}" if np.isfinite(z) else "",
             "score": f"{sigmoid(z):.6f}" if np.isfinite(z) else ""}
            for (s, e), z in zip(fw.spans[a:b], fw.logits[a:b], strict=True)]


def finish_file(fw: _FileWindows) -> dict:
    """Fill a file's row from its window logits: max (score, logit), mean, count, timestamps."""
    row = fw.row
    if row["error"] or not fw.logits:
        return row
    logits = np.asarray(fw.logits, dtype=np.float64)
    if not np.isfinite(logits).all():  # never a NaN score: the row fails, with the window
        k = int(np.flatnonzero(~np.isfinite(logits))[0])
        row["error"] = (f"the model gave a non-finite logit ({logits[k]}) for the window at "
                        f"{fw.spans[k][0] / SAMPLE_RATE:.3f} s")
        return row
    peak = int(np.argmax(logits))  # the first of equal maxima
    lo, hi = fw.spans[0][0], fw.spans[-1][1]
    row.update(logit=f"{logits[peak]:.6f}", score=f"{sigmoid(logits[peak]):.6f}",
               mean_logit=f"{logits.mean():.6f}", windows=str(len(logits)),
               covered_s=f"{(hi - lo) / SAMPLE_RATE:.3f}",
               peak_start_s=f"{fw.spans[peak][0] / SAMPLE_RATE:.3f}",
               peak_end_s=f"{fw.spans[peak][1] / SAMPLE_RATE:.3f}")
    return row


def iter_window_chunks(root: Path, files: list[Path], scorer, cfg,
                       on_windows: Callable[[list[dict]], None] | None = None,
                       on_audio: Callable[[float], None] | None = None) -> Iterator[list[dict]]:
    """windowed_rows as hearsay-score's chunks: each finished file's row as soon as it is done
    (a long file is one row, so rows are flushed file by file)."""
    for row in windowed_rows(root, files, scorer, cfg, on_windows, on_audio):
        yield [row]


def first_window_span(row: dict, first: windows.Window) -> None:
    """--first-window: the columns of its one window (file time: the trim offset included)."""
    row.update(windows="1", covered_s=f"{len(first.wave) / SAMPLE_RATE:.3f}",
               peak_start_s=f"{first.start_s:.3f}", peak_end_s=f"{first.end_s:.3f}")


# --------------------------------------------------------------------------- command line


def add_window_args(ap: argparse.ArgumentParser, hop_s: float) -> None:
    """--windows (default) / --first-window, --hop-s, --windows-csv."""
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--windows", dest="first_window", action="store_false", default=False,
                      help="score every window of each file (the default; see WINDOWS above)")
    mode.add_argument("--first-window", action="store_true",
                      help="score only the first max_s trimmed seconds of each file, as the "
                      "campaign's scores were made: the mode that reproduces them (out-of-fold, "
                      "holdout, test and probe; the windowed default does not for a file longer "
                      "than max_s after trimming)")
    ap.add_argument("--hop-s", type=float, default=hop_s,
                    help=f"seconds between window starts (default {hop_s:g}; at most the "
                    "window length, max_s)")
    ap.add_argument("--windows-csv", type=Path, metavar="FILE",
                    help="also write one row per window (" + ",".join(WINDOW_COLUMNS) + "), "
                    "through FILE.partial like -o")


def window_usage_error(args) -> str:
    """The message for a bad combination of window options, or ''."""
    if args.first_window and args.windows_csv:
        return "--windows-csv needs windowed scoring (drop --first-window)"
    return ""


class WindowSink(RowSink):
    """--windows-csv FILE: RowSink with WINDOW_COLUMNS; without FILE every call is a no-op."""

    def __init__(self, output: Path | None, keep: list[dict] | None = None):
        self.enabled = output is not None
        if self.enabled:
            super().__init__(output, WINDOW_COLUMNS, keep)

    def write(self, rows: list[dict]) -> None:
        if self.enabled:
            super().write(rows)

    def commit(self) -> None:
        if self.enabled:
            super().commit()

    def abandon(self) -> None:
        if self.enabled:
            super().abandon()
