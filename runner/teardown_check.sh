#!/usr/bin/env bash
# Usage: runner/teardown_check.sh
# Summary: prove that no instance is left billing on the account, or refuse to claim it
#
# Exit codes: 0 a successful listing holds zero instances; 1 instances remain (listed on stdout as
#   "id status label $/h"); 2 cannot confirm (error JSON, empty or non-JSON answer, auth failure,
#   429, timeout); 10 missing dependency; 11 no API key; 64 usage (an unknown argument: its own
#   code, so a caller that retries on 2 never mistakes a typo for an unreachable API).
set -euo pipefail
export RUNNER_SCRIPT=teardown_check
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/vast.sh
. "$RUNNER_ROOT/lib/vast.sh"

case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  '') ;;
  *) die 64 "unknown argument: $1 (it takes none)" "run runner/teardown_check.sh without arguments; see --help" ;;
esac
need jq awk mktemp
key_guard || exit 11
umask 077
list=$(_vast_tmp) || exit 2   # cannot even look: that is "cannot confirm", never "instances remain"
trap 'rm -f "$list"' EXIT
if ! vast_list "$list"; then
  echo "runner: cannot confirm teardown: the instance listing failed (retry; check VAST_URL and the key)" >&2
  exit 2
fi
n=$(awk 'END { print NR }' "$list")
if [ "$n" -eq 0 ]; then
  echo "teardown confirmed: 0 instances listed"
  exit 0
fi
echo "runner: $n instance(s) still listed (destroy them: vastai destroy instance ID -y)" >&2
awk -F '\t' '{ printf "%s %s %s %s\n", $1, $2, ($3 == "" ? "-" : $3), ($4 == "" ? "?" : $4) }' "$list"
exit 1
