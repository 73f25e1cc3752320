# shellcheck shell=bash
# runner/lib/judge.sh — the one judge of a job's box: observe (judge_observe; judge_observe_unrecorded
# for a box of ours that no record owns), decide (judge_decide, a pure function of the evidence), and
# let the caller act. runner/reaper.sh acts on the verdict (runner/lib/unrecorded.sh's sweep_unrecorded
# on an unrecorded box's); runner/status.sh and runner/teardown_check.sh print it; the box's watchdog
# and on-start guard apply the same numbers from the same contract (runner/lib/contract.sh): its
# deadline and grace_s. The decision table, one row per
# rule, first match wins, is docs/RUNBOOK.md's "The judge" and tests/runner/judge.bats, row by row.
#
# Evidence (j_* variables, set by judge_observe or by a test):
#   j_now          this machine's clock, epoch s (deadlines are absolute times)
#   j_state        the record's state (CREATING … PROVISIONED); UNRECORDED: a box labelled by this
#                  operator that no record owns (its job, generation and deadline from its label)
#   j_deadline     the contract's deadline, epoch s
#   j_campaign     the campaign deadline that holds: the earlier of the contract's and this machine's
#                  RUNNER_CAMPAIGN_DEADLINE, epoch s, or empty
#   j_told         yes when the box was told j_campaign (the contract's), no when only this machine
#                  knows it (set after the launch: the box will not stop itself there)
#   j_grace        the contract's grace_s
#   j_phase        the STATUS phase of the contract's generation; empty: none or unreadable
#   j_held         yes while a fresh HOLD, or a live launcher of a record not yet PROVISIONED, owns it
#   j_beats        yes when the contract's beats is yes AND the generation's STATUS line says
#                  beats=yes (the box's own word that its chain beats); no otherwise: an image that
#                  declares nothing is judged by STATUS and deadline
#   j_beat         the generation's HEARTBEAT line ("GEN SEQ EPOCH"), "none", or "?" (unreadable)
#   j_still        monotonic seconds that line has shown no progress (judge_beat); empty: unknown
#   j_looks        looks since it last progressed
#   j_stale        the contract's heartbeat_stale_s (0 = never)
# Verdicts: KEEP, WAIT_PUSH (past a deadline, its final push runs), END_DONE, END_FAIL, END_DEADLINE,
# END_CAMPAIGN, END_HEARTBEAT, END_UNRECORDED, END_ABANDONED; j_why says why in words.

# judge_decide: the table. Pure: reads j_*, sets verdict and j_why, nothing else.
# shellcheck disable=SC2034  # verdict and j_why are the caller's (runner/lib/reap.sh, runner/status.sh)
judge_decide() {
  local stop=$j_deadline what=DEADLINE
  verdict=KEEP j_why=""
  if is_number "$j_campaign" && { ! is_number "$stop" || [ "$j_campaign" -le "$stop" ]; }; then
    stop=$j_campaign what=CAMPAIGN
  fi
  # 1-4. a deadline passed: the box finished, its final push runs, or it is ended
  if is_number "$stop" && [ "$j_now" -ge "$stop" ]; then
    # a box that finished is ended as DONE; one that failed (at the deadline, its own stop) below
    if [ "$j_phase" = DONE ]; then verdict=END_DONE j_why="STATUS DONE at the deadline"; return; fi
    if [ "$what" = CAMPAIGN ] && [ "$j_told" = no ]; then
      verdict=END_CAMPAIGN
      j_why="the campaign deadline $(iso "$stop") passed (RUNNER_CAMPAIGN_DEADLINE, set after this box's launch: the box was never told it and is ended without its final push)"
      return
    fi
    if { [ "$j_state" = PROVISIONED ] || [ "$j_state" = UNRECORDED ]; } && [ "$j_now" -lt $((stop + j_grace)) ]; then
      case $j_phase in TRAINING | PUSHING)
        verdict=WAIT_PUSH j_why="its box is $j_phase: it stops its trainer and pushes its checkpoints first; destroyed at $(iso $((stop + j_grace))) at the latest (grace_s=$j_grace)"
        return ;;
      esac
    fi
    verdict=END_$what
    if [ "$what" = CAMPAIGN ]; then
      j_why="the campaign deadline $(iso "$stop") passed (RUNNER_CAMPAIGN_DEADLINE) with the box without a STATUS"
      [ -z "$j_phase" ] || j_why="the campaign deadline $(iso "$stop") passed (RUNNER_CAMPAIGN_DEADLINE) with the box in phase $j_phase"
    else
      j_why="deadline passed"
    fi
    [ "$j_now" -lt $((stop + j_grace)) ] || case $j_phase in TRAINING | PUSHING) j_why="$j_why, after its final push's grace_s=$j_grace s" ;; esac
    return
  fi
  # 5. a fresh HOLD or a launcher still provisioning owns the box
  if [ "$j_held" = yes ]; then j_why="held"; return; fi
  # 6. the box reported its end
  case $j_phase in DONE | FAIL) verdict=END_$j_phase j_why="STATUS $j_phase"; return ;; esac
  # 7. a beating box whose beats stopped progressing: only a line of its own generation, seen
  #    unchanged for heartbeat_stale_s of this machine's monotonic clock over two looks or more; no
  #    line at all, an unreadable store, or an image that does not beat is unknown, never dead
  if [ "$j_state" = PROVISIONED ] && [ "$j_beats" = yes ] && [ "$j_stale" != 0 ] &&
    [ "$j_beat" != none ] && [ "$j_beat" != "?" ] && is_number "$j_still" &&
    [ "$j_still" -ge "$j_stale" ] && [ "${j_looks:-0}" -ge 2 ]; then
    verdict=END_HEARTBEAT
    j_why="heartbeat unchanged for $j_still s (last: ${j_beat#* }), limit heartbeat_stale_s=$j_stale s: its chain stopped without its exit trap (killed, out of memory, or the container restarted)"
    return
  fi
  # 8. a box of ours no record owns: kept while its generation's STATUS is live, else ended (a STATUS
  #    unreadable or of another generation is no evidence that anything runs for it)
  if [ "$j_state" = UNRECORDED ]; then
    if [ -n "$j_phase" ]; then
      j_why="its STATUS reports $j_phase (never destroyed while it is live)"
    else
      verdict=END_UNRECORDED j_why="no record of ours owns it and its generation reports no live STATUS"
    fi
    return
  fi
  # 9. a launch whose launcher is gone before PROVISIONED
  if [ "$j_state" != PROVISIONED ]; then verdict=END_ABANDONED j_why="launch abandoned in state ${j_state:-?}"; return; fi
  # 10. otherwise alive, or unknown: kept (its listing is judged by runner/lib/gone.sh)
  j_why="alive or unknown"
}

# mono_now: seconds of a clock no wall-clock step moves (Linux /proc/uptime, which also counts a
# laptop's sleep); this machine's wall clock where there is none.
mono_now() {
  local u
  if read -r u _ </proc/uptime 2>/dev/null; then echo "${u%.*}"; else now; fi
}

# judge_beat JOB [look]: read the generation's HEARTBEAT and set j_beat, j_still, j_looks. The record
# keeps the line's first sighting, jobs/JOB/beat: "EPOCH MONO LOOKS LINE" (wall and monotonic clocks,
# looks since), written only by a look (the reaper's; runner/status.sh only reads). Any change of the
# line (the box's SEQ or its own time) is progress and starts again; a monotonic clock that went back
# (a reboot) starts again too.
judge_beat() {
  local seen e m k rest mono look=${2:-}
  j_still="" j_looks=0
  j_beat=$(store_heartbeat "$1") || { j_beat="?"; return 0; }
  seen=$(rec_get "$1" beat)
  read -r e m k rest <<<"$seen"
  mono=$(mono_now)
  if ! is_number "$m" || ! is_number "$k" || [ "$rest" != "$j_beat" ] || [ "$mono" -lt "$m" ]; then
    [ -z "$look" ] || rec_set "$1" beat "$(now) $mono 0 $j_beat" 2>/dev/null || true   # unwritable: looked at again next cycle
    j_still=0
    return 0
  fi
  j_looks=$k
  j_still=$((mono - m))
  [ -n "$look" ] || return 0
  j_looks=$((k + 1))
  rec_set "$1" beat "$e $m $j_looks $j_beat" 2>/dev/null || true
}

# judge_observe JOB STATE [look]: gather JOB's evidence into j_* (the store read at the contract's
# store); "look" counts it as one of the reaper's looks at the heartbeat (judge_beat).
judge_observe() {
  local cdl mine line gen
  j_now=$(now)
  j_state=$2
  j_deadline=$(contract_get "$1" deadline)
  cdl=$(contract_get "$1" campaign_deadline)
  is_number "$cdl" || cdl=""
  mine=$(campaign_deadline 2>/dev/null) || mine=""
  j_campaign=$cdl j_told=yes
  if [ -n "$mine" ] && { [ -z "$cdl" ] || [ "$mine" -lt "$cdl" ]; }; then
    j_campaign=$mine j_told=no
  fi
  j_grace=$(contract_get "$1" grace_s)
  is_number "$j_grace" || j_grace=0
  line=$(store_status_line "$1")   # one read: its phase and its word on beating
  gen=$(rec_get "$1" gen)
  j_phase=$(status_phase_in "$line" "$gen")
  j_held=no
  if hold_fresh "$1" || { [ "$2" != PROVISIONED ] && launcher_alive "$1"; }; then j_held=yes; fi
  j_beats=$(contract_get "$1" beats)
  [ "$j_beats" = yes ] && [ "$(status_beats_in "$line" "$gen")" = yes ] || j_beats=no
  j_stale=$(contract_get "$1" heartbeat_stale_s)
  is_number "$j_stale" || j_stale=0
  j_beat="?" j_still="" j_looks=0
  if [ "$2" = PROVISIONED ] && [ "$j_beats" = yes ] && [ "$j_stale" != 0 ]; then judge_beat "$1" "${3:-}"; fi
}

# judge_job JOB STATE [look]: observe, then decide (verdict, j_why).
judge_job() { judge_observe "$1" "$2" "${3:-}"; judge_decide; }

# judge_observe_unrecorded JOB GEN DEADLINE: the evidence of a box labelled by this operator that no
# record owns (runner/lib/unrecorded.sh's sweep_unrecorded): its generation's STATUS, its label's
# DEADLINE (empty: an older runner's label without one), the final push's grace of this machine's
# settings (no contract to read it from), this machine's campaign deadline (told to the box when its
# label's deadline is already at or before it). No HOLD, launcher or heartbeat: none exists for it.
judge_observe_unrecorded() {
  local mine
  j_now=$(now)
  j_state=UNRECORDED j_deadline=$3
  is_number "$j_deadline" || j_deadline=""
  mine=$(campaign_deadline 2>/dev/null) || mine=""
  j_campaign="" j_told=yes
  if [ -n "$mine" ] && { [ -z "$j_deadline" ] || [ "$mine" -lt "$j_deadline" ]; }; then
    j_campaign=$mine j_told=no
  fi
  j_grace=$(whole_s "$RUNNER_FINAL_PUSH_GRACE_S")
  is_number "$j_grace" || j_grace=0
  j_phase=$(store_status_of "$1" "$2")
  j_held=no j_beats=no j_stale=0 j_beat="?" j_still="" j_looks=0
}
