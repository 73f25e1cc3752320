#!/usr/bin/env bash
# Usage: runner/launch.sh [--yes] [--no-pilot-gate] [--any-epochs] [--no-heartbeat] pilot | full | fold N | probe | ablate RECIPE fold N
# Summary: rent one GPU box for one training job, start its chain, and never leave it billing
#
# In order, under one launch lock shared by every job (concurrent launches wait their turn, up to
# RUNNER_LAUNCH_WAIT_S): refuse while the job's previous instance is still listed; budget guard
# (credit from `show user --raw` must cover estimate + commitments + RUNNER_MARGIN_USD, where every
# job of ours counts at its $/h x hours left to its deadline, an overdue one at
# RUNNER_UNKNOWN_COMMIT_H, another operator's listed box at its $/h x hours left to its label's
# DEADLINE, and any other unknown listed instance at RUNNER_UNKNOWN_COMMIT_H); choose an offer
# (RUNNER_OFFER_QUERY, only hosts whose driver runs the CUDA of RUNNER_LOCK's torch: cuda_max_good,
# and none above the price ceiling RUNNER_OFFER_MAX_DPH: dph_total; the offer's GPU, vCPUs, driver
# CUDA and $/h go into its ledger row);
# ask for the go-ahead (offer, $/h, estimate, credit) unless --yes; create the instance labelled
# PREFIX.OPERATOR:JOB:GEN:DEADLINE (RUNNER_STATE/operator, one per state folder), its on-start command
# the box's own guard (runner/box/onstart.sh: it ends a box no chain starts on by HEARSAY_PROVISION_BY,
# or past HEARSAY_DEADLINE, laptop or not); persist its id and
# the ledger row at once (the launch lock is released here); wait
# for it to run; send the store's
# credentials over ssh stdin into a mode-600 rclone config on the box, then RUNNER_TRAIN_CONFIG's exact
# bytes (the ones hashed for the pilot gate) as the box's train.json; start the chain; write
# PROVISIONED only once the box reports the chain running. Any failure destroys the box and confirms
# its absence; a box that cannot be confirmed gone is recorded ORPHAN for runner/reaper.sh.
#
#   --yes            scripted go-ahead (no prompt)
#   --no-pilot-gate  let fold/full run without a DONE pilot of the same bundle + recipe, and without
#                    checking the epoch count E (logged)
#   --any-epochs     let fold/full run with a train.epochs other than the E recorded for the recipe
#                    (runner/epochs.sh; logged)
#   --no-heartbeat   rent RUNNER_IMAGE although it does not write HEARTBEAT (RUNNER_IMAGE_BEATS=no: an
#                    image built before it); its box is judged by STATUS and deadline only, so a chain
#                    killed without its trap bills until its deadline. Without it such an image is refused
#
# The box contract (runner/lib/contract.sh): written into jobs/JOB/contract just before the create
# (store, generation, deadlines, the final push's grace, heartbeat period and limit, whether the image
# beats) and, once the create answers, the $/h the instance bills; the box gets the same numbers
# (its create's environment, then job.env), and every judge of the box reads them there.
#
# The pilot gate keys on the recipe: RUNNER_TRAIN_CONFIG without its step budget (train.epochs;
# runner/lib/recipe.sh), so a pilot of 1 epoch clears finals of 3; and a fold/full config must set
# train.epochs to the E recorded for its bundle + recipe (runner/epochs.sh from-pilot | set E).
#
# The campaign's hard stop (RUNNER_CAMPAIGN_DEADLINE, runner/lib/campaign.sh): past it nothing is
# rented (exit 16); before it, the job's deadline is clamped to it (its record, its label and the
# box's HEARSAY_DEADLINE), so the box stops its trainer, pushes its checkpoints and ends itself there.
#
# ablate RECIPE fold N: job ablate-RECIPE-foldN trains RUNNER_RECIPES/RECIPE.json (a training config,
# RECIPE of [a-z0-9_]) on inner fold N, validating on fold N (the box runs a fold job; its store
# folder is runs/ablate-RECIPE-foldN/..., apart from the finals'). No pilot gate; instead, under the
# launch lock, the GPU-hours of every ablation rental in the ledger (closed: their hours; open: their
# most, to the deadline) + this job's most (RUNNER_HOURS_ABLATION x RUNNER_DEADLINE_FACTOR) must fit
# RUNNER_ABLATION_GPU_HOURS, else exit 15 before anything is rented.
#
# Settings: runner/config.sh (each overridable by an environment variable of the same name).
# Prints the instance id on stdout when PROVISIONED.
# Before anything is rented, the trainer the box runs (RUNNER_BOX_TRAIN) checks RUNNER_TRAIN_CONFIG
# on this machine (--check-config); a box that fails at start has its REASON in the error.
# Exit codes: 0 provisioned; 1 failed, box confirmed destroyed (its REASON said), or nothing can
#   be written under RUNNER_STATE before the create (a full disk: nothing rented); 2 usage (a fold
#   N that is not one of the bundle's folds 0..n_folds-1, its fold file's n_folds: `hearsay bundle
#   info RUNNER_BUNDLE_META --n-folds`, among them), the
#   trainer refuses the training config (its message said, nothing rented), no temp folder can be
#   made under TMPDIR, or RUNNER_IMAGE does not beat (RUNNER_IMAGE_BEATS=no) without --no-heartbeat; 3 budget refused or not
#   measurable; 4 the job's previous instance is still listed (or another launch of it is running),
#   or its run folder shows a live generation this RUNNER_STATE never launched (another operator's);
#   5 cannot confirm the previous instance is gone (listing failed or cannot vouch, its label not
#   settled, or a create that gave no id still inside RUNNER_LABEL_LAG_S); 6 no go-ahead or no
#   DONE pilot; 7 ORPHAN: a box could not be confirmed destroyed; 8 no offer matches
#   (RUNNER_OFFER_QUERY, cuda_max_good >= the CUDA of RUNNER_LOCK's nvidia-cuda-runtime pin and
#   dph_total <= RUNNER_OFFER_MAX_DPH), that lock has no such pin, or RUNNER_OFFER_MAX_DPH is not
#   a number;
#   10 missing dependency or
#   store credentials (RUNNER_RCLONE_CONF);
#   11 no API key (or a key file readable by others); 12 remote path refused; 13 no reaper running
#   and none could be started (RUNNER_REAPER_MODE); 14 the store holds no verified copy of the
#   bundle (RUNNER_STORE/bundles/<tree_sha>/VERIFIED: runner/bundle_put.sh BUNDLE_DIR), checked
#   before any offer is searched; 15 the ablation GPU-hour cap (RUNNER_ABLATION_GPU_HOURS) would be
#   passed, or the ledger's ablation hours cannot be read; 16 the campaign deadline
#   (RUNNER_CAMPAIGN_DEADLINE) has passed: nothing rented (checked first, and again just before the
#   create). A malformed RUNNER_CAMPAIGN_DEADLINE is exit 2. 17 the new instance bills above
#   RUNNER_OFFER_MAX_DPH (its own dph_total read back after the create: the search's price is not
#   trusted), or its $/h cannot be read: the box is destroyed, its ledger row closed with the reason
#   (PRICE_CEILING, PRICE_UNKNOWN).
set -euo pipefail
export RUNNER_SCRIPT=launch
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
# shellcheck source=runner/lib/ledger.sh
. "$RUNNER_ROOT/lib/ledger.sh"
# shellcheck source=runner/lib/vast.sh
. "$RUNNER_ROOT/lib/vast.sh"
# shellcheck source=runner/lib/cuda.sh
. "$RUNNER_ROOT/lib/cuda.sh"
# shellcheck source=runner/lib/store.sh
. "$RUNNER_ROOT/lib/store.sh"
# shellcheck source=runner/lib/box.sh
. "$RUNNER_ROOT/lib/box.sh"
# shellcheck source=runner/lib/teardown.sh
. "$RUNNER_ROOT/lib/teardown.sh"
# shellcheck source=runner/lib/campaign.sh
. "$RUNNER_ROOT/lib/campaign.sh"
# shellcheck source=runner/lib/heartbeat.sh
. "$RUNNER_ROOT/lib/heartbeat.sh"
# shellcheck source=runner/lib/judge.sh
. "$RUNNER_ROOT/lib/judge.sh"
# shellcheck source=runner/lib/launch_steps.sh
. "$RUNNER_ROOT/lib/launch_steps.sh"
# shellcheck source=runner/lib/launch_budget.sh
. "$RUNNER_ROOT/lib/launch_budget.sh"
# shellcheck source=runner/lib/launch_create.sh
. "$RUNNER_ROOT/lib/launch_create.sh"
# shellcheck source=runner/lib/launch_provision.sh
. "$RUNNER_ROOT/lib/launch_provision.sh"

yes=0 gate=1 any_epochs=0 no_beat=0 kind="" fold="" recipe=""
# mixed WORD: a second job word (fold 3 pilot, fold 3 fold 4) is a usage error, never a merged job.
mixed() { die 2 "one job per launch: got ${recipe:+ablate $recipe }$kind${fold:+ $fold} and then $1" "runner/launch.sh pilot | full | fold N | probe | ablate RECIPE fold N"; }
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage_from "$0"; exit 0 ;;
    --yes) yes=1 ;;
    --no-pilot-gate) gate=0 ;;
    --any-epochs) any_epochs=1 ;;
    --no-heartbeat) no_beat=1 ;;
    pilot | full | probe) [ -z "$kind$recipe" ] || mixed "$1"; kind=$1 ;;
    ablate)
      [ -z "$kind$recipe" ] || mixed "$1"
      recipe=${2:-}
      case $recipe in '' | *[!a-z0-9_]*) die 2 "ablate needs a recipe name of a-z, 0-9 and _" "runner/launch.sh ablate core_only fold 0" ;; esac
      [ "${3:-}" = fold ] || die 2 "ablate $recipe needs an inner fold" "runner/launch.sh ablate $recipe fold 0"
      shift ;;
    fold)
      [ -z "$kind" ] || mixed "$1"
      kind="fold"
      fold=${2:-}
      case $fold in '' | *[!0-9]*) die 2 "fold needs a number: one of the bundle's folds, 0..n_folds-1" "runner/launch.sh fold 3" ;; esac
      shift ;;
    *) die 2 "unknown argument: $1" "see runner/launch.sh --help" ;;
  esac
  shift
done
[ -n "$kind" ] || die 2 "no job given" "runner/launch.sh pilot | full | fold N | probe | ablate RECIPE fold N"
job=$kind$fold
if [ -n "$recipe" ]; then   # the recipe's own config and job name: never a final's store folder
  RUNNER_TRAIN_CONFIG=$RUNNER_RECIPES/$recipe.json
  [ -r "$RUNNER_TRAIN_CONFIG" ] || die 2 "no recipe $recipe: $RUNNER_TRAIN_CONFIG is missing" "write its training config there (RUNNER_RECIPES, docs/RUNBOOK.md)"
  job=ablate-$recipe-$job
fi
# stdout is for the instance id only. Closed, it is reopened on /dev/null (said), so no later command
# that writes to it can fail and be mistaken for a refusal; the id is in the record either way.
if ! (exec 9>&1) 2>/dev/null; then   # duplicating fd 1 fails only when it is closed
  exec >/dev/null
  say "stdout is closed: the instance id will only be in runner/status.sh"
fi

need jq awk mktemp
[ -n "${RUNNER_VASTAI%% *}" ] && need "${RUNNER_VASTAI%% *}"
hs=${RUNNER_HEARSAY:-hearsay}   # word-split: the hearsay command line of this machine
[ "$kind" = probe ] || need "${hs%% *}"   # it reads the bundle meta (a probe trains on none)
[ -z "$fold" ] || step_fold_in_bundle "$fold"   # exit 2: not one of the bundle's folds
key_guard || exit 11
umask 077
mkdir -p "$RUNNER_STATE"
guard_path "$(store_job_path "$job")" >/dev/null || exit 12
store_conf_guard || exit 10
case $RUNNER_IMAGE in PLACEHOLDER*) die 2 "RUNNER_IMAGE is the placeholder $RUNNER_IMAGE" "set it to the trainer image's digest (docs/RUNBOOK.md)" ;; esac
campaign_refuse_after                     # exit 16 past RUNNER_CAMPAIGN_DEADLINE (2: malformed)
case $RUNNER_IMAGE_BEATS:$no_beat in
  yes:0) ;;
  no:1 | yes:1) RUNNER_IMAGE_BEATS=no; say "--no-heartbeat: job $job is judged by its STATUS and deadline only (no heartbeat)" ;;
  no:0) die 2 "RUNNER_IMAGE does not write HEARTBEAT (RUNNER_IMAGE_BEATS=no): a chain killed without its trap would bill until its deadline" "use an image that beats, or pass --no-heartbeat to rent it so deliberately" ;;
  *) die 2 "RUNNER_IMAGE_BEATS=$RUNNER_IMAGE_BEATS is neither yes nor no" "say in runner/config.sh whether RUNNER_IMAGE writes HEARTBEAT" ;;
esac

# Every temp file of this launch (the account's listings among them) lives in one folder of its own,
# removed on every exit; the reaper it may start keeps the caller's TMPDIR (user_tmp).
user_tmp=${TMPDIR:-}
launch_tmp=$(mktemp -d "${TMPDIR:-/tmp}/runner-launch.XXXXXX" 2>/dev/null) \
  || die 2 "cannot make a temp folder under ${TMPDIR:-/tmp}" "set TMPDIR to a writable folder"
export TMPDIR=$launch_tmp
trap 'rm -rf "$launch_tmp"' EXIT

# One launcher per job name at a time; and one launch at a time between the listing the budget reads
# and the persisted id of its create (budget_lock), so a second launch counts the first one's box.
launch_lock="$RUNNER_STATE/launch.$job.lock"
budget_lock="$RUNNER_STATE/launch.lock"
# lock_take's 2: its owner could not be written (a full state disk), not a lock another holds
state_full() { die 1 "nothing can be written under RUNNER_STATE=$RUNNER_STATE (disk full?): nothing was rented" "free space there, then launch again"; }
lock_take "$launch_lock" 1 || { [ $? != 2 ] || state_full; die 4 "another launch of $job is running" "wait for it, or check runner/status.sh"; }
trap 'lock_drop "$budget_lock"; lock_drop "$launch_lock"; rm -rf "$launch_tmp"' EXIT
lock_take "$budget_lock" $((RUNNER_LAUNCH_WAIT_S * 10)) \
  || { [ $? != 2 ] || state_full; die 4 "another launch held the budget lock for over RUNNER_LAUNCH_WAIT_S=$RUNNER_LAUNCH_WAIT_S s" "wait for it (runner/status.sh), then launch again"; }

step_previous "$job"                      # exit 4/5 unless the old record is cleared
step_run_folder "$job"                    # exit 4: another live generation trains in its run folder
step_pilot_gate "$job" "$kind" "$gate" "$any_epochs"  # exit 6: fold/full without a DONE pilot or E
step_ablation_cap                         # exit 15: an ablation past RUNNER_ABLATION_GPU_HOURS
step_budget "$kind"                       # sets offer dph credit estimate; exit 3/8
step_go_ahead "$yes"                      # exit 6 without a yes
step_reaper                               # a live reaper, or one started; exit 13
step_create "$job" "$kind" "$fold"        # record + create + id + ledger row; sets instance
step_wait_running "$job"                  # sets host port
step_provision "$job"                     # secrets, chain start, CHAIN confirmed
rec_set "$job" state PROVISIONED
log_event "job $job PROVISIONED on instance $instance (gen $(rec_get "$job" gen))"
say "job $job PROVISIONED on instance $instance; runner/reaper.sh ends it at DONE, FAIL or its deadline"
printf '%s\n' "$instance" 2>/dev/null || say "cannot print instance $instance on stdout; it is PROVISIONED all the same (runner/status.sh)"
