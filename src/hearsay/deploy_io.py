"""hearsay-score's output as it runs: CSV rows streamed per chunk, progress and the summary line.

    sink, progress = RowSink(Path("scores.csv")), Progress(total=len(files))
    for rows in chunks:  sink.write(rows); progress.update(rows)
    sink.commit(); print(progress.summary(skipped), file=sys.stderr)

numpy-free, torch-free (the deploy image imports it); tqdm only when stderr is a terminal.
"""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path

COLUMNS = ["path", "duration_s", "score", "logit", "model_sha256", "error",
           "windows", "covered_s", "mean_logit", "peak_start_s", "peak_end_s"]


def new_row(root: Path, path: Path, model_sha: str) -> dict:
    """The CSV row of one file before it is scored: COLUMNS' first six, empty but path and model."""
    return {"path": path.relative_to(root).as_posix(), "duration_s": "", "score": "",
            "logit": "", "model_sha256": model_sha, "error": ""}


class RowSink:
    """CSV rows as they finish: stdout, or `-o FILE` through FILE.partial (flushed per chunk).

    `commit()` fsyncs and renames FILE.partial to FILE (atomic: FILE is never half written).
    Without commit (an interrupted run) FILE.partial stays with every finished row."""

    def __init__(self, output: Path | None, columns: list[str] = COLUMNS):
        self.output = output
        self.partial = None if output is None else output.with_name(output.name + ".partial")
        if self.partial is not None:
            self.partial.parent.mkdir(parents=True, exist_ok=True)
            self.stream = open(self.partial, "w", newline="")  # noqa: SIM115 - closed in commit
        else:
            self.stream = sys.stdout
        self.writer = csv.DictWriter(self.stream, fieldnames=columns, lineterminator="\n")
        self.writer.writeheader()
        self.stream.flush()

    def write(self, rows: list[dict]) -> None:
        self.writer.writerows(rows)
        self.stream.flush()

    def commit(self) -> None:
        if self.partial is not None:
            os.fsync(self.stream.fileno())
            self.stream.close()
            os.replace(self.partial, self.output)

    def abandon(self) -> None:
        if self.partial is not None:
            self.stream.close()


class Progress:
    """Files done on stderr: a tqdm bar on a terminal, else a plain line every `every_s` s."""

    def __init__(self, total: int, every_s: float = 30.0, stream=None):
        self.total, self.every_s, self.done, self.failed = total, every_s, 0, 0
        self.audio_s = 0.0  # trimmed audio seconds scored so far (windowed runs report it)
        self.stream = sys.stderr if stream is None else stream
        self.start = self.last = time.monotonic()
        self.bar = None
        if every_s > 0 and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="file", file=self.stream, desc="hearsay-score")

    def update(self, rows: list[dict]) -> None:
        self.done += len(rows)
        self.failed += sum(1 for r in rows if r["error"])
        if self.bar is not None:
            self.bar.update(len(rows))
        else:
            self._line()

    def audio(self, seconds: float) -> None:
        """More audio scored (inside a long file, before its row is done)."""
        self.audio_s += seconds
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.audio_s:.0f} audio s", refresh=True)
        else:
            self._line()

    def _line(self) -> None:
        if self.every_s > 0 and time.monotonic() - self.last >= self.every_s:
            self.last = time.monotonic()
            audio = f", {self.audio_s:.0f} audio s" if self.audio_s else ""
            print(f"hearsay-score: {self.done}/{self.total} files ({self.failed} failed){audio}, "
                  f"{self.last - self.start:.0f} s", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def summary(self, skipped: int) -> str:
        return (f"hearsay-score: {self.done - self.failed}/{self.done} scored, {self.failed} "
                f"failed, {skipped} skipped (not audio), {time.monotonic() - self.start:.1f} s")
