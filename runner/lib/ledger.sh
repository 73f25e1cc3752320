# shellcheck shell=bash
# runner/lib/ledger.sh — the expense ledger: one CSV row per rental, written at creation and
# completed when the instance's destruction is confirmed. $LEDGER names the file.
# Columns: id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost

LEDGER_HEADER='id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost'

_ledger_lock() { lock_take "$LEDGER.lock" 300 || die 1 "ledger $LEDGER is locked" "remove $LEDGER.lock if no runner is running"; }

_ledger_init() {
  [ -s "$LEDGER" ] && return 0
  mkdir -p "$(dirname "$LEDGER")"
  echo "$LEDGER_HEADER" >"$LEDGER"
}

# ledger_append ID JOB GEN OFFER DPH CREATED_EPOCH: the creation row (once per id).
ledger_append() {
  _ledger_lock
  _ledger_init
  if ! awk -F, -v id="$1" 'NR > 1 && $1 == id { f = 1 } END { exit !f }' "$LEDGER"; then
    echo "$1,$2,$3,$4,$5,$(iso "$6"),,," >>"$LEDGER"
  fi
  lock_drop "$LEDGER.lock"
  log_event "ledger row for instance $1 ($2 $3)"
}

# ledger_complete ID CREATED_EPOCH DESTROYED_EPOCH DPH: fill destroyed_confirmed, hours and cost.
ledger_complete() {
  local tmp
  _ledger_lock
  _ledger_init
  tmp="$LEDGER.tmp.$$"
  awk -F, -v OFS=, -v id="$1" -v c="$2" -v d="$3" -v dph="$4" -v when="$(iso "$3")" '
    NR > 1 && $1 == id && $7 == "" {
      h = (d - c) / 3600; if (h < 0) h = 0
      $7 = when; $8 = sprintf("%.4f", h); $9 = sprintf("%.4f", h * dph)
    }
    { print }' "$LEDGER" >"$tmp"
  mv -f "$tmp" "$LEDGER"
  lock_drop "$LEDGER.lock"
  log_event "ledger row for instance $1 completed"
}
