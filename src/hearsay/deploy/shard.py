"""Scoring one corpus on many machines: `hearsay-score --shard K/N` scores the K-th of N parts of
the inputs, and `hearsay-score merge` joins the N parts into the file one run would have written.

    hearsay-score clips/ -o part0.csv --shard 0/3      # on three machines (or pods, or tasks)
    hearsay-score clips/ -o part1.csv --shard 1/3
    hearsay-score clips/ -o part2.csv --shard 2/3
    hearsay-score merge -o scores.csv part0.csv part1.csv part2.csv

The split is by path: a file belongs to shard int(sha256(row path)[:8 bytes]) mod N, where the row
path is the `path` its row names (relative to CLIPS for a folder, as given for a list). Every
machine that sees the same inputs under the same names makes the same split, whatever order its
filesystem lists them in, without talking to the others. K is 0-based (0 <= K < N): a Kubernetes
Indexed Job's $JOB_COMPLETION_INDEX or a Slurm array's $SLURM_ARRAY_TASK_ID with --array=0-(N-1).

A shard run needs -o FILE and, once FILE is complete, writes FILE.shard.json beside it: the shard
(K, N), the run record's options (hearsay.deploy.inputs.run_record: format, windowing, decode
bounds, engine, model identity and variant), the decision options (--threshold, --llr), the
model's front end (front_end.json), the number and sha256 of ALL the inputs' row paths (before
the split) and, per row of FILE, its position among all the inputs. `merge` refuses (exit 2,
naming what) unless the records agree on all of that, the shards are 0..N-1 once each, every row
lies in the shard its path hashes to, and together they hold every input exactly once; then it
writes the rows in the order one run over all the inputs writes them, in the shards' format,
through OUTPUT.partial (renamed when complete). Stdlib only (the deploy image imports it).

Exit codes of merge: 0 merged; 2 usage, or shards that disagree, miss, repeat or lack a record;
5 OUTPUT not writable.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

from hearsay.deploy import io, jsonl
from hearsay.deploy.io import COLUMNS, OutputError, say
from hearsay.util.files import write_json

FORMAT = "hearsay-score-shard"
FORMAT_VERSION = 1
SPEC = re.compile(r"^(\d+)/(\d+)$")
# Run-record keys that name where this machine found things (its paths, device:inode), not what
# was scored: shards on different machines differ in them, and merge does not compare them.
LOCAL_KEYS = ("clips", "clips_id", "files", "files_sha256", "windows_csv")
EXIT_OK, EXIT_USAGE, EXIT_OUTPUT = 0, 2, 5


class ShardError(Exception):
    """The shards cannot be merged (or --shard is malformed); the message names why."""


def parse(spec: str | None) -> tuple[int, int] | None:
    """'K/N' -> (K, N), 0 <= K < N; None for None; ShardError otherwise."""
    if spec is None:
        return None
    m = SPEC.match(spec.strip())
    if not m or not int(m[1]) < int(m[2]):
        raise ShardError(f"--shard {spec!r}: give K/N with 0 <= K < N, e.g. --shard 0/4 "
                         "(K = $JOB_COMPLETION_INDEX or $SLURM_ARRAY_TASK_ID)")
    return int(m[1]), int(m[2])


def shard_of(row_path: str, n: int) -> int:
    """The shard (0..n-1) of a row path: the first 8 bytes of its sha256, mod n."""
    return int.from_bytes(hashlib.sha256(row_path.encode("utf-8")).digest()[:8], "big") % n


def split(src, spec: tuple[int, int] | None):
    """(the Inputs of shard K, {row path: position among all the inputs} of its files, the
    inputs' summary) for --shard K/N; (src, None, None) without it. `src` is
    hearsay.deploy.inputs.Inputs."""
    if spec is None:
        return src, None, None
    k, n = spec
    paths = [io.csv_path(src.root, f) for f in src.files]
    mine = [i for i, p in enumerate(paths) if shard_of(p, n) == k]
    summary = {"total": len(paths),
               "sha256": hashlib.sha256("\n".join(paths).encode("utf-8")).hexdigest()}
    return replace(src, files=[src.files[i] for i in mine]), {paths[i]: i for i in mine}, summary


def record_path(output: Path) -> Path:
    """FILE.shard.json: what the shard run that wrote FILE was."""
    return output.with_name(output.name + ".shard.json")


def write_record(args, record: dict, front: dict, positions: dict, summary: dict) -> None:
    """FILE.shard.json for a completed shard run (module docstring); OutputError if it cannot
    be written."""
    k, n = parse(args.shard)
    try:
        write_json(record_path(args.output), {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "shard": {"index": k, "count": n},
            "run": {k: v for k, v in record.items() if k not in (*LOCAL_KEYS, "shard")},
            "decision": {"threshold": args.threshold, "llr": args.llr},
            "front_end": front, "inputs": summary, "positions": positions})
    except OSError as err:
        raise OutputError(f"cannot write {record_path(args.output)}: {err.strerror or err} "
                          "(merge needs it: score this shard again)") from None


def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--shard", metavar="K/N",
                    help="score only the K-th of N parts of the inputs (0 <= K < N, split by "
                    "path; needs -o FILE, writes FILE.shard.json); join the parts with "
                    "`hearsay-score merge -o OUT PART...`")


def usage_error(args) -> str:
    """What is wrong with --shard as given (checked before any work), or ''."""
    if args.shard is None:
        return ""
    try:
        parse(args.shard)
    except ShardError as err:
        return str(err)
    return "" if args.output is not None else \
        "--shard needs -o FILE (FILE.shard.json beside it is what merge checks)"


# --------------------------------------------------------------------------- merge


def _read(part: Path) -> tuple[dict, list[dict]]:
    rec_path = record_path(part)
    try:
        rec = json.loads(rec_path.read_text())
    except (OSError, ValueError) as err:
        raise ShardError(f"{part}: no readable shard record {rec_path} ({err}): merge only the "
                         "complete outputs of `hearsay-score --shard K/N -o FILE`") from None
    if rec.get("format") != FORMAT or rec.get("format_version") != FORMAT_VERSION:
        raise ShardError(f"{rec_path} is not a {FORMAT} v{FORMAT_VERSION} record")
    read = jsonl.read_partial if rec["run"].get("format") == "jsonl" else io.read_partial
    try:
        rows = read(part, COLUMNS)
    except io.ResumeError as err:
        raise ShardError(f"{part}: {err}") from None
    if sorted(r["path"] for r in rows) != sorted(rec["positions"]):
        raise ShardError(f"{part} holds {len(rows)} rows, its record names "
                         f"{len(rec['positions'])} other or more files: the file was changed "
                         "after its run; score that shard again")
    return rec, rows


def merge(parts: list[Path]) -> tuple[list[dict], str]:
    """The rows of all the shards in one run's order, and their format; ShardError unless the
    shards agree and cover the inputs exactly once."""
    read = [(p, *_read(p)) for p in parts]
    first_part, first, _ = read[0]
    n = first["shard"]["count"]
    same = ("run", "decision", "front_end", "inputs")
    for part, rec, _ in read[1:]:
        if rec["shard"]["count"] != n:
            raise ShardError(f"{part} is shard {rec['shard']['index']}/{rec['shard']['count']}, "
                             f"{first_part} one of {n}: merge the parts of one split")
        for key in same:
            if rec[key] != first[key]:
                diff = sorted(k for k in set(rec[key]) | set(first[key])
                              if rec[key].get(k) != first[key].get(k))
                raise ShardError(f"{part} and {first_part} differ in {key} {diff}: every shard "
                                 "must score the same inputs with the same model and options")
    indices = sorted(rec["shard"]["index"] for _, rec, _ in read)
    if indices != list(range(n)):
        missing = sorted(set(range(n)) - set(indices))
        twice = sorted({i for i in indices if indices.count(i) > 1})
        raise ShardError(f"shards of {n}: missing {missing}, given twice {twice}: give each "
                         f"part 0..{n - 1} once")
    total, placed = first["inputs"]["total"], {}
    for part, rec, rows in read:
        k = rec["shard"]["index"]
        for row in rows:
            pos = rec["positions"][row["path"]]
            if shard_of(row["path"], n) != k or not 0 <= pos < total or pos in placed:
                raise ShardError(f"{part}: row {row['path']!r} (input {pos}) is not shard {k}'s "
                                 "own or is already in another part: score that shard again")
            placed[pos] = row
    if len(placed) != total:
        raise ShardError(f"the shards hold {len(placed)} of the {total} inputs: score the "
                         "missing files' shard again")
    return [placed[i] for i in range(total)], first["run"].get("format", "csv")


def merge_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="hearsay-score merge", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="+", type=Path, metavar="PART",
                    help="the outputs of `hearsay-score --shard K/N -o PART`, K = 0..N-1")
    ap.add_argument("-o", "--output", type=Path, required=True,
                    help="the merged file (written through OUTPUT.partial)")
    args = ap.parse_args(argv)
    try:
        io.check_writable(args.output)
        rows, fmt = merge(args.parts)
        sink = (jsonl.JsonlSink if fmt == "jsonl" else io.RowSink)(args.output)
        sink.write(rows)
        sink.commit()
    except ShardError as err:
        say(f"hearsay-score merge: {err}")
        return EXIT_USAGE
    except OutputError as err:
        say(f"hearsay-score merge: {err}")
        return EXIT_OUTPUT
    say(f"hearsay-score merge: {len(rows)} rows from {len(args.parts)} shards -> {args.output}")
    return EXIT_OK
