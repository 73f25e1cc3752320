# shellcheck shell=bash
# runner/lib/labels.sh — the label of a job's creates (PREFIX.OPERATOR:JOB:GEN:DEADLINE): the CLI
# resends a create whose connection dropped, so one launch can rent several boxes with it. Every box
# but the record's is a duplicate, destroyed with its own ledger row (sweep_duplicates); a listing
# settles the label only once it can have shown them all (label_settled). Sourced by
# runner/lib/teardown.sh; the gone rule is runner/lib/gone.sh's.

# sweep_duplicates JOB LISTFILE: the CLI retries a create whose connection dropped, so one launch can rent
# twice; only the reported id is the record's. Every other instance in the listing carrying the record's
# label gets a ledger row (rows = creations) and is destroyed, its row completed once confirmed. A record
# without an id (CREATING) or with a label outside RUNNER_LABEL_PREFIX is left alone (adopt_by_label
# adopts one of its labelled instances and then calls this for the others). A duplicate destroyed in
# an earlier sweep but not confirmed then, and absent from this listing, has its open row completed.
# Whether the listing can have shown every duplicate is label_settled's to judge (sweep_label).
# 0 = no duplicate left, 1 = one could not be confirmed destroyed.
sweep_duplicates() {
  local job=$1 list=$2 own label id created lj rc=0
  own=$(rec_instance "$job")
  label=$(rec_get "$job" label)
  [ -n "$own" ] && [ -n "$label" ] || return 0
  # the record's own label (this operator's PREFIX.OPERATOR:…, or an older runner's PREFIX:…)
  case $label in "$RUNNER_LABEL_PREFIX".* | "$RUNNER_LABEL_PREFIX":*) ;; *) return 0 ;; esac
  for id in $(list_by_label "$list" "$label"); do
    [ "$id" != "$own" ] || continue
    created=$(list_field "$list" "$id" 7)
    created=${created%%.*}
    is_number "$created" || created=$(rec_get "$job" created_at)
    ledger_append "$id" "$job" "$(rec_get "$job" gen)" "$(rec_get "$job" offer)" "$(list_dph "$list" "$id" "$(rec_get "$job" dph)")" "$created" "$(ledger_offer "$job")" || rc=1
    say "job $job: instance $id duplicates instance $own (same label $label, a retried create), destroying it"
    if destroy_confirmed "$id"; then
      ledger_close "$job" "$id" "$created" || rc=1
    else
      say "duplicate instance $id of job $job could NOT be confirmed destroyed (the reaper keeps trying; check: runner/teardown_check.sh)"
      rc=1
    fi
  done
  # a duplicate destroyed earlier but not confirmed then (the listing still showed it) and absent
  # from this successful listing is gone: its row is completed now, or nothing ever would complete it
  lj=$(rec_get "$job" ledger_job)
  # shellcheck disable=SC2046  # "ID CREATED_ISO" pairs, no spaces inside either
  set -- $(ledger_open_rows "${lj:-$job}" "$(rec_get "$job" gen)")
  while [ $# -ge 2 ]; do
    id=$1 created=$2
    shift 2
    [ "$id" != "$own" ] || continue
    gone_judge "$list" "$id" || continue   # listed, or unknown: the row stays open
    say "job $job: duplicate instance $id is gone (runner/lib/gone.sh): its ledger row completed"
    ledger_close "$job" "$id" "$(epoch_of "$created")" || rc=1
  done
  return "$rc"
}

# label_lag_end JOB: prints the second (created_at + RUNNER_LABEL_LAG_S) from which a listing can
# show every box the record's creates rented: a create the CLI resent lands within the lag (label_settled).
# Counted from rec_created (without a created_at, a later second: the window only ends later).
# Fails when the record has no creation time at all.
label_lag_end() {
  local created
  created=$(rec_created "$1") || return 1
  echo $((created + RUNNER_LABEL_LAG_S))
}

# label_settled JOB LISTFILE: may LISTFILE, a successful listing, have shown every box the record's
# creates rented? The CLI resends a create whose connection dropped, and a create answered with an
# error can still land, each within RUNNER_LABEL_LAG_S of the create (created_at); a duplicate no
# chain reaches ends itself at the record's provision_by. Judged by when the listing was taken
# (list_taken_at), never by the time now (a listing can be minutes old when a reaper cycle reaches
# its job):
#   0, seen: taken in [created_at + RUNNER_LABEL_LAG_S, provision_by), and it vouches for absences
#     (it shows the record's own box, or runner/lib/gone.sh's listing_vouches): dups_seen is set 1,
#     as none can have come and gone unseen (unseen_rental);
#   0, past: taken at or after provision_by: whatever it does not show has ended itself, and
#     unseen_rental's row counts it while dups_seen is 0;
#   1: a later listing is owed (taken inside the label window, a page that cannot vouch, its time
#     unknown, or a record without an id yet).
# Once seen, a label stays settled: what is left is destroying the duplicates that listing named.
label_settled() {
  local job=$1 list=$2 t lag_end pb own
  [ "$(rec_get "$job" dups_seen)" != 1 ] || return 0
  t=$(list_taken_at "$list")
  pb=$(rec_get "$job" provision_by)
  own=$(rec_instance "$job")
  is_number "$t" && lag_end=$(label_lag_end "$job") && [ -n "$own" ] || return 1
  if is_number "$pb" && [ "$t" -ge "${pb%%.*}" ]; then return 0; fi
  [ "$t" -ge "$lag_end" ] || return 1
  list_has "$list" "$own" || listing_vouches "$list" || return 1
  if is_number "$pb"; then rec_set "$job" dups_seen 1 || true; fi   # no provision_by: an older runner's record
  return 0
}

# sweep_label JOB LISTFILE: sweep_duplicates on LISTFILE and label_settled on the same listing, then the
# record's dup_sweep marker: removed when nothing is left to sweep and the label is settled; set when
# a duplicate could not be confirmed destroyed; otherwise (a later listing owed) left as it is: a
# record that has no marker never had a create to settle (an older runner's, or one adopt_record made).
# 0 = settled (no marker), 1 = a duplicate lives on, 2 = not settled by this listing.
sweep_label() {
  local swept=0 settled=0
  sweep_duplicates "$1" "$2" || swept=1
  label_settled "$1" "$2" || settled=1   # judged even so: a listing that showed them all is "seen"
  if [ "$swept" = 1 ]; then
    rec_set "$1" dup_sweep pending || true
    return 1
  fi
  [ "$settled" = 0 ] || return 2
  rm -f "$(rec_dir "$1")/dup_sweep"
}
