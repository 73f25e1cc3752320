#!/usr/bin/env bash
# Usage: runner/ledger.sh [LEDGER_CSV]
# Summary: sum the rental ledger: rentals, hours, spend per job and in total, rows still open
#
# Reads $LEDGER (default docs/ledger.csv) unless a file is given. An open row (no destroyed_confirmed)
# is a rental still billing or never confirmed gone; its cost is not in the total.
# Exit codes: 0 summary printed (all rows closed); 1 some rows are open; 2 usage or unreadable ledger.
set -euo pipefail
export RUNNER_SCRIPT=ledger
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  '') ;;
  *) LEDGER=$1 ;;
esac
need awk
[ -r "$LEDGER" ] || die 2 "cannot read ledger $LEDGER" "pass the file, or set LEDGER"
head -n 1 "$LEDGER" | grep -qx 'id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost' \
  || die 2 "$LEDGER has no ledger header" "is it the runner's ledger?"
awk -F, '
  NR == 1 { next }
  { n++; if ($7 == "") { open++; openids = openids " " $1; next }
    h += $8; c += $9; jh[$2] += $8; jc[$2] += $9; jn[$2]++ }
  END {
    for (j in jn) printf "%-8s rentals %3d  hours %9.4f  spend $%9.4f\n", j, jn[j], jh[j], jc[j]
    printf "total    rentals %3d  hours %9.4f  spend $%9.4f\n", n - open, h, c
    if (open) { printf "open     %d row(s) not confirmed destroyed:%s\n", open, openids; exit 1 }
  }' "$LEDGER"
