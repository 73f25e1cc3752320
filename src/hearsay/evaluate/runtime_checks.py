"""The campaign's runtime checks in the report: what ended the boxes (G2), the spend against the
cap and the budget guard's refusals (G3), and whether a key reached a box (G5), read from the
rental ledger (hearsay.contracts.ledger, its one reader) and the runner's event log
(hearsay.contracts.event_log, its one reader), never re-parsed here.

    rec = runtime_checks.record(Path("docs/ledger.csv"), state / "runner.log", cap_usd=CAP)
    lines = runtime_checks.markdown(rec)           # the report's "Campaign runtime checks"
    hearsay assemble ... --ledger docs/ledger.csv \\
        --runner-log ~/.local/state/hearsay-runner/runner.log [--cap-usd USD]

G2  every closed rental and why it ended, by the ledger's `reason` (the reaper's ending: DONE,
    FAIL, DEADLINE, HEARTBEAT, CAMPAIGN_DEADLINE, ABANDONED, LAUNCH_FAILED, ...; empty: the box
    destroyed itself and the reaper saw it gone), with the reaper's own words for each REASON it
    gave (the event log's "reaper: job JOB REASON WHY"); open rentals are named: not ended.
G3  the ledger's spend (known costs; a lower bound when it is incomplete) against `cap_usd`,
    the campaign's spending cap (given: --cap-usd; the code holds no figure), and every launch the
    budget guard refused (credit, the ablation GPU-hour cap, the campaign deadline).
G5  the secrets sweep: the latest "secrets sweep:" line of the event log (runner/secrets_sweep.sh,
    run by runner/teardown_check.sh once teardown is confirmed): fail when it found a secret (the
    paths named), pass when it found none and read the store's run folders, else not measured
    (no sweep in the log, or the store unreadable: the boxes' files unknown).
Each check's "outcome" is "pass", "fail" or "not measured" (a missing ledger or log is never a
pass); they are reported, never gating: the gate is hearsay.evaluate.gate's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hearsay.contracts import event_log
from hearsay.contracts import ledger as ledgers

G5_NONE = ("no secrets sweep in the event log (runner/secrets_sweep.sh; runner/teardown_check.sh "
           "runs it once teardown is confirmed)")


def _events(log: Path | None) -> tuple[event_log.Read | None, str | None]:
    if log is None:
        return None, "no event log given (--runner-log RUNNER_STATE/runner.log)"
    try:
        return event_log.read(log), None
    except OSError as err:
        return None, f"event log {log} unreadable ({err.strerror or err})"


def g2_endings(rentals: list | None, events: event_log.Read | None, why_not: str | None) -> dict:
    """G2: each closed rental's ending reason (ledger) and the reaper's REASON lines (log)."""
    if rentals is None:
        return {"outcome": "not measured", "why": "no readable ledger: endings unknown"}
    closed = [r for r in rentals if r.closed]
    by_reason = Counter(r.extra.get("reason") or "ended itself" for r in closed)
    still_open = [f"{r.job} ({r.id})" for r in rentals if not r.closed]
    said = [] if events is None else event_log.reaper_reasons(events.events)
    out = {"closed": len(closed), "by_reason": dict(sorted(by_reason.items())),
           "open": still_open, "reaper_reasons": [{"job": j, "why": w} for j, w in said],
           "event_log": why_not or "read"}
    if still_open:
        return {**out, "outcome": "fail",
                "why": f"{len(still_open)} rental(s) not confirmed ended: {', '.join(still_open)}"}
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(by_reason.items())) or "no rental"
    return {**out, "outcome": "pass",
            "why": f"every rental ended: {why}"
                   + (f"; the reaper's reasons: {len(said)}" if events is not None
                      else f"; {why_not}")}


def g3_spend(summary: dict, events: event_log.Read | None, why_not: str | None,
             cap_usd: float | None) -> dict:
    """G3: the ledger's spend against the cap, and the budget guard's refusals (log)."""
    refused = None if events is None else event_log.refusals(events.events)
    total = summary.get("total_usd")
    out = {"total_usd": total, "ledger_status": summary.get("status"), "cap_usd": cap_usd,
           "refusals": refused, "event_log": why_not or "read"}
    if total is None or cap_usd is None:
        what = "spend unknown (no readable ledger)" if total is None else \
            "no cap given (--cap-usd)"
        return {**out, "outcome": "not measured", "why": f"{what}"}
    bound = "" if summary.get("status") == "complete" else " at least"
    over = total > cap_usd
    why = (f"spend{bound} ${total:.2f} against the cap ${cap_usd:.2f}"
           f"{' (OVER)' if over else ''}; budget guard refusals: "
           + (f"{len(refused)}" if refused is not None else f"unknown ({why_not})"))
    return {**out, "outcome": "fail" if over else "pass", "why": why}


def g5_sweep(events: event_log.Read | None, why_not: str | None) -> dict:
    """G5: the campaign's latest secrets sweep (the event log), judged as the module says."""
    if events is None:
        return {"outcome": "not measured", "why": f"no sweep read: {why_not}"}
    done = event_log.sweeps(events.events)
    if not done:
        return {"outcome": "not measured", "why": G5_NONE, "sweeps": 0}
    last = done[-1]
    out = {"time": last.time, "files": last.files, "secrets": last.secrets, "hits": last.hits,
           "where": last.where, "store": "read" if last.store_read else "unreadable",
           "over_cap": last.over_cap, "sweeps": len(done)}
    if last.hits:
        return {**out, "outcome": "fail",
                "why": f"the sweep of {last.time} found a secret in {last.hits} file(s): "
                       + ", ".join(last.where)}
    if not last.store_read:
        return {**out, "outcome": "not measured",
                "why": f"the sweep of {last.time} could not read the store's run folders "
                       f"(the boxes' files unknown); {last.files} local file(s) hold no secret"}
    return {**out, "outcome": "pass",
            "why": f"the sweep of {last.time}: {last.files} files (the runner's state, the "
                   f"ledger, the store's run folders) hold none of {last.secrets} secrets; "
                   f"{last.over_cap} over the size cap not read"}


def record(ledger: Path | None, runner_log: Path | None, cap_usd: float | None = None) -> dict:
    """{"G2", "G3", "G5"}: each {"outcome", "why", ...} (module docstring)."""
    summary = ledgers.summary(ledger)
    try:
        rentals = ledgers.rows(ledger) if summary["status"] != "unknown" else None
    except ledgers.LedgerError:
        rentals = None
    events, why_not = _events(runner_log)
    return {"G2": g2_endings(rentals, events, why_not),
            "G3": g3_spend(summary, events, why_not, cap_usd),
            "G5": g5_sweep(events, why_not),
            "sources": {"ledger": None if ledger is None else str(ledger),
                        "runner_log": None if runner_log is None else str(runner_log)}}


def markdown(rec: dict) -> list[str]:
    """The report's section: one line per check, then the reaper's reasons and the refusals."""
    names = {"G2": "boxes ended by the reaper", "G3": "spend against the cap",
             "G5": "secrets sweep"}
    lines = ["## Campaign runtime checks", ""]
    lines += [f"- {g} ({names[g]}): **{rec[g]['outcome']}**: {rec[g]['why']}"
              for g in ("G2", "G3", "G5")]
    for r in rec["G2"].get("reaper_reasons") or []:
        lines.append(f"  - reaper: job {r['job']}: {r['why']}")
    for r in rec["G3"].get("refusals") or []:
        lines.append(f"  - refused ({r['kind']}, {r['time']}): {r['what']}")
    return lines + [""]
