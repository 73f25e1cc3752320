# shellcheck shell=bash
# runner/lib/teardown.sh — ending a rental: destroy, confirm absence, complete the ledger, archive.
# Unknown is never gone: a record leaves jobs/ only after a successful listing lacks its instance.

# adopt_by_label JOB: for a record whose create answered badly (no id persisted), look for an instance
# carrying its label. 0 = found and adopted (id persisted, ledger row written); 2 = confirmed none
# after RUNNER_LABEL_LAG_S of successful listings; 1 = unknown (listing failed, or still inside the lag).
# Every create attempt can fail from our side yet each have rented a box (the CLI retries a create
# whose connection dropped): the first labelled instance is adopted, every other one is swept on the
# same listing (sweep_duplicates); one not confirmed destroyed leaves the dup_sweep marker, which
# finish_job retries and which keeps the record (and so runner/reaper.sh's sweep) alive.
adopt_by_label() {
  local job=$1 list id label created
  list=$(_vast_tmp)
  vast_list "$list" || { rm -f "$list"; return 1; }
  label=$(rec_get "$job" label)
  id=$(list_by_label "$list" "$label" | head -n 1)
  if [ -n "$id" ]; then
    created=$(list_field "$list" "$id" 7)
    created=${created%%.*}
    is_number "$created" || created=$(rec_get "$job" created_at)
    rec_set "$job" instance "$id"
    rec_set "$job" created_at "$created"
    rec_set "$job" state CREATED
    ledger_append "$id" "$job" "$(rec_get "$job" gen)" "$(rec_get "$job" offer)" "$(rec_get "$job" dph)" "$created"
    log_event "job $job adopted instance $id by label $label"
    rec_set "$job" dup_sweep pending
    if sweep_duplicates "$job" "$list"; then rm -f "$(rec_dir "$job")/dup_sweep"; fi
    rm -f "$list"
    return 0
  fi
  rm -f "$list"
  created=$(rec_get "$job" created_at)
  if is_number "$created" && [ $(($(now) - created)) -ge "$RUNNER_LABEL_LAG_S" ]; then
    return 2
  fi
  return 1
}

# sweep_pending JOB: a dup_sweep marker (a sweep that could not confirm every duplicate destroyed) is
# retried on a fresh listing. 0 = no marker left, 1 = still pending (listing failed or a duplicate lives).
sweep_pending() {
  local list rc=1
  [ -e "$(rec_dir "$1")/dup_sweep" ] || return 0
  list=$(_vast_tmp)
  if vast_list "$list" && sweep_duplicates "$1" "$list"; then
    rm -f "$(rec_dir "$1")/dup_sweep"
    rc=0
  fi
  rm -f "$list"
  return "$rc"
}

# finish_job JOB REASON: end the job's rental. 0 = confirmed gone (record archived), 1 = not confirmed
# (record kept, state ORPHAN, or CREATING while its label may still appear). The record is archived
# only once its own instance AND every duplicate of its label are confirmed destroyed: a pending
# dup_sweep marker keeps it ORPHAN, so runner/reaper.sh sweeps again (its step 0) and finishes it.
finish_job() {
  local job=$1 reason=$2 id rc=0 created
  rec_exists "$job" || return 0
  id=$(rec_get "$job" instance)
  if [ -z "$id" ]; then
    adopt_by_label "$job" || rc=$?
    case $rc in
      0) id=$(rec_get "$job" instance) ;;
      2) rec_set "$job" result "$reason"; rec_archive "$job"; return 0 ;;
      *) return 1 ;;
    esac
  fi
  rec_set "$job" state DESTROYING
  if destroy_confirmed "$id"; then
    created=$(rec_get "$job" created_at)
    ledger_complete "$id" "${created:-$(now)}" "$(now)" "$(rec_get "$job" dph)"
    if [ "$reason" = DONE ] && [ "$(rec_get "$job" kind)" = pilot ]; then
      mkdir -p "$RUNNER_STATE/pilots"
      rec_get "$job" gen >"$RUNNER_STATE/pilots/$(rec_get "$job" bundle_sha)-$(rec_get "$job" config_hash)"
    fi
    say "instance $id of job $job destroyed (confirmed: absent from a successful listing)"
    if sweep_pending "$job"; then
      rec_set "$job" result "$reason"
      rec_archive "$job"
      return 0
    fi
    rec_set "$job" state ORPHAN
    say "job $job: a duplicate of label $(rec_get "$job" label) could NOT be confirmed destroyed: record kept ORPHAN (the reaper keeps sweeping; check: runner/teardown_check.sh)"
    return 1
  fi
  rec_set "$job" state ORPHAN
  say "instance $id of job $job could NOT be confirmed destroyed: recorded ORPHAN (the reaper keeps trying; check: runner/teardown_check.sh)"
  return 1
}

# sweep_duplicates JOB LISTFILE: the CLI retries a create whose connection dropped, so one launch can rent
# twice; only the reported id is the record's. Every other instance in the listing carrying the record's
# label gets a ledger row (rows = creations) and is destroyed, its row completed once confirmed. A record
# without an id (CREATING) or with a label outside RUNNER_LABEL_PREFIX is left alone (adopt_by_label
# adopts one of its labelled instances and then calls this for the others).
# 0 = no duplicate left, 1 = one could not be confirmed destroyed.
sweep_duplicates() {
  local job=$1 list=$2 own label id created rc=0
  own=$(rec_get "$job" instance)
  label=$(rec_get "$job" label)
  [ -n "$own" ] && [ -n "$label" ] || return 0
  case $label in "$RUNNER_LABEL_PREFIX":*) ;; *) return 0 ;; esac
  for id in $(list_by_label "$list" "$label"); do
    [ "$id" != "$own" ] || continue
    created=$(list_field "$list" "$id" 7)
    created=${created%%.*}
    is_number "$created" || created=$(rec_get "$job" created_at)
    ledger_append "$id" "$job" "$(rec_get "$job" gen)" "$(rec_get "$job" offer)" "$(rec_get "$job" dph)" "$created"
    say "job $job: instance $id duplicates instance $own (same label $label, a retried create), destroying it"
    if destroy_confirmed "$id"; then
      ledger_complete "$id" "$created" "$(now)" "$(rec_get "$job" dph)"
    else
      say "duplicate instance $id of job $job could NOT be confirmed destroyed (the reaper keeps trying; check: runner/teardown_check.sh)"
      rc=1
    fi
  done
  return "$rc"
}
