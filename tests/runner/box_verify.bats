#!/usr/bin/env bats
# runner/box/entry.sh writes DONE only for a run the store keeps: every pushed file read back from
# the store with its sha256. A store that acknowledges a push and keeps nothing (or loses a file)
# is a FAIL naming the files, never a DONE that opens the pilot gate with no run.

load helpers

setup() { world; box_world; }
teardown() { world_end; }

phases() { sed -n 's/^entry: g-7 \([A-Z]*\)$/\1/p' "$1" | tr '\n' ' '; }

@test "a store that acknowledges every push and keeps nothing: FAIL with a REASON, never DONE, the box destroyed" {
  export HEARSAY_RCLONE=$REPO/tests/runner/bin/rclone_drop.sh FAKE_STORE_DROP=all
  run "$REPO/runner/box/entry.sh" "$box"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE TRAINING PUSHING FAIL " ]
  [ ! -e "$runs/run_meta.json" ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
  grep -q "the store does not keep the run: 2 of 2 pushed files do not read back from $run_store with their sha256" "$RUNS/pilot/REASON"
  wait_for 10 none_live
}

@test "a store that loses one file of the run: FAIL naming that file" {
  export HEARSAY_RCLONE=$REPO/tests/runner/bin/rclone_drop.sh FAKE_STORE_DROP=model.safetensors
  run "$REPO/runner/box/entry.sh" "$box"
  echo "$output"
  [ "$status" -eq 1 ]
  [ -f "$runs/run_meta.json" ]                                    # the rest arrived
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
  grep -q "1 of 2 pushed files do not read back .*(checkpoints/epoch_0001/model.safetensors )" "$RUNS/pilot/REASON"
  wait_for 10 none_live
}

@test "DONE: the hash list of the pushed run is what the store reads back" {
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 DONE" ]
  [ "$(cut -c67- "$box/pushed.sha256" | tr '\n' ' ')" = "checkpoints/epoch_0001/model.safetensors run_meta.json " ]
  (cd "$runs" && sha256sum -c "$box/pushed.sha256")
}
