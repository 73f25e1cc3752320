"""A score row's values as Python and JSON users read them: floats, ints and None.

    typed(row)       # {"score": 0.912345, "windows": 3, "error": None, ...} from a CSV row
    text(row)        # back to the CSV's text: text(typed(row)) == row for every row written

hearsay-score builds each row as the CSV's text (io.COLUMNS: numbers with the digits below,
"" when not set). The Python API (api.py) and --format jsonl (jsonl.py) hand out typed(row):
a number is a number (`row["score"] > 0.5` works; `jq '.score > 0.5'` compares numbers, not
a string with a number), and a value not set is None (JSON null). `path` is not touched here:
the API gives the path as given, the CSV and jsonl the escaped one (io.csv_path).
Stdlib only.
"""

from __future__ import annotations

# Numeric columns and the digits the CSV writes them with (engine.py, windowed.py, io.py):
# seconds to the ms, logits and scores to 1e-6.
FLOATS = {"duration_s": 3, "score": 6, "logit": 6, "covered_s": 3, "mean_logit": 6,
          "peak_start_s": 3, "peak_end_s": 3, "header_s": 3, "llr": 6,
          "start_s": 3, "end_s": 3}  # the last two: a window's row (windowed.WINDOW_COLUMNS)
INTS = ("windows", "audio_tracks")
KEEP = ("path",)  # never typed: "" is a name (an array's label may be empty), not "not set"


def typed(row: dict) -> dict:
    """`row` (CSV text) with numbers as float / int and every empty value as None."""
    out = {}
    for key, value in row.items():
        if key in KEEP or not isinstance(value, str):
            out[key] = value
        elif value == "":
            out[key] = None
        elif key in FLOATS:
            out[key] = float(value)
        elif key in INTS:
            out[key] = int(value)
        else:
            out[key] = value
    return out


def text(row: dict) -> dict:
    """`row` (typed, or already text) as the CSV's text: the inverse of typed()."""
    out = {}
    for key, value in row.items():
        if value is None:
            out[key] = ""
        elif key in FLOATS and isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = f"{value:.{FLOATS[key]}f}"
        else:
            out[key] = str(value)
    return out
