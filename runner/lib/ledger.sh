# shellcheck shell=bash
# runner/lib/ledger.sh — the expense ledger, append-only: it is never rewritten, only appended to.
# $LEDGER names the file. Columns (13):
#   id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost,gpu_name,cpu_cores,driver_cuda,reason
# gpu_name, cpu_cores (the offer's cpu_cores_effective: the vCPUs this rental gets) and driver_cuda
# (its cuda_max_good: the newest CUDA the host's driver runs) are what the chosen offer said, in both
# rows of a rental (empty for an instance the runner did not choose, e.g. an adopted one); reason is
# why the rental ended, on the closing row only (DONE, FAIL, DEADLINE, CAMPAIGN_DEADLINE, HEARTBEAT,
# ABANDONED, LAUNCH_FAILED, …; empty when the box ended itself or the row was closed otherwise).
# A ledger begun before the last four columns existed keeps its 9-column header and rows; new rows
# are appended with 13 fields all the same. The ledger's reader is hearsay.contracts.ledger (runner/
# ledger.sh and the ablation cap ask it: `hearsay ledger sum|hours`); it takes a header of either
# form and rows of 9 or 13 fields by position. The writer below keeps two small readers of its own
# in bash (_ledger_has, ledger_open_rows: why is written there), held to that reader's answers by
# tests/test_ledger_readers.py.
#
# Each rental has a creation row (written the moment its id is known; destroyed_confirmed, hours,
# cost and reason empty) and, once its destruction is confirmed, a closing row: the same columns
# with destroyed_confirmed, hours and cost filled. A box judged gone (its row closed) that is seen
# running again is re-adopted (runner/lib/unrecorded.sh readopt_gone) and gets a re-open row: the
# creation row's columns with reason "REOPENED <ISO time>"; its next closing row (hours and cost
# from the creation again) closes it anew. A create whose answer never came and whose label no
# listing showed before its box's provision-by (the box, if rented, ended itself unseen), or whose
# box no listing showed before then (so none showed a duplicate a resent create rented), gets one
# closing row, id "unseen:LABEL", hours to that provision-by: the most one such box can have billed
# (ledger_unseen). A rental is open while its id's last row is not a
# closing row; rentals = distinct ids (runner/ledger.sh sums it that way, through
# hearsay.contracts.ledger). Each row is written once: one creation row per id, a closing row only
# onto an open rental, a re-open row only onto a closed one (and never a line already there).
# An append that fails (full disk, stuck lock) is retried RUNNER_LEDGER_TRIES times (the n-th after
# n x RUNNER_LEDGER_BACKOFF_S s, default 1) and said loudly
# on stderr and in the event log. The row then waits in the spool, $RUNNER_STATE/ledger.spool (the
# state folder, not the ledger's), and every later ledger write and every reaper cycle appends the
# spooled rows first, in order: a row with no job record behind it (an adopted instance) is kept
# too. Only when the spool cannot be written either does the append return 1; callers then keep
# the job record (the reaper retries), so a row is never silently dropped.

LEDGER_HEADER='id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost,gpu_name,cpu_cores,driver_cuda,reason'
# shellcheck disable=SC2034  # read by runner/ledger.sh
LEDGER_HEADER_V1='id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost'   # 9 columns: still read
: "${RUNNER_LEDGER_TRIES:=5}"
: "${RUNNER_LEDGER_BACKOFF_S:=1}"   # seconds: the n-th retry waits n x this

# Why the writer reads the ledger in bash, not through hearsay: it runs under the ledger lock, on the
# reaper's teardown path too (the closing row of every destroyed box), and the reaper needs no
# hearsay: rows must go on being written on a machine whose hearsay install is broken or absent, and
# a python start per spooled row would hold the lock that much longer. Its rules are the reader's
# (hearsay.contracts.ledger), spelled once here for both bash readers:
#   a whole row is 9 fields, the header's width, or 13 under a 9-field header, with an id; any other
#   row is a write cut short and counts as nothing (so a cut-short row is written again);
#   a rental (an id) is known from any whole row of it, and closed while its last whole row has
#   destroyed_confirmed (field 7): a re-open row (reason REOPENED ...) opens it again.
# LEDGER_AWK: that test as an awk function, whole(), w the header's width (13 with no header line).
# shellcheck disable=SC2016  # awk code: its $1 and $7 are awk's fields
LEDGER_AWK='function whole() { return (NF == 9 || NF == w || (w == 9 && NF == 13)) && $1 != "" }
  BEGIN { w = 13 } NR == 1 && $1 == "id" { w = NF; next }'

# _ledger_has ID open|closed|reopen LINE: 0 when the row must not be written (again): a creation row
# when the id has any whole row; a closing row when LINE is there already or the id's last whole row
# is a closing row; a re-open row when LINE is there already, the id has no row, or its last row is
# open. (A spool replayed after a failed flush re-presents rows already appended, in order: LINE
# itself being there is what keeps a replayed closing row from closing a rental re-opened since.)
_ledger_has() {
  LINE=$3 awk -F, -v id="$1" -v want="$2" "$LEDGER_AWK"'
    !whole() { next }
    $1 == id { n++; last = ($7 != "") }
    $0 == ENVIRON["LINE"] { same = 1 }
    END {
      if (want == "open") exit !(n > 0)
      if (same) exit 0
      if (want == "closed") exit !(n > 0 && last)
      exit !(n == 0 || !last)
    }' "$LEDGER" 2>/dev/null
}

# _ledger_kind LINE: open, closed or reopen (a row without destroyed_confirmed whose reason, the
# 13th column, starts with REOPENED).
_ledger_kind() {
  printf '%s\n' "$1" | awk -F, '{ print ($7 != "") ? "closed" : (NF >= 13 && index($13, "REOPENED") == 1) ? "reopen" : "open" }'
}

# _ledger_write ID open|closed|reopen LINE: one checked append (header first on a new file; a last
# line cut short by a full disk is ended first, so the new row starts on its own line). Caller holds
# the lock.
_ledger_write() {
  if [ ! -s "$LEDGER" ]; then
    mkdir -p "$(dirname "$LEDGER")" 2>/dev/null || return 1
    printf '%s\n' "$LEDGER_HEADER" >>"$LEDGER" 2>/dev/null || return 1
  fi
  ! _ledger_has "$1" "$2" "$3" || return 0
  if [ -n "$(tail -c 1 "$LEDGER" 2>/dev/null)" ]; then printf '\n' >>"$LEDGER" 2>/dev/null || return 1; fi
  printf '%s\n' "$3" >>"$LEDGER" 2>/dev/null
}

_ledger_spool() { printf '%s\n' "$RUNNER_STATE/ledger.spool"; }

# _ledger_flush_spool: append the spooled rows (oldest first) to the ledger. Caller holds the ledger
# lock. 0 = the spool is empty now; 1 = the rows are still spooled (a row already appended is not
# written twice: _ledger_has).
_ledger_flush_spool() {
  local spool batch line id kind ok=1
  spool=$(_ledger_spool)
  [ -s "$spool" ] || return 0
  batch="$spool.flush.$$"
  mv -f "$spool" "$batch" 2>/dev/null || return 1  # rows spooled meanwhile start a new spool
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    id=${line%%,*}
    kind=$(_ledger_kind "$line")
    if ! _ledger_write "$id" "$kind" "$line"; then ok=0; break; fi
    log_event "spooled ledger row for instance $id ($kind) appended"
  done <"$batch"
  if [ "$ok" = 0 ]; then  # the whole batch back, in front of any row spooled meanwhile
    if [ ! -e "$spool" ] || cat "$spool" >>"$batch" 2>/dev/null; then mv -f "$batch" "$spool" 2>/dev/null; fi
    return 1
  fi
  rm -f "$batch"
}

# _ledger_folder: the ledger's folder, made first: its lock lives there, so a missing folder would
# otherwise fail every append as a "stuck lock" and leave the rows in the spool for good.
_ledger_folder() { mkdir -p "$(dirname "$LEDGER")" 2>/dev/null || true; }

# ledger_flush: the reaper's cycle: spooled rows into the ledger, under its lock.
ledger_flush() {
  [ -s "$(_ledger_spool)" ] || return 0
  local rc=0
  _ledger_folder
  lock_take "$LEDGER.lock" 100 || return 1
  _ledger_flush_spool || rc=$?
  lock_drop "$LEDGER.lock"
  return "$rc"
}

# _ledger_add ID open|closed|reopen LINE: _ledger_write under the ledger lock (spooled rows first), retried;
# loud when it fails, and then spooled (1 only when even the spool cannot be written).
_ledger_add() {
  local try=0
  _ledger_folder
  while [ "$try" -lt "$RUNNER_LEDGER_TRIES" ]; do
    try=$((try + 1))
    if lock_take "$LEDGER.lock" 100; then
      if _ledger_flush_spool && _ledger_write "$1" "$2" "$3"; then
        lock_drop "$LEDGER.lock"
        return 0
      fi
      lock_drop "$LEDGER.lock"
    fi
    sleep "$(awk -v n="$try" -v b="$RUNNER_LEDGER_BACKOFF_S" 'BEGIN { print n * b }')"
  done
  if printf '%s\n' "$3" >>"$(_ledger_spool)" 2>/dev/null; then
    echo "runner: LEDGER WRITE FAILED after $try tries: $3 (is the disk under $LEDGER full, or $LEDGER.lock stuck?) - the row is spooled in $(_ledger_spool) and appended by the next ledger write or reaper cycle" >&2
    log_event "LEDGER WRITE FAILED, row spooled: $3"
    return 0
  fi
  echo "runner: LEDGER WRITE FAILED after $try tries: $3 (is the disk under $LEDGER full, or $LEDGER.lock stuck? the spool $(_ledger_spool) cannot be written either: the job record is kept and the row retried)" >&2
  log_event "LEDGER WRITE FAILED: $3"
  return 1
}

# ledger_offer JOB: the record's offer fields as the ledger's last columns but one: "GPU,CORES,CUDA"
# (each empty when the record lacks it; commas were already turned to spaces by vast_offer).
ledger_offer() {
  printf '%s,%s,%s\n' "$(rec_get "$1" offer_gpu | tr ',' ' ')" "$(rec_get "$1" offer_cores | tr ',' ' ')" \
    "$(rec_get "$1" offer_cuda | tr ',' ' ')"
}

# ledger_append ID JOB GEN OFFER DPH CREATED_EPOCH [GPU,CORES,CUDA]: the creation row.
ledger_append() {
  [ -n "$1" ] || { echo "runner: ledger_append without an instance id" >&2; return 1; }
  _ledger_add "$1" open "$1,$2,$3,$4,$5,$(iso "${6:-$(now)}"),,,,${7:-,,}," || return 1
  log_event "ledger row for instance $1 ($2 $3)"
}

# ledger_complete ID JOB GEN OFFER DPH CREATED_EPOCH DESTROYED_EPOCH [GPU,CORES,CUDA [REASON]]: the
# closing row.
ledger_complete() {
  local c=${6:-$7} h cost
  [ -n "$1" ] || { echo "runner: ledger_complete without an instance id" >&2; return 1; }
  is_number "$c" || c=$7
  h=$(awk -v c="$c" -v d="$7" 'BEGIN { h = (d - c) / 3600; if (h < 0) h = 0; printf "%.4f", h }')
  cost=$(calc 'h * dph' h="$h" dph="${5:-0}" 2>/dev/null) || cost=""
  _ledger_add "$1" closed "$1,$2,$3,$4,$5,$(iso "$c"),$(iso "$7"),$h,$cost,${8:-,,},$(printf '%s' "${9:-}" | tr ',\n' '  ')" || return 1
  log_event "ledger row for instance $1 completed"
}

# ledger_open_rows JOB GEN: "ID CREATED_ISO" of every rental of JOB's generation GEN that is open
# (its last whole row is not a closing row; the ledger, then the spool: a row spooled after a failed
# append counts as written). In bash for the writer's reason (above): the reaper calls it.
ledger_open_rows() {
  cat "$LEDGER" "$(_ledger_spool)" 2>/dev/null | awk -F, -v j="$1" -v g="$2" "$LEDGER_AWK"'
    !whole() { next }
    $2 == j && $3 == g { if (!($1 in s)) { s[$1] = $6; o[++n] = $1 } c[$1] = ($7 != "") }
    END { for (i = 1; i <= n; i++) if (!c[o[i]]) print o[i], s[o[i]] }'
}

# ledger_open_ids: "ID JOB" of every open rental in the ledger (and its spool), whatever its job:
# what runner/teardown_check.sh must see proven gone before it says "teardown confirmed".
ledger_open_ids() {
  cat "$LEDGER" "$(_ledger_spool)" 2>/dev/null | awk -F, "$LEDGER_AWK"'
    !whole() { next }
    { if (!($1 in s)) { s[$1] = $2; o[++n] = $1 } c[$1] = ($7 != "") }
    END { for (i = 1; i <= n; i++) if (!c[o[i]]) print o[i], s[o[i]] }'
}

# ledger_close JOB ID [CREATED_EPOCH]: the closing row of instance ID rented for JOB's record, now,
# at its creation row's $/h (ledger_row_dph), with the record's offer fields and its end_reason (set
# by finish_job, runner/lib/teardown.sh).
# An adopted record (runner/lib/unrecorded.sh adopt_record) keeps the job its label named (ledger_job).
ledger_close() {
  local job dph
  job=$(rec_get "$1" ledger_job)
  dph=$(ledger_row_dph "$2")
  [ -n "$dph" ] || dph=$(rec_get "$1" dph)
  ledger_complete "$2" "${job:-$1}" "$(rec_get "$1" gen)" "$(rec_get "$1" offer)" "$dph" \
    "${3:-$(rec_get "$1" created_at)}" "$(now)" "$(ledger_offer "$1")" "$(rec_get "$1" end_reason)"
}

# ledger_row_dph ID: the $/h on instance ID's last whole row (the ledger, then the spool), nothing when
# it has none. A closing row repeats its creation row's $/h: the bill read back for the record's box,
# the listing's for a box found by its label (a duplicate bills at its own price, not the record's).
ledger_row_dph() {
  cat "$LEDGER" "$(_ledger_spool)" 2>/dev/null | awk -F, -v id="$1" "$LEDGER_AWK"'
    !whole() { next }
    $1 == id { d = $5 } END { printf "%s", d }'
}

# ledger_unseen JOB: the one row of a rental no listing showed (runner/lib/teardown.sh unseen_rental):
# id "unseen:LABEL", a closing row from the create (rec_created) to the record's provision_by, when
# the box's guard ended it if it existed, so hours and cost are the most one such box can have
# billed (give or take the guard's destroy call); reason UNSEEN, saying which case. It is written
# whether or not a box was rented: the ledger cannot know, and the budget counts the worst case.
ledger_unseen() {
  local c pb label what
  pb=$(rec_get "$1" provision_by)
  is_number "$pb" || pb=$(now)
  c=$(rec_created "$1") || c=$pb
  label=$(rec_get "$1" label)
  if [ -z "$(rec_get "$1" instance)" ]; then
    what="its create's answer never came and no listing showed its label before its provision-by"
  else
    what="no listing showed its box before its provision-by: a duplicate the CLI's resent create rented would have gone unseen"
  fi
  ledger_complete "unseen:${label:-$1:$(rec_get "$1" gen)}" "$1" "$(rec_get "$1" gen)" "$(rec_get "$1" offer)" \
    "$(rec_get "$1" dph)" "$c" "$pb" "$(ledger_offer "$1")" \
    "UNSEEN: $what; hours are the most one such box can have billed" || return 1
  say "job $1: its create may have rented a box no listing showed (it ends itself by $(iso "$pb")): ledger row unseen:$label, hours to its provision-by"
}

# ledger_closed ID: 0 when the rental of instance ID is closed (its last row, in the ledger then
# the spool, is a closing row).
ledger_closed() {
  { cat "$LEDGER" "$(_ledger_spool)" 2>/dev/null || true; } | awk -F, -v id="$1" '   # no spool: no error (pipefail)
    NR > 1 && $1 == id { n++; last = ($7 != "") } END { exit !(n > 0 && last) }'
}

# ledger_reopen_row ID JOB GEN OFFER DPH CREATED_EPOCH [GPU,CORES,CUDA]: the re-open row of a rental
# whose closing row was written when its box was judged gone and which is listed running again:
# the creation row's columns, reason "REOPENED <now>". The rental is then open again (its spend
# counted as open, never as done) until its next closing row (ledger_complete, hours and cost from
# CREATED as ever). 1 when the row cannot be written (nor spooled).
ledger_reopen_row() {
  [ -n "$1" ] || { echo "runner: ledger_reopen_row without an instance id" >&2; return 1; }
  _ledger_add "$1" reopen "$1,$2,$3,$4,$5,$(iso "${6:-$(now)}"),,,,${7:-,,},REOPENED $(iso "$(now)")" || return 1
  log_event "ledger row for instance $1 re-opened ($2 $3)"
}

# ledger_reopen JOB ID: ledger_reopen_row for instance ID of JOB's record (runner/lib/unrecorded.sh
# readopt_gone), from the record's fields (an adopted record keeps its label's job: ledger_job).
ledger_reopen() {
  local job c
  job=$(rec_get "$1" ledger_job)
  c=$(rec_get "$1" created_at)
  is_number "$c" || c=$(now)
  ledger_reopen_row "$2" "${job:-$1}" "$(rec_get "$1" gen)" "$(rec_get "$1" offer)" "$(rec_get "$1" dph)" "$c" "$(ledger_offer "$1")"
}
