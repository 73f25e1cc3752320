#!/usr/bin/env bats
# The one judge (runner/lib/judge.sh): its decision table, row by row as docs/RUNBOOK.md lists it
# ("The judge"), then the invariants over every combination of the evidence: no box ended while
# alive and inside deadline + grace, none kept past deadline + grace, none ended in its final push.

setup() {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  # shellcheck source=runner/lib/common.sh
  . "$REPO/runner/lib/common.sh"
  # shellcheck source=runner/lib/judge.sh
  . "$REPO/runner/lib/judge.sh"
  T=1800000000   # the judge's "now" in these rows
  # a healthy, beating, PROVISIONED box an hour before its deadline
  j_now=$T j_state=PROVISIONED j_deadline=$((T + 3600)) j_campaign="" j_told=yes j_grace=600
  j_phase=TRAINING j_held=no j_beats=yes j_beat="g-1 41 1799999990" j_still=30 j_looks=1 j_stale=900
}

decide() { judge_decide; echo "$verdict: $j_why"; }

@test "row 1: past the deadline, a box that reported DONE is ended as DONE; one that reported FAIL at once, as the deadline" {
  j_now=$((T + 3600))
  j_phase=DONE; judge_decide; [ "$verdict" = END_DONE ]
  j_phase=FAIL; judge_decide; [ "$verdict" = END_DEADLINE ]
  j_campaign=$((T + 100)); judge_decide; [ "$verdict" = END_CAMPAIGN ]
  [[ "$j_why" == *" with the box in phase FAIL" ]]
}

@test "row 2: a campaign deadline the box was never told (set after its launch) ends it at once, said so" {
  j_campaign=$((T - 10)) j_told=no
  run decide
  [[ "$output" == "END_CAMPAIGN: the campaign deadline "*" passed (RUNNER_CAMPAIGN_DEADLINE, set after this box's launch: the box was never told it and is ended without its final push)" ]]
}

@test "row 3: past the deadline, a box TRAINING or PUSHING is left its final push until deadline + grace" {
  j_now=$((T + 3600))
  j_phase=TRAINING; judge_decide; [ "$verdict" = WAIT_PUSH ]
  j_phase=PUSHING j_now=$((T + 3600 + 599)); judge_decide; [ "$verdict" = WAIT_PUSH ]
  [[ "$j_why" == "its box is PUSHING: it stops its trainer and pushes its checkpoints first; destroyed at "*" at the latest (grace_s=600)" ]]
  j_campaign=$((T + 100)) j_told=yes j_now=$((T + 200)); judge_decide; [ "$verdict" = WAIT_PUSH ]   # the campaign's, told
}

@test "row 4: past the deadline + grace, or in any other phase, the box is destroyed (a HOLD never defers it)" {
  j_now=$((T + 3600 + 600)) j_held=yes
  run decide
  [ "$output" = "END_DEADLINE: deadline passed, after its final push's grace_s=600 s" ]
  j_now=$((T + 3600)) j_phase=""
  run decide
  [ "$output" = "END_DEADLINE: deadline passed" ]
  j_campaign=$((T + 100)) j_now=$((T + 200)) j_phase=SMOKE
  run decide
  [[ "$output" == "END_CAMPAIGN: the campaign deadline "*" passed (RUNNER_CAMPAIGN_DEADLINE) with the box in phase SMOKE" ]]
  j_campaign="" j_state=RUNNING j_phase=TRAINING j_now=$((T + 3600))   # not PROVISIONED: no chain, no push to wait for
  judge_decide; [ "$verdict" = END_DEADLINE ]
}

@test "row 5: before the deadline a fresh HOLD, or a launcher still provisioning, keeps the box" {
  j_held=yes j_phase=FAIL j_still=5000 j_looks=9
  judge_decide; [ "$verdict" = KEEP ]; [ "$j_why" = held ]
}

@test "row 6: before the deadline, STATUS DONE or FAIL of its generation ends the box" {
  j_phase=DONE; judge_decide; [ "$verdict" = END_DONE ]
  j_phase=FAIL; judge_decide; [ "$verdict" = END_FAIL ]
}

@test "row 7: a beating box whose line shows no progress for heartbeat_stale_s over two looks is dead" {
  j_still=900 j_looks=2
  run decide
  [ "$output" = "END_HEARTBEAT: heartbeat unchanged for 900 s (last: 41 1799999990), limit heartbeat_stale_s=900 s: its chain stopped without its exit trap (killed, out of memory, or the container restarted)" ]
  j_looks=1; judge_decide; [ "$verdict" = KEEP ]      # one look after the first: a clock step, not a death
  j_looks=2 j_still=899; judge_decide; [ "$verdict" = KEEP ]
}

@test "row 7, unknown: no heartbeat, an unreadable store, an image that does not beat, or the check off is never dead" {
  j_still=5000 j_looks=50
  j_beat=none; judge_decide; [ "$verdict" = KEEP ]
  j_beat="?"; judge_decide; [ "$verdict" = KEEP ]
  j_beat="g-1 41 1799999990" j_beats=no; judge_decide; [ "$verdict" = KEEP ]
  j_beats=yes j_stale=0; judge_decide; [ "$verdict" = KEEP ]
  j_stale=900 j_still=""; judge_decide; [ "$verdict" = KEEP ]
}

@test "row 8: a box of ours no record owns is kept while its generation's STATUS is live, ended otherwise" {
  j_state=UNRECORDED j_held=no j_beats=no j_beat="?" j_still="" j_stale=0
  j_phase=TRAINING
  run decide
  [ "$output" = "KEEP: its STATUS reports TRAINING (never destroyed while it is live)" ]
  j_phase=""
  run decide
  [ "$output" = "END_UNRECORDED: no record of ours owns it and its generation reports no live STATUS" ]
  j_phase=DONE; judge_decide; [ "$verdict" = END_DONE ]
  j_phase=PUSHING j_now=$((T + 3600 + 599)); judge_decide; [ "$verdict" = WAIT_PUSH ]   # its final push, as any box's
  j_now=$((T + 3600 + 600)); judge_decide; [ "$verdict" = END_DEADLINE ]               # live, but past deadline + grace
  j_deadline="" j_now=$((T + 99999)); judge_decide; [ "$verdict" = KEEP ]              # an older label without a deadline
}

@test "row 9: a record not PROVISIONED whose launcher is gone is an abandoned launch" {
  j_state=RUNNING j_phase=""
  run decide
  [ "$output" = "END_ABANDONED: launch abandoned in state RUNNING" ]
}

@test "row 10: otherwise the box is kept" {
  run decide
  [ "$output" = "KEEP: alive or unknown" ]
}

@test "invariants over every combination: never ended alive inside deadline + grace, never kept past it, never in its final push" {
  local dt phase held beat still looks state
  for dt in -3600 -1 0 1 300 599 600 601 7200; do
    for phase in "" SMOKE TRAINING PUSHING DONE FAIL; do
      for held in yes no; do
        for beat in "g-1 41 1799999990" none "?"; do
          for still in 0 899 900 ""; do
            for looks in 0 1 2; do
              for state in PROVISIONED RUNNING UNRECORDED; do
                j_now=$((T + 3600 + dt)) j_phase=$phase j_held=$held j_beat=$beat j_still=$still j_looks=$looks j_state=$state
                judge_decide
                case $phase in DONE | FAIL) continue ;; esac   # the box reported its end
                # alive: PROVISIONED, its beat progressing or unknown (not seen unchanged long enough)
                if [ "$state" = UNRECORDED ] && [ -n "$phase" ]; then   # no record, its STATUS live
                  if [ "$dt" -lt 0 ]; then [ "$verdict" = KEEP ] || { echo "unrecorded and live, ended: dt=$dt $phase: $verdict"; return 1; }; fi
                  case $phase in TRAINING | PUSHING)
                    if [ "$dt" -ge 0 ] && [ "$dt" -lt 600 ]; then [ "$verdict" = WAIT_PUSH ] || { echo "unrecorded, final push cut: dt=$dt $phase: $verdict"; return 1; }; fi ;;
                  esac
                fi
                if [ "$state" = PROVISIONED ] && { [ "$beat" = none ] || [ "$beat" = "?" ] || [ "$still" != 900 ] || [ "$looks" -lt 2 ]; }; then
                  if [ "$dt" -lt 0 ]; then [ "$verdict" = KEEP ] || { echo "alive, ended: dt=$dt $phase $held $beat $still $looks: $verdict"; return 1; }; fi
                  case $phase in TRAINING | PUSHING)   # in its final push
                    if [ "$dt" -ge 0 ] && [ "$dt" -lt 600 ]; then [ "$verdict" = WAIT_PUSH ] || { echo "final push cut: dt=$dt $phase: $verdict"; return 1; }; fi ;;
                  esac
                fi
                if [ "$dt" -ge 600 ]; then [ "${verdict#END_}" != "$verdict" ] || { echo "kept past deadline + grace: dt=$dt $phase $state: $verdict"; return 1; }; fi
              done
            done
          done
        done
      done
    done
  done
}
