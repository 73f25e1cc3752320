#!/usr/bin/env bats
# runner/collect.sh against a local store holding six finished runs (files made here, shaped as
# hearsay train leaves them); the pin it writes is read back by hearsay.evaluate.assemble.load_pin.

load helpers

setup() {
  world
  # the fold count a real bundle's meta records (hearsay pin keys reads it)
  jq -c '.folds = {"config": {"n_folds": 5}}' "$RUNNER_BUNDLE_META" >"$W/m" && mv "$W/m" "$RUNNER_BUNDLE_META"
  cfg=$(sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1)
  for job in fold0 fold1 fold2 fold3 fold4 full; do put_run "$job"; done
}
teardown() { world_end; }

# put_run JOB [BUNDLE]: a complete run of JOB in its store folder, trainer config hash "trainer-JOB".
put_run() {
  local d=$RUNS/$1/$BUNDLE_SHA/$cfg fold=null kind=full
  case $1 in fold*) fold=${1#fold} kind=fold ;; esac
  mkdir -p "$d/final" "$d/checkpoints/epoch_0001"
  echo "weights of $1" >"$d/final/model.safetensors"
  echo '{}' >"$d/final/config.json" && echo '{}' >"$d/config.json"
  printf '{"job": "%s", "fold": %s, "complete": true, "bundle_tree_sha": "%s", "config_hash": "trainer-%s", "steps": 18, "total_steps": 18}\n' \
    "$kind" "$fold" "${2:-$BUNDLE_SHA}" "$1" >"$d/run_meta.json"
  mkdir -p "$d/scores"                                          # what its box scored (hearsay score-run)
  echo "path,score" >"$d/scores/$1_x.csv" && echo '{}' >"$d/scores/$1_x.csv.meta.json"
  [ "$1" != full ] || echo '{"kind": "hearsay parity-b box logits"}' >"$d/scores/full_parity_logits.json"
}

@test "six finished runs come back and are pinned with the trainer's config hash and their weights' sha256" {
  run "$REPO/runner/collect.sh" --name camp --min-steps 2000 "$W/models/camp"
  [ "$status" -eq 0 ]
  pin=$W/models/camp/final_runs.json
  [ "${lines[${#lines[@]}-1]}" = "$pin" ]
  [ "$(jq -r '.name, .bundle_tree_sha, .min_steps' "$pin" | tr '\n' ' ')" = "camp $BUNDLE_SHA 2000 " ]
  [ "$(jq -r '.runs.fold3.config_hash' "$pin")" = trainer-fold3 ]        # not the runner's train.json sha256
  [ "$(jq -r '.runs.full.weights_sha256' "$pin")" = "$(sha256sum "$W/models/camp/runs/full/final/model.safetensors" | cut -d' ' -f1)" ]
  [ ! -e "$W/models/camp/runs/fold0/checkpoints" ]                    # checkpoints stay in the store
  python -c 'import sys; from pathlib import Path; from hearsay.evaluate.assemble import load_pin; p = load_pin(Path(sys.argv[1])); assert p["runs"]["fold2"]["dir"].is_dir()' "$pin"
}

@test "the box scores come back beside the runs and the pin requires parity A and B from the box logits" {
  echo stale >"$W/s" && mkdir -p "$W/models/camp/scores" && cp "$W/s" "$W/models/camp/scores/fold2_old.csv"
  run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  [ "$status" -eq 0 ]
  pin=$W/models/camp/final_runs.json
  [ "$(jq -cS .parity "$pin")" = '{"box_logits":"scores/full_parity_logits.json","file":"export/parity.json","require":["parity_a","parity_b"]}' ]
  for job in fold0 fold1 fold2 fold3 fold4 full; do [ -f "$W/models/camp/scores/${job}_x.csv.meta.json" ]; done
  [ -s "$W/models/camp/scores/full_parity_logits.json" ]
  [ ! -e "$W/models/camp/scores/fold2_old.csv" ]                # only what the store holds now
  [[ "$output" == *"6 box score file(s) in $W/models/camp/scores; parity: A and B required, B against scores/full_parity_logits.json"* ]]
  python -c 'import sys; from pathlib import Path; from hearsay.evaluate.assemble import load_pin; p = load_pin(Path(sys.argv[1])); assert p["parity"]["file"] == Path(sys.argv[1]).parent.resolve() / "export" / "parity.json"' "$pin"
}

@test "without the full run's parity logits no pin is written, unless the operator waives parity B (recorded)" {
  rm "$RUNS/full/$BUNDLE_SHA/$cfg/scores/full_parity_logits.json"
  run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  [ "$status" -eq 3 ]
  [[ "$output" == *"the full run brought back no scores/full_parity_logits.json"*"runner/collect.sh --no-parity"* ]]
  [ ! -e "$W/models/camp/final_runs.json" ]
  run "$REPO/runner/collect.sh" --no-parity --min-steps 18 "$W/models/camp"
  [ "$status" -eq 0 ]
  [ "$(jq -r .parity.waived "$W/models/camp/final_runs.json")" = "runner/collect.sh --no-parity: the operator pinned without parity B" ]
  [[ "$output" == *"; parity: waived (--no-parity)"* ]]
  python -c 'import sys; from pathlib import Path; from hearsay.evaluate.assemble import load_pin, check_f6_parity; assert "waived" in check_f6_parity(load_pin(Path(sys.argv[1])))' "$W/models/camp/final_runs.json"
}

@test "a run missing or not complete is named, and no pin is written" {
  rm -rf "$RUNS/fold4"
  jq '.complete = false' "$RUNS/full/$BUNDLE_SHA/$cfg/run_meta.json" >"$W/m" && mv "$W/m" "$RUNS/full/$BUNDLE_SHA/$cfg/run_meta.json"
  run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  [ "$status" -eq 3 ]
  [ "$output" = "runner: not complete in the store for bundle $BUNDLE_SHA and config $cfg: fold4 full (let those jobs reach DONE (runner/status.sh --why JOB), or relaunch them)" ]
  [ ! -e "$W/models/camp/final_runs.json" ]
}

@test "a run folder holding another bundle's run is refused" {
  put_run fold1 "0000000000000000000000000000000000000000000000000000000000000000"
  run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  [ "$status" -eq 4 ]
  [[ "$output" == *"run_meta.json holds another run: bundle_tree_sha '0000000000000000000000000000000000000000000000000000000000000000' (want '$BUNDLE_SHA')"* ]]
  [ ! -e "$W/models/camp/final_runs.json" ]
}

@test "a failed collect into a folder that holds a pin leaves no pin describing other runs" {
  run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  [ "$status" -eq 0 ]
  [ -s "$W/models/camp/final_runs.json" ]
  rm -rf "$RUNS/fold3"
  run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  [ "$status" -eq 3 ]
  [ ! -e "$W/models/camp/final_runs.json" ]
  [ -z "$(ls "$W/models/camp/runs/fold3")" ]          # what the old pin described is no longer there
}

@test "the pin's min_steps is the operator's --min-steps, required: never the runs' own planned count" {
  run "$REPO/runner/collect.sh" "$W/models/camp"
  [ "$status" -eq 2 ]
  [ "$output" = "runner: no --min-steps given: the training budget every run is held to (pass the recipe's optimiser steps (epochs x steps per epoch), e.g. --min-steps 2000)" ]
  [ ! -e "$W/models/camp/final_runs.json" ]
  for bad in 0 -5 1.5 x; do
    run "$REPO/runner/collect.sh" --min-steps "$bad" "$W/models/camp"
    [ "$status" -eq 2 ]
  done
  run "$REPO/runner/collect.sh" --min-steps 40 "$W/models/camp"
  [ "$status" -eq 0 ]
  [ "$(jq .min_steps "$W/models/camp/final_runs.json")" = 40 ]   # the runs planned 18: assemble refuses them
}

@test "collect hashes with shasum where sha256sum is missing (macOS)" {
  nosha=$(bin_without sha256sum)
  PATH="$REPO/.venv/bin:$nosha" run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.runs.full.weights_sha256' "$W/models/camp/final_runs.json")" = "$(sha256sum "$W/models/camp/runs/full/final/model.safetensors" | cut -d' ' -f1)" ]
  [ -n "$(ls "$RUNS/full/$BUNDLE_SHA/$cfg")" ]   # the store folder named by shasum's hash was found
}

@test "the runs pinned are the fold file's: a 3-fold bundle pins fold0-fold2 and full" {
  jq -c '.folds.config.n_folds = 3' "$RUNNER_BUNDLE_META" >"$W/m" && mv "$W/m" "$RUNNER_BUNDLE_META"
  rm -rf "$RUNS/fold3" "$RUNS/fold4"
  run "$REPO/runner/collect.sh" --min-steps 18 "$W/models/camp"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.runs | keys | join(" ")' "$W/models/camp/final_runs.json")" = "fold0 fold1 fold2 full" ]
  [ ! -e "$W/models/camp/runs/fold3" ]
}
