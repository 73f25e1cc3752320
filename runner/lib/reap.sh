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
reap_job() {
  local job=$1 list=$2 st id dl phase
  rec_exists "$job" || return 0
  st=$(rec_state "$job")
  id=$(rec_get "$job" instance)
  dl=$(rec_get "$job" deadline)
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
  # the campaign's hard stop: before the job's own deadline, which it bounds (runner/lib/campaign.sh)
  if reap_campaign "$job"; then return 0; else case $? in 1) ;; *) return 1 ;; esac; fi
  if is_number "$dl" && [ "$(now)" -ge "$dl" ]; then
    say "job $job: deadline passed, destroying instance ${id:-?}"
    finish_job "$job" DEADLINE
    return
  fi
  hold_fresh "$job" && return 0
  if launcher_alive "$job" && [ "$st" != PROVISIONED ]; then
    return 0   # its launcher owns it until PROVISIONED (and destroys it on any failure)
  fi
  phase=$(store_status "$job")
  case $phase in
    DONE | FAIL)
      say "job $job: STATUS $phase (generation $(rec_get "$job" gen)), destroying instance ${id:-?}"
      [ "$phase" != FAIL ] || say "job $job FAILED on its box: $(store_reason "$job" | grep . || echo "no REASON in the store") (runner/status.sh --why $job)"
      finish_job "$job" "$phase"
      return ;;
  esac
  # a live box whose chain stopped beating (killed without its EXIT trap): ended now, not at its deadline
  if [ "$st" = PROVISIONED ] && heartbeat_stale "$job"; then
    # shellcheck disable=SC2154  # hb_why is set by heartbeat_stale (runner/lib/heartbeat.sh)
    say "job $job: REASON $hb_why; destroying instance ${id:-?}"
    log_event "reaper: job $job REASON $hb_why"
    rec_set "$job" why "$hb_why" || true
    finish_job "$job" HEARTBEAT
    return
  fi
  # st was read before the launcher check: a launcher that wrote PROVISIONED and exited in between
  # left a live job, not an abandoned one, so the state is read again now that it is gone.
  [ "$st" = PROVISIONED ] || st=$(rec_state "$job")
  if [ "$st" != PROVISIONED ]; then
    say "job $job: launch abandoned in state ${st:-?}, destroying instance ${id:-?}"
    finish_job "$job" ABANDONED
    return
  fi
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

# reap_campaign JOB: the campaign's hard stop (rule 2a of runner/reaper.sh). 1 = no campaign deadline
# holds for JOB (campaign_of) or it has not passed: the other rules go on. Past it: a box whose STATUS
# (its generation's) is DONE is ended as DONE; one that is TRAINING or PUSHING is stopping its trainer and pushing its checkpoints (its
# own deadline is the campaign's): it is left alone until the deadline + RUNNER_CAMPAIGN_GRACE_S (0,
# said once); after that, or in any other phase, the box is destroyed with the REASON said on stderr
# and kept in the record (why), result and ledger reason CAMPAIGN_DEADLINE (0 once confirmed gone,
# 2 when not: the record stays ORPHAN and is retried).
reap_campaign() {
  local job=$1 cdl phase until why
  cdl=$(campaign_of "$job" 2>/dev/null) || cdl=""
  is_number "$cdl" && [ "$(now)" -ge "$cdl" ] || return 1
  phase=$(store_status "$job")
  until=$((cdl + RUNNER_CAMPAIGN_GRACE_S))   # whole seconds (runner/reaper.sh refuses others)
  case $phase in
    DONE)   # finished before the stop: ended as any DONE job is (a DONE pilot is recorded)
      say "job $job: STATUS DONE (generation $(rec_get "$job" gen)) at the campaign deadline, destroying instance $(rec_get "$job" instance | grep . || echo '?')"
      finish_job "$job" DONE && return 0
      return 2 ;;
    TRAINING | PUSHING)
      if [ "$(now)" -lt "$until" ]; then
        if [ -z "$(rec_get "$job" campaign_wait)" ]; then
          rec_set "$job" campaign_wait "$(now)" || true
          say "job $job: the campaign deadline $(iso "$cdl") has passed while its box is $phase: it stops its trainer and pushes its checkpoints first; destroyed at $(iso "$until") at the latest (RUNNER_CAMPAIGN_GRACE_S)"
        fi
        return 0
      fi ;;
  esac
  why="the campaign deadline $(iso "$cdl") passed (RUNNER_CAMPAIGN_DEADLINE) with the box without a STATUS"
  [ -z "$phase" ] || why="the campaign deadline $(iso "$cdl") passed (RUNNER_CAMPAIGN_DEADLINE) with the box in phase $phase"
  [ "$(now)" -lt "$until" ] || [ -z "$(rec_get "$job" campaign_wait)" ] || why="$why, after RUNNER_CAMPAIGN_GRACE_S=$RUNNER_CAMPAIGN_GRACE_S s"
  say "job $job: REASON $why; destroying instance $(rec_get "$job" instance | grep . || echo '?')"
  log_event "reaper: job $job REASON $why"
  rec_set "$job" why "$why" || true
  finish_job "$job" CAMPAIGN_DEADLINE && return 0
  return 2
}
