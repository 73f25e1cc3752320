#!/usr/bin/env bats
# runner/launch.sh against the fake vast.ai API (real vastai CLI), a local rclone store and sandbox boxes.

load helpers

setup() { world; }
teardown() { world_end; }

@test "pilot launch provisions: id on stdout, ledger row at creation, chain running before PROVISIONED" {
  run launch --yes pilot
  echo "$output"; [ "$status" -eq 0 ]
  id=${lines[${#lines[@]}-1]}
  [ "$(cat "$RUNNER_STATE/jobs/pilot/instance")" = "$id" ]
  [ "$(cat "$RUNNER_STATE/jobs/pilot/state")" = PROVISIONED ]
  gen=$(cat "$RUNNER_STATE/jobs/pilot/gen")
  [ "$(ledger_rows)" -eq 1 ]
  grep -q "^$id,pilot,$gen," "$LEDGER"
  [ "$(live_count)" -eq 1 ]
  # the box got the store's config through stdin, mode 600, and its chain says this generation runs
  port=$(cut -d: -f2 "$RUNNER_STATE/jobs/pilot/ssh")
  [ "$(stat -c %a "$W/boxes/box-$port/run/rclone.conf")" = 600 ]
  grep -q "^$gen running" "$W/boxes/box-$port/run/CHAIN"
  no_secrets "$W/boxes/ssh.log" "$RUNNER_STATE/runner.log"
  [[ "$output" != *SECRET* ]]
}
