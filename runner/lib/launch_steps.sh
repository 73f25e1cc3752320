# shellcheck shell=bash
# runner/lib/launch_steps.sh — the steps of runner/launch.sh that refuse a launch before any money
# is asked about (the job's folds and config, its previous record, its run folder, the pilot gate,
# the ablation cap), in the order it runs them. The later steps: runner/lib/launch_budget.sh (budget,
# go-ahead, reaper), runner/lib/launch_create.sh (the create and its bill), runner/lib/launch_provision.sh
# (the box up and its chain started). They share the launcher's globals: job kind fold gen offer dph
# credit estimate instance host port launch_lock budget_lock.
# shellcheck disable=SC2154  # kind, fold, job, recipe, launch_lock, budget_lock, launch_tmp and user_tmp are set by runner/launch.sh
# shellcheck source=runner/lib/bundles.sh
. "$RUNNER_ROOT/lib/bundles.sh"
# shellcheck source=runner/lib/recipe.sh
. "$RUNNER_ROOT/lib/recipe.sh"

# hours_for KIND: the budget estimate's hours (an ablation's fold job: RUNNER_HOURS_ABLATION).
hours_for() {
  [ -z "${recipe:-}" ] || { echo "$RUNNER_HOURS_ABLATION"; return 0; }
  case $1 in
    pilot) echo "$RUNNER_HOURS_PILOT" ;; fold) echo "$RUNNER_HOURS_FOLD" ;;
    full) echo "$RUNNER_HOURS_FULL" ;; *) echo "$RUNNER_HOURS_PROBE" ;;
  esac
}

# step_fold_in_bundle FOLD: FOLD must be one of the bundle's fold models, 0..n_folds-1 (its fold
# file's n_folds, as hearsay.contracts.bundle reads RUNNER_BUNDLE_META): exit 2, before anything
# else is asked of the account, with the reason hearsay gives.
step_fold_in_bundle() {
  local why rc=0
  [ -r "$RUNNER_BUNDLE_META" ] || die 2 "no bundle meta at $RUNNER_BUNDLE_META" "set RUNNER_BUNDLE_META to the bundle's bundle_meta.json"
  why=$(bundle_info "$RUNNER_BUNDLE_META" --fold "$1" 2>&1) || rc=$?
  case $rc in
    0) ;;
    4) die 2 "${why#hearsay bundle info: }" "runner/launch.sh fold K with K below $(bundle_info "$RUNNER_BUNDLE_META" --n-folds 2>/dev/null || echo n_folds)" ;;
    *) die 2 "cannot tell the bundle's folds from $RUNNER_BUNDLE_META (hearsay bundle info exit $rc: ${why#hearsay bundle info: })" "rebuild the bundle with hearsay bundle, or set RUNNER_BUNDLE_META" ;;
  esac
}

# identity KIND: sets bundle_sha, config_hash (sha256 of the file: the store folder, what the box
# checks) and recipe_hash (the same config without its step budget: what the pilot gate compares).
identity() {
  bundle_sha=none config_hash=none recipe_hash=none
  [ "$1" = probe ] && return 0
  [ -r "$RUNNER_BUNDLE_META" ] || die 2 "no bundle meta at $RUNNER_BUNDLE_META" "set RUNNER_BUNDLE_META to the bundle's bundle_meta.json"
  [ -r "$RUNNER_TRAIN_CONFIG" ] || die 2 "no training config at $RUNNER_TRAIN_CONFIG" "set RUNNER_TRAIN_CONFIG"
  bundle_sha=$(bundle_info "$RUNNER_BUNDLE_META" --tree-sha) \
    || die 2 "$RUNNER_BUNDLE_META gives no tree-sha (hearsay bundle info said why above)" "rebuild the bundle with hearsay bundle"
  config_hash=$(sha256_file "$RUNNER_TRAIN_CONFIG")
  recipe_hash=$(recipe_hash "$RUNNER_TRAIN_CONFIG") || die 2 "$RUNNER_TRAIN_CONFIG is not JSON" "fix the config; check it with: hearsay train --check-config --config $RUNNER_TRAIN_CONFIG"
  step_check_config "$1"               # exit 2: the trainer refuses the config, nothing rented
  step_bundle_in_store "$bundle_sha"   # exit 14: no verified copy in the store, nothing rented
}

# step_check_config KIND: the box's own trainer command (RUNNER_BOX_TRAIN, default `hearsay train`,
# its flags included) loads and resolves RUNNER_TRAIN_CONFIG here with --check-config, the same
# code a box runs first; a refusal exits 2 with the trainer's message, before anything is rented.
step_check_config() {
  local cmd=${RUNNER_BOX_TRAIN:-hearsay train} sel out rc=0
  case $1 in fold) sel="--fold $fold" ;; *) sel="--$1" ;; esac
  command -v "${cmd%% *}" >/dev/null 2>&1 \
    || die 10 "missing dependency: ${cmd%% *} (the trainer, to check $RUNNER_TRAIN_CONFIG)" "install hearsay (make install) or set RUNNER_BOX_TRAIN"
  # shellcheck disable=SC2086  # RUNNER_BOX_TRAIN is a command line by design; sel is two words at most
  out=$($cmd --check-config --config "$RUNNER_TRAIN_CONFIG" $sel </dev/null 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || die 2 "the trainer refuses $RUNNER_TRAIN_CONFIG (exit $rc): $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')" "fix the config; check it with: $cmd --check-config --config $RUNNER_TRAIN_CONFIG $sel"
  log_event "training config checked for $1${fold:+ $fold}: $(printf '%s' "$out" | tail -n 1)"
}

# step_previous JOB: the job's previous instance must be absent from a successful listing; only then is
# an old record cleared (its ledger row completed). Leaves the listing in $prev_list for the budget.
step_previous() {
  local job=$1 id listed own
  own=$(label_prefix) || die 1 "no operator identity, so no label can be ours" "see the message above"
  prev_list=$(_vast_tmp)
  vast_list "$prev_list" || die 5 "cannot list instances, so cannot confirm job $job's previous instance is gone" "retry later; check VAST_URL, the key and runner/teardown_check.sh"
  listed=$(awk -F '\t' -v p="$own:$job:" 'index($3, p) == 1 { print $1 }' "$prev_list" | head -n 1)
  id=$(rec_get "$job" instance)
  if [ -z "$listed" ] && [ -n "$id" ] && list_has "$prev_list" "$id"; then listed=$id; fi
  # the record's create landed but its launcher died before keeping the id (killed mid-create): the
  # id and the creation row are kept now (adoption by its label), so the rental is on the ledger
  # whoever ends it, even if the box then ends itself before any listing sees it again
  if [ -n "$listed" ] && [ -z "$id" ] && [ -n "$(rec_get "$job" asked)" ] && ! launcher_alive "$job"; then
    adopt_by_label "$job" "$prev_list" >/dev/null 2>&1 || true
  fi
  if [ -n "$listed" ]; then
    # what the one judge (runner/lib/judge.sh) makes of the record's box, as the reaper will act on it
    local verdict_said=""
    if [ "$listed" = "$id" ]; then
      judge_job "$job" "$(rec_state "$job")"
      # shellcheck disable=SC2154  # set by judge_job
      verdict_said="; the judge: $verdict ($j_why)"
    fi
    die 4 "job $job's previous instance $listed is still listed$verdict_said" "wait for runner/reaper.sh to end it, or: vastai destroy instance $listed -y"
  fi
  rec_exists "$job" || return 0
  # a well-formed empty listing can be an API hiccup: the record's box must be gone by the one rule
  # (runner/lib/gone.sh: the listing still shows our other boxes, or show instance agrees)
  if [ -n "$id" ] && ! gone_judge "$prev_list" "$id"; then
    die 5 "job $job's previous instance $id is missing from the listing but show instance does not confirm it gone" "retry later; check runner/teardown_check.sh"
  fi
  # its label must be settled too: a duplicate a resent create rented may land late (label_settled)
  if [ -n "$id" ] && [ -e "$(rec_dir "$job")/dup_sweep" ] && ! label_settled "$job" "$prev_list"; then
    die 5 "job $job's previous create may still have a duplicate no listing has shown (its label is not settled)" "runner/reaper.sh settles it; retry after its provision-by $(iso "$(rec_get "$job" provision_by)")"
  fi
  if launcher_alive "$job" && [ "$(rec_get "$job" launcher)" != "$$" ]; then
    die 4 "job $job is being launched by process $(rec_get "$job" launcher)" "wait for it"
  fi
  if [ -z "$id" ] && [ -n "$(rec_get "$job" asked)" ]; then
    local lag_end
    if ! lag_end=$(label_lag_end "$job") || [ "$(now)" -lt "$lag_end" ]; then
      die 5 "job $job's last create is recent and may still appear in the listing" "retry after RUNNER_LABEL_LAG_S=$RUNNER_LABEL_LAG_S s"
    fi
  fi
  rec_lock "$job" || die 4 "record of job $job is locked" "wait for runner/reaper.sh"
  if [ -n "$id" ]; then
    ledger_close "$job" "$id" || die 1 "cannot complete the ledger row of job $job's old instance $id" "free space under $LEDGER, then launch again"
  fi
  if unseen_rental "$job"; then
    ledger_unseen "$job" || die 1 "cannot write the ledger row of job $job's unseen create" "free space under $LEDGER, then launch again"
  fi
  rec_set "$job" result CLEARED
  rec_archive "$job"
  rec_unlock "$job"
  say "old record of job $job cleared (its instance ${id:-none} is confirmed absent)"
}

# step_run_folder JOB: the job's run folder (STORE/runs/OPERATOR/JOB) must not show another live
# generation (two operators who set one RUNNER_OPERATOR).
# A STATUS in a live phase (not DONE or FAIL) of a generation this RUNNER_STATE never launched (none
# of its records or archives) is another operator's launch of JOB training there: two boxes would
# train into one folder, and STATUS, HEARTBEAT and the pilot gate would read the wrong one. exit 4.
step_run_folder() {
  local line g ph
  line=$(store_status_line "$1")
  g=${line%% *} ph=${line#* }
  ph=${ph%% *}
  case $ph in '' | DONE | FAIL) return 0 ;; esac
  [ -n "$g" ] && [ "$g" != "$line" ] || return 0
  [ "$g" != "$(rec_get "$1" gen)" ] || return 0
  if compgen -G "$RUNNER_STATE/archive/$1-$g-*" >/dev/null; then return 0; fi   # ours, ended
  die 4 "job $1's run folder $(store_job_path "$1") shows generation $g in phase $ph, which this RUNNER_STATE never launched: another operator's $1 trains there" "give each operator its own RUNNER_OPERATOR (unset: each RUNNER_STATE's own identity); or wait until that generation ends (DONE or FAIL)"
}

# step_pilot_gate JOB KIND GATE ANY_EPOCHS: fold/full need a DONE pilot of the same bundle tree-sha +
# recipe hash (the config without its epoch count: a short pilot clears longer finals), and the
# config's train.epochs must be the E recorded for that recipe (runner/epochs.sh) unless ANY_EPOCHS
# is 1 (--any-epochs, logged). GATE 0 (--no-pilot-gate, logged) skips both. An ablation's fold job
# (a recipe of its own, job ablate-*) is not gated: runner/launch.sh ablate caps it in GPU-hours.
step_pilot_gate() {
  identity "$2"
  case $2 in fold | full) ;; *) return 0 ;; esac
  [ -z "${recipe:-}" ] || return 0
  if [ "$3" = 0 ]; then
    say "pilot gate overridden (--no-pilot-gate): DONE pilot and epoch count E not checked for bundle $bundle_sha recipe $recipe_hash"
    log_event "pilot gate OVERRIDDEN for $1 (bundle $bundle_sha recipe $recipe_hash config $config_hash)"
    return 0
  fi
  [ -f "$RUNNER_STATE/pilots/$bundle_sha-$recipe_hash" ] \
    || die 6 "no DONE pilot for bundle $bundle_sha and recipe $recipe_hash ($RUNNER_TRAIN_CONFIG without train.epochs)" "run runner/launch.sh pilot first, or pass --no-pilot-gate"
  step_epochs "$1" "$4"
}

# step_epochs JOB ANY_EPOCHS: the config's train.epochs = the E recorded for bundle + recipe.
step_epochs() {
  local e have
  e=$(recorded_epochs "$bundle_sha" "$recipe_hash")
  have=$(config_epochs "$RUNNER_TRAIN_CONFIG")
  [ -n "$e" ] && [ "$have" = "$e" ] && return 0
  if [ "$2" = 1 ]; then
    say "epoch check overridden (--any-epochs): train.epochs ${have:-unset}, recorded E ${e:-none}"
    log_event "epoch check OVERRIDDEN for $1 (train.epochs ${have:-unset}, recorded E ${e:-none}, recipe $recipe_hash)"
    return 0
  fi
  [ -n "$e" ] || die 6 "no epoch count E recorded for bundle $bundle_sha and recipe $recipe_hash" "record the pilot's: runner/epochs.sh from-pilot (or your own: runner/epochs.sh set E), or pass --any-epochs"
  die 6 "$RUNNER_TRAIN_CONFIG sets train.epochs ${have:-unset}, the recorded E is $e" "set \"epochs\": $e in its train section, or pass --any-epochs"
}

# step_ablation_cap: an ablation's rental must fit RUNNER_ABLATION_GPU_HOURS: the hours of every
# ablation rental in the ledger (closed: spent; open: at their most, ablation_hours_used) plus this
# job's most (RUNNER_HOURS_ABLATION x RUNNER_DEADLINE_FACTOR, where the reaper ends it). Exit 15.
step_ablation_cap() {
  local used mine
  [ -n "${recipe:-}" ] || return 0
  used=$(ablation_hours_used) || die 15 "cannot read the ablation hours from $LEDGER" "fix the ledger (runner/ledger.sh names bad rows)"
  mine=$(calc 'h * f' h="$RUNNER_HOURS_ABLATION" f="$RUNNER_DEADLINE_FACTOR") || die 15 "cannot compute this job's hours" "check RUNNER_HOURS_ABLATION and RUNNER_DEADLINE_FACTOR"
  is_number "$RUNNER_ABLATION_GPU_HOURS" || die 15 "RUNNER_ABLATION_GPU_HOURS=$RUNNER_ABLATION_GPU_HOURS is not a number" "set it in runner/config.sh"
  if ! awk -v u="$used" -v m="$mine" -v c="$RUNNER_ABLATION_GPU_HOURS" 'BEGIN { exit !(u + m <= c + 1e-9) }' </dev/null; then
    die 15 "ablation GPU-hour cap: $used h used or committed by ablation rentals + $mine h for $job > RUNNER_ABLATION_GPU_HOURS=$RUNNER_ABLATION_GPU_HOURS" "fewer recipes or folds, a lower RUNNER_HOURS_ABLATION, or raise RUNNER_ABLATION_GPU_HOURS deliberately"
  fi
  log_event "ablation cap: $used h + $mine h for $job <= $RUNNER_ABLATION_GPU_HOURS h"
}
