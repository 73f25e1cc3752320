"""A job's STATUS file in the store, RUNNER_STORE/runs/JOB/STATUS (docs/INTERFACES.md, "STATUS"),
and the REASON its box leaves after a failure. The box writes them in bash (runner/box/status.sh,
box_status); the runner reads them in bash (runner/lib/store.sh for the reaper, runner/status.sh
--why): the reaper's every poll must not wait on a Python start. This module is the rule they
follow, and tests/test_bash_spellings.py holds both bash readers to it line for line.

    STATUS   one line "GEN PHASE EPOCH": the launch generation that wrote it, its phase, the
             UTC epoch second it was written
    REASON   line 1 "GEN PHASE EPOCH" (the phase that failed), then why (the trainer's exit code
             and last lines)

    from hearsay.contracts import status
    status.parse("g-7 TRAINING 1796000000")        # Status("g-7", "TRAINING", 1796000000)
    status.phase_of("g-7 DONE 1796000000", "g-7")  # "DONE"; another generation's line -> None

The rules, once: only the first line counts; a STATUS written by another generation than the
record's is no status at all (a relaunch must not be ended by its predecessor's DONE); DONE and
FAIL are terminal (TERMINAL: the reaper destroys the box; the runner applies it in bash),
every other phase is live.
"""

from __future__ import annotations

from typing import NamedTuple

FILE = "STATUS"
REASON = "REASON"
PHASES = ("STARTED", "SMOKE", "TRAINING", "PUSHING", "SCORING", "DONE", "FAIL")  # in order
TERMINAL = ("DONE", "FAIL")


class Status(NamedTuple):
    gen: str
    phase: str
    epoch: int | None  # UTC seconds; None when the third field is missing or not a number


def parse(text: str) -> Status | None:
    """The first line of a STATUS (or REASON) file; None when it is empty."""
    line = text.splitlines()[0] if text.strip() else ""
    parts = line.split(" ")
    if not line or len(parts) < 2 or not parts[0]:
        return None
    epoch = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
    return Status(parts[0], parts[1], epoch)


def phase_of(text: str, gen: str | None) -> str | None:
    """The phase of a STATUS written by generation `gen`; None when there is no line, no
    generation to compare, or the line is another generation's."""
    s = parse(text)
    if s is None or not gen or s.gen != gen:
        return None
    return s.phase


def line(gen: str, phase: str, epoch: int) -> str:
    """What the box writes: "GEN PHASE EPOCH\\n" (ValueError for a phase not in PHASES)."""
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r} is not one of {', '.join(PHASES)}")
    return f"{gen} {phase} {int(epoch)}\n"
