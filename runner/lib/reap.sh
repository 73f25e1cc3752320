# shellcheck shell=bash
# runner/lib/reap.sh — one reaper cycle over every job record (the order is runner/reaper.sh's help).

# reap_cycle: 0 when the cycle ran on a successful listing, 1 when the listing failed (nothing done).
reap_cycle() {
  local list job
  list=$(_vast_tmp) || { log_event "reaper: cannot make a temp file (TMPDIR full?)"; return 1; }
  if ! vast_list "$list"; then
    list_rm "$list"
    log_event "reaper: listing failed, nothing changed"
    return 1
  fi
  for job in $(jobs_list); do
    job_due "$job" || continue       # backing off after failed cycles
    rec_lock "$job" 20 || continue   # a launcher is finishing it right now
    # one job's failure (a full disk, a destroy not confirmed) is logged and backed off; the other
    # jobs go on
    if reap_job "$job" "$list"; then
      rm -f "$(rec_dir "$job")/retry" 2>/dev/null || true
      rec_reserve_renew "$job"       # a reserve a full disk took, back once there is room
    else
      job_failed "$job"
    fi
    rec_unlock "$job"
  done
  sweep_unrecorded "$list" || log_event "reaper: an unrecorded instance is not finished (retried next cycle)"
  list_rm "$list"
  ledger_flush || log_event "reaper: spooled ledger rows still wait (the ledger's disk full or its lock stuck?)"
  return 0
}

# Per-job back-off: a job that failed a cycle (destroy not confirmed, its ledger row or record not
# written) is tried again RUNNER_REAPER_POLL_S x 2^(failures-1) seconds later, at most
# RUNNER_REAPER_JOB_BACKOFF_S, so one box the API keeps refusing does not spend every cycle's calls.
# jobs/JOB/retry holds "FAILURES NEXT_EPOCH" and leaves with the record; REAP_ALL=1 (reaper.sh
# --once) ignores it.

# job_due JOB: 0 unless JOB waits out a back-off (a missing or unreadable retry file is due).
job_due() {
  local r next
  [ "${REAP_ALL:-0}" = 0 ] || return 0
  r=$(rec_get "$1" retry)
  next=${r#* }
  case $next in '' | *[!0-9]*) return 0 ;; esac
  [ "$(now)" -ge "$next" ]
}

# job_failed JOB: count the failure and set the job's next try (said on stderr).
job_failed() {
  local n delay
  n=$(rec_get "$1" retry)
  n=${n%% *}
  case $n in '' | *[!0-9]*) n=0 ;; esac
  n=$((n + 1))
  delay=$(calc 'p * 2 ^ (n > 20 ? 20 : n - 1)' p="$RUNNER_REAPER_POLL_S" n="$n")   # capped below anyway
  ! gt "$delay" "$RUNNER_REAPER_JOB_BACKOFF_S" || delay=$RUNNER_REAPER_JOB_BACKOFF_S
  # the record before the words: whoever reads "N in a row" finds N in jobs/JOB/retry
  rec_set "$1" retry "$n $(($(now) + ${delay%.*}))" 2>/dev/null || true   # unwritable: retried every cycle
  say "job $1 not finished this cycle ($n in a row): next try in ${delay%.*}s (the other jobs go on)"
  log_event "reaper: job $1 not finished this cycle ($n in a row), next try in ${delay%.*}s"
}

# reap_job JOB LISTFILE: act on one record, first rule that applies wins.
# shellcheck disable=SC2154  # verdict and j_* are set by judge_job (runner/lib/judge.sh)
reap_job() {
  local job=$1 list=$2 st id phase
  rec_exists "$job" || return 0
  st=$(rec_state "$job")
  id=$(rec_get "$job" instance)
  # 0. duplicates of the record's label (a retried create): swept first, while the record owns the label;
  # one not confirmed destroyed keeps the record (and its marker) for the next cycle. A cycle inside
  # the label window sweeps but cannot settle it (sweep_label's 2): a later cycle does.
  if [ -n "$id" ]; then
    sweep_label "$job" "$list" || [ $? = 2 ] || return 1
  fi
  if [ "$st" = ORPHAN ]; then
    say "job $job: ORPHAN instance $id, destroying again"
    finish_job "$job" ORPHAN
    return
  fi
  # st was read before the launcher check: a launcher that wrote PROVISIONED and exited in between
  # left a live job, not an abandoned one, so the state is read again once it is gone.
  [ "$st" = PROVISIONED ] || launcher_alive "$job" || st=$(rec_state "$job")
  # the one judge (runner/lib/judge.sh): its verdict, acted on here
  judge_job "$job" "$st" look
  case $verdict in
    KEEP) [ "$j_held" = no ] || return 0 ;;
    WAIT_PUSH)
      if [ -z "$(rec_get "$job" campaign_wait)" ]; then
        rec_set "$job" campaign_wait "$(now)" || true
        say "job $job: its deadline has passed while $j_why"
      fi ;;
    END_DONE | END_FAIL)
      phase=${verdict#END_}
      say "job $job: STATUS $phase (generation $(contract_get "$job" gen)), destroying instance ${id:-?}"
      [ "$phase" != FAIL ] || say "job $job FAILED on its box: $(store_reason "$job" | grep . || echo "no REASON in the store") (runner/status.sh --why $job)"
      finish_job "$job" "$phase"
      return ;;
    END_DEADLINE)
      say "job $job: $j_why, destroying instance ${id:-?}"
      finish_job "$job" DEADLINE
      return ;;
    END_ABANDONED)
      say "job $job: $j_why, destroying instance ${id:-?}"
      finish_job "$job" ABANDONED
      return ;;
    END_CAMPAIGN | END_HEARTBEAT)
      say "job $job: REASON $j_why; destroying instance ${id:-?}"
      log_event "reaper: job $job REASON $j_why"
      rec_set "$job" why "$j_why" || true
      if [ "$verdict" = END_HEARTBEAT ]; then finish_job "$job" HEARTBEAT; return; fi
      finish_job "$job" CAMPAIGN_DEADLINE && return 0
      return 1 ;;
  esac
  phase=$j_phase
  [ -n "$id" ] || return 0
  if list_has "$list" "$id"; then
    rm -f "$(rec_dir "$job")/gone_since" 2>/dev/null || true
    return 0
  fi
  # PROVISIONED boxes were listed running before, but a well-formed empty listing can be an API
  # hiccup: absence from a second listing taken now counts only by the one rule (runner/lib/gone.sh:
  # a listing that still shows our other boxes, or show instance agreeing). Until then the box is
  # unknown and kept, however long (jobs/JOB/gone_since notes, and says once, since when).
  vast_list "$list" || return 0
  local g=0
  gone_judge "$list" "$id" || g=$?
  case $g in
    1) rm -f "$(rec_dir "$job")/gone_since" 2>/dev/null || true; return 0 ;;
    2)
      if ! is_number "$(rec_get "$job" gone_since)"; then
        rec_set "$job" gone_since "$(now)" || true
        say "job $job: instance $id is missing from the listing but not confirmed gone (show instance): kept until it is"
      fi
      return 0 ;;
  esac
  say "job $job: instance $id is gone (destroyed on the box)"
  ledger_close "$job" "$id" || return 1
  rec_set "$job" result "GONE${phase:+ $phase}" || true
  rec_archive "$job"
}
