#!/usr/bin/env bats
# runner/box/entry.sh, run as the box would run it: job.env + a mode-600 rclone.conf in the box dir,
# real rclone against the local store, self-destroy through the fake API with the instance's own key.

load helpers

setup() {
  world
  id=$(rent pilot PROVISIONED g-7)
  export CONTAINER_ID=$id
  CONTAINER_API_KEY=$(curl -fsS "$VAST_URL/_control/state" | jq -r ".instances[] | select(.id == $id) | .instance_api_key")
  export CONTAINER_API_KEY
  box=$W/box
  mkdir -p "$box"
  cp "$RUNNER_RCLONE_CONF" "$box/rclone.conf"
  run_path="$RUNNER_STORE/runs/pilot"
  cp "$RUNNER_TRAIN_CONFIG" "$box/train.json"                  # what the launcher sends before job.env
  cfg_sha=$(sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1)
  printf 'HEARSAY_JOB=pilot\nHEARSAY_KIND=pilot\nHEARSAY_FOLD=\nHEARSAY_GEN=g-7\nHEARSAY_STORE=%s\nHEARSAY_RUN_PATH=%s\nHEARSAY_BUNDLE_SHA=tree-aaaa\nHEARSAY_CONFIG_HASH=%s\nHEARSAY_TRAIN=%s\n' \
    "$RUNNER_STORE" "$run_path" "$cfg_sha" "$RUNNER_BOX_TRAIN" >"$box/job.env"
}
teardown() { world_end; }

phases() { sed -n 's/^entry: g-7 \([A-Z]*\)$/\1/p' "$1" | tr '\n' ' '; }

@test "DONE: every phase's STATUS carries the generation, the run is pushed, the box destroys itself" {
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE TRAINING PUSHING DONE " ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 DONE" ]
  [ -f "$W/bucket/hearsay/runs/pilot/run/checkpoints/epoch_0001/model.safetensors" ]
  grep -q -- "--pilot --out $box/run --store $run_path/run --resume --config $box/train.json" "$box/train.args"
  [ "$(cat "$box/train.config_sha")" = "$cfg_sha" ]          # the trainer read the hashed bytes
  wait_for 10 test "$(live_count)" -eq 0
}

@test "a training config whose sha256 is not job.env's HEARSAY_CONFIG_HASH ends FAIL before training" {
  echo '{"train": {"epochs": 9}}' >"$box/train.json"           # tampered (or stale) on the box
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [[ "$output" == *"entry: $box/train.json has sha256 "*", job.env says HEARSAY_CONFIG_HASH=$cfg_sha (relaunch)"* ]]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED FAIL " ]
  [ ! -e "$box/train.args" ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
  [ "$(cat "$box/CHAIN")" = "g-7 failed" ]
  rm "$box/train.json" "$box/CHAIN"                            # and a missing one likewise
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [[ "$output" == *"entry: no $box/train.json (the launcher sends it before job.env)"* ]]
  [ ! -e "$box/train.args" ]
}

@test "a checkpoint push failing three times ends FAIL, never DONE, and still destroys the box" {
  mkdir -p "$W/bucket/hearsay/runs/pilot"
  echo "not a directory" >"$W/bucket/hearsay/runs/pilot/run"    # every copy into run/ fails
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [ "$(printf '%s\n' "$output" | grep -c 'push of .* failed (try [123] of 3)')" -eq 3 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE TRAINING PUSHING FAIL " ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
  [ "$(cat "$box/CHAIN")" = "g-7 failed" ]
  wait_for 10 test "$(live_count)" -eq 0
}

@test "a failing smoke check ends FAIL before training" {
  HEARSAY_SMOKE_CHECK="$REPO/tests/runner/bin/smoke_fail.sh" run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE FAIL " ]
  [ ! -e "$box/train.args" ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
}

@test "the box refuses a run path outside the store prefix (.. included)" {
  sed -i "s|^HEARSAY_RUN_PATH=.*|HEARSAY_RUN_PATH=$RUNNER_STORE/runs/../../elsewhere|" "$box/job.env"
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -ne 0 ]
  [[ "$output" == *"runner: remote path refused: $RUNNER_STORE/runs/../../elsewhere (no '.' or '..' segments)"* ]]
  [ ! -e "$W/bucket/elsewhere" ]
}
