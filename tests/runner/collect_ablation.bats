#!/usr/bin/env bats
# runner/collect_ablation.sh: one recipe's ablation fold runs from the store, checked and pinned
# for hearsay compare, with the per-run score files their boxes left.

load helpers

setup() {
  world
  # the fold count a real bundle's meta records (hearsay pin keys reads it)
  jq -c '.folds = {"config": {"n_folds": 5}}' "$RUNNER_BUNDLE_META" >"$W/m" && mv "$W/m" "$RUNNER_BUNDLE_META"
  export RUNNER_RECIPES=$W/recipes
  mkdir -p "$RUNNER_RECIPES"
  echo '{"train": {"epochs": 1}}' >"$RUNNER_RECIPES/core_only.json"
  cfg=$(sha256sum "$RUNNER_RECIPES/core_only.json" | cut -d' ' -f1)
}
teardown() { world_end; }

# ablation_run K [JOB]: a finished ablation fold run in the store, as a box leaves it (JOB in run_meta).
ablation_run() {
  local d=$RUNS/ablate-core_only-fold$1/$BUNDLE_SHA/$cfg
  mkdir -p "$d/final" "$d/scores"
  jq -n --arg b "$BUNDLE_SHA" --argjson k "$1" --arg j "${2:-fold}" \
    '{job: $j, fold: $k, complete: true, bundle_tree_sha: $b, config_hash: "trainer-hash"}' >"$d/run_meta.json"
  echo '{}' >"$d/config.json"
  echo "weights $1" >"$d/final/model.safetensors"
  echo "path,fold,split,score,logit" >"$d/scores/fold$1_inner_oof.csv"
  echo '{"split": "inner_oof"}' >"$d/scores/fold$1_inner_oof.csv.meta.json"
  echo "path,fold,split,score,logit" >"$d/scores/fold$1_probe.csv"   # every box scores the probe set
  echo '{"split": "probe"}' >"$d/scores/fold$1_probe.csv.meta.json"
}

@test "the recipe's fold runs are pinned with their weights and score files; a missing one is named" {
  ablation_run 0
  run "$REPO/runner/collect_ablation.sh" core_only "0 1" "$W/abl"
  [ "$status" -eq 3 ]
  [[ "$output" == *"not complete in the store for recipe core_only (bundle $BUNDLE_SHA, core_only.json sha256 $cfg): fold1 ("* ]]
  [ ! -e "$W/abl/ablation_runs.json" ]
  ablation_run 1
  run "$REPO/runner/collect_ablation.sh" core_only "0 1" "$W/abl"
  echo "$output"; [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "$W/abl/ablation_runs.json" ]
  [ "$(jq -r '.recipe, .bundle_tree_sha, (.runs | keys | join(" ")), .runs.fold1.dir, .runs.fold1.config_hash' "$W/abl/ablation_runs.json" | tr '\n' ' ')" = "core_only $BUNDLE_SHA fold0 fold1 runs/fold1 trainer-hash " ]
  [ "$(jq -r .runs.fold1.weights_sha256 "$W/abl/ablation_runs.json")" = "$(sha256sum "$W/abl/runs/fold1/final/model.safetensors" | cut -d' ' -f1)" ]
  [ -s "$W/abl/scores/fold1_inner_oof.csv.meta.json" ]
  # the probe set's scores come back beside them: the drop rule reads them there
  [ "$(jq -r .split "$W/abl/scores/fold1_probe.csv.meta.json")" = probe ]
  [ -s "$W/abl/scores/fold0_probe.csv" ]
  # a later collect never keeps an earlier run's probe file when the store has none
  rm "$RUNS/ablate-core_only-fold1/$BUNDLE_SHA/$cfg/scores/fold1_probe.csv"*
  run "$REPO/runner/collect_ablation.sh" core_only "0 1" "$W/abl"
  echo "$output"; [ "$status" -eq 0 ]
  [ ! -e "$W/abl/scores/fold1_probe.csv" ]
  [ -s "$W/abl/scores/fold0_probe.csv" ]
}

@test "a run of another fold or job in the recipe's folder is refused (exit 4)" {
  ablation_run 0 full
  run "$REPO/runner/collect_ablation.sh" core_only 0 "$W/abl"
  [ "$status" -eq 4 ]
  [[ "$output" == *"run_meta.json holds another run: job 'full' (want 'fold')"* ]]
}
