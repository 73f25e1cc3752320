"""A job's STATUS file in the store, RUNNER_STORE/runs/OPERATOR/JOB/STATUS (docs/INTERFACES.md,
"STATUS"), and the REASON its box leaves after a failure. The box writes them in bash
(runner/box/status.sh, box_status); the runner reads them in bash (runner/lib/store.sh for the
reaper, runner/status.sh --why): the reaper's every poll must not wait on a Python start. This
module is the rule they follow, and tests/test_bash_spellings.py holds both bash readers to it line
for line.

    STATUS   one line "GEN PHASE EPOCH [beats=yes|no]": the launch generation that wrote it, its
             phase, the UTC epoch second it was written, and whether its box writes HEARTBEAT
             (a chain that beats says beats=yes on every line from its first; older images say
             nothing: readers of the first three fields are unaffected)
    REASON   line 1 "GEN PHASE EPOCH" (the phase that failed), then why (the trainer's exit code
             and last lines)

    from hearsay.contracts import status
    status.parse("g-7 TRAINING 1796000000")        # Status("g-7", "TRAINING", 1796000000)
    status.phase_of("g-7 DONE 1796000000", "g-7")  # "DONE"; another generation's line -> None
    status.beats_of("g-7 SMOKE 1796000000 beats=yes", "g-7")  # True; no such field -> None

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


def beats_of(text: str, gen: str | None) -> bool | None:
    """Whether generation `gen`'s box declared in its STATUS line that it writes HEARTBEAT (a field
    beats=yes or beats=no after the epoch); None when the line is another generation's, or says
    nothing (an image older than the field: judged by STATUS and deadline only). Split on each
    single space, as runner/lib/store.sh's status_beats_in does."""
    s = parse(text)
    if s is None or not gen or s.gen != gen:
        return None
    for field in text.splitlines()[0].split(" ")[3:]:
        if field in ("beats=yes", "beats=no"):
            return field == "beats=yes"
    return None


def line(gen: str, phase: str, epoch: int, beats: bool | None = None) -> str:
    """What the box writes: "GEN PHASE EPOCH\\n", with " beats=yes|no" when `beats` is given
    (ValueError for a phase not in PHASES)."""
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r} is not one of {', '.join(PHASES)}")
    word = "" if beats is None else f" beats={'yes' if beats else 'no'}"
    return f"{gen} {phase} {int(epoch)}{word}\n"
