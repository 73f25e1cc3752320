"""hearsay.contracts.ledger at its edges: which rows are whole, which closing row counts, what
the total leaves out and says so, and the text `hearsay ledger sum` prints."""

from __future__ import annotations

import pytest

from hearsay.contracts import ledger

HEAD = ",".join(ledger.HEADER)
WRITTEN = ",".join(ledger.WRITTEN)


def row(rid, job="fold", closed="", hours="", cost="", *later):
    """One ledger row: created columns, then the three closing ones, then any later ones."""
    return ",".join([rid, job, f"g{rid}", "9", "0.5", "2026-11-30T00:00:00Z", closed, hours,
                     cost, *later])


def write(tmp_path, *lines, head=HEAD):
    p = tmp_path / "ledger.csv"
    p.write_text("\n".join([head, *lines]) + "\n")
    return p


DONE = "2026-11-30T02:00:00Z"


def test_the_first_closing_row_of_a_rental_counts_and_its_first_row_names_it(tmp_path):
    p = write(tmp_path, row("1", "fold"), row("1", "full", DONE, "2", "1.0"),
              row("1", "full", DONE, "9", "9.0"))
    (r,) = ledger.rows(p)
    assert r == ledger.Rental("1", "fold", "g1", "2026-11-30T00:00:00Z", True, 2.0, 1.0, {})


@pytest.mark.parametrize("text", ["", "x", "nan", "inf", "-inf"])
def test_a_cost_or_hours_that_is_not_a_finite_number_is_unknown(tmp_path, text):
    (r,) = ledger.rows(write(tmp_path, row("1", "fold", DONE, text, text)))
    assert r.closed and r.hours is None and r.cost is None


def test_an_open_rental_has_no_hours_or_cost_whatever_its_row_says(tmp_path):
    (r,) = ledger.rows(write(tmp_path, row("1", "fold", "", "3", "4")))
    assert not r.closed and (r.hours, r.cost) == (None, None)


def test_a_nine_column_ledger_takes_rows_of_nine_or_thirteen_and_names_the_later_columns(
        tmp_path):
    p = write(tmp_path, row("1", "fold", DONE, "1", "2"),
              row("2", "fold", DONE, "1", "2", "H100", "16", "12.4", "done"),
              row("3", "fold", DONE, "1", "2", "H100"), row("", "fold", DONE, "1", "2"))
    got = ledger.read(p)
    assert [r.id for r in got.rentals] == ["1", "2"] and got.malformed == [4, 5]
    assert got.rentals[1].extra == {"gpu_name": "H100", "cpu_cores": "16", "driver_cuda": "12.4",
                                    "reason": "done"}


def test_a_ledger_of_another_width_takes_its_own_width_and_nine_only(tmp_path):
    head = HEAD + ",gpu_name,cpu_cores"
    p = write(tmp_path, row("1", "fold", DONE, "1", "2"),
              row("2", "fold", DONE, "1", "2", "H100", "16"),
              row("3", "fold", DONE, "1", "2", "H100", "16", "12.4", "done"), head=head)
    got = ledger.read(p)
    assert [r.id for r in got.rentals] == ["1", "2"] and got.malformed == [4]
    p = write(tmp_path, row("1", "fold", DONE, "1", "2", "a", "b", "c", "d", "e"),
              head=WRITTEN + ",extra")
    assert ledger.rows(p)[0].extra == {**dict(zip(ledger.LATER, "abcd", strict=True)),
                                       "extra": "e"}


@pytest.mark.parametrize("text", ["", "id,job\n", "job,id,generation\n"])
def test_a_file_without_the_ledger_header_is_refused(tmp_path, text):
    p = tmp_path / "l.csv"
    p.write_text(text)
    with pytest.raises(ledger.LedgerError, match="has no ledger header"):
        ledger.read(p)
    s = ledger.summary(p)
    assert s == {"status": "unknown", "total_usd": None, "source": str(p),
                 "note": f"{p} has no ledger header (is it the runner's ledger?)"}


def test_an_unreadable_ledger_names_the_fix_and_no_ledger_is_spend_unknown(tmp_path):
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ledger.LedgerError, match="cannot read ledger .*: pass the file, or set "
                                                 "LEDGER"):
        ledger.read(tmp_path / "bin.csv")
    for path in (None, tmp_path / "none.csv"):
        assert ledger.summary(path) == {"status": "unknown", "total_usd": None,
                                        "source": str(path),
                                        "note": "no ledger file: spend unknown"}


def test_the_summary_sums_known_costs_per_job_and_names_all_it_leaves_out(tmp_path):
    p = write(tmp_path, row("1", "fold", DONE, "1.5", "3.0"), row("2", "full", DONE, "2", ""),
              row("3", "fold"), row("4", "fold", DONE, "0.5", "1.25"), "cut,short",
              row("5", "abl", DONE, "", "0.5"))
    s = ledger.summary(p)
    assert s == {
        "status": "incomplete", "total_usd": 4.75, "hours": 4.0, "rows": 5, "closed": 4,
        "open_rows": 1, "open_ids": ["3"], "unknown_cost_ids": ["2"], "malformed_lines": [6],
        "by_job": {"abl": 0.5, "fold": 4.25, "full": 0.0},
        "jobs": {"fold": {"rentals": 2, "hours": 2.0, "usd": 4.25},
                 "full": {"rentals": 1, "hours": 2.0, "usd": 0.0},
                 "abl": {"rentals": 1, "hours": 0.0, "usd": 0.5}},
        "source": str(p),
        "note": "1 rental(s) without confirmed destruction; 1 closed rental(s) with an unknown "
                "cost; 1 malformed row(s): the total is a lower bound"}
    whole = ledger.summary(write(tmp_path, row("1", "fold", DONE, "1.5", "3.0")))
    assert (whole["status"], whole["note"]) == ("complete", "every rental closed")


def test_ledger_sum_prints_jobs_total_and_each_thing_left_out(tmp_path, capsys):
    p = write(tmp_path, row("1", "fold", DONE, "1.5", "3.0"), row("2", "full", DONE, "2", ""),
              row("3", "fold"), row("7", "fold"), "cut,short", "also,cut")
    assert ledger.main(["sum", str(p)]) == ledger.EXIT_OPEN == 1
    assert capsys.readouterr().out.splitlines() == [
        "fold     rentals   1  hours    1.5000  spend $   3.0000",
        "full     rentals   1  hours    2.0000  spend $   0.0000",
        "total    rentals   2  hours    3.5000  spend $   3.0000",
        "malformed 2 row(s) (a write cut short?) at line(s): 6 7",
        "unknown  1 closed rental(s) with no cost (cost unknown, not $0; left out of the total): "
        "2",
        "open     2 row(s) not confirmed destroyed: 3 7"]
    assert ledger.main(["sum", str(write(tmp_path, row("1", "fold", DONE, "1", "2")))]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "fold     rentals   1  hours    1.0000  spend $   2.0000",
        "total    rentals   1  hours    1.0000  spend $   2.0000"]
    assert ledger.main(["sum", str(tmp_path / "none.csv")]) == ledger.EXIT_USAGE == 2
    assert capsys.readouterr().err.startswith(f"hearsay ledger: cannot read ledger "
                                              f"{tmp_path / 'none.csv'} (")


def test_ledger_help_is_the_module_docstring_under_its_own_name(capsys):
    with pytest.raises(SystemExit) as e:
        ledger.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith("usage: hearsay ledger [-h] {sum,hours} ...")
    assert ledger.__doc__.splitlines()[0] in out
    assert "  status: \"complete\" when every rental is closed" in out  # layout kept as written
    assert "sum the ledger (exit 1 while anything is left out)" in out
    with pytest.raises(SystemExit) as e:
        ledger.main([])
    assert e.value.code == ledger.EXIT_USAGE
    assert capsys.readouterr().err.splitlines()[-1] == (
        "hearsay ledger: error: the following arguments are required: verb")


def test_ledger_sum_names_every_closed_rental_whose_cost_is_unknown(tmp_path, capsys):
    p = write(tmp_path, row("1", "fold", DONE, "1", ""), row("2", "full", DONE, "2", ""))
    assert ledger.main(["sum", str(p)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "unknown  2 closed rental(s) with no cost (cost unknown, not $0; left out of the total): "
        "1 2")


def test_the_sum_verbs_help_line_is_its_own_text(capsys, monkeypatch):
    import re

    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        ledger.main(["--help"])
    assert re.search(r"^\s+sum\s+sum the ledger \(exit 1 while anything is left out\)$",
                     capsys.readouterr().out, re.M)
