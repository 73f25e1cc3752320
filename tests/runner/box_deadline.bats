#!/usr/bin/env bats
# The box's own guard from its first second (runner/box/onstart.sh, the instance's on-start command):
# the fake API runs a create's on-start command when the instance first runs (bin/fake_boot.sh), as
# vast.ai does at container start, with no laptop involved, and kills it when the box is destroyed.

load helpers

setup() {
  export HEARSAY_GUARD_POLL_S=0.3 HEARSAY_PUSH_WAIT_S=0.1
  export FAKE_BOOT_PASS="HEARSAY_GUARD_POLL_S HEARSAY_PUSH_WAIT_S HEARSAY_DEADLINE_GRACE_S HEARSAY_GUARD_MARGIN_S"
  world --set boot_cmd="$BATS_TEST_DIRNAME/bin/fake_boot.sh"
}
teardown() {
  [ ! -f "$W/box/guard.lock/pid" ] || kill "$(cat "$W/box/guard.lock/pid")" 2>/dev/null || true
  world_end
}

@test "the laptop gone after the create, before provisioning: the box ends itself by HEARSAY_PROVISION_BY, no reaper" {
  export RUNNER_BOOT_DEADLINE_S=10 RUNNER_SSH_TIMEOUT_S=2 RUNNER_PROVISION_SLACK_S=0
  printf '#!/bin/sh\nexec sleep 15\n' >"$W/ssh_hang.sh"               # the laptop never reaches the box
  chmod +x "$W/ssh_hang.sh"
  RUNNER_SSH=$W/ssh_hang.sh "$REPO/runner/launch.sh" --yes pilot >"$W/launch.out" 2>&1 3>&- &
  lp=$!
  wait_for 60 test -s "$RUNNER_STATE/jobs/pilot/instance" || { cat "$W/launch.out"; false; }
  kill -KILL "$lp"                                                  # the laptop vanishes
  id=$(cat "$RUNNER_STATE/jobs/pilot/instance")
  st=$(curl -fsS "$VAST_URL/_control/state")
  [ "$(jq -r ".instances[] | select(.id == $id) | .env.HEARSAY_DEADLINE" <<<"$st")" = "$(cat "$RUNNER_STATE/jobs/pilot/deadline")" ]
  [ "$(jq -r ".instances[] | select(.id == $id) | .env.HEARSAY_PROVISION_BY" <<<"$st")" = "$(cat "$RUNNER_STATE/jobs/pilot/provision_by")" ]
  [[ "$(jq -r ".instances[] | select(.id == $id) | .onstart" <<<"$st")" == 'bash ${HEARSAY_ONSTART:-/opt/hearsay/runner/box/onstart.sh} ${HEARSAY_BOX_DIR:-/run/hearsay}' ]]
  [ "$(live_count)" -eq 1 ]
  wait_for 40 none_live                                             # no reaper runs meanwhile
  [ ! -d "$RUNNER_STATE/reaper.lock" ]
  grep -q "this box was never provisioned: destroying instance $id" "$W"/boxes/box-*/run/onstart.log
  run reaper_once                                                   # later, the reaper closes the row
  [ "$(open_rows)" -eq 0 ]
  no_secrets "$W"/boxes/box-*/run/onstart.log "$W"/boxes/box-*/boot.log
}

@test "the create's on-start command needs no bash of its own: run by a POSIX sh (dash) from an empty environment, the box still ends itself" {
  command -v dash >/dev/null || skip "no dash here"
  echo dash >"$W/boxes/boot_shell"                                  # read by bin/fake_boot.sh
  export RUNNER_BOOT_DEADLINE_S=10 RUNNER_SSH_TIMEOUT_S=2 RUNNER_PROVISION_SLACK_S=0
  printf '#!/bin/sh\nexec sleep 15\n' >"$W/ssh_hang.sh"               # the laptop never reaches the box
  chmod +x "$W/ssh_hang.sh"
  RUNNER_SSH=$W/ssh_hang.sh "$REPO/runner/launch.sh" --yes pilot >"$W/launch.out" 2>&1 3>&- &
  lp=$!
  wait_for 60 test -s "$RUNNER_STATE/jobs/pilot/instance" || { cat "$W/launch.out"; false; }
  kill -KILL "$lp"
  id=$(cat "$RUNNER_STATE/jobs/pilot/instance")
  wait_for 40 none_live || { cat "$W"/boxes/box-*/boot.log "$W"/boxes/box-*/run/onstart.log; false; }
  grep -q "guarding instance $id: provision by [0-9]*, deadline [0-9]*" "$W"/boxes/box-*/run/onstart.log
  grep -q "this box was never provisioned: destroying instance $id" "$W"/boxes/box-*/run/onstart.log
  ! grep -q . "$W"/boxes/box-*/boot.log                             # the sh said nothing (no syntax error)
}

@test "a chain killed without its exit trap: the guard writes FAIL and a REASON, and destroys the box, no reaper" {
  export FAKE_TRAIN_S=60
  run launch --yes pilot
  echo "$output"; [ "$status" -eq 0 ]
  port=$(cut -d: -f2 "$RUNNER_STATE/jobs/pilot/ssh")
  run_dir=$W/boxes/box-$port/run
  [ -d "$run_dir/guard.lock" ]                                      # the guard runs since the box booted
  kill -KILL "$(cat "$run_dir/entry.pid")"                          # entry.sh alone: its trap never runs
  wait_for 30 none_live
  gen=$(cat "$RUNNER_STATE/jobs/pilot/gen")
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "$gen FAIL" ]
  grep -q "is gone without its exit trap (killed, out of memory, or the container restarted)" "$RUNS/pilot/REASON"
  kill "$(cat "$run_dir/train.pid")" 2>/dev/null || true
}

@test "a healthy box is left alone by its guard: the chain reaches DONE" {
  export FAKE_TRAIN_S=3
  run launch --yes pilot
  echo "$output"; [ "$status" -eq 0 ]
  port=$(cut -d: -f2 "$RUNNER_STATE/jobs/pilot/ssh")
  wait_for 60 none_live
  [ "$(cut -d' ' -f2 <<<"$(status_of pilot)")" = DONE ]
  ! grep -q "destroying" "$W/boxes/box-$port/run/onstart.log"
}

@test "a box still running past its deadline plus grace and margin (its chain's own watchdog stuck) is destroyed by its guard" {
  box_world
  "$REPO/tests/runner/bin/box_environ.sh" "$W/box-sandbox" "$W/init.environ" \
    "CONTAINER_ID=$CONTAINER_ID" "CONTAINER_API_KEY=$CONTAINER_API_KEY" "HEARSAY_DEADLINE=$(($(date -u +%s) + 2))"
  bash -c 'sleep 60; true' entry.sh 3>&- &                          # a live chain that never ends itself
  stuck=$!
  mkdir "$box/entry.lock"
  echo "$stuck" >"$box/entry.pid"
  HEARSAY_DEADLINE_GRACE_S=1 HEARSAY_GUARD_MARGIN_S=1 "$REPO/runner/box/onstart.sh" "$box" 3>&-
  sleep 2
  [ "$(live_count)" -eq 1 ]                                         # not before deadline + 2 s
  wait_for 20 none_live
  kill "$stuck"
  grep -q "deadline .* passed by over HEARSAY_DEADLINE_GRACE_S + HEARSAY_GUARD_MARGIN_S and the box still runs: destroying instance $CONTAINER_ID" "$box/onstart.log"
}

@test "the guard takes the final push's grace from the create's environment (the job's contract), not a default of its own" {
  box_world
  "$REPO/tests/runner/bin/box_environ.sh" "$W/box-sandbox" "$W/init.environ" \
    "CONTAINER_ID=$CONTAINER_ID" "CONTAINER_API_KEY=$CONTAINER_API_KEY" "HEARSAY_DEADLINE=$(($(date -u +%s) + 2))" \
    "HEARSAY_DEADLINE_GRACE_S=1"
  bash -c 'sleep 60; true' entry.sh 3>&- &                          # a live chain that never ends itself
  stuck=$!
  mkdir "$box/entry.lock"
  echo "$stuck" >"$box/entry.pid"
  env -u HEARSAY_DEADLINE_GRACE_S HEARSAY_GUARD_MARGIN_S=1 "$REPO/runner/box/onstart.sh" "$box" 3>&-
  wait_for 20 none_live                                             # 600 s of a default would keep it
  kill "$stuck"
}
