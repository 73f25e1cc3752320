# shellcheck shell=bash
# runner/lib/recipe.sh — what a training config is apart from its length: the recipe hash the pilot
# gate keys on, the epoch count E recorded for a recipe, and the ablation's GPU-hour account.
#
# A recipe is a training config (RUNNER_TRAIN_CONFIG's JSON) without its step budget: the fields in
# RECIPE_BUDGET_FIELDS (the trainer's train.epochs; hearsay.train.config has no other max-steps or
# step-budget field: batches_per_epoch sets what one epoch is and stays in the recipe). So a pilot
# of 1 epoch and finals of 3 share a recipe; a different lr does not.

RECIPE_BUDGET_FIELDS='.train.epochs'

# recipe_hash FILE: sha256 of the config's canonical JSON (keys sorted, compact) with the budget
# fields removed and a section left empty by that removal dropped. 1 when FILE is not JSON.
recipe_hash() {
  local canon
  canon=$(jq -cS "del($RECIPE_BUDGET_FIELDS) | with_entries(select(.value != {}))" "$1" 2>/dev/null) || return 1
  printf '%s' "$canon" | _sha256_stdin
}

# config_epochs FILE: the config's own train.epochs (empty when it sets none).
config_epochs() { jq -r '.train.epochs // empty' "$1" 2>/dev/null; }

# epochs_file BUNDLE_SHA RECIPE_HASH: where runner/epochs.sh records E for that bundle + recipe.
# Its first line is E; the second says how it was chosen.
epochs_file() { printf '%s/epochs/%s-%s\n' "$RUNNER_STATE" "$1" "$2"; }

# recorded_epochs BUNDLE_SHA RECIPE_HASH: the recorded E, or nothing.
recorded_epochs() { head -n 1 "$(epochs_file "$1" "$2")" 2>/dev/null || true; }

# ablation_hours_used: GPU-hours of every ablation rental (job ablate-*) in the ledger and its spool,
# as the ledger's one reader counts them (hearsay.contracts.ledger: `hearsay ledger hours`): a closed
# rental at its hours column (its last closing row), an open (or re-opened) one at its most: its
# record's deadline - created (the reaper ends it there), or RUNNER_HOURS_ABLATION x
# RUNNER_DEADLINE_FACTOR without a record. 1 (hearsay's reason on stderr) when a row cannot be read
# that way.
ablation_hours_used() {
  local j id dflt args=()
  dflt=$(calc 'h * f' h="$RUNNER_HOURS_ABLATION" f="$RUNNER_DEADLINE_FACTOR") || return 1
  for j in $(jobs_list); do
    id=$(rec_get "$j" instance)
    [ -z "$id" ] || args+=(--record "$id" "$(rec_get "$j" created_at)" "$(rec_get "$j" deadline)")
  done
  # shellcheck disable=SC2086  # RUNNER_HEARSAY is a command line by design
  ${RUNNER_HEARSAY:-hearsay} ledger hours "$LEDGER" --job-prefix ablate- --spool "$(_ledger_spool)" \
    --open-default "$dflt" ${args[@]+"${args[@]}"}
}
