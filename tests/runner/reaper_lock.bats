#!/usr/bin/env bats
# runner/reaper.sh's lock: a reaper that cannot write its lock's owner says so (exit 12), never
# "another reaper is running (pid )".

load helpers

setup() { world; }
teardown() { umount "$W/mnt" 2>/dev/null || true; world_end; }

@test "a full state disk: the reaper says its lock's owner cannot be written (exit 12), not that another reaper runs" {
  mkdir -p "$W/mnt"
  mount -t tmpfs -o size=16k tmpfs "$W/mnt" 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  export RUNNER_STATE=$W/mnt/state
  mkdir -p "$RUNNER_STATE"
  head -c 100000 /dev/zero >"$W/mnt/fill" 2>/dev/null || true     # the disk is full now
  run "$REPO/runner/reaper.sh" --once
  echo "$output"
  [ "$status" -eq 12 ]
  [[ "$output" == *"runner: cannot take the reaper lock $RUNNER_STATE/reaper.lock: it or its owner file cannot be written (free space under RUNNER_STATE=$RUNNER_STATE, then start the reaper again)"* ]]
  [[ "$output" != *"another reaper is running"* ]]
  [ ! -d "$RUNNER_STATE/reaper.lock" ]
}
