#!/usr/bin/env bats
# Two runner rules at their boundary second and one step on each side, judged from outside
# (runner/launch.sh's and runner/reaper.sh's exit codes, what they say and what is left rented):
#   - the campaign deadline: a launch at its very second is refused (exit 16), as after it; one
#     second before it rents;
#   - re-adoption after a GONE archive: a listed box goes back into an archived GONE record only when
#     both its label and its instance id are the record's; a duplicate with the label alone is swept
#     as an unrecorded box of ours.

load helpers

setup() { world; }
teardown() { world_end; }

# frozen_clock EPOCH: `date -u +%s` (the runner's clock, runner/lib/common.sh's now) reads EPOCH;
# every other use of date is the real one. Prepended to PATH for the launch alone.
frozen_clock() {
  local real dir=$W/frozen-$1
  real=$(command -v date)
  mkdir -p "$dir"
  printf '#!/bin/sh\nif [ "$*" = "-u +%%s" ]; then echo %s; else exec %s "$@"; fi\n' "$1" "$real" >"$dir/date"
  chmod +x "$dir/date"
  echo "$dir"
}

@test "a launch at the campaign deadline's second is refused (16), as one a second after; one a second before rents" {
  cdl=$(($(date -u +%s) + 3600))
  export RUNNER_CAMPAIGN_DEADLINE=$cdl
  for at in "$cdl" $((cdl + 1)); do
    PATH="$(frozen_clock "$at"):$PATH" run timeout 120 "$REPO/runner/launch.sh" --yes probe
    echo "at $at: $output"; [ "$status" -eq 16 ]
    [[ "$output" == *"runner: the campaign deadline $(date -u -d "@$cdl" +%Y-%m-%dT%H:%M:%SZ) (RUNNER_CAMPAIGN_DEADLINE) has passed: nothing is rented"* ]]
    [ "$(created_count)" -eq 0 ]
  done
  PATH="$(frozen_clock $((cdl - 1))):$PATH" run timeout 120 "$REPO/runner/launch.sh" --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(created_count)" -eq 1 ]
  [ "$(cat "$RUNNER_STATE/jobs/probe/deadline")" = "$cdl" ]   # clamped to the campaign's
}

@test "a box with an archived GONE record's label but another instance id is not re-adopted: swept as unrecorded" {
  id=$(rent pilot PROVISIONED g-1)
  label=$(cat "$RUNNER_STATE/jobs/pilot/label")
  put_status pilot "g-1 TRAINING 1"
  export RUNNER_ORPHAN_GRACE_S=0
  fault '[{"op": "list", "kind": "error", "status": 200, "body": {"instances": [], "total_instances": 0}, "times": 2}]'
  fault "[{\"op\": \"show\", \"kind\": \"error\", \"status\": 200, \"body\": {\"instances\": null}, \"instance\": $id, \"times\": null}]"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-*/result)" = "GONE TRAINING" ]   # fooled by show
  ctl DELETE faults >/dev/null
  vastai destroy instance "$id" -y >/dev/null                # the box itself is really gone now
  put_status pilot "g-1 DONE 2"
  offer=$(vastai search offers 'num_gpus=1' --limit 1 --raw | jq '.[0].id')
  dup=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$label" --raw | jq .new_contract)
  [ "$dup" != "$id" ]
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" != *"re-adopted"* ]]
  [[ "$output" == *"instance $dup (label $label) has no job record of ours: adopting and destroying it"* ]]
  [ ! -e "$RUNNER_STATE/jobs/pilot" ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-*/instance)" = "$id" ]   # the GONE record stays archived
  [ "$(live_count)" -eq 0 ]
  grep "^$dup," "$LEDGER" | tail -n 1 | cut -d, -f7 | grep -q .     # its own rental, closed
}
