"""hearsay-score --format jsonl: the same rows as the CSV, one JSON object a line.

    hearsay-score clips/ --format jsonl -o scores.jsonl     # through scores.jsonl.partial
    hearsay-score call.m4a --format jsonl | jq -r .decision

Each line is {column: value} with io.COLUMNS' keys in their order and the CSV's values as JSON
values (rowtypes.typed): numbers as numbers with the CSV's digits, ints as ints, null where the
CSV is empty, text as text; `path` escaped as in the CSV (\\xNN, the leading ' of a
formula-like name), so rowtypes.typed of a CSV row equals the jsonl row of that file. Lines end
in LF (JSON Lines); a row is always one line: the control characters and every other line
separator (U+0085, U+2028, U+2029) are escaped (json_line), so readers that split lines on them
(str.splitlines) see one object a line too. Output goes through io.RowSink (FILE.partial, the
rename, the write checks, stdout closed), and --resume reads an interrupted FILE.partial back
with read_partial (a last line cut anywhere is dropped). Stdlib only.
"""

from __future__ import annotations

import json
from pathlib import Path

from hearsay.deploy import rowtypes
from hearsay.deploy.io import ResumeError, RowSink, whole_lines


class JsonlSink(RowSink):
    """RowSink writing JSON Lines: no header; one object per row."""

    def _start(self) -> None:
        pass

    def _put(self, rows: list[dict]) -> None:
        self.stream.write("".join(
            json_line(rowtypes.typed({c: r.get(c, "") for c in self.columns})) for r in rows))


# json.dumps escapes the control characters but writes these raw (ensure_ascii=False): each
# ends a line for some reader (str.splitlines, JavaScript before ES2019), so they are escaped
# too, and every reader sees one object a line. They occur inside strings only (keys are ASCII).
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_line(obj: dict) -> str:
    """One JSON Lines line: `obj` as UTF-8 JSON with every line separator escaped, then LF."""
    text = json.dumps(obj, ensure_ascii=False)
    for raw, escaped in _LINE_BREAKS.items():
        text = text.replace(raw, escaped)
    return text + "\n"


def read_partial(partial: Path, columns: list[str]) -> list[dict]:
    """The complete rows of an interrupted run's FILE.partial ([] if there is none; a last line
    cut anywhere is dropped: io.whole_lines); a line that is not JSON, or a row with other keys,
    is refused (ResumeError). The rows come back as the CSV's text (rowtypes.text), as the sink
    is handed them."""
    rows = []
    for n, line in enumerate(whole_lines(partial), 1):
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
