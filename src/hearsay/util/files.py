"""Writing files so that a reader never sees half of one, and JSON that strict readers accept
(stdlib only: the deploy image uses it).

    from hearsay.util.files import jsonable, write_atomic, write_json
    write_atomic(Path("scores.csv"), text)          # temp file beside it, fsync, os.replace
    write_json(run_dir / "run_meta.json", meta)     # indented, sorted keys, atomic too
    json.dumps(jsonable(metrics), allow_nan=False)  # inf / nan as strings: strict JSON
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync, then os.replace: never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: dict) -> None:
    """Indented, sorted JSON (config.json, run_meta.json); paths and the like as strings; written
    through write_atomic, so a reader (or a box killed mid-write) never sees half of it."""
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def jsonable(obj):
    """A copy with non-finite floats as strings ("inf", "-inf", "nan"): strict JSON has none."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj
