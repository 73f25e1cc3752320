#!/usr/bin/env bats
# The box protects itself: its self-destroy retries and confirms absence, its own hard deadline stops
# the trainer and destroys it with the laptop gone, and xtrace never prints its key.

load helpers

setup() { world; box_world; }
teardown() { world_end; }

@test "self-destroy retries: one HTTP 500 (the CLI exits 0 on it) is not taken for success; absence confirmed; xtrace never prints the key" {
  fault '[{"op": "destroy", "kind": "error", "status": 500, "times": 1}]'
  RUNNER_DEBUG=1 run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [[ "$output" == *"entry: instance $id confirmed destroyed (try 2)"* ]]
  [ "$(live_count)" -eq 0 ]
  [[ "$output" == *"+ "* ]]                          # xtrace was on (RUNNER_DEBUG in the box's environment)
  [[ "$output" != *"$CONTAINER_API_KEY"* ]]
}

@test "a destroy never confirmed is said, and the exit status stays the run's" {
  fault '[{"op": "destroy", "kind": "error", "status": 500, "times": 100}]'
  HEARSAY_DESTROY_TRIES=1 run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [[ "$output" == *"entry: this box could NOT be confirmed destroyed"* ]]
  [ "$(live_count)" -eq 1 ]
}

@test "the box's own hard deadline: the trainer is stopped, what it has pushed, FAIL written, the box destroyed" {
  echo "HEARSAY_DEADLINE=$(($(date -u +%s) + 3))" >>"$box/job.env"
  FAKE_TRAIN_S=120 HEARSAY_STOP_WAIT_S=1 run "$REPO/runner/box/entry.sh" "$box"
  echo "$output"; [ "$status" -eq 1 ]
  [[ "$output" == *"entry: deadline "*" passed: stopping the trainer, pushing what it has"* ]]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
  [ "$(live_count)" -eq 0 ]
}

@test "the box's deadline holds before training too: a smoke check hanging past it is stopped, FAIL and REASON name the phase, the box destroyed" {
  printf '#!/bin/sh\nsleep 300 &\nwait\n' >"$W/smoke_hang.sh"   # its own child too: the whole tree must go
  chmod +x "$W/smoke_hang.sh"
  echo "HEARSAY_DEADLINE=$(($(date -u +%s) + 3))" >>"$box/job.env"
  HEARSAY_SMOKE_CHECK=$W/smoke_hang.sh run timeout 60 "$REPO/runner/box/entry.sh" "$box"
  echo "$output"; [ "$status" -eq 1 ]
  [[ "$output" == *"entry: deadline "*" passed in phase SMOKE: stopping the job"* ]]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
  grep -q "passed in phase SMOKE: the box's watchdog stopped the job" "$RUNS/pilot/REASON"
  [ "$(live_count)" -eq 0 ]
  ! pgrep -f "$W/smoke_hang.sh"
}

@test "a second TERM while the box destroys itself is ignored: the destroy is still confirmed" {
  fault '[{"op": "destroy", "kind": "error", "status": 500, "times": 2}]'
  FAKE_TRAIN_S=120 "$REPO/runner/box/entry.sh" "$box" >"$W/entry.out" 2>&1 &
  local e=$!
  wait_for 30 grep -q "g-7 running" "$box/CHAIN"
  kill -TERM "$e"
  wait_for 30 grep -q "not confirmed (try 1" "$W/entry.out"
  kill -TERM "$e"
  wait "$e" || true
  cat "$W/entry.out"
  grep -q "entry: instance $id confirmed destroyed (try 3)" "$W/entry.out"
  [ "$(live_count)" -eq 0 ]
}
