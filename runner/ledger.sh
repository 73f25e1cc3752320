#!/usr/bin/env bash
# Usage: runner/ledger.sh [LEDGER_CSV]
# Summary: sum the rental ledger: rentals, hours, spend per job and in total, rows still open
#
# Reads $LEDGER (default docs/ledger.csv) unless a file is given; for $LEDGER, rows spooled in
# $RUNNER_STATE/ledger.spool (an append that failed on a full disk or a stuck lock) are appended
# first, and any that still cannot be are counted and make it exit 1. The ledger is append-only: a
# rental's creation row, then its closing row (destroyed_confirmed, hours, cost) once its
# destruction is confirmed. A rental (an id) with no closing row is open: still billing or never
# confirmed gone; its cost is not in the total. Rows have 13 fields (9 in a ledger begun before the
# offer and reason columns: both are read); a row of another length (a write cut short) is named.
# Exit codes: 0 summary printed (all rentals closed); 1 some are open, a row is malformed, or rows
#   still wait in the spool; 2 usage or unreadable ledger.
set -euo pipefail
export RUNNER_SCRIPT=ledger
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/ledger.sh
. "$RUNNER_ROOT/lib/ledger.sh"
own=1
case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  '') ;;
  *) LEDGER=$1 own=0 ;;
esac
need awk
spooled=0
if [ "$own" = 1 ] && [ -s "$(_ledger_spool)" ]; then
  ledger_flush || true
  [ ! -s "$(_ledger_spool)" ] || spooled=$(awk 'END { print NR }' "$(_ledger_spool)")
fi
[ -r "$LEDGER" ] || die 2 "cannot read ledger $LEDGER" "pass the file, or set LEDGER"
case $(head -n 1 "$LEDGER") in
  "$LEDGER_HEADER" | "$LEDGER_HEADER_V1") ;;   # a ledger begun with 9 columns keeps its header
  *) die 2 "$LEDGER has no ledger header" "is it the runner's ledger?" ;;
esac
awk -F, '
  NR == 1 { next }
  (NF != 9 && NF != 13) || $1 == "" { bad++; badlines = badlines " " NR; next }
  !($1 in seen) { seen[$1] = 1; order[++n] = $1; job[$1] = $2 }
  $7 != "" && !($1 in closed) { closed[$1] = 1; hh[$1] = $8; cc[$1] = $9 }
  END {
    for (i = 1; i <= n; i++) {
      id = order[i]
      if (!(id in closed)) { open++; openids = openids " " id; continue }
      j = job[id]; h += hh[id]; c += cc[id]; jh[j] += hh[id]; jc[j] += cc[id]; jn[j]++
    }
    for (j in jn) printf "%-8s rentals %3d  hours %9.4f  spend $%9.4f\n", j, jn[j], jh[j], jc[j]
    printf "total    rentals %3d  hours %9.4f  spend $%9.4f\n", n - open, h, c
    if (bad) printf "malformed %d row(s) (a write cut short?) at line(s):%s\n", bad, badlines
    if (open) printf "open     %d row(s) not confirmed destroyed:%s\n", open, openids
    if (spooled) printf "spooled  %d row(s) not yet in the ledger (its disk full or its lock stuck?): %s\n", spooled, spool
    if (open || bad || spooled) exit 1
  }' spooled="$spooled" spool="$(_ledger_spool)" "$LEDGER"
