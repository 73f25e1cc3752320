"""The runner's event log, RUNNER_STATE/runner.log: the one reader. runner/lib/common.sh's
log_event appends one line per event, `<ISO time> [<pid> <script>] <text>`, from every runner
script (the launcher, the reaper, collect, ...); nothing in it is a secret (its callers pass ids
and states only). `hearsay assemble --runner-log` reads it for the report's runtime checks
(hearsay.evaluate.runtime_checks).

    from hearsay.contracts import event_log
    events = event_log.read(Path("~/.local/state/hearsay-runner/runner.log").expanduser())
    event_log.reaper_reasons(events)   # [("fold2", "no heartbeat for 912 s ...")]
    event_log.refusals(events)         # the budget guard's refusals, as the launcher said them
    event_log.sweeps(events)           # the secrets sweeps, oldest first

What is read, and the lines that say it (their writers):
  the reaper ending a box       "reaper: job JOB REASON WHY"   runner/lib/reap.sh (heartbeat,
                                                               campaign deadline)
  a launch refused by the budget guard, "error: WHAT" of runner/launch.sh (die):
    credit                      "credit $C < estimate $E + commitments $K + margin $M"
    credit unmeasurable         "cannot measure credit ..." / "cannot measure commitments ..."
    ablation GPU-hour cap       "ablation GPU-hour cap: ..."  (exit 15)
    campaign deadline           "the campaign deadline ... has passed: nothing is rented" (16)
  a secrets sweep               "secrets sweep: files=N secrets=S hits=H store=read|unreadable
                                over_cap=K where=P1, P2" (where=-: no hit)  runner/secrets_sweep.sh
A line that does not parse is counted (`unparsed`), never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FILE = "runner.log"  # RUNNER_STATE/runner.log (runner/config.sh: RUNNER_STATE)
_LINE = re.compile(r"^(\S+) \[(\d+) ([^\]]+)\] (.*)$")
_REASON = re.compile(r"^reaper: job (\S+) REASON (.*)$")
# the budget guard's refusals (runner/lib/launch_steps.sh step_budget, step_ablation_cap,
# the campaign deadline): the text after "error: " starts with one of these
BUDGET_REFUSALS = {"credit": r"credit \S+ < estimate ",
                   "credit unmeasurable": r"cannot measure (credit|commitments)",
                   "ablation GPU-hour cap": r"ablation GPU-hour cap: ",
                   "campaign deadline": r"the campaign deadline \S+ \(RUNNER_CAMPAIGN_DEADLINE\) "
                                        r"has passed"}
_SWEEP = re.compile(r"^secrets sweep: files=(\d+) secrets=(\d+) hits=(\d+) "
                    r"store=(read|unreadable) over_cap=(\d+) where=(.*)$")


@dataclass(frozen=True)
class Event:
    time: str  # ISO 8601, UTC
    pid: int
    script: str  # RUNNER_SCRIPT of the writer: launch, reaper, collect, ...
    text: str


@dataclass(frozen=True)
class Sweep:
    """One run of runner/secrets_sweep.sh: what it read and where it found a secret."""
    time: str  # ISO 8601, UTC
    files: int  # files searched: the state folder, the ledger, the store's run folders
    secrets: int  # secrets searched for (the API key, the store config's secret values)
    hits: int  # files holding one
    store_read: bool  # the store's run folders were listed and copied (False: "unreadable")
    over_cap: int  # run-folder files over RUNNER_SWEEP_MAX_MB, counted but not read
    where: list[str]  # the paths of the hits (local paths, or REMOTE:PATH in the store)


@dataclass(frozen=True)
class Read:
    events: list[Event]
    unparsed: int  # lines not of the log_event form (a write cut short)


def read(path: Path) -> Read:
    """Every event of the log at `path`; OSError when it cannot be read."""
    events, unparsed = [], 0
    for line in Path(path).read_text(errors="replace").splitlines():
        m = _LINE.match(line)
        if m is None:
            unparsed += 1
            continue
        events.append(Event(m.group(1), int(m.group(2)), m.group(3), m.group(4)))
    return Read(events, unparsed)


def reaper_reasons(events: list[Event]) -> list[tuple[str, str]]:
    """(job, why) of every box the reaper ended with a REASON, in the log's order."""
    return [(m.group(1), m.group(2)) for e in events if (m := _REASON.match(e.text))]


def refusals(events: list[Event]) -> list[dict]:
    """The budget guard's refusals: {"time", "kind", "what"}, in the log's order."""
    out = []
    for e in events:
        what = e.text.removeprefix("error: ")
        if what == e.text:
            continue
        kind = next((k for k, pat in BUDGET_REFUSALS.items() if re.match(pat, what)), None)
        if kind is not None:
            out.append({"time": e.time, "kind": kind, "what": what})
    return out


def sweeps(events: list[Event]) -> list[Sweep]:
    """Every secrets sweep of the log, in its order (the last is the latest)."""
    out = []
    for e in events:
        if (m := _SWEEP.match(e.text)) is None:
            continue
        where = [] if m.group(6) == "-" else m.group(6).split(", ")
        out.append(Sweep(e.time, int(m.group(1)), int(m.group(2)), int(m.group(3)),
                         m.group(4) == "read", int(m.group(5)), where))
    return out
