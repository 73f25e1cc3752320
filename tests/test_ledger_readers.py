"""The ledger has one reader, hearsay.contracts.ledger. The ablation cap asks it (`hearsay ledger
hours`: ledger + spool, open rentals at their most); the writer's two bash readers (its dedupe,
_ledger_has, and the reaper's ledger_open_rows: runner/lib/ledger.sh says why they stay in bash)
are held here to its answers on the same ledgers: 9- and 13-column forms, an empty closing cost,
a row still in the spool, a write cut short."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hearsay.contracts import ledger

REPO = Path(__file__).resolve().parents[1]
V1 = ",".join(ledger.HEADER)
V2 = ",".join(ledger.WRITTEN)
T0, T1 = "2026-12-01T10:00:00Z", "2026-12-01T12:00:00Z"


def opened(rid, job="ablate-a-fold0", gen="g-1", wide=True):
    return f"{rid},{job},{gen},off,0.5,{T0},,,," + (",,," if wide else "")


def closed(rid, job="ablate-a-fold0", gen="g-1", hours="2.0000", cost="1.0000", wide=True):
    return f"{rid},{job},{gen},off,0.5,{T0},{T1},{hours},{cost}" + (",A100,32,12.4,DONE" if wide
                                                                    else "")


def reopened(rid, job="ablate-a-fold0", gen="g-1"):
    """The row of a box judged gone (closed) and then seen running again (runner/lib/ledger.sh)."""
    return f"{rid},{job},{gen},off,0.5,{T0},,,,A100,32,12.4,REOPENED {T1}"


# name -> (ledger text or None for no file, spool text or None)
LEDGERS = {
    "13 columns": (
        [V2, opened("1"), closed("1"), opened("2"), opened("3", job="fold0"), closed("3", "fold0")],
        None),
    "9 columns with 13-column rows appended": (
        [V1, opened("1", wide=False), closed("1", wide=False), opened("2"), closed("2")], None),
    "an empty closing cost": ([V2, opened("1"), closed("1", cost=""), opened("2")], None),
    "a row still in the spool": ([V2, opened("1"), opened("2")], [closed("1"), opened("4")]),
    "only a spool": (None, [opened("5"), closed("5")]),
    "a write cut short": ([V2, opened("1"), closed("1")[:60], opened("2"), "6,abl"], None),
    "another job's generation": ([V2, opened("1", gen="g-2"), opened("1b", gen="g-1")], None),
    "a rental re-opened": ([V2, opened("1"), closed("1"), reopened("1"), opened("2")], None),
    "a re-opened rental closed again": (
        [V2, opened("1"), closed("1"), reopened("1"), closed("1", hours="3.0000")], None),
}


def write(tmp_path, name):
    text, spool = LEDGERS[name]
    path, spool_path = tmp_path / "ledger.csv", tmp_path / "state" / "ledger.spool"
    spool_path.parent.mkdir(exist_ok=True)
    if text is not None:
        path.write_text("\n".join(text) + "\n")
    if spool is not None:
        spool_path.write_text("\n".join(spool) + "\n")
    return path, spool_path


def bash(tmp_path, call: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LEDGER": str(tmp_path / "ledger.csv"),
           "RUNNER_STATE": str(tmp_path / "state")}
    script = (f'. "{REPO}/runner/lib/common.sh"; . "{REPO}/runner/lib/ledger.sh"; '
              f'{call} "$@"')
    return subprocess.run(["bash", "-c", script, "_", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def ids_in(name):
    text, spool = LEDGERS[name]
    return sorted({line.split(",")[0] for line in (text or [])[1:] + (spool or [])} - {""})


@pytest.mark.parametrize("name", [n for n in LEDGERS if LEDGERS[n][0] is not None])
def test_the_writers_dedupe_knows_a_rental_exactly_when_the_reader_does(tmp_path, name):
    path, _ = write(tmp_path, name)
    rentals = {r.id: r for r in ledger.rows(path)}
    for rid in ids_in(name) + ["absent"]:
        for kind, py in (("open", rid in rentals), ("closed", rid in rentals and
                                                     rentals[rid].closed)):
            got = bash(tmp_path, "_ledger_has", rid, kind).returncode == 0
            assert got == py, f"{name}: _ledger_has {rid} {kind} -> {got}, the reader {py}"


@pytest.mark.parametrize("name", sorted(LEDGERS))
@pytest.mark.parametrize("job,gen", [("ablate-a-fold0", "g-1"), ("fold0", "g-1"),
                                     ("ablate-a-fold0", "g-2")])
def test_the_reapers_open_rows_are_the_readers_open_rentals(tmp_path, name, job, gen):
    path, spool = write(tmp_path, name)
    want = [f"{r.id} {r.created}" for r in ledger.read(path, spool, missing_ok=True).rentals
            if r.job == job and r.generation == gen and not r.closed]
    out = bash(tmp_path, "ledger_open_rows", job, gen)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == want


def test_a_closing_row_cut_short_is_no_closing_row_so_the_writer_writes_it_again(tmp_path):
    path, _ = write(tmp_path, "a write cut short")
    assert not [r for r in ledger.rows(path) if r.id == "1"][0].closed
    assert bash(tmp_path, "_ledger_has", "1", "closed").returncode == 1
    assert bash(tmp_path, "_ledger_has", "1", "open").returncode == 0


# ------------------------------------------------------------------- hearsay ledger hours


def hours(tmp_path, name, *extra: str) -> tuple[int, str, str]:
    path, spool = write(tmp_path, name)
    out = subprocess.run(["python", "-m", "hearsay.cli", "ledger", "hours", str(path),
                          "--job-prefix", "ablate-", "--spool", str(spool),
                          "--open-default", "6", *extra], capture_output=True, text=True,
                         timeout=120)
    return out.returncode, out.stdout.strip(), out.stderr


@pytest.mark.parametrize("name,want", [
    ("13 columns", "8.0000"),                              # 1 closed 2 h + 2 open 6 h; fold0 not
    ("9 columns with 13-column rows appended", "4.0000"),  # two closed, 2 h each
    ("an empty closing cost", "8.0000"),                   # hours known though the cost is not
    ("a row still in the spool", "14.0000"),               # 1 closed in the spool; 2, 4 open
    ("only a spool", "2.0000"),                            # no ledger file yet
    ("a write cut short", "12.0000"),                      # 1's closing row cut: open, at most
])
def test_ablation_hours_count_closed_rentals_at_their_hours_and_open_ones_at_their_most(
        tmp_path, name, want):
    assert hours(tmp_path, name)[:2] == (0, want)


def test_an_open_rental_with_a_record_counts_to_its_deadline(tmp_path):
    rc, out, _ = hours(tmp_path, "13 columns", "--record", "2", "1000", "4600")  # 1 h
    assert (rc, out) == (0, "3.0000")
    rc, out, _ = hours(tmp_path, "13 columns", "--record", "2", "", "")  # no times: the default
    assert (rc, out) == (0, "8.0000")


def test_a_closed_rental_without_hours_stops_the_count_naming_it(tmp_path):
    LEDGERS["no hours"] = ([V2, opened("7"), closed("7", hours="", cost="")], None)
    try:
        rc, out, err = hours(tmp_path, "no hours")
    finally:
        del LEDGERS["no hours"]
    assert (rc, out) == (ledger.EXIT_NO_HOURS, "")
    assert "ledger row of instance 7 has no hours" in err


def test_a_file_that_is_not_a_ledger_is_refused_as_usage(tmp_path):
    (tmp_path / "ledger.csv").write_text("a,b,c\n")
    out = subprocess.run(["python", "-m", "hearsay.cli", "ledger", "hours",
                          str(tmp_path / "ledger.csv"), "--job-prefix", "ablate-",
                          "--open-default", "6"], capture_output=True, text=True, timeout=120)
    assert out.returncode == ledger.EXIT_USAGE and "no ledger header" in out.stderr
