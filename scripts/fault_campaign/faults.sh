# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # the scenario's variables, shared by bash's dynamic scope with scenario.sh
# scripts/fault_campaign/faults.sh — what scripts/fault_campaign.sh does to a scenario's world once
# its faults are drawn (scripts/fault_campaign/draws.sh): the box-side faults, the kills, and the
# helpers that signal a process only while it is still the one named.
# kill_named SIGNAL PIDFILE WORD: signal the pid a pid or lock-owner file names (its first word),
# only while that process's command line still holds WORD. A box or reaper that ended long ago left
# its pid behind, and pids wrap (pid_max): by now it can name another scenario's fake API.
kill_named() {
  local pid cmd
  pid=$(cut -d' ' -f1 "$2" 2>/dev/null) || return 0
  case $pid in '' | *[!0-9]*) return 0 ;; esac
  cmd=$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || return 0   # gone: nothing to signal
  case $cmd in *"$3"*) kill "-$1" "$pid" 2>/dev/null || true ;; esac
}

# apply_box_faults: in the scenario's world (its subshell), before its launch.
apply_box_faults() {
  selfend=""
  if [ -n "$storedrop" ]; then
    export HEARSAY_RCLONE="$repo/tests/runner/bin/rclone_drop.sh" FAKE_STORE_DROP=$storedrop
  fi
  [ "$noledgerdir" = 0 ] || export LEDGER=$W/ledger-not-yet/made/ledger.csv
  if [ -n "$killchain" ]; then export FAKE_TRAIN_S=20; fi   # long enough to be killed mid-run
  if [ "$gone" = 1 ]; then   # the laptop never reaches the box: its ssh hangs
    printf '#!/bin/sh\nexec sleep 30\n' >"$W/ssh_hang.sh"
    chmod +x "$W/ssh_hang.sh"
    export RUNNER_SSH=$W/ssh_hang.sh RUNNER_BOOT_DEADLINE_S=8 RUNNER_SSH_TIMEOUT_S=3
  fi
  return 0
}

# kill_chains entry|box: once a chain trains, SIGKILL its entry.sh (entry), or every process of the
# box, its on-start guard included (box); no EXIT trap runs.
kill_chains() {
  local p n=0 d
  exec 3>&-
  while [ "$n" -lt 200 ]; do
    n=$((n + 1))
    for d in "$W"/boxes/box-*/run; do
      [ -s "$d/train.pid" ] || continue
      sleep 1
      if [ "$1" = box ]; then
        kill_named 9 "$d/guard.lock/pid" onstart.sh
        kill_named 9 "$d/entry.pid" entry.sh
        kill -9 "$(cat "$d/train.pid" 2>/dev/null)" 2>/dev/null || true   # live: its box trains now
        for p in $(ps -eo pid=,args= | awk -v d="$d" 'index($0, d) { print $1 }'); do kill -9 "$p" 2>/dev/null || true; done
      else
        kill_named 9 "$d/entry.pid" entry.sh
      fi
      return 0
    done
    sleep 0.2
  done
}

live_records() {
  local d
  for d in "$1"/[!.]*; do [ -d "$d" ] && return 0; done
  return 1
}

# apply_operator_faults: in the scenario's world, before its launch; sets the caller's beatflag.
# The kinds judged while a box trains (all but pricelie) train 20 s at least, so the reapers after
# the launch look at a box in TRAINING several times.
apply_operator_faults() {
  beatflag=""
  if [ "$nobeat" = 1 ]; then   # the image writes no HEARTBEAT; it is rented deliberately
    export RUNNER_IMAGE_BEATS=no FAKE_RCLONE_NEXT=${HEARSAY_RCLONE:-rclone}
    export HEARSAY_RCLONE=$repo/scripts/fault_campaign/rclone_nobeat.sh FAKE_SSH_PASS="$FAKE_SSH_PASS FAKE_RCLONE_NEXT"
    beatflag=--no-heartbeat
  fi
  if [ $((nobeat + otherstore + clockstep + latedeadline + twoops + teardown2)) -gt 0 ] \
    && awk -v t="$FAKE_TRAIN_S" 'BEGIN { exit !(t < 20) }'; then
    export FAKE_TRAIN_S=20
  fi
  return 0
}

# reap_once STATE LEDGER: one runner/reaper.sh --once of the scenario's last loop, for the laptop
# whose RUNNER_STATE and ledger these are, with the reaper-side kinds drawn: another RUNNER_STORE
# (otherstore), the laptop's clock stepped by $W/clock_step (clockstep), the campaign deadline set
# after the launch ($late: latedeadline); the reapers in their own time zone (tz).
reap_once() {
  local store=$RUNNER_STORE path=$PATH
  [ "$otherstore" = 0 ] || store="store:$W/otherbucket/hearsay"
  [ "$clockstep" = 0 ] || path="$repo/scripts/fault_campaign/clock:$PATH"
  RUNNER_STATE=$1 LEDGER=$2 RUNNER_STORE=$store PATH=$path FAKE_CLOCK_STEP_FILE=$W/clock_step \
    RUNNER_CAMPAIGN_DEADLINE=$late TZ=${reaper_tz:-${TZ:-UTC0}} \
    "$repo/runner/reaper.sh" --once >>"$W/reaper.out" 2>&1 3>&- || true
}

# second_operator JOB: once a box of the first operator trains (20 s at most), a second operator
# (its own RUNNER_STATE $W/state2 and ledger $W/ledger2.csv, the same store and account) launches
# JOB; its launch's exit status goes to $W/launch-op2.rc.
second_operator() {
  local rc=0
  for _ in $(seq 1 100); do grep -qsx TRAINING "$W"/boxes/box-*/run/PHASE && break; sleep 0.2; done
  mkdir -p "$W/state2"
  # shellcheck disable=SC2086  # job is "fold 3"; beatflag --no-heartbeat or nothing
  RUNNER_STATE=$W/state2 LEDGER=$W/ledger2.csv RUNNER_REAPER_MODE=off \
    "$repo/runner/launch.sh" --yes --no-pilot-gate $beatflag $1 >"$W/launch-op2.out" 2>"$W/launch-op2.err" 3>&- || rc=$?
  echo "$rc" >"$W/launch-op2.rc"
}

# teardown_from_laptop2: runner/teardown_check.sh from a second laptop (an empty RUNNER_STATE, the
# ledger copied as from git) while the boxes run, the next listing page answered empty. Writes its
# exit status and, where it said 0 (confirmed), how many rows its ledger copy held open for boxes
# still billing after it ended (a box cannot come back: each billed throughout) to $W/teardown2.
teardown_from_laptop2() {
  local rc=0 d=$W/laptop2 open_ids live
  mkdir -p "$d/state"
  cp "$LEDGER" "$d/ledger.csv" 2>/dev/null || true
  curl -fsS -X POST -H 'Content-Type: application/json' "$VAST_URL/_control/faults" \
    -d '{"rules":[{"op":"list","kind":"error","status":200,"body":{"instances":[],"total_instances":0},"times":1}]}' >/dev/null
  RUNNER_STATE=$d/state LEDGER=$d/ledger.csv RUNNER_REAPER_MODE=off \
    "$repo/runner/teardown_check.sh" >"$d/teardown.out" 2>"$d/teardown.err" 3>&- || rc=$?
  live=$(curl -fsS "$VAST_URL/_control/state" | jq -r '.instances[] | select(.destroyed_at == null) | .id')
  # ids whose last row in the copy is not a closing row (column 7, destroyed_confirmed, empty); no
  # copy (no row written yet when it ran): none (a failing awk would end the scenario unrecorded)
  open_ids=$(awk -F, 'NR > 1 { c[$1] = ($7 != "") } END { for (k in c) if (!c[k]) print k }' "$d/ledger.csv" 2>/dev/null || true)
  local billing=0
  [ "$rc" != 0 ] || billing=$(comm -12 <(sort <<<"$open_ids") <(sort <<<"$live") | grep -c . || true)
  echo "$rc $billing" >"$W/teardown2"
}
