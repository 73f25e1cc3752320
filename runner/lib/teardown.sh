# shellcheck shell=bash
# runner/lib/teardown.sh — ending a rental: destroy, confirm absence, complete the ledger, archive.
# Unknown is never gone: a record leaves jobs/ only once its instance is gone by the one rule
# (runner/lib/gone.sh: gone_judge).
# shellcheck source=runner/lib/gone.sh
. "$RUNNER_ROOT/lib/gone.sh"

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
    ledger_append "$id" "$job" "$(rec_get "$job" gen)" "$(rec_get "$job" offer)" "$(rec_get "$job" dph)" "$created" "$(ledger_offer "$job")" || true
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
    ledger_append "$id" "$job" "$(rec_get "$job" gen)" "$(rec_get "$job" offer)" "$(rec_get "$job" dph)" "$created" "$(ledger_offer "$job")" || rc=1
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

# adopt_record ID LABEL JOB GEN DPH CREATED: a record adopted-ID (state ORPHAN) for an unrecorded
# instance whose destruction is not confirmed yet; its ledger rows keep JOB (ledger_job).
adopt_record() {
  local r="adopted-$1"
  rec_exists "$r" || rec_new "$r" 2>/dev/null || return 1
  rec_set "$r" instance "$1" && rec_set "$r" label "$2" && rec_set "$r" ledger_job "$3" \
    && rec_set "$r" gen "$4" && rec_set "$r" dph "$5" && rec_set "$r" created_at "$6" \
    && rec_set "$r" kind adopted && rec_set "$r" state ORPHAN
}

# sweep_unrecorded LISTFILE: every listed instance labelled with this state's own prefix
# (label_prefix: PREFIX.OPERATOR:JOB:GEN[:DEADLINE]) that no job record owns (by id or by label) and
# that is older than RUNNER_ORPHAN_GRACE_S (its start_date) is ours and billing unwatched: a create
# that answered after its launcher gave up on the label, or a record lost. It gets a ledger row (job
# and generation from its label; a re-open row when its rental is closed already: a box judged gone
# whose job record is another's now), is destroyed, and its row is completed once confirmed, unless the
# judge (runner/lib/judge.sh, judge_observe_unrecorded) keeps it: its generation's STATUS live before
# its label's deadline + grace, or its final push running within it. One that
# carries RUNNER_LABEL_PREFIX but another operator's identity (or none: an older runner's label) is
# never adopted: said once (RUNNER_STATE/foreign/ID) and left to its own reaper.
# 0 = none left, 1 = one could not be confirmed destroyed or recorded.
# shellcheck disable=SC2154  # verdict and j_why are set by judge_decide (runner/lib/judge.sh)
sweep_unrecorded() {
  local list=$1 owned j id label start job gen dl rc=0 created own fresh="" reopen
  own=$(label_prefix) || return 1
  foreign_note "$list" "$own"
  owned=$(_vast_tmp) || return 1
  for j in $(jobs_list); do
    printf '%s\n%s\n' "id:$(rec_get "$j" instance)" "label:$(rec_get "$j" label)"
  done >"$owned" || { rm -f "$owned"; return 1; }
  while IFS= read -r id; do
    [ -n "$id" ] || continue
    label=$(list_field "$list" "$id" 3)
    start=$(list_field "$list" "$id" 7)
    start=${start%%.*}
    is_number "$start" || start=0
    job=${label#"$own":}
    gen=${job#*:}
    job=${job%%:*}
    [ "$gen" != "$job" ] || gen=""
    dl=${gen#*:}
    [ "$dl" != "$gen" ] || dl=""
    gen=${gen%%:*}   # without the label's DEADLINE
    # a box archived GONE (a `show instance` that answered wrongly) is its record's again
    if readopt_gone "$id" "$label" "$job" "$gen"; then continue; fi
    [ $(($(now) - start)) -ge "$RUNNER_ORPHAN_GRACE_S" ] || continue
    # its rental closed in the ledger: ended since LISTFILE was taken (a record finished this cycle),
    # or running after all (judged gone wrongly, its record another's now). Only a fresh listing that
    # still shows it re-opens the rental; a box missing there, or no fresh listing, is left alone.
    reopen=0
    if ledger_closed "$id"; then
      if [ -z "$fresh" ]; then
        fresh=$(_vast_tmp) || fresh=none
        [ "$fresh" = none ] || vast_list "$fresh" || { list_rm "$fresh"; fresh=none; }
      fi
      if [ "$fresh" = none ] || ! list_has "$fresh" "$id"; then
        log_event "instance $id (label $label): its rental is closed in the ledger and no fresh listing shows it running: left alone"
        continue
      fi
      reopen=1
    fi
    judge_observe_unrecorded "$job" "$gen" "$dl"
    judge_decide
    case $verdict in
      KEEP | WAIT_PUSH)
        say "instance $id (label $label) has no job record of ours, but the judge keeps generation $gen of job $job: $j_why: left running"
        log_event "unrecorded instance $id label $label: kept by the judge ($j_why)"
        continue ;;
    esac
    say "instance $id (label $label) has no job record of ours: adopting and destroying it"
    log_event "unrecorded instance $id label $label adopted"
    if [ "$reopen" = 1 ]; then
      ledger_reopen_row "$id" "${job:-unknown}" "$gen" "" "$(list_field "$list" "$id" 4)" "$start" || rc=1
    else
      ledger_append "$id" "${job:-unknown}" "$gen" "" "$(list_field "$list" "$id" 4)" "$start" || rc=1
    fi
    created=$start
    if destroy_confirmed "$id"; then
      ledger_complete "$id" "${job:-unknown}" "$gen" "" "$(list_field "$list" "$id" 4)" "$created" "$(now)" || rc=1
    else
      # a listing that lags may never show it again: a record keeps it ours until it is confirmed
      # gone and its ledger row is completed (rule 1, ORPHAN)
      if adopt_record "$id" "$label" "${job:-unknown}" "$gen" "$(list_field "$list" "$id" 4)" "$created"; then
        say "unrecorded instance $id could NOT be confirmed destroyed: recorded as job adopted-$id (ORPHAN; the reaper destroys it again and completes its ledger row)"
      else
        say "unrecorded instance $id could NOT be confirmed destroyed (the reaper keeps trying)"
      fi
      rc=1
    fi
  done <<EOF_IDS
$(awk -F '\t' -v p="$own:" -v owned="$owned" '
    BEGIN { while ((getline l < owned) > 0) own[l] = 1 }
    index($3, p) == 1 && !(("id:" $1) in own) && !(("label:" $3) in own) { print $1 }' "$list")
EOF_IDS
  rm -f "$owned"
  [ -z "$fresh" ] || [ "$fresh" = none ] || list_rm "$fresh"
  return "$rc"
}

# foreign_note LISTFILE OWN_PREFIX: say once per instance (RUNNER_STATE/foreign/ID) that a listed box
# labelled RUNNER_LABEL_PREFIX… but not OWN_PREFIX: is not this operator's, and is left alone.
foreign_note() {
  local id label
  awk -F '\t' -v p="$RUNNER_LABEL_PREFIX" -v own="$2:" \
    '(index($3, p ":") == 1 || index($3, p ".") == 1) && index($3, own) != 1 { print $1 "\t" $3 }' "$1" \
    | while IFS="$(printf '\t')" read -r id label; do
      [ ! -e "$RUNNER_STATE/foreign/$id" ] || continue
      mkdir -p "$RUNNER_STATE/foreign" 2>/dev/null && : >"$RUNNER_STATE/foreign/$id" 2>/dev/null || true
      say "instance $id (label $label) is not this operator's ($2): left alone, its own RUNNER_STATE's reaper watches it (an older runner's label without an operator: destroy it by hand if it is yours, vastai destroy instance $id -y)"
      log_event "instance $id label $label: another operator's, not adopted"
    done
}

# readopt_gone ID LABEL JOB GEN: a listed box whose record was archived GONE (absence vouched for by
# a `show instance` that answered wrongly) goes back into that record: the newest archived record of
# JOB whose label is LABEL, generation GEN, instance ID and result GONE... is moved back to jobs/JOB
# (state PROVISIONED, result and gone note dropped), and the reaper watches the box again. Its
# rental, closed when the box was judged gone, is re-opened in the ledger (ledger_reopen: one more
# row for the same id, no second creation row), so its spend counts as open until the reaper ends
# it and writes its closing row anew. 0 = re-adopted, or the box is left alone this cycle (its
# re-open row could not be written: the record goes back to the archive and the next cycle tries
# again); 1 = no such record, or jobs/JOB is taken (then the caller's STATUS check decides).
readopt_gone() {
  local id=$1 label=$2 job=$3 gen=$4 a pick=""
  [ -n "$job" ] && [ -n "$gen" ] || return 1
  for a in "$RUNNER_STATE/archive/$job-$gen-"*; do
    [ -d "$a" ] || continue
    [ "$(cat "$a/label" 2>/dev/null)" = "$label" ] && [ "$(cat "$a/instance" 2>/dev/null)" = "$id" ] || continue
    case $(cat "$a/result" 2>/dev/null) in GONE*) pick=$a ;; esac
  done
  [ -n "$pick" ] || return 1
  if rec_exists "$job"; then
    log_event "instance $id (label $label) was archived GONE in $pick, but jobs/$job is another record's: not re-adopted"
    return 1
  fi
  mkdir -p "$RUNNER_STATE/jobs" 2>/dev/null && mv "$pick" "$(rec_dir "$job")" 2>/dev/null || return 1
  if ! ledger_reopen "$job" "$id"; then
    mv "$(rec_dir "$job")" "$pick" 2>/dev/null || true
    say "instance $id (label $label) is listed again after job $job was archived GONE, but its ledger row cannot be re-opened (is the disk under $LEDGER full?): left running, re-adopted on a later cycle"
    return 0
  fi
  rm -f "$(rec_dir "$job")/result" "$(rec_dir "$job")/gone_since" "$(rec_dir "$job")/retry"
  rec_set "$job" state PROVISIONED || true
  say "instance $id (label $label) is listed again after job $job was archived GONE: re-adopted into its record, its ledger row re-opened (the reaper watches it again)"
  log_event "job $job re-adopted instance $id from $pick"
}
