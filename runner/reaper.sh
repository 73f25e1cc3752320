#!/usr/bin/env bash
# Usage: runner/reaper.sh [--once | --background]
# Summary: watch every job's rental and end it: ORPHAN, deadline, HOLD, STATUS, abandoned launch
#
# One reaper watches all jobs (a second one exits 4). Each cycle takes one listing of the account's
# instances and acts per job record, in this order:
#   0. duplicate                   another listed instance with the record's label (a create the CLI
#                                  retried after a dropped connection rents twice): destroy it, ledger
#                                  row written and completed. A record without an id is swept when it
#                                  is ended (rules 2, 4, 5): one labelled instance is adopted, every
#                                  other one destroyed the same way; a duplicate not confirmed destroyed
#                                  keeps the record (ORPHAN, jobs/JOB/dup_sweep) for the next cycle, and
#                                  so does a label not yet settled (no listing taken RUNNER_LABEL_LAG_S
#                                  after the create has shown every box it rented)
#   1. ORPHAN                      destroy again until a successful listing lacks the instance
#   2-4b. the judge                runner/lib/judge.sh decides from the job's contract (jobs/JOB/contract:
#                                  its store, generation, deadlines, grace_s, heartbeat limits, whether
#                                  its image beats) and the evidence (its generation's STATUS and
#                                  HEARTBEAT read at the contract's store, HOLD, launcher, clocks); the
#                                  decision table is docs/RUNBOOK.md's "The judge". In short: past the
#                                  deadline (the job's, or the campaign's: the earlier of the contract's
#                                  and RUNNER_CAMPAIGN_DEADLINE) a box that reported DONE or FAIL is
#                                  ended as that; one TRAINING or PUSHING is left its final push until
#                                  deadline + grace_s; any other is destroyed (a HOLD never defers it;
#                                  a campaign deadline the box was never told ends it at once, said so).
#                                  Before it: a fresh HOLD leaves the job alone; STATUS DONE / FAIL
#                                  (its generation's) ends it; a beating box whose HEARTBEAT of its
#                                  generation shows no progress for heartbeat_stale_s (monotonic clock,
#                                  two looks at least) is destroyed with a REASON line — no heartbeat at
#                                  all, or an image that does not beat, is unknown, never dead
#   5. launch abandoned            a record not PROVISIONED whose launcher is gone: destroy
#   6. instance missing            a PROVISIONED instance absent from two successful listings, gone
#                                  by the one rule (the second listing still shows our other boxes,
#                                  or `show instance ID` agrees; runner/lib/gone.sh): record it gone
#                                  (the box destroyed itself), row completed. Otherwise unknown and
#                                  kept, however long (jobs/JOB/gone_since: since when)
#   7. unrecorded                  a listed instance labelled with this state's own prefix
#                                  (PREFIX.OPERATOR:…, RUNNER_STATE/operator) that no record owns,
#                                  older than RUNNER_ORPHAN_GRACE_S (a create that answered after its
#                                  launcher gave up): ledger row, destroy, row completed. One whose
#                                  record was archived GONE (same label, generation and id) is
#                                  re-adopted into it instead (its ledger row re-opened); one
#                                  whose generation's STATUS is live in the store is never
#                                  destroyed; one whose rental is closed in
#                                  the ledger is acted on only when a fresh listing still shows it
#                                  (its row re-opened), else left alone (ended this cycle). Another
#                                  operator's box (or an older runner's PREFIX:… label) is said once
#                                  and left alone
# A destroy counts only when a later listing lacks the instance by the same rule; a failed listing (error,
# 429, empty, `{}`, null, malformed) changes nothing and the reaper backs off (doubling, up to
# RUNNER_REAPER_MAX_BACKOFF_S) on its own.
#
#   --once         one cycle, then exit (exit 0 = listing succeeded, 5 = listing failed)
#   --background   start the looping reaper detached (own session, INT/HUP ignored), its output
#                  appended to $RUNNER_STATE/reaper.out (the folder is made); exit 0 once it runs
# One job's failure (full disk, lock, destroy not confirmed) is logged and that job backs off
# (RUNNER_REAPER_POLL_S doubling per failure in a row, up to RUNNER_REAPER_JOB_BACKOFF_S; --once
# ignores the wait); the reaper goes on with the other jobs. Stale locks (owner gone, pid reused,
# or empty and older than RUNNER_LOCK_STALE_S) are broken. On a full disk a record's lock is taken
# with the room of its reserve (jobs/JOB/.reserve, RUNNER_RECORD_RESERVE_KB), so its ending has
# room to be written; a live record gets its reserve again once its disk has 16 times it free.
#
# Exit codes: 0 ok; 2 usage, or a malformed RUNNER_CAMPAIGN_DEADLINE or RUNNER_FINAL_PUSH_GRACE_S; 4 another reaper is running; 5 (--once) the listing failed;
#   10 missing dependency, or no temp folder under TMPDIR; 11 no API key; 12 the reaper lock's owner cannot be written (RUNNER_STATE
#   full or read-only).
set -euo pipefail
export RUNNER_SCRIPT=reaper
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
# shellcheck source=runner/lib/ledger.sh
. "$RUNNER_ROOT/lib/ledger.sh"
# shellcheck source=runner/lib/vast.sh
. "$RUNNER_ROOT/lib/vast.sh"
# shellcheck source=runner/lib/store.sh
. "$RUNNER_ROOT/lib/store.sh"
# shellcheck source=runner/lib/teardown.sh
. "$RUNNER_ROOT/lib/teardown.sh"
# shellcheck source=runner/lib/heartbeat.sh
. "$RUNNER_ROOT/lib/heartbeat.sh"
# shellcheck source=runner/lib/campaign.sh
. "$RUNNER_ROOT/lib/campaign.sh"
# shellcheck source=runner/lib/judge.sh
. "$RUNNER_ROOT/lib/judge.sh"
# shellcheck source=runner/lib/reap.sh
. "$RUNNER_ROOT/lib/reap.sh"

once=0 bg=0
case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  --once) once=1; export REAP_ALL=1 ;;
  --background) bg=1 ;;
  '') ;;
  *) die 2 "unknown argument: $1" "see runner/reaper.sh --help" ;;
esac
need jq awk mktemp
campaign_deadline >/dev/null || die 2 "RUNNER_CAMPAIGN_DEADLINE is malformed (see above)" "fix it in runner/config.sh or the environment"
case $RUNNER_FINAL_PUSH_GRACE_S in '' | *[!0-9]*) die 2 "RUNNER_FINAL_PUSH_GRACE_S=$RUNNER_FINAL_PUSH_GRACE_S is not a whole number of seconds" "fix it in runner/config.sh, e.g. 720" ;; esac
key_guard || exit 11
umask 077
mkdir -p "$RUNNER_STATE" || die 10 "cannot create RUNNER_STATE=$RUNNER_STATE" "check the path and free space"
if [ "$bg" = 1 ]; then
  if [ -d "$RUNNER_STATE/reaper.lock" ] && ! lock_stale "$RUNNER_STATE/reaper.lock"; then
    die 4 "another reaper is running (pid $(lock_owner "$RUNNER_STATE/reaper.lock"))" "one reaper watches every job"
  fi
  # detached: its own session where setsid exists (Linux), and INT/HUP ignored from the start (an
  # ignored-on-entry signal stays ignored in bash), so closing the terminal or ^C does not end it
  starter=""
  command -v setsid >/dev/null 2>&1 && starter=setsid
  # (and none of the caller's other descriptors: a test harness waits on fd 3 until it closes)
  ( trap '' INT HUP; exec $starter nohup "$0" </dev/null >>"$RUNNER_STATE/reaper.out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- ) &
  p=$!
  i=0
  while [ "$i" -lt 100 ]; do
    # the lock with its owner written (a taker writes it just after its mkdir): never "(pid )"
    if [ -n "$(lock_owner "$RUNNER_STATE/reaper.lock")" ] && ! lock_stale "$RUNNER_STATE/reaper.lock"; then
      say "reaper running (pid $(lock_owner "$RUNNER_STATE/reaper.lock")), output in $RUNNER_STATE/reaper.out"
      exit 0
    fi
    kill -0 "$p" 2>/dev/null || [ -d "$RUNNER_STATE/reaper.lock" ] || break
    sleep 0.1
    i=$((i + 1))
  done
  die 4 "the reaper did not start (see $RUNNER_STATE/reaper.out)" "run runner/reaper.sh in a terminal to see why"
fi
if ! lock_take "$RUNNER_STATE/reaper.lock" 1; then
  # lock_take removes a lock whose owner it could not write; a lock still there is another reaper's
  # (its owner file may be a moment away: a taker writes it just after its mkdir)
  holder=$(lock_owner "$RUNNER_STATE/reaper.lock")
  [ -d "$RUNNER_STATE/reaper.lock" ] || die 12 "cannot take the reaper lock $RUNNER_STATE/reaper.lock: it or its owner file cannot be written" "free space under RUNNER_STATE=$RUNNER_STATE, then start the reaper again"
  die 4 "another reaper is running (pid ${holder:-not yet written})" "one reaper watches every job"
fi
# every temp file of this reaper (its listings) in one folder of its own, removed on every exit: a
# TERM mid-cycle leaves none behind
reaper_tmp=$(mktemp -d "${TMPDIR:-/tmp}/runner-reaper.XXXXXX" 2>/dev/null) || {
  lock_drop "$RUNNER_STATE/reaper.lock"
  die 10 "cannot make a temp folder under ${TMPDIR:-/tmp}" "set TMPDIR to a writable folder"
}
export TMPDIR=$reaper_tmp
sleeper=""
trap '[ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null; rm -rf "$reaper_tmp"; lock_drop "$RUNNER_STATE/reaper.lock"' EXIT
trap 'exit 130' INT TERM HUP

wait_s=$RUNNER_REAPER_POLL_S
while :; do
  if reap_cycle; then
    wait_s=$RUNNER_REAPER_POLL_S
    [ "$once" = 0 ] || exit 0
  else
    [ "$once" = 0 ] || exit 5
    wait_s=$(calc 'w * 2' w="$wait_s")   # seconds may be decimal (tests poll at 0.3 s)
    ! gt "$wait_s" "$RUNNER_REAPER_MAX_BACKOFF_S" || wait_s=$RUNNER_REAPER_MAX_BACKOFF_S
    say "listing failed; next try in ${wait_s}s"
  fi
  # a background sleep and `wait`: a TERM ends the reaper at once (bash runs a trap only after a
  # foreground command returns, so a plain 60 s sleep would hold the lock for up to a minute)
  sleep "$wait_s" &
  sleeper=$!
  wait "$sleeper" || true
  sleeper=""
done
