"""hearsay-score --resume, bound to the run that wrote FILE.partial.

    hearsay-score clips/ -o scores.csv            # interrupted: scores.csv.partial + .partial.json
    hearsay-score clips/ -o scores.csv --resume   # same folder, options, engine and model: goes on

`-o FILE` writes FILE.partial.json (the run record) before its first row: the inputs (a clips
folder's real path and its device:inode, so another folder mounted at the same path is told
apart; a file's or a list's absolute paths, as a sha256), the output format (csv, jsonl), every
option that changes a score or which files fail, the engine and the model identity (the folder's
SHA256SUMS sha and the variant). --resume keeps FILE.partial's rows only when the record equals
this run's; otherwise it refuses (exit 2) naming what differs and the fix. The record is removed
when FILE is complete. Stdlib only (the deploy image imports it).
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

from hearsay.deploy import inputs, jsonl
from hearsay.deploy.io import COLUMNS, ResumeError, partial_of, read_partial, say
from hearsay.files import write_json


def record_path(output: Path) -> Path:
    """FILE.partial.json: the record of the run that writes FILE.partial."""
    return output.with_name(output.name + ".partial.json")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def run_record(args, cfg, model_sha: str, source: dict | None = None) -> dict:
    """What made (or would make) these rows: inputs (`source`, inputs.Inputs.source; None: the
    folder args.clips), options, output format, engine, model identity."""
    wcsv = getattr(args, "windows_csv", None)
    source = inputs.folder_source(args.clips) if source is None else source
    return {**source, "format": getattr(args, "format", "csv"),
            "first_window": cfg.first_window,
            "hop_s": None if cfg.first_window else cfg.hop_s,
            "windows_csv": None if wcsv is None else os.path.realpath(wcsv),
            "max_decode_s": cfg.max_decode_s, "max_decode_mb": cfg.max_decode_mb,
            "variant": cfg.variant, "model_sums_sha256": model_sha,
            "engine": f"onnxruntime {_version('onnxruntime')}",
            "hearsay": _version("hearsay"), "columns": COLUMNS}


def write_record(output: Path | None, record: dict) -> None:
    if output is not None:
        write_json(record_path(output), record)


def drop_record(output: Path | None) -> None:
    if output is not None:
        record_path(output).unlink(missing_ok=True)


def resume_rows(args, record: dict, window_columns: list[str]
                ) -> tuple[list[dict], list[dict]]:
    """--resume: the complete rows of -o's and --windows-csv's .partial files (the window rows
    of files whose row is there only), if FILE.partial.json is this run's record; else
    ResumeError naming what differs."""
    partial, rec = partial_of(args.output), record_path(args.output)
    if not partial.is_file():
        say(f"hearsay-score: --resume: no {partial}, scoring every file")
        return [], []
    fix = (f"run again with the first run's folder and options, or remove {partial} and {rec} "
           "and run without --resume")
    if not rec.is_file():
        raise ResumeError(f"{partial} has no run record {rec} (not written by this "
                          f"hearsay-score): {fix}")
    try:
        old = json.loads(rec.read_text())
    except (OSError, ValueError) as err:
        raise ResumeError(f"{rec} cannot be read ({err}): {fix}") from None
    diff = [f"{k} {old.get(k)!r} -> {v!r}" for k, v in record.items() if old.get(k) != v]
    if diff:
        raise ResumeError(f"{partial} was written by another run ({'; '.join(diff)}): {fix}")
    read = jsonl.read_partial if record.get("format") == "jsonl" else read_partial
    kept = read(partial, COLUMNS)
    other = {(r["model_sums_sha256"], r["variant"]) for r in kept} - {
        (record["model_sums_sha256"], record["variant"])}
    if other:
        raise ResumeError(f"{partial} holds rows of model {sorted(other)[0]}, not this run's: "
                          f"{fix}")
    done = {r["path"] for r in kept}
    kept_windows = []
    if args.windows_csv is not None:
        wpartial = partial_of(args.windows_csv)
        kept_windows = [r for r in read_partial(wpartial, window_columns) if r["path"] in done]
    say(f"hearsay-score: --resume: {len(kept)} files already done in {partial}")
    return kept, kept_windows
