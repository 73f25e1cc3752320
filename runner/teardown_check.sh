#!/usr/bin/env bash
# Usage: runner/teardown_check.sh
# Summary: prove that no instance is left billing on the account, or refuse to claim it
#
# Reads the account's listing, this machine's job records (RUNNER_STATE/jobs/) and the ledger (LEDGER,
# from git on a second laptop): "all gone" needs all three, since a well-formed empty listing can be
# an API hiccup, and a record or an open ledger row says a box may bill. An open row counts as gone
# only by the one rule (runner/lib/gone.sh: `show instance ID` agrees, or a listing that vouches).
# Each live record is named with the judge's verdict on its box (runner/lib/judge.sh, read only:
# runner/reaper.sh acts on it).
# Exit codes: 0 a complete, successful listing holds zero instances and no job record is live
#   (none in RUNNER_STATE/jobs/: creating, running, destroying or ORPHAN), and the secrets sweep
#   is clean (it prints its line after the verdict); 1 instances remain
#   (listed on stdout as "id status label $/h"); 2 cannot confirm: the listing failed (error JSON,
#   empty or non-JSON answer, auth failure, 429, timeout), or it is empty while a job record is
#   still live (the records are named on stderr: see docs/RUNBOOK.md, "teardown_check says 2"), or
#   it is empty but the account's total kept changing while it was paged, or the ledger holds an
#   open rental not proven gone (named on stderr); 3 teardown confirmed, but the secrets sweep that
#   follows it (runner/secrets_sweep.sh) did not come out clean: a secret found, or the store or a
#   file could not be read (its lines say which); 10 missing dependency; 11 no API key; 64 usage (an unknown argument: its own code, so a caller that retries on 2 never
#   mistakes a typo for an unreachable API).
set -euo pipefail
export RUNNER_SCRIPT=teardown_check
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
# shellcheck source=runner/lib/vast.sh
. "$RUNNER_ROOT/lib/vast.sh"
# shellcheck source=runner/lib/ledger.sh
. "$RUNNER_ROOT/lib/ledger.sh"
# shellcheck source=runner/lib/gone.sh
. "$RUNNER_ROOT/lib/gone.sh"
# shellcheck source=runner/lib/store.sh
. "$RUNNER_ROOT/lib/store.sh"
# shellcheck source=runner/lib/heartbeat.sh
. "$RUNNER_ROOT/lib/heartbeat.sh"
# shellcheck source=runner/lib/campaign.sh
. "$RUNNER_ROOT/lib/campaign.sh"
# shellcheck source=runner/lib/judge.sh
. "$RUNNER_ROOT/lib/judge.sh"

case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  '') ;;
  *) die 64 "unknown argument: $1 (it takes none)" "run runner/teardown_check.sh without arguments; see --help" ;;
esac
need jq awk mktemp
key_guard || exit 11
umask 077
list=$(_vast_tmp) || exit 2   # cannot even look: that is "cannot confirm", never "instances remain"
trap 'list_rm "$list"' EXIT
if ! vast_list "$list"; then
  echo "runner: cannot confirm teardown: the instance listing failed (retry; check VAST_URL and the key)" >&2
  exit 2
fi
n=$(awk 'END { print NR }' "$list")
live=""   # " JOB (STATE, instance ID, judged VERDICT: why)" per live record
for j in $(jobs_list); do
  i=$(rec_get "$j" instance)
  st=$(rec_state "$j")
  judge_job "$j" "$st"   # no look: this check writes nothing into the record
  # shellcheck disable=SC2154  # verdict and j_why are set by judge_job
  live="$live $j (${st:-no state}, instance ${i:-not yet known}, judged $verdict: $j_why)"
done
# the ledger's open rentals (LEDGER: on a second laptop, from git): each listed one is among the
# instances below; an unlisted one must be proven gone by the one rule, else it may still bill
open=""   # " ID (job JOB)" per open row not proven gone
while read -r i j; do
  case $i in '' | *[!0-9]*) continue ;; esac
  list_has "$list" "$i" && continue
  g=0
  gone_judge "$list" "$i" || g=$?
  [ "$g" = 0 ] || open="$open $i (job ${j:-?})"
done <<EOF_OPEN
$(ledger_open_ids)
EOF_OPEN
if [ "$n" -eq 0 ]; then
  if [ -n "$live" ]; then
    echo "runner: cannot confirm teardown: the listing is empty, but job records under $RUNNER_STATE/jobs are live:$live (run runner/reaper.sh --once, then check again; docs/RUNBOOK.md)" >&2
    exit 2
  fi
  if [ -n "$open" ]; then
    echo "runner: cannot confirm teardown: the listing is empty, but the ledger $LEDGER holds open rentals not proven gone:$open (vastai show instance ID; runner/reaper.sh --once on the machine that launched them; docs/RUNBOOK.md)" >&2
    exit 2
  fi
  if [ -e "$list.partial" ]; then
    echo "runner: cannot confirm teardown: the account's instances kept changing while the listing was paged (retry)" >&2
    exit 2
  fi
  echo "teardown confirmed: 0 instances listed"
  # the campaign is over: sweep for its secrets (runner/secrets_sweep.sh records it for the report's G5)
  "$RUNNER_ROOT/secrets_sweep.sh" || exit 3
  exit 0
fi
echo "runner: $n instance(s) still listed (destroy them: vastai destroy instance ID -y)" >&2
[ -z "$live" ] || echo "runner: job records still live:$live" >&2
awk -F '\t' '{ printf "%s %s %s %s\n", $1, $2, ($3 == "" ? "-" : $3), ($4 == "" ? "?" : $4) }' "$list"
exit 1
