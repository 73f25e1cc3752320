#!/usr/bin/env bats
# The pilot gate keyed on the recipe (the training config without train.epochs), the epoch count E
# recorded for a recipe (runner/epochs.sh: from the pilot's readouts or by hand) and the launcher's
# refusal of fold/full jobs trained for another epoch count; the pilot's readout in status --why.

load helpers

setup() { world; }
teardown() { world_end; }

# done_pilot CONFIG: a pilot launched with CONFIG runs on its box and is ended DONE by the reaper.
done_pilot() {
  cp "$1" "$W/pilot.json"
  RUNNER_TRAIN_CONFIG=$W/pilot.json launch --yes pilot >/dev/null
  wait_for 30 grep -q " DONE " "$RUNS/pilot/STATUS"
  reaper_once >/dev/null 2>&1
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
}

# pilot_meta DIR: a complete pilot's run_meta.json with fold-4 minDCF 0.5, 0.31, 0.30 at epochs 1-3.
pilot_meta() {
  mkdir -p "$1"
  jq -n '{job: "pilot", fold: null, complete: true, epochs: 3, history: {val: [
    {step: 4, epoch: 1, epoch_end: true, auc: 0.7, eer: 0.3, min_dcf: 0.5, pi: 0.3, n: 10},
    {step: 8, epoch: 2, epoch_end: true, auc: 0.8, eer: 0.2, min_dcf: 0.31, pi: 0.3, n: 10},
    {step: 12, epoch: 3, epoch_end: true, auc: 0.8, eer: 0.2, min_dcf: 0.30, pi: 0.3, n: 10}]}}' >"$1/run_meta.json"
}

@test "a pilot of 1 epoch clears finals of 3 (same recipe); a pilot with another lr does not" {
  echo '{"train": {"epochs": 3, "lr_head": 0.001}}' >"$RUNNER_TRAIN_CONFIG"
  echo '{"train": {"epochs": 1, "lr_head": 0.002}}' >"$W/other_lr.json"
  done_pilot "$W/other_lr.json"
  RUNNER_MARGIN_USD=1000 run launch --yes fold 3
  [ "$status" -eq 6 ]
  [[ "$output" == "runner: no DONE pilot for bundle $BUNDLE_SHA and recipe $(recipe_of "$RUNNER_TRAIN_CONFIG") "* ]]
  echo '{"train": {"lr_head": 0.001, "epochs": 1}}' >"$W/short.json"   # key order is not the recipe
  [ "$(recipe_of "$W/short.json")" = "$(recipe_of "$RUNNER_TRAIN_CONFIG")" ]
  done_pilot "$W/short.json"
  [ -f "$RUNNER_STATE/pilots/$BUNDLE_SHA-$(recipe_of "$RUNNER_TRAIN_CONFIG")" ]
  "$REPO/runner/epochs.sh" set 3 2>/dev/null
  RUNNER_MARGIN_USD=1000 run launch --yes fold 3
  echo "$output"; [ "$status" -eq 3 ]            # past the gate, stopped at the budget
  [ "$(created_count)" -eq 2 ]                    # the two pilots only
}

@test "a recipe's row selection is in its key: core only and all are two recipes, each pilot clears its own" {
  echo '{"train": {"epochs": 3}}' >"$W/all.json"
  echo '{"train": {"epochs": 3}, "selection": {"rules": [{"action": "keep", "train_scope": ["core"]}]}}' >"$W/core.json"
  echo '{"selection": {"rules": [{"action": "keep", "train_scope": ["core"]}]}, "train": {"epochs": 1}}' >"$W/core_pilot.json"
  [ "$(recipe_of "$W/core.json")" != "$(recipe_of "$W/all.json")" ]
  [ "$(recipe_of "$W/core_pilot.json")" = "$(recipe_of "$W/core.json")" ]   # the pilot's epochs are not
}

@test "E recorded from the pilot's readouts; fold/full with another train.epochs refused unless --any-epochs (logged)" {
  rcp=$(recipe_of "$RUNNER_TRAIN_CONFIG")
  mkdir -p "$RUNNER_STATE/pilots" && echo g-1 >"$RUNNER_STATE/pilots/$BUNDLE_SHA-$rcp"
  RUNNER_MARGIN_USD=1000 run launch --yes fold 3
  [ "$status" -eq 6 ]
  [ "$output" = "runner: no epoch count E recorded for bundle $BUNDLE_SHA and recipe $rcp (record the pilot's: runner/epochs.sh from-pilot (or your own: runner/epochs.sh set E), or pass --any-epochs)" ]
  # the pilot (a 1-epoch config of the same recipe) in the store, as its box leaves it
  echo '{"train": {"epochs": 1}}' >"$W/pilot.json"
  pilot_meta "$RUNS/pilot/$BUNDLE_SHA/$(sha256sum "$W/pilot.json" | cut -d' ' -f1)"
  run "$REPO/runner/epochs.sh" from-pilot --pilot-config "$W/pilot.json" --tol 0.02
  echo "$output"; [ "$status" -eq 0 ]
  [ "${lines[-1]}" = 2 ]                          # epoch 2 is within 0.02 of the best (epoch 3)
  [ "$(head -n 1 "$RUNNER_STATE/epochs/$BUNDLE_SHA-$rcp")" = 2 ]
  grep -q "epochs E=2 recorded for bundle $BUNDLE_SHA recipe $rcp: from pilot " "$RUNNER_STATE/runner.log"
  [ "$(jq .chosen_epoch "$RUNNER_STATE/epochs/$BUNDLE_SHA-$rcp.json")" = 2 ]
  RUNNER_MARGIN_USD=1000 run launch --yes full     # train.json says 3 epochs
  [ "$status" -eq 6 ]
  [ "$output" = "runner: $RUNNER_TRAIN_CONFIG sets train.epochs 3, the recorded E is 2 (set \"epochs\": 2 in its train section, or pass --any-epochs)" ]
  RUNNER_MARGIN_USD=1000 run launch --yes --any-epochs full
  [ "$status" -eq 3 ]
  grep -q "epoch check OVERRIDDEN for full (train.epochs 3, recorded E 2" "$RUNNER_STATE/runner.log"
  echo '{"train": {"epochs": 2}}' >"$RUNNER_TRAIN_CONFIG"
  RUNNER_MARGIN_USD=1000 run launch --yes full
  [ "$status" -eq 3 ]
  [ "$(created_count)" -eq 0 ]
}

@test "from-pilot refuses a pilot of another recipe; set takes the operator's E; show prints it" {
  echo '{"train": {"epochs": 1, "seed": 5}}' >"$W/pilot.json"
  run "$REPO/runner/epochs.sh" from-pilot --pilot-config "$W/pilot.json"
  [ "$status" -eq 2 ]
  [[ "$output" == *"is another recipe than $RUNNER_TRAIN_CONFIG"* ]]
  run "$REPO/runner/epochs.sh" show
  [ "$status" -eq 3 ]
  run "$REPO/runner/epochs.sh" set 0
  [ "$status" -eq 2 ]
  "$REPO/runner/epochs.sh" set 4 --why "long enough on the last campaign" 2>/dev/null
  run "$REPO/runner/epochs.sh" show
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = 4 ]
  grep -q "epochs E=4 recorded .*: set by hand: long enough on the last campaign" "$RUNNER_STATE/runner.log"
}

@test "status --why shows the job's last readout from its run folder" {
  put_status pilot "g-9 DONE 1764460000"
  d=$RUNS/pilot/$BUNDLE_SHA/$(sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1)
  mkdir -p "$d"
  echo '{"job": "pilot", "fold": null, "step": 8, "epoch": 2, "epoch_end": true, "auc": 0.81234567, "eer": 0.2, "min_dcf": 0.41, "pi": 0.3, "n": 40}' >"$d/readout.json"
  run "$REPO/runner/status.sh" --why pilot
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "READOUT epoch 2 step 8 (epoch end): minDCF(pi 0.3) 0.41 EER 0.2 AUC 0.8123 on 40 validation clips" ]
}

@test "status JOB shows a running job's latest per-step log line beside its readout" {
  put_status pilot "g-9 RUNNING 1764460000"
  d=$RUNS/pilot/$BUNDLE_SHA/$(sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1)
  mkdir -p "$d"
  echo '{"job": "pilot", "fold": null, "step": 8, "epoch": 2, "epoch_end": true, "auc": 0.8, "eer": 0.2, "min_dcf": 0.41, "pi": 0.3, "n": 40}' >"$d/readout.json"
  echo '{"job": "pilot", "step": 120, "at": "2026-12-04T15:20:00Z", "line": "hearsay train: step 120/1000 epoch 1/4 loss 0.4123 eta 1h02m"}' >"$d/progress.json"
  run "$REPO/runner/status.sh" pilot
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "STATUS g-9 RUNNING 1764460000" ]
  [[ "${lines[1]}" == "READOUT epoch 2 step 8 (epoch end): "* ]]
  [ "${lines[2]}" = "PROGRESS step 120/1000 epoch 1/4 loss 0.4123 eta 1h02m (at 2026-12-04T15:20:00Z)" ]
  run "$REPO/runner/status.sh" --why pilot   # the same read
  [ "${lines[2]}" = "PROGRESS step 120/1000 epoch 1/4 loss 0.4123 eta 1h02m (at 2026-12-04T15:20:00Z)" ]
  run "$REPO/runner/status.sh" --why
  [ "$status" -eq 2 ]
}
