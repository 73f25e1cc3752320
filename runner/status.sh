#!/usr/bin/env bash
# Usage: runner/status.sh
# Summary: every job at a glance: generation, state, instance, age, spend so far (local records only)
#
# Spend = $/h x hours since creation (the ledger has the confirmed figure once destroyed). Reads
# $RUNNER_STATE only; it calls no API. Exit codes: 0 printed; 2 usage.
set -euo pipefail
export RUNNER_SCRIPT=status
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
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
