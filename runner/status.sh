#!/usr/bin/env bash
# Usage: runner/status.sh [[--why] JOB]
# Summary: every job at a glance: generation, state, instance, age, spend so far (local records only)
#
# Spend = $/h x hours since creation (the ledger has the confirmed figure once destroyed). Reads
# $RUNNER_STATE only; it calls no API.
#
#   --why JOB   read the store instead: the job's last STATUS line and, after a FAIL, the REASON its
#               box left (the failing step, the trainer's exit code and last lines), so why a job
#               failed is known after the box is gone; and its trainer's last validation readout
#               (READOUT: minDCF at pi 0.3, EER, AUC; for the pilot, fold 4) and the latest line of its
#               per-step log (PROGRESS: step/total, epoch, loss, LRs, grad norm, throughput, ETA, when)
#               from its run folder, that of the record's bundle + config (or RUNNER_BUNDLE_META +
#               RUNNER_TRAIN_CONFIG); the trainer pushes both with its readouts and checkpoints, and
#               `hearsay run readout|progress` (RUNNER_HEARSAY, default hearsay) prints them
#               and, while JOB has a record, the judge's verdict on its box (runner/lib/judge.sh, the
#               one the reaper acts on: JUDGE VERDICT: why), read from its contract and its store
#   JOB         the same as --why JOB (how far a running box is)
#
# Exit codes: 0 printed; 2 usage; 3 (--why) the store has no STATUS for JOB or cannot be read.
set -euo pipefail
export RUNNER_SCRIPT=status
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  --why | [!-]*)
    [ "$1" != --why ] || shift
    set -- "" "${1:-}"   # the job is $2, as in `--why JOB`
    # shellcheck source=runner/lib/guard.sh
    . "$RUNNER_ROOT/lib/guard.sh"
    # shellcheck source=runner/lib/store.sh
    . "$RUNNER_ROOT/lib/store.sh"
    [ -n "${2:-}" ] || die 2 "--why needs a job name" "runner/status.sh --why fold3"
    folder=$(store_job_path "$2") || exit 2
    # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
    line=$(RCLONE_CONFIG="$RUNNER_RCLONE_CONF" $RUNNER_RCLONE cat "$folder/STATUS" </dev/null 2>/dev/null | head -n 1) || true
    [ -n "$line" ] || die 3 "no STATUS for job $2 at $folder/STATUS (or the store cannot be read)" "check RUNNER_STORE and RUNNER_RCLONE_CONF"
    echo "STATUS $line"
    if rec_exists "$2"; then
      # shellcheck source=runner/lib/campaign.sh
      . "$RUNNER_ROOT/lib/campaign.sh"
      # shellcheck source=runner/lib/heartbeat.sh
      . "$RUNNER_ROOT/lib/heartbeat.sh"
      # shellcheck source=runner/lib/judge.sh
      . "$RUNNER_ROOT/lib/judge.sh"
      judge_job "$2" "$(rec_state "$2")"
      # shellcheck disable=SC2154  # set by judge_job
      echo "JUDGE $verdict: $j_why"
    fi
    # shellcheck disable=SC2086
    RCLONE_CONFIG="$RUNNER_RCLONE_CONF" $RUNNER_RCLONE cat "$folder/REASON" </dev/null 2>/dev/null | sed 's/^/  /' || true
    # shellcheck source=runner/lib/bundles.sh
    . "$RUNNER_ROOT/lib/bundles.sh"
    b=$(rec_get "$2" bundle_sha) c=$(rec_get "$2" config_hash)
    [ -n "$b" ] || b=$(bundle_info "$RUNNER_BUNDLE_META" --tree-sha 2>/dev/null || true)
    [ -n "$c" ] || c=$(sha256_file "$RUNNER_TRAIN_CONFIG" 2>/dev/null || true)
    readout="" progress=""
    if [ -n "$b" ] && [ -n "$c" ] && rp=$(store_run_path "$folder" "$b" "$c"); then
      # shellcheck disable=SC2086
      readout=$(RCLONE_CONFIG="$RUNNER_RCLONE_CONF" $RUNNER_RCLONE cat "$rp/readout.json" </dev/null 2>/dev/null) || readout=""
      # shellcheck disable=SC2086
      progress=$(RCLONE_CONFIG="$RUNNER_RCLONE_CONF" $RUNNER_RCLONE cat "$rp/progress.json" </dev/null 2>/dev/null) || progress=""
    fi
    # shellcheck disable=SC2086  # RUNNER_HEARSAY is a command line by design
    [ -z "$readout" ] || printf '%s\n' "$readout" | ${RUNNER_HEARSAY:-hearsay} run readout - 2>/dev/null || true
    # shellcheck disable=SC2086
    [ -z "$progress" ] || printf '%s\n' "$progress" | ${RUNNER_HEARSAY:-hearsay} run progress - 2>/dev/null || true
    exit 0 ;;
  '') ;;
  *) die 2 "unknown argument: $1" "see runner/status.sh --help" ;;
esac
printf '%-7s %-34s %-11s %-9s %8s %9s %s\n' JOB GENERATION STATE INSTANCE AGE SPEND HOLD
t=$(now)
for job in $(jobs_list); do
  c=$(rec_get "$job" created_at)
  is_number "$c" || c=$t
  age=$((t - c))
  dph=$(rec_get "$job" dph)
  is_number "$dph" || dph=0
  h=-
  hold_fresh "$job" && h=held
  printf '%-7s %-34s %-11s %-9s %7dm %9s %s\n' "$job" "$(rec_get "$job" gen)" "$(rec_state "$job")" \
    "$(rec_get "$job" instance)" $((age / 60)) "\$$(calc 'dph * age / 3600' dph="$dph" age="$age")" "$h"
done
