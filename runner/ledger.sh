#!/usr/bin/env bash
# Usage: runner/ledger.sh [LEDGER_CSV]
# Summary: sum the rental ledger: rentals, hours, spend per job and in total, rows still open
#
# Reads $LEDGER (default docs/ledger.csv) unless a file is given; for $LEDGER, rows spooled in
# $RUNNER_STATE/ledger.spool (an append that failed on a full disk or a stuck lock) are appended
# first, and any that still cannot be are counted and make it exit 1. The ledger is append-only: a
# rental's creation row, then its closing row (destroyed_confirmed, hours, cost) once its
# destruction is confirmed. The sums and their rules are `hearsay ledger sum`'s (hearsay.contracts.
# ledger, the one reader, which the report's spend uses too): a rental (an id) whose last row is not
# a closing row is open (still billing, never confirmed gone, or re-opened: a box judged gone that
# ran on) and a closing row with an empty cost is "cost
# unknown", never $0: either is named and left out of the total, which is then a lower bound. A row
# with fewer than 9 fields (a write cut short) is named. Columns after cost are allowed.
# hearsay is RUNNER_HEARSAY (default: hearsay on PATH).
# Exit codes: 0 summary printed (all rentals closed, every cost known); 1 some are open or have an
#   unknown cost, a row is malformed, or rows still wait in the spool; 2 usage or unreadable ledger.
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
HEARSAY=${RUNNER_HEARSAY:-hearsay}   # word-split: the hearsay command line of this machine
need "${HEARSAY%% *}"
spooled=0
if [ "$own" = 1 ] && [ -s "$(_ledger_spool)" ]; then
  ledger_flush || true
  [ ! -s "$(_ledger_spool)" ] || spooled=$(wc -l <"$(_ledger_spool)" | tr -d ' ')
fi
[ -r "$LEDGER" ] || die 2 "cannot read ledger $LEDGER" "pass the file, or set LEDGER"
case $(head -n 1 "$LEDGER") in
  "$LEDGER_HEADER_V1" | "$LEDGER_HEADER_V1",*) ;;   # 9 columns, or 13 (offer GPU, ..., reason): the reader keeps them
  *) die 2 "$LEDGER has no ledger header" "is it the runner's ledger?" ;;
esac
rc=0
# shellcheck disable=SC2086  # HEARSAY is a command line by design
$HEARSAY ledger sum "$LEDGER" || rc=$?
[ "$rc" -le 1 ] || die 2 "hearsay ledger sum refused $LEDGER (exit $rc, its message above)" "pass the runner's ledger"
if [ "$spooled" -gt 0 ]; then
  printf 'spooled  %d row(s) not yet in the ledger (its disk full or its lock stuck?): %s\n' "$spooled" "$(_ledger_spool)"
  rc=1
fi
exit "$rc"
