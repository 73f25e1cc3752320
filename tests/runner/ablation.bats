#!/usr/bin/env bats
# runner/launch.sh ablate RECIPE fold N: a named recipe (RUNNER_RECIPES/RECIPE.json) trained on one
# inner fold as job ablate-RECIPE-foldN, every rental held to RUNNER_ABLATION_GPU_HOURS by the
# ledger (closed rentals at their hours, open ones at their most) before anything is rented.

load helpers

setup() {
  world
  export RUNNER_RECIPES=$W/recipes RUNNER_HOURS_ABLATION=0.5 RUNNER_DEADLINE_FACTOR=1.5 RUNNER_ABLATION_GPU_HOURS=2
  mkdir -p "$RUNNER_RECIPES"
  echo '{"train": {"epochs": 1}}' >"$RUNNER_RECIPES/core_only.json"
  echo '{"train": {"epochs": 1, "seed": 1}}' >"$RUNNER_RECIPES/core_extra.json"
}
teardown() { world_end; }

# ablation_row ID JOB [HOURS]: a rental of JOB in the ledger, closed at HOURS when given.
ablation_row() {
  [ -s "$LEDGER" ] || echo 'id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost' >"$LEDGER"
  echo "$1,$2,g-0,1,0.5,2026-11-30T00:00:00Z,,," >>"$LEDGER"
  [ -z "${3:-}" ] || echo "$1,$2,g-0,1,0.5,2026-11-30T00:00:00Z,2026-11-30T01:00:00Z,$3,0.5" >>"$LEDGER"
}

@test "an ablation job is named after its recipe and fold, trains the recipe's config, its store folder apart from the finals'" {
  run launch --yes ablate core_only fold 2
  echo "$output"; [ "$status" -eq 0 ]
  id=${lines[-1]}
  [ "$(cat "$RUNNER_STATE/jobs/ablate-core_only-fold2/instance")" = "$id" ]
  [ "$(cat "$RUNNER_STATE/jobs/ablate-core_only-fold2/recipe")" = core_only ]
  grep -q "^$id,ablate-core_only-fold2," "$LEDGER"
  port=$(cut -d: -f2 "$RUNNER_STATE/jobs/ablate-core_only-fold2/ssh")
  box=$W/boxes/box-$port/run
  [[ "$(cat "$box/train.args")" == *"--fold 2 "* ]]
  [ "$(cat "$box/train.config_sha")" = "$(sha256sum "$RUNNER_RECIPES/core_only.json" | cut -d' ' -f1)" ]
  wait_for 30 grep -q " DONE " "$RUNS/ablate-core_only-fold2/STATUS"
  [ -f "$RUNS/ablate-core_only-fold2/$BUNDLE_SHA/$(sha256sum "$RUNNER_RECIPES/core_only.json" | cut -d' ' -f1)/run_meta.json" ]
  [ ! -e "$RUNS/fold2" ]
  grep -q "ablation cap: 0.0000 h + 0.7500 h for ablate-core_only-fold2 <= 2 h" "$RUNNER_STATE/runner.log"
}

@test "the ablation cap refuses (exit 15, nothing created) when the ledger's ablation hours + this job's pass it" {
  ablation_row 901 ablate-core_only-fold0 0.6       # spent
  ablation_row 902 ablate-core_extra-fold0          # open, no record: at its most, 0.5 x 1.5 h
  ablation_row 903 fold1 9.0                        # a final: not the ablation's
  run launch --yes ablate core_extra fold 1
  [ "$status" -eq 15 ]
  [ "$output" = "runner: ablation GPU-hour cap: 1.3500 h used or committed by ablation rentals + 0.7500 h for ablate-core_extra-fold1 > RUNNER_ABLATION_GPU_HOURS=2 (fewer recipes or folds, a lower RUNNER_HOURS_ABLATION, or raise RUNNER_ABLATION_GPU_HOURS deliberately)" ]
  [ "$(created_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/ablate-core_extra-fold1" ]
  RUNNER_HOURS_ABLATION=0.4 RUNNER_MARGIN_USD=1000 run launch --yes ablate core_extra fold 1   # 0.6 + 0.6 + 0.6 <= 2
  echo "$output"; [ "$status" -eq 3 ]                 # allowed: past the cap, stopped at the budget
  [ "$(created_count)" -eq 0 ]
}

@test "an open ablation rental with a record counts to its deadline; ablate refuses a bad or missing recipe" {
  RUNNER_HOURS_ABLATION=1 FAKE_TRAIN_S=60 run launch --yes ablate core_only fold 0   # its most: 1.5 h
  [ "$status" -eq 0 ]
  run launch --yes ablate core_extra fold 1
  [ "$status" -eq 15 ]
  [[ "$output" == "runner: ablation GPU-hour cap: 1.5000 h used or committed"* ]]
  [ "$(created_count)" -eq 1 ]
  run launch --yes ablate Core-Only fold 0
  [ "$status" -eq 2 ]
  [ "$output" = "runner: ablate needs a recipe name of a-z, 0-9 and _ (runner/launch.sh ablate core_only fold 0)" ]
  run launch --yes ablate nosuch fold 0
  [ "$status" -eq 2 ]
  [ "$output" = "runner: no recipe nosuch: $RUNNER_RECIPES/nosuch.json is missing (write its training config there (RUNNER_RECIPES, docs/RUNBOOK.md))" ]
  run launch --yes ablate core_only full
  [ "$status" -eq 2 ]
}
