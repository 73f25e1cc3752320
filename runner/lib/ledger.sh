# shellcheck shell=bash
# runner/lib/ledger.sh — the expense ledger, append-only: it is never rewritten, only appended to.
# $LEDGER names the file. Columns: id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost
#
# Each rental has a creation row (written the moment its id is known; the last three columns empty)
# and, once its destruction is confirmed, a closing row: the same first six columns with
# destroyed_confirmed, hours and cost filled. A rental is open while its id has no closing row;
# rentals = distinct ids (runner/ledger.sh sums it that way). Each row is written once per id.
# An append that fails (full disk, stuck lock) is retried RUNNER_LEDGER_TRIES times, said loudly on
# stderr and in the event log, and returns 1: callers keep the job record (the reaper retries), so
# a row is never silently dropped.

LEDGER_HEADER='id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost'
: "${RUNNER_LEDGER_TRIES:=5}"

# _ledger_has ID open|closed: the ledger already holds that row.
_ledger_has() {
  awk -F, -v id="$1" -v want="$2" 'NR > 1 && $1 == id && ((want == "open") == ($7 == "")) { f = 1 }
    END { exit !f }' "$LEDGER" 2>/dev/null
}

# _ledger_write ID open|closed LINE: one checked append (header first on a new file; a last line cut
# short by a full disk is ended first, so the new row starts on its own line). Caller holds the lock.
_ledger_write() {
  if [ ! -s "$LEDGER" ]; then
    mkdir -p "$(dirname "$LEDGER")" 2>/dev/null || return 1
    printf '%s\n' "$LEDGER_HEADER" >>"$LEDGER" 2>/dev/null || return 1
  fi
  ! _ledger_has "$1" "$2" || return 0
  if [ -n "$(tail -c 1 "$LEDGER" 2>/dev/null)" ]; then printf '\n' >>"$LEDGER" 2>/dev/null || return 1; fi
  printf '%s\n' "$3" >>"$LEDGER" 2>/dev/null
}

# _ledger_add ID open|closed LINE: _ledger_write under the ledger lock, retried; loud when it fails.
_ledger_add() {
  local try=0
  while [ "$try" -lt "$RUNNER_LEDGER_TRIES" ]; do
    try=$((try + 1))
    if lock_take "$LEDGER.lock" 100; then
      if _ledger_write "$1" "$2" "$3"; then
        lock_drop "$LEDGER.lock"
        return 0
      fi
      lock_drop "$LEDGER.lock"
    fi
    sleep "$try"
  done
  echo "runner: LEDGER WRITE FAILED after $try tries: $3 (is the disk under $LEDGER full, or $LEDGER.lock stuck? the job record is kept and the row retried)" >&2
  log_event "LEDGER WRITE FAILED: $3"
  return 1
}

# ledger_append ID JOB GEN OFFER DPH CREATED_EPOCH: the creation row.
ledger_append() {
  [ -n "$1" ] || { echo "runner: ledger_append without an instance id" >&2; return 1; }
  _ledger_add "$1" open "$1,$2,$3,$4,$5,$(iso "${6:-$(now)}"),,," || return 1
  log_event "ledger row for instance $1 ($2 $3)"
}

# ledger_complete ID JOB GEN OFFER DPH CREATED_EPOCH DESTROYED_EPOCH: the closing row.
ledger_complete() {
  local c=${6:-$7} h cost
  [ -n "$1" ] || { echo "runner: ledger_complete without an instance id" >&2; return 1; }
  is_number "$c" || c=$7
  h=$(awk -v c="$c" -v d="$7" 'BEGIN { h = (d - c) / 3600; if (h < 0) h = 0; printf "%.4f", h }')
  cost=$(calc 'h * dph' h="$h" dph="${5:-0}" 2>/dev/null) || cost=""
  _ledger_add "$1" closed "$1,$2,$3,$4,$5,$(iso "$c"),$(iso "$7"),$h,$cost" || return 1
  log_event "ledger row for instance $1 completed"
}

# ledger_close JOB ID [CREATED_EPOCH]: the closing row of instance ID rented for JOB's record, now.
ledger_close() {
  ledger_complete "$2" "$1" "$(rec_get "$1" gen)" "$(rec_get "$1" offer)" "$(rec_get "$1" dph)" \
    "${3:-$(rec_get "$1" created_at)}" "$(now)"
}
