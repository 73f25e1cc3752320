"""hearsay-score --format jsonl: the same rows as the CSV, one JSON object a line.

    hearsay-score clips/ --format jsonl -o scores.jsonl     # through scores.jsonl.partial
    hearsay-score call.m4a --format jsonl | jq -r .decision

Each line is {column: value} with io.COLUMNS' keys in their order and the CSV's values as JSON
values (rowtypes.typed): numbers as numbers with the CSV's digits, ints as ints, null where the
CSV is empty, text as text; `path` escaped as in the CSV (\\xNN, the leading ' of a
formula-like name), so rowtypes.typed of a CSV row equals the jsonl row of that file. Lines end
in LF (JSON Lines); a row is always one line. Output goes through io.RowSink (FILE.partial, the
rename, the write checks, stdout closed), and --resume reads an interrupted FILE.partial back
with read_partial. Stdlib only.
"""

from __future__ import annotations

import json
from pathlib import Path

from hearsay.deploy import rowtypes
from hearsay.deploy.io import ResumeError, RowSink


class JsonlSink(RowSink):
    """RowSink writing JSON Lines: no header; one object per row."""

    def _start(self) -> None:
        pass

    def _put(self, rows: list[dict]) -> None:
        self.stream.write("".join(
            json.dumps(rowtypes.typed({c: r.get(c, "") for c in self.columns}),
                       ensure_ascii=False) + "\n"
            for r in rows))


def read_partial(partial: Path, columns: list[str]) -> list[dict]:
    """The complete rows of an interrupted run's FILE.partial ([] if there is none); a last line
    cut by the interrupt (no LF) is dropped; a row with other keys is refused (ResumeError).
    The rows come back as the CSV's text (rowtypes.text), as the sink is handed them."""
    if not partial.is_file():
        return []
    text = partial.read_text(encoding="utf-8")
    rows = []
    for n, line in enumerate(text[: text.rfind("\n") + 1].splitlines(), 1):
        try:
            row = json.loads(line)
        except ValueError:
            raise ResumeError(f"{partial} line {n} is not JSON (not written by hearsay-score "
                              "--format jsonl: remove it, or run without --resume)") from None
        if not isinstance(row, dict) or list(row) != columns:
            keys = list(row)[:20] if isinstance(row, dict) else type(row).__name__
            raise ResumeError(f"{partial} line {n} has keys {keys}, not {columns} "
                              "(written by another version: remove it, or run without "
                              "--resume)")
        rows.append(rowtypes.text(row))
    return rows
