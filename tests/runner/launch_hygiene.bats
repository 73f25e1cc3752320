#!/usr/bin/env bats
# runner/launch.sh's hygiene: the store's credentials must be mode 600, and a launch leaves none of
# its temp files (the account's listings) behind, whatever its exit.

load helpers

setup() { world; }
teardown() { world_end; }

@test "store credentials readable by others are refused (exit 10, naming the chmod), before anything is rented" {
  chmod 644 "$RUNNER_RCLONE_CONF"
  run launch --yes probe
  echo "$output"
  [ "$status" -eq 10 ]
  [ "$output" = "runner: the store credentials $RUNNER_RCLONE_CONF are readable by others (run: chmod 600 $RUNNER_RCLONE_CONF)" ]
  [ "$(created_count)" -eq 0 ]
  chmod 640 "$RUNNER_RCLONE_CONF"                                 # group-readable alike
  run launch --yes probe
  [ "$status" -eq 10 ]
  chmod 600 "$RUNNER_RCLONE_CONF"
  run "$REPO/runner/bundle_put.sh" "$W/bundle"
  [[ "$output" != *"readable by others"* ]]
}

@test "a launch leaves no temp file in TMPDIR: provisioned, or refused by the budget" {
  export TMPDIR=$W/tmp
  mkdir -p "$TMPDIR"
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  [ -z "$(ls -A "$TMPDIR")" ]
  RUNNER_MARGIN_USD=100000 run launch --yes --no-pilot-gate fold 2   # the budget refuses: exit 3
  [ "$status" -eq 3 ]
  ls -A "$TMPDIR"
  [ -z "$(ls -A "$TMPDIR")" ]
}
