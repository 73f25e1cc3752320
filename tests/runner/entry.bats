#!/usr/bin/env bats
# runner/box/entry.sh, run as the box would run it: job.env + a mode-600 rclone.conf in the box dir,
# real rclone against the local store, self-destroy through the fake API with the instance's own key.

load helpers

setup() { world; box_world; }
teardown() { world_end; }

phases() { sed -n 's/^entry: g-7 \([A-Z]*\)$/\1/p' "$1" | tr '\n' ' '; }

@test "DONE: every phase's STATUS carries the generation, the run is pushed, the box destroys itself" {
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE TRAINING PUSHING DONE " ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 DONE" ]
  [ -f "$runs/checkpoints/epoch_0001/model.safetensors" ]
  grep -q -- "--pilot --out $box/run --store $run_store --resume auto --config $box/train.json" "$box/train.args"
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
  mkdir -p "$(dirname "$runs")"
  echo "not a directory" >"$runs"                              # every copy into the run folder fails
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
  sed -i "s|^HEARSAY_RUN_PATH=.*|HEARSAY_RUN_PATH=$RUNNER_STORE/runs/$RUNNER_OPERATOR/../../elsewhere|" "$box/job.env"
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -ne 0 ]
  [[ "$output" == *"runner: remote path refused: $RUNNER_STORE/runs/$RUNNER_OPERATOR/../../elsewhere (no '.' or '..' segments)"* ]]
  [ ! -e "$W/bucket/elsewhere" ]
}

@test "a bundle the store lacks is a FAIL that says so, in REASON too, and nothing trains" {
  rm -rf "$W/bucket/hearsay/bundles"
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [[ "$output" == *"entry: bundle pull from $RUNNER_STORE/bundles/$BUNDLE_SHA failed (rclone: "*"is it in the store? on the laptop: runner/bundle_put.sh BUNDLE_DIR"* ]]
  [ ! -e "$box/train.args" ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE TRAINING FAIL " ]
  [ "$(sed -n 1p "$RUNS/pilot/REASON" | cut -d' ' -f1-2)" = "g-7 TRAINING" ]
  grep -q "^bundle pull from .* failed" "$RUNS/pilot/REASON"
}

@test "a pulled bundle whose tree-sha is not the launched one is a FAIL naming both" {
  echo "changed" >>"$W/bucket/hearsay/bundles/$BUNDLE_SHA/audio/a.flac"
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [[ "$output" == *"entry: pulled bundle hashes to tree-sha "*", job.env says HEARSAY_BUNDLE_SHA=$BUNDLE_SHA (the store's copy is incomplete or another bundle"* ]]
  [ ! -e "$box/train.args" ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
}

@test "the box's tree-sha covers selection.json: a store copy whose fold or selection record changed is a FAIL, nothing trains" {
  echo '{"folds": {"config": {"family_exclusion": {"full": ["voc"]}}}, "selection": null}' >"$W/bucket/hearsay/bundles/$BUNDLE_SHA/selection.json"
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [[ "$output" == *"entry: pulled bundle hashes to tree-sha "*", job.env says HEARSAY_BUNDLE_SHA=$BUNDLE_SHA"* ]]
  [ ! -e "$box/train.args" ]
}

@test "the trainer's exit code and last lines reach the store's REASON, and status.sh --why shows them" {
  FAKE_TRAIN_RC=7 run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [[ "$output" == *"entry: trainer exit 7 ("* ]]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
  run "$REPO/runner/status.sh" --why pilot
  [ "$status" -eq 0 ]
  [[ "$output" == *"STATUS g-7 FAIL"* ]]
  [[ "$output" == *"trainer exit 7 ("* ]]
}

# as_job KIND [FOLD]: the box's job.env turned into a fold or full job's (its run folder in the store).
as_job() {
  local job=$1
  [ "$1" != fold ] || job=fold$2
  sed -i -e "s|^HEARSAY_JOB=.*|HEARSAY_JOB=$job|" -e "s|^HEARSAY_KIND=.*|HEARSAY_KIND=$1|" \
    -e "s|^HEARSAY_FOLD=.*|HEARSAY_FOLD=${2:-}|" \
    -e "s|^HEARSAY_RUN_PATH=.*|HEARSAY_RUN_PATH=$RUNNER_STORE/runs/$RUNNER_OPERATOR/$job|" "$box/job.env"
  runs=$RUNS/$job/$BUNDLE_SHA/$cfg_sha
}

@test "a fold job scores its rows after the run is pushed, and the scores reach RUN/scores in the store" {
  as_job fold 1
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE TRAINING PUSHING SCORING DONE " ]
  [ "$(cat "$box/score.args")" = "--run $box/run --bundle $box/bundle --out $box/run/scores" ]
  [ -f "$runs/scores/fake_scores.csv.meta.json" ]
  [ -f "$runs/run_meta.json" ]
  [[ "$output" == *"entry: hearsay score-run: stand-in: 1 file(s)"* ]]
}

@test "the full job asks the scorer for the parity B logits, and a relaunch finds the store's scores first" {
  as_job full
  mkdir -p "$runs/scores"
  echo "path,score" >"$runs/scores/full_test.csv"               # scored by an earlier box of this run
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [[ "$(cat "$box/score.args")" == *"--out $box/run/scores --parity-clips 50" ]]
  grep -qx "./full_test.csv" "$box/score.found"
}

@test "a scoring failure is a FAIL with the scorer's exit code and last lines in REASON, never DONE" {
  as_job fold 3
  FAKE_SCORE_RC=3 run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED SMOKE TRAINING PUSHING SCORING FAIL " ]
  [[ "$output" == *"entry: scoring exit 3 ($HEARSAY_SCORE_RUN; "*"the trained run is in the store, its scores are not"* ]]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of fold3)")" = "g-7 FAIL" ]
  grep -q "^scoring exit 3 " "$RUNS/fold3/REASON"
  grep -q "stand-in failure (exit 3)" "$RUNS/fold3/REASON"
  [ ! -e "$runs/scores/fake_scores.csv" ]
  [ "$(cat "$box/CHAIN")" = "g-7 failed" ]
}

@test "started with an empty environment, the chain takes each variable it needs from the container and job.env" {
  printf 'OTHER=x\0' >>"$HEARSAY_INIT_ENVIRON"                  # not a name the box imports
  printf '#!/usr/bin/env bash\nenv >"%s/train.env"\nexec %s "$@"\n' "$box" "$RUNNER_BOX_TRAIN" >"$W/train_env.sh"
  chmod +x "$W/train_env.sh"
  sed -i "s|^HEARSAY_TRAIN=.*|HEARSAY_TRAIN=$W/train_env.sh|" "$box/job.env"
  run env -i HEARSAY_INIT_ENVIRON="$HEARSAY_INIT_ENVIRON" VAST_URL="$VAST_URL" \
    HEARSAY_SMOKE_CHECK="$HEARSAY_SMOKE_CHECK" HEARSAY_PUSH_WAIT_S=0.1 /bin/bash "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  grep -qx "HEARSAY_GIT_SHA=$(git -C "$REPO" rev-parse HEAD)" "$box/train.env"
  grep -qx "PATH=$REPO/.venv/bin:/usr/bin:/bin" "$box/train.env"
  grep -qx "HF_HUB_OFFLINE=1" "$box/train.env"
  grep -qx "HEARSAY_WEIGHTS_DIR=$W/box-sandbox/weights" "$box/train.env"
  grep -q "^HEARSAY_FFMPEG=.*ffmpeg" "$box/train.env"
  grep -q "^SSL_CERT_FILE=/" "$box/train.env"
  grep -qx "HEARSAY_DEADLINE=[0-9]*" "$box/train.env"            # job.env's, exported
  [ "$(grep -c "^OTHER=" "$box/train.env")" -eq 0 ]
  [ "$(stat -c %a "$box/box.env")" = 600 ]
  [ "$(cut -d= -f1 "$box/box.env" | tr '\n' ' ')" = "PATH LD_LIBRARY_PATH HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HEARSAY_WEIGHTS_DIR HEARSAY_WEIGHTS_SHA256 HEARSAY_FFMPEG HEARSAY_VERSION HEARSAY_GIT_SHA SSL_CERT_FILE TMPDIR HOME CONTAINER_ID CONTAINER_API_KEY HEARSAY_SMOKE_CHECK " ]
  no_secrets <(printf '%s\n' "$output")
  [[ "$output" != *"$CONTAINER_API_KEY"* ]]
  wait_for 10 test "$(live_count)" -eq 0                       # it destroyed itself with the imported key
}

@test "a variable missing from the image's environment or from job.env fails the box with a REASON naming it" {
  FAKE_IMAGE_DROP="HEARSAY_FFMPEG SSL_CERT_FILE" "$REPO/tests/runner/bin/box_environ.sh" "$W/box-sandbox" \
    "$HEARSAY_INIT_ENVIRON" "CONTAINER_ID=$CONTAINER_ID" "CONTAINER_API_KEY=$CONTAINER_API_KEY"
  run env -i HEARSAY_INIT_ENVIRON="$HEARSAY_INIT_ENVIRON" VAST_URL="$VAST_URL" HEARSAY_PUSH_WAIT_S=0.1 \
    HEARSAY_SMOKE_CHECK="$HEARSAY_SMOKE_CHECK" /bin/bash "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [ "$(phases <(printf '%s\n' "$output"))" = "STARTED FAIL " ]
  [ ! -e "$box/train.args" ]
  [ "$(sed -n 1p "$RUNS/pilot/REASON" | cut -d' ' -f1-2)" = "g-7 STARTED" ]
  grep -q "^the container's environment ($HEARSAY_INIT_ENVIRON) lacks HEARSAY_FFMPEG SSL_CERT_FILE: the trainer image sets them (nix/trainer-image.nix, Env)" \
    "$RUNS/pilot/REASON"
  wait_for 10 test "$(live_count)" -eq 0                       # vast.ai's variables were there: it destroyed itself
  "$REPO/tests/runner/bin/box_environ.sh" "$W/box-sandbox" "$HEARSAY_INIT_ENVIRON" \
    "CONTAINER_ID=$CONTAINER_ID" "CONTAINER_API_KEY=$CONTAINER_API_KEY"
  sed -i '/^HEARSAY_DEADLINE=/d; /^HEARSAY_BUNDLE_SHA=/d' "$box/job.env"
  rm -f "$box/CHAIN"
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [ ! -e "$box/train.args" ]
  [[ "$output" == *"entry: job.env lacks HEARSAY_BUNDLE_SHA HEARSAY_DEADLINE: runner/launch.sh writes them"* ]]
  run "$REPO/runner/status.sh" --why pilot
  [[ "$output" == *"STATUS g-7 FAIL"* ]]
  [[ "$output" == *"job.env lacks HEARSAY_BUNDLE_SHA HEARSAY_DEADLINE"* ]]
}

@test "every image variable the box requires is one nix/trainer-image.nix's Env sets" {
  names=$(bash -c '. "$1/runner/box/job.sh" && echo $BOX_IMAGE_NAMES' _ "$REPO")
  for n in $names; do
    grep -q "^ *\"$n=" "$REPO/nix/trainer-image.nix" || { echo "$n is not in the image's Env"; return 1; }
  done
}
