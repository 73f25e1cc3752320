#!/usr/bin/env bash
# Usage: runner/logs.sh JOB [-f]
# Summary: a job's box log (the trainer's train.log) read from the store, under the job's STATUS
#
# The box copies its train.log (the trainer's stdout and stderr: per-step and readout lines,
# warnings, a traceback) to RUNNER_STORE/runs/JOB/train.log at every heartbeat
# (RUNNER_HEARTBEAT_S, 60 s) and once more as it ends (runner/box/job.sh box_push_log), headed by
# "# GEN train.log": no ssh is needed, and the log stays readable after the box is gone. Lines show
# up at most one heartbeat late. Printed first: "STATUS GEN PHASE EPOCH", the store's STATUS line;
# a log written by another generation than that STATUS's is said ("log of generation G").
#
#   -f   follow: read the store again every RUNNER_LOGS_POLL_S seconds (default 10) and print the
#        new lines (and a STATUS line when it changes), until the STATUS is DONE or FAIL (then
#        exit 0) or Ctrl-C. A log that got shorter (a relaunch's new box) is printed again whole.
#
# Exit codes: 0 printed (or followed to its end); 2 usage; 3 the store has no STATUS for JOB or
# cannot be read.
set -euo pipefail
export RUNNER_SCRIPT=logs
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/store.sh
. "$RUNNER_ROOT/lib/store.sh"

job="" follow=""
for a in "$@"; do
  case $a in
    -h | --help) usage_from "$0"; exit 0 ;;
    -f | --follow) follow=1 ;;
    -*) die 2 "unknown option: $a" "see runner/logs.sh --help" ;;
    *) [ -z "$job" ] || die 2 "one job at a time, not '$job' and '$a'" "runner/logs.sh fold3 -f"
       job=$a ;;
  esac
done
[ -n "$job" ] || die 2 "a job name is needed" "runner/logs.sh fold3 [-f]"
poll=${RUNNER_LOGS_POLL_S:-10}
is_number "$poll" || die 2 "RUNNER_LOGS_POLL_S=$poll is not a number of seconds" "unset it for 10"
p=$(store_job_path "$job") || exit 2

status="" shown=0 log_gen=""
while :; do
  line=$(store_cat "$job" STATUS | head -n 1) || line=""
  if [ -z "$line" ]; then
    [ -n "$status" ] || die 3 "no STATUS for job $job at $p/STATUS (or the store cannot be read)" "check RUNNER_STORE and RUNNER_RCLONE_CONF"
  elif [ "$line" != "$status" ]; then
    status=$line
    echo "STATUS $status"
  fi
  if log=$(store_cat "$job" train.log); then
    head=${log%%$'\n'*}
    gen=${head#\# }
    gen=${gen%% *}
    if [ "$gen" != "$log_gen" ]; then
      log_gen=$gen shown=0
      [ "$gen" = "${status%% *}" ] || echo "(log of generation $gen; the STATUS above is of ${status%% *})"
    fi
    n=$(printf '%s\n' "$log" | wc -l)
    n=$((n - 1))   # the header is not a log line
    [ "$n" -ge "$shown" ] || shown=0   # shorter: a new file
    [ "$n" -eq "$shown" ] || printf '%s\n' "$log" | tail -n +2 | tail -n +$((shown + 1))
    shown=$n
  elif [ -z "$follow" ]; then
    echo "(no train.log in the store yet: the box copies it at each heartbeat)"
  fi
  [ -n "$follow" ] || exit 0
  # the shared STATUS rule (runner/lib/store.sh): DONE and FAIL end the box, and the log with it;
  # judged on the line printed above, never a second read (a DONE written in between would end the
  # loop before it is printed)
  case $(status_phase_in "$status" "${status%% *}") in DONE | FAIL) exit 0 ;; esac
  sleep "$poll"
done
