"""The rental ledger, docs/ledger.csv (docs/INTERFACES.md, "Ledger"): the one reader. runner/lib/
ledger.sh appends its rows (under a lock, spooled when the disk is full); `hearsay ledger sum`
(runner/ledger.sh) and `hearsay assemble`'s report (hearsay.evaluate.report.spend) read it here.

    id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost,gpu_name,cpu_cores,
    driver_cuda,reason            (a ledger begun before the last four keeps the first nine)

Append-only: a rental's creation row (the last three columns empty), then, once its destruction
is confirmed, its closing row (destroyed_confirmed, hours and cost filled). A box judged gone
(closed) and then seen running again gets a re-open row (destroyed_confirmed empty, reason
"REOPENED <time>") and later a closing row anew. A create whose answer never came and whose
label no listing showed before its box's provision-by (or whose box no listing showed, so none
showed its duplicates) has one closing row alone, id "unseen:<label>", its hours the most such a
box can have billed: a rental like any other here. Columns after `cost` (a later writer's:
offer GPU, CPU cores, ...) are kept by their header names and judge nothing: rows with and
without them read alike.

    from hearsay.contracts import ledger
    for r in ledger.rows(path): r.id, r.job, r.closed, r.cost, r.extra   # one Rental per id
    s = ledger.summary(path)      # {"status", "total_usd", "open_ids", "unknown_cost_ids", ...}

The rules, once:
  a rental is its id; it is CLOSED when a row of it has destroyed_confirmed set (its first
    such row is its closing row), OPEN otherwise: still billing or never confirmed gone; a row
    without destroyed_confirmed after its closing row RE-OPENS it (the box ran on), and the
    first closing row after that is its closing row (its hours and cost, counted from the
    creation, replace the earlier one's)
  a closing row's cost (and hours) is a number, or UNKNOWN when empty or not a number: never
    $0. It is left out of the total, which is then a lower bound, and the rental is named
  a row of another width than 9, the header's, or (under a 9-column header) 13, or with no id,
    is MALFORMED (a write cut short) and named by line
  status: "complete" when every rental is closed with a known cost and no row is malformed,
    else "incomplete" (the total a lower bound); "unknown" when the file cannot be read

A row still in the spool (runner/lib/ledger.sh: an append that failed waits in
RUNNER_STATE/ledger.spool, header-less, until the next write) is read after the ledger's rows
when the reader is handed the spool: it counts as written.

hearsay ledger sum LEDGER    print rentals, hours and spend per job and in total, then the
                             malformed rows, the closed rentals whose cost is unknown and the
                             open ones (runner/ledger.sh prints this)
hearsay ledger hours LEDGER --job-prefix ablate- [--spool SPOOL] [--record ID CREATED DEADLINE]...
                   --open-default H
                             the GPU-hours of the rentals whose job starts with the prefix
                             (ledger + spool): a closed one at its hours column, an open one at
                             its most: (DEADLINE - CREATED) / 3600 from its --record (epoch
                             seconds: the job record's, where the reaper ends it), else H.
                             Printed as %.4f (runner/launch.sh ablate's GPU-hour cap). A missing
                             ledger is one with no rows yet.

Exit codes: 0 every rental closed with a known cost (sum) / the hours printed (hours); 1 some are
open, have an unknown cost, or a row is malformed (sum); 2 usage, or the file is unreadable or
has no ledger header; 3 a closed rental the hours count has no hours (named; hours).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

FILE = "ledger.csv"  # docs/ledger.csv in a checkout (runner/config.sh: LEDGER)
HEADER = ("id", "job", "generation", "offer", "dph", "created", "destroyed_confirmed", "hours",
          "cost")  # what every ledger's header starts with (a ledger begun before LATER: all of it)
# the columns runner/lib/ledger.sh writes after cost: the rented offer's GPU, vCPUs and driver CUDA,
# and the reason the rental ended (closing rows); a 9-column ledger gets such rows appended
LATER = ("gpu_name", "cpu_cores", "driver_cuda", "reason")
WRITTEN = HEADER + LATER  # the header of a ledger begun now
EXIT_OK, EXIT_OPEN, EXIT_USAGE, EXIT_NO_HOURS = 0, 1, 2, 3  # `hearsay ledger` (its help)


class LedgerError(ValueError):
    """The file is not the runner's ledger (no header) or cannot be read."""


@dataclass(frozen=True)
class Rental:
    id: str
    job: str
    generation: str
    created: str
    closed: bool
    hours: float | None  # None: open, or closed with the hours unknown
    cost: float | None  # USD; None: open, or closed with the cost unknown (never read as 0)
    extra: dict = field(default_factory=dict)  # the columns after cost, by header name


@dataclass(frozen=True)
class Read:
    rentals: list[Rental]  # one per id, in the order their first row appears
    malformed: list[int]  # 1-based line numbers


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _lines(path: Path) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise LedgerError(f"cannot read ledger {path} ({err}): pass the file, or set "
                          "LEDGER") from None


def read(path: Path, spool: Path | None = None, missing_ok: bool = False) -> Read:
    """Every rental of the ledger at `path` (the rules of the module docstring), then of the
    rows still in `spool` (header-less; numbered on after the ledger's lines). `missing_ok`: an
    absent ledger is one with no rows yet (the header runner/lib/ledger.sh writes first)."""
    path = Path(path)
    lines = ([",".join(WRITTEN)] if missing_ok and not path.exists() else _lines(path))
    if spool is not None and Path(spool).is_file():
        lines += _lines(Path(spool))
    head = lines[0].split(",") if lines else []
    if tuple(head[:len(HEADER)]) != HEADER:
        raise LedgerError(f"{path} has no ledger header (is it the runner's ledger?)")
    names = head[len(HEADER):] or list(LATER)  # a 9-column header: its appended rows carry LATER
    # whole rows: the first nine columns (a row written before the later ones), the header's
    # width, or under a 9-column header the 13 of WRITTEN; any other width is a write cut short
    widths = {len(HEADER), len(head)} | ({len(WRITTEN)} if len(head) == len(HEADER) else set())
    first: dict[str, list[str]] = {}
    closing: dict[str, list[str] | None] = {}  # None: open (again)
    malformed = []
    for number, line in enumerate(lines[1:], start=2):
        f = line.split(",")
        if len(f) not in widths or not f[0]:
            malformed.append(number)
            continue
        first.setdefault(f[0], f)
        if f[6]:
            if closing.get(f[0]) is None:  # the first closing row since the creation or a re-open
                closing[f[0]] = f
        elif closing.get(f[0]) is not None:  # an open row after the closing row: re-opened
            closing[f[0]] = None
    rentals = []
    for rid, f in first.items():
        c = closing.get(rid)
        row = c or f
        extra = {names[i] if i < len(names) else f"column{len(HEADER) + i + 1}": v
                 for i, v in enumerate(row[len(HEADER):])}
        rentals.append(Rental(rid, f[1], f[2], f[5], c is not None,
                              _number(c[7]) if c else None, _number(c[8]) if c else None, extra))
    return Read(rentals, malformed)


def rows(path: Path) -> list[Rental]:
    """The ledger's rentals, one per id (read(path).rentals)."""
    return read(path).rentals


def summary(path: Path | None) -> dict:
    """Spend from the ledger: status, total_usd (known costs only), per job, and the rentals
    the total leaves out (open ones, closed ones whose cost is unknown) and malformed lines.
    An unreadable or absent ledger is status "unknown" with total_usd None, never 0."""
    if path is None or not Path(path).is_file():
        return {"status": "unknown", "total_usd": None, "source": str(path),
                "note": "no ledger file: spend unknown"}
    try:
        got = read(path)
    except LedgerError as err:
        return {"status": "unknown", "total_usd": None, "source": str(path), "note": str(err)}
    closed = [r for r in got.rentals if r.closed]
    open_ids = [r.id for r in got.rentals if not r.closed]
    unknown = [r.id for r in closed if r.cost is None]
    by_job: dict[str, dict] = {}
    for r in closed:
        j = by_job.setdefault(r.job, {"rentals": 0, "hours": 0.0, "usd": 0.0})
        j["rentals"] += 1
        j["hours"] += r.hours or 0.0
        j["usd"] += r.cost or 0.0
    notes = []
    if open_ids:
        notes.append(f"{len(open_ids)} rental(s) without confirmed destruction")
    if unknown:
        notes.append(f"{len(unknown)} closed rental(s) with an unknown cost")
    if got.malformed:
        notes.append(f"{len(got.malformed)} malformed row(s)")
    bad = bool(open_ids or unknown or got.malformed)
    return {"status": "incomplete" if bad else "complete",
            "total_usd": float(sum(r.cost for r in closed if r.cost is not None)),
            "hours": float(sum(r.hours for r in closed if r.hours is not None)),
            "rows": len(got.rentals), "closed": len(closed), "open_rows": len(open_ids),
            "open_ids": open_ids, "unknown_cost_ids": unknown, "malformed_lines": got.malformed,
            "by_job": {j: v["usd"] for j, v in sorted(by_job.items())}, "jobs": by_job,
            "source": str(path),
            "note": ("; ".join(notes) + ": the total is a lower bound") if bad
            else "every rental closed"}


def print_summary(s: dict) -> None:
    """The text runner/ledger.sh prints (its --help): per job, total, then what is left out."""
    for j, v in sorted(s["jobs"].items()):
        print(f"{j:<8} rentals {v['rentals']:3d}  hours {v['hours']:9.4f}  spend ${v['usd']:9.4f}")
    print(f"total    rentals {s['closed']:3d}  hours {s['hours']:9.4f}  "
          f"spend ${s['total_usd']:9.4f}")
    if s["malformed_lines"]:
        print(f"malformed {len(s['malformed_lines'])} row(s) (a write cut short?) at line(s): "
              + " ".join(map(str, s["malformed_lines"])))
    if s["unknown_cost_ids"]:
        print(f"unknown  {len(s['unknown_cost_ids'])} closed rental(s) with no cost (cost "
              "unknown, not $0; left out of the total): " + " ".join(s["unknown_cost_ids"]))
    if s["open_ids"]:
        print(f"open     {len(s['open_ids'])} row(s) not confirmed destroyed: "
              + " ".join(s["open_ids"]))


class NoHours(LedgerError):
    """A closed rental whose closing row has no hours: its GPU-hours cannot be counted."""


def hours(path: Path, job_prefix: str, open_default: float, spool: Path | None = None,
          records: dict[str, tuple[str, str]] | None = None) -> float:
    """GPU-hours of the rentals whose job starts with `job_prefix`, in the ledger and its
    spool: a closed rental at its hours, an open one at its most: (deadline - created) / 3600
    of its record (epoch seconds; `records`: id -> (created, deadline)), else `open_default`.
    NoHours names a closed rental whose hours are not a number."""
    total = 0.0
    for r in read(path, spool, missing_ok=True).rentals:
        if not r.job.startswith(job_prefix):
            continue
        if r.closed:
            if r.hours is None:
                raise NoHours(f"ledger row of instance {r.id} has no hours: its GPU-hours "
                              "cannot be counted (fix the row; runner/ledger.sh names bad rows)")
            total += r.hours
            continue
        created, deadline = (_number(x) for x in (records or {}).get(r.id, ("", "")))
        total += open_default if created is None or deadline is None \
            else (deadline - created) / 3600
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="hearsay ledger", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("sum", help="sum the ledger (exit 1 while anything is left out)")
    s.add_argument("ledger", type=Path)
    h = sub.add_parser("hours", help="GPU-hours of a kind of rental, open ones at their most")
    h.add_argument("ledger", type=Path)
    h.add_argument("--job-prefix", required=True, help="count the jobs starting so (ablate-)")
    h.add_argument("--spool", type=Path, help="rows still waiting to be appended")
    h.add_argument("--record", nargs=3, action="append", default=[],
                   metavar=("ID", "CREATED", "DEADLINE"),
                   help="an open rental's job record: its most is DEADLINE - CREATED (epoch s)")
    h.add_argument("--open-default", type=float, required=True, metavar="H",
                   help="hours of an open rental without a record")
    args = ap.parse_args(argv)
    if args.verb == "hours":
        try:
            got = hours(args.ledger, args.job_prefix, args.open_default, args.spool,
                        {i: (c, d) for i, c, d in args.record})
        except NoHours as err:
            print(f"hearsay ledger hours: {err}", file=sys.stderr)
            return EXIT_NO_HOURS
        except LedgerError as err:
            print(f"hearsay ledger hours: {err}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{got:.4f}")
        return EXIT_OK
    try:
        read(args.ledger)
    except LedgerError as err:
        print(f"hearsay ledger: {err}", file=sys.stderr)
        return EXIT_USAGE
    got = summary(args.ledger)
    print_summary(got)
    return EXIT_OK if got["status"] == "complete" else EXIT_OPEN
