# shellcheck shell=bash
# runner/lib/unrecorded.sh — listed boxes labelled by this operator that no job record owns: adopted
# and destroyed unless the judge keeps them (sweep_unrecorded, runner/lib/judge.sh), re-adopted into
# their record when it was archived GONE by a `show instance` that answered wrongly (readopt_gone),
# and another operator's left alone, said once (foreign_note). Sourced by runner/lib/teardown.sh.

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
