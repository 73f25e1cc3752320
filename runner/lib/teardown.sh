# shellcheck shell=bash
# runner/lib/teardown.sh — ending a rental: destroy, confirm absence, complete the ledger, archive.
# Unknown is never gone: a record leaves jobs/ only once its instance is gone by the one rule
# (runner/lib/gone.sh: gone_judge).
# Its parts: runner/lib/labels.sh (a create's label: duplicates, and when a listing settles it) and
# runner/lib/unrecorded.sh (boxes of ours that no record owns).
# shellcheck source=runner/lib/gone.sh
. "$RUNNER_ROOT/lib/gone.sh"
# shellcheck source=runner/lib/labels.sh
. "$RUNNER_ROOT/lib/labels.sh"
# shellcheck source=runner/lib/unrecorded.sh
. "$RUNNER_ROOT/lib/unrecorded.sh"

# rec_instance JOB: the record's instance id; or, when this process holds one it could not write
# there (finish_job's ID on a full disk: held_job, held_id), that one, so the label's sweep still
# knows which box is the record's own.
rec_instance() {
  local id
  id=$(rec_get "$1" instance)
  if [ -z "$id" ] && [ "${held_job:-}" = "$1" ]; then id=${held_id:-}; fi
  printf '%s\n' "$id"
}

# adopt_by_label JOB [LISTFILE]: for a record whose create answered badly (no id persisted), look for
# an instance carrying its label (in LISTFILE, a vast_list the caller has just taken, else a fresh
# one). 0 = found and adopted (id persisted, ledger row written); 2 = confirmed none after
# RUNNER_LABEL_LAG_S of successful listings; 1 = unknown (listing failed, or still inside the lag).
# Every create attempt can fail from our side yet each have rented a box (the CLI retries a create
# whose connection dropped): the first labelled instance is adopted, every other one is swept on the
# same listing (sweep_label). The dup_sweep marker stays until a sweep settles the label (a resent
# create may land after this listing): finish_job retries it, and it keeps the record (and so
# runner/reaper.sh's sweep) alive.
adopt_by_label() {
  local job=$1 list id label created lag_end v
  label=$(rec_get "$job" label)
  if [ -z "$(rec_get "$job" asked)" ]; then
    return 2                   # the create was never asked: nothing can carry this record's label
  fi
  if [ -n "${2:-}" ]; then   # the caller's listing: copied, as every path below removes its own
    list=$(_vast_tmp) || return 1
    cp "$2" "$list" 2>/dev/null || { list_rm "$list"; return 1; }
    [ ! -e "$2.partial" ] || : >"$list.partial"
    [ ! -e "$2.at" ] || cp "$2.at" "$list.at" 2>/dev/null || true   # uncopied: its time is unknown
  else
    list=$(_vast_tmp) || return 1
    vast_list "$list" || { list_rm "$list"; return 1; }
  fi
  id=""
  # an empty label matches nothing (an unlabelled instance is someone else's); after the lag such a
  # record is given up and runner/reaper.sh's sweep of unrecorded labels takes whatever it rented
  [ -z "$label" ] || id=$(list_by_label "$list" "$label" | head -n 1)
  if [ -n "$id" ]; then
    created=$(list_field "$list" "$id" 7)
    created=${created%%.*}
    is_number "$created" || created=$(rec_get "$job" created_at)
    # the id must persist before anything acts on it (unpersisted, the step stops: unknown)
    rec_set "$job" instance "$id" || { list_rm "$list"; return 1; }
    rec_set "$job" created_at "$created" || true
    rec_set "$job" state CREATED || true
    ledger_append "$id" "$job" "$(rec_get "$job" gen)" "$(rec_get "$job" offer)" "$(list_dph "$list" "$id" "$(rec_get "$job" dph)")" "$created" "$(ledger_offer "$job")" || true
    log_event "job $job adopted instance $id by label $label"
    rec_set "$job" dup_sweep pending || true
    sweep_label "$job" "$list" || true
    list_rm "$list"
    return 0
  fi
  # an absent label counts only in a listing that can be told from an API hiccup: complete, and
  # showing every other box of ours (rule in runner/lib/gone.sh); one that lacks a known box is
  # unknown. With no other box of ours known, the listing alone is all there is (the label lag).
  v=0
  listing_vouches "$list" || v=$?
  if [ "$v" = 1 ]; then
    list_rm "$list"
    log_event "job $job: label $label absent from a listing that cannot vouch (partial, or lacks a known box): unknown"
    return 1
  fi
  list_rm "$list"
  # a create still in flight in another live launcher may land any moment: only that launcher (or,
  # once it is gone, the reaper) may give up on its label
  if launcher_alive "$job" && [ "$(rec_get "$job" launcher)" != "$$" ]; then return 1; fi
  lag_end=$(label_lag_end "$job") || return 1
  [ "$(now)" -lt "$lag_end" ] || return 2
  return 1
}

# unseen_rental JOB: 0 when the record's create may have rented a box that no listing will ever
# show, so the caller writes ledger_unseen's row. Two cases, judged as the record ends:
#   no id: its label absent from a listing that vouches, RUNNER_LABEL_LAG_S after the create
#     (adopt_by_label's 2);
#   an id: no listing that could show every duplicate a resent create rents was taken before the
#     provision_by (dups_seen still 0: label_settled), e.g. its launcher killed right after the create.
# A box rented for it that no chain reaches (no id for it, so no ssh) is ended by its on-start
# guard at the record's provision_by, not before: judged before then, it would still be listed
# (none was rented: 1); judged at or after then, it may have come and gone unseen (0). A record
# with an id is archived only once its label is settled (finish_job, step_previous), which before
# the provision-by means seen.
unseen_rental() {
  local pb
  [ -n "$(rec_get "$1" asked)" ] || return 1
  # with an id: unseen only while no listing in the label window has shown it ("0" from the create;
  # a record an older runner made has no such field and is not judged)
  [ -z "$(rec_get "$1" instance)" ] || [ "$(rec_get "$1" dups_seen)" = 0 ] || return 1
  pb=$(rec_get "$1" provision_by)
  is_number "$pb" || return 1          # a record an older runner made: no bound to judge by
  [ "$(now)" -ge "$pb" ]
}

# sweep_pending JOB: a dup_sweep marker (a label not settled yet: label_settled) is retried on a fresh
# listing, taken no earlier than RUNNER_LABEL_LAG_S after the create: inside that window it first
# waits (at most RUNNER_LABEL_LAG_S), as a create the CLI resent may still land. It does not wait
# when the window ends at or after the provision-by (only the provision-by can settle it then).
# 0 = no marker left, 1 = still pending (listing failed, a duplicate lives, or the listing cannot vouch).
sweep_pending() {
  local list lag_end pb wait rc=1
  [ -e "$(rec_dir "$1")/dup_sweep" ] || return 0
  pb=$(rec_get "$1" provision_by)
  if lag_end=$(label_lag_end "$1") && { ! is_number "$pb" || [ "$lag_end" -lt "${pb%%.*}" ]; }; then
    wait=$((lag_end - $(now)))
    [ "$wait" -le "$RUNNER_LABEL_LAG_S" ] || wait=$RUNNER_LABEL_LAG_S   # a created_at in the future
    if [ "$wait" -gt 0 ]; then
      say "job $1: waiting ${wait}s for its label to settle: a create the CLI resent may still land a duplicate (RUNNER_LABEL_LAG_S=$RUNNER_LABEL_LAG_S)"
      sleep "$wait"
    fi
  fi
  list=$(_vast_tmp) || return 1
  if vast_list "$list" && sweep_label "$1" "$list"; then rc=0; fi
  list_rm "$list"
  return "$rc"
}

# finish_job JOB REASON [ID]: end the job's rental (ID: an instance id the caller holds that the
# record may lack, when writing it failed). 0 = confirmed gone (record archived), 1 = not confirmed
# (record kept, state ORPHAN, or CREATING while its label may still appear). The record is archived
# only once its own instance AND every duplicate of its label are confirmed destroyed and its label
# is settled (label_settled): a pending dup_sweep marker keeps it ORPHAN, so runner/reaper.sh sweeps
# again (its step 0) and finishes it.
# bill_readback JOB ID REASON: a box whose bill was never read back (its launcher ended between the
# create and step_bill_check: the contract's dph still "pending") and that has no ledger row yet gets
# its own $/h read now, while it may still exist, so its closing row says what it billed, not what
# the search said. Unreadable (the box already ended itself, or no answer; one try: the teardown does
# not wait on a price): the search's $/h stays, and the closing row's reason says so, PRICE_UNKNOWN.
bill_readback() {
  local v
  [ "$(contract_get "$1" dph)" = pending ] && [ -z "$(ledger_row_dph "$2")" ] || return 0
  if v=$(vast_show_dph "$2"); then
    contract_billed "$1" "$v" || true
  elif [ -z "$(rec_get "$1" end_reason)" ]; then
    rec_set "$1" end_reason "PRICE_UNKNOWN: $3; its bill was never read back: the \$/h is the search's" || true
  fi
}

finish_job() {
  local job=$1 reason=$2 id rc=0 created settled=0
  rec_exists "$job" || return 0
  rec_reserve_free "$job"   # the ending's writes have room on a state disk that filled meanwhile
  id=$(rec_get "$job" instance)
  if [ -z "$id" ] && [ -n "${3:-}" ]; then   # the launcher knows an id it could not persist
    id=$3
    if ! rec_set "$job" instance "$id"; then
      say "job $job: instance $id could not be written to its record; destroying it anyway"
      held_job=$job held_id=$id   # rec_instance: the label sweep knows it all the same
    fi
  fi
  if [ -z "$id" ]; then
    adopt_by_label "$job" || rc=$?
    case $rc in
      0) id=$(rec_get "$job" instance) ;;
      2)
        if unseen_rental "$job"; then ledger_unseen "$job" || return 1; fi
        rec_set "$job" result "$reason" || true; rec_archive "$job" || return 1; return 0 ;;
      *) return 1 ;;
    esac
    [ -n "$id" ] || return 1
  fi
  # the label is settled before the box is destroyed: the box, still listed, is what vouches for the
  # listing that settles it (destroyed first, only other boxes of ours or the provision-by could)
  sweep_pending "$job" || settled=1
  rec_set "$job" state DESTROYING || true
  bill_readback "$job" "$id" "$reason"
  # the first reason the rental was ended for is the one its closing ledger row carries (a later
  # ORPHAN retry keeps it)
  [ -n "$(rec_get "$job" end_reason)" ] || rec_set "$job" end_reason "$reason" || true
  if destroy_confirmed "$id"; then
    created=$(rec_get "$job" created_at)
    if ! ledger_close "$job" "$id" "$created"; then
      rec_set "$job" state ORPHAN || true
      say "instance $id of job $job is destroyed, but its ledger row could not be completed: record kept (the reaper retries)"
      return 1
    fi
    if [ "$reason" = DONE ] && [ "$(rec_get "$job" kind)" = pilot ]; then
      # keyed on the recipe (the config without its epoch count: runner/lib/recipe.sh)
      if ! { [ -n "$(rec_get "$job" recipe_hash)" ] && mkdir -p "$RUNNER_STATE/pilots" \
        && printf '%s\n' "$(rec_get "$job" gen)" >"$RUNNER_STATE/pilots/$(rec_get "$job" bundle_sha)-$(rec_get "$job" recipe_hash)"; } 2>/dev/null; then
        say "job $job: could not record the DONE pilot (no recipe_hash in its record, or no space under RUNNER_STATE)"
      fi
    fi
    say "instance $id of job $job destroyed (confirmed gone: runner/lib/gone.sh)"
    if [ "$settled" = 0 ]; then
      if unseen_rental "$job"; then ledger_unseen "$job" || { rec_set "$job" state ORPHAN || true; return 1; }; fi
      rec_set "$job" result "$reason" || true
      rec_archive "$job" || return 1
      return 0
    fi
    rec_set "$job" state ORPHAN || true
    say "job $job: a duplicate of label $(rec_get "$job" label) could NOT be confirmed destroyed, or no listing could show them all yet: record kept ORPHAN (the reaper keeps sweeping; check: runner/teardown_check.sh)"
    return 1
  fi
  rec_set "$job" state ORPHAN || true
  say "instance $id of job $job could NOT be confirmed destroyed: recorded ORPHAN (the reaper keeps trying; check: runner/teardown_check.sh)"
  return 1
}
