#!/usr/bin/env bats
# The short fault campaign (CI): seeded random faults at every step, killed launchers, relaunches,
# deadlines, full disks, empty locks, second signals, slow creates, a killed reaper, pid reuse, a
# vanished laptop, the box contract's kinds (here a clock step and a teardown check from a second
# laptop), and one whole campaign (a pilot, then six jobs launched at once); the goal is 0
# instances left, ledger rentals = creations, 0 open, 0 secrets in any output or file, 0 in each
# contract column (the columns themselves are tested on made-up worlds below).
# The full figures are in docs/BENCHMARKS.md ("Runner fault campaign").

@test "5 seeded fault scenarios, one a whole campaign: nothing left billing, every creation in the ledger, no secret seen" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  run "$REPO/scripts/fault_campaign.sh" --scenarios 5 --seed 7 --jobs 5 --campaign-every 5 --keep "$BATS_TEST_TMPDIR/c" 3>&-
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" CAMPAIGN"* ]]
  [[ "$output" == *" clockstep teardown2"* ]]        # scenario 5 draws two of the contract's kinds
  [[ "${lines[-1]}" =~ ^scenarios\ 5\ \|\ instances\ left\ 0\ \|\ ledger\ rows\ ([0-9]+)\ vs\ creations\ ([0-9]+)\ \|\ unseen\ creates\ ([0-9]+)\ \|\ creations\ without\ a\ row\ 0\ \|\ rows\ open\ 0\ \|\ secrets\ seen\ 0 ]]
  [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]
  [[ "${lines[-1]}" == *" | final pushes cut 0 | late deadlines waited on 0 | run folders shared 0 | teardown confirmed while billing 0 | over the price ceiling 0 | "* ]]
}

# result LINE-NUMBER CREATED: a scenario's result line as scripts/fault_campaign.sh writes it.
result() { echo "$1 seed=$((7 * 100003 + $1)) fold | left=0 created=$2 rows=$2 open=0 healthy_killed=0 done_without_run=0 not_self_ended=0 secrets=0"; }

@test "a continuation (--keep DIR --from I) counts every scenario's result kept in DIR and names each missing one" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  d=$BATS_TEST_TMPDIR/c
  mkdir -p "$d"
  echo "seed=7 campaign-every=5" >"$d/campaign.args"
  result 1 2 >"$d/r1.txt"
  : >"$d/r2.txt"                                     # cut off by the stop: no result line
  result 3 1 >"$d/r3.txt"
  printf '%s\n' "$(result 1 2)" "$(result 9 5)" >"$d/results.txt"   # a stopped run's summary: not a result
  # --from 4 of 3 runs nothing: the summary of what DIR holds
  run "$REPO/scripts/fault_campaign.sh" --scenarios 3 --seed 7 --campaign-every 5 --keep "$d" --from 4 3>&-
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"scenarios 2 | instances left 0 | ledger rows 3 vs creations 3 | unseen creates 0 | creations without a row 0 | rows open 0 |"* ]]
  [ "${lines[-1]}" = "missing scenarios (1 of 3, no result: continue with --from the first, same --seed and --keep): 2" ]
  result 2 4 >"$d/r2.txt"                            # scenario 2 run again by a continuation
  run "$REPO/scripts/fault_campaign.sh" --scenarios 3 --seed 7 --campaign-every 5 --keep "$d" --from 4 3>&-
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" == "scenarios 3 | instances left 0 | ledger rows 7 vs creations 7 | unseen creates 0 | creations without a row 0 | rows open 0 |"* ]]
  [ "$(cut -d' ' -f1 "$d/results.txt" | tr '\n' ' ')" = "1 2 3 " ]
  run "$REPO/scripts/fault_campaign.sh" --scenarios 3 --seed 8 --campaign-every 5 --keep "$d" --from 4 3>&-
  echo "$output"
  [ "$status" -eq 2 ]                                # another seed draws other scenarios: refused
  [[ "$output" == *"$d holds a campaign of seed=7 campaign-every=5, not seed=8 campaign-every=5"* ]]
}

@test "a 2-scenario run stopped after scenario 1 and continued with --from 2 sums both" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  d=$BATS_TEST_TMPDIR/c
  run "$REPO/scripts/fault_campaign.sh" --scenarios 1 --seed 7 --jobs 1 --campaign-every 0 --keep "$d" 3>&-
  echo "$output"
  [ "$status" -eq 0 ]
  run "$REPO/scripts/fault_campaign.sh" --scenarios 2 --seed 7 --jobs 1 --campaign-every 0 --keep "$d" --from 2 3>&-
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" =~ ^scenarios\ 2\ \|\ instances\ left\ 0\ \|\ ledger\ rows\ ([0-9]+)\ vs\ creations\ ([0-9]+)\ \|\ unseen\ creates\ 0\ \|\ creations\ without\ a\ row\ 0\ \|\ rows\ open\ 0\ \| ]]
  [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
  [ "$(cut -d' ' -f1 "$d/results.txt" | tr '\n' ' ')" = "1 2 " ]
}

@test "the harness signals a pid file's process only while its command line still names it (pids wrap)" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  eval "$(sed -n '/^kill_named() {/,/^}/p' "$REPO/scripts/fault_campaign/faults.sh")"
  sleep 60 3>&- &
  other=$!                                         # what a box's old pid now names
  echo "$other" >"$BATS_TEST_TMPDIR/entry.pid"
  kill_named TERM "$BATS_TEST_TMPDIR/entry.pid" entry.sh
  sleep 0.2
  kill -0 "$other"                                 # not an entry.sh: left alone
  echo "$other 12345" >"$BATS_TEST_TMPDIR/owner"   # a lock owner's "PID START"
  kill_named TERM "$BATS_TEST_TMPDIR/owner" sleep
  wait "$other" || rc=$?
  [ "$rc" -eq 143 ]
}

@test "a scenario with a cut final push, or a teardown confirmed while a box billed, misses the goal" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  d=$BATS_TEST_TMPDIR/c
  mkdir -p "$d"
  echo "seed=7 campaign-every=5" >"$d/campaign.args"
  result 1 2 >"$d/r1.txt"
  result 2 1 | sed 's/ secrets=0$/ push_cut=1 late_waited=0 shared_run=0 false_confirm=0 over_ceiling=0 secrets=0/' >"$d/r2.txt"
  result 3 1 | sed 's/ secrets=0$/ push_cut=0 late_waited=0 shared_run=0 false_confirm=2 over_ceiling=0 secrets=0/' >"$d/r3.txt"
  run "$REPO/scripts/fault_campaign.sh" --scenarios 3 --seed 7 --campaign-every 5 --keep "$d" --from 4 3>&-
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *" | final pushes cut 1 | late deadlines waited on 0 | run folders shared 0 | teardown confirmed while billing 2 | over the price ceiling 0 | "* ]]
  [ "${lines[-1]}" = "failing scenarios: 2 3" ]
}

# contract_world: a scenario's variables for judge_contract, in a made-up world under BATS_TEST_TMPDIR.
contract_world() {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  # shellcheck source=scripts/fault_campaign/judge.sh
  . "$REPO/scripts/fault_campaign/judge.sh"
  W=$BATS_TEST_TMPDIR/w
  mkdir -p "$W/boxes"
  latedeadline=0 pricelie=0 story=""
}

@test "a box destroyed in PUSHING before its deadline + grace is a cut final push; at or after it, or in another phase, is not" {
  contract_world
  # ID PHASE EPOCH DEADLINE GRACE_S SSH_PORT (scripts/fault_campaign/destroyed.sh)
  printf '%s\n' "1 PUSHING 1019 900 120 20001" "2 PUSHING 1020 900 120 20002" "3 TRAINING 1000 900 120 20003" \
    "4 PUSHING 1000 - - 20004" "5 DONE 1000 900 120 20005" >"$W/boxes/destroyed.log"
  judge_contract
  [ "$cut" -eq 2 ]                                   # 1 (1 s short of 1020) and 4 (no deadline known)
}

# box PORT GEN RUN_PATH START [END [PHASE]]: a sandbox box whose job.env was written at START (epoch s),
# destroyed at END, its last phase PHASE.
box() {
  mkdir -p "$W/boxes/box-$1/run"
  printf 'HEARSAY_GEN=%s\nHEARSAY_RUN_PATH=%s\n' "$2" "$3" >"$W/boxes/box-$1/run/job.env"
  touch -d "@$4" "$W/boxes/box-$1/run/job.env"
  [ -z "${5:-}" ] || echo "$1 ${6:-TRAINING} $5 - - $1" >>"$W/boxes/destroyed.log"
  [ -z "${6:-}" ] || echo "$6" >"$W/boxes/box-$1/run/PHASE"
}

@test "two generations in one run folder at once are a shared run folder; one after the other, or two folders, are not" {
  contract_world
  box 20001 g1 store:b/runs/fold0 1000 1200              # the first operator's fold 0
  box 20002 g2 store:b/runs/fold0 1100 1300              # a second operator's, while g1 ran
  box 20003 g3 store:b/runs/fold0 1400                   # a relaunch after both ended
  box 20004 g4 store:b/runs/op2/fold0 1100 1300          # another folder
  judge_contract
  [ "$shared" -eq 1 ]
}

@test "over the price ceiling: a box over it that a chain ran on, or a ledger \$/h not the bill's, counts; a rental closed PRICE_UNKNOWN does not" {
  contract_world
  pricelie=1 RUNNER_OFFER_MAX_DPH=1.50 lg=$BATS_TEST_TMPDIR/ledger.csv
  # instances 1 (its $/h read back: ledger right), 2 (never read: PRICE_UNKNOWN, the search's $/h),
  # 3 (the search's $/h in the ledger: wrong), 4 (provisioned: its job.env) and 5 (under the ceiling)
  st='{"instances": [{"id": 1, "label": "a", "ssh_port": 20001, "dph_total": 2.3},
    {"id": 2, "label": "b", "ssh_port": 20002, "dph_total": 2.3}, {"id": 3, "label": "c", "ssh_port": 20003, "dph_total": 2.3},
    {"id": 4, "label": "d", "ssh_port": 20004, "dph_total": 2.3}, {"id": 5, "label": "e", "ssh_port": 20005, "dph_total": 0.3}]}'
  printf '%s\n' "id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost,gpu_name,cpu_cores,driver_cuda,reason" \
    "1,probe,g,9,2.3,T,,,,G,16,13.0," "1,probe,g,9,2.3,T,T2,0.1,0.2,G,16,13.0,PRICE_CEILING" \
    "2,probe,g,9,0.3,T,,,,G,16,13.0," "2,probe,g,9,0.3,T,T2,0.1,0.2,G,16,13.0,PRICE_UNKNOWN" \
    "3,probe,g,9,0.3,T,,,,G,16,13.0," "4,probe,g,9,2.3,T,,,,G,16,13.0," "5,probe,g,9,0.3,T,,,,G,16,13.0," >"$lg"
  box 20004 g4 store:b/runs/probe 1000
  [ "$(over_ceiling)" -eq 2 ]                        # 3 and 4
}

@test "a teardown check from a second laptop before any ledger row exists writes its result, and its scenario goes on" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  eval "$(sed -n '/^teardown_from_laptop2() {/,/^}/p' "$REPO/scripts/fault_campaign/faults.sh")"
  W=$BATS_TEST_TMPDIR/w repo=$BATS_TEST_TMPDIR/repo LEDGER=$BATS_TEST_TMPDIR/w/ledger.csv VAST_URL=http://127.0.0.1:9
  mkdir -p "$W" "$repo/runner"
  printf '#!/bin/sh\necho "teardown confirmed: 0 instances listed"\n' >"$repo/runner/teardown_check.sh"
  chmod +x "$repo/runner/teardown_check.sh"
  curl() { case "$*" in *_control/state*) echo '{"instances": []}' ;; esac; }   # the fake API, nothing rented
  ( set -euo pipefail; teardown_from_laptop2; echo on >"$W/went_on" )            # the harness's shell options
  [ -f "$W/went_on" ]
  [ "$(cat "$W/teardown2")" = "0 0" ]
}
