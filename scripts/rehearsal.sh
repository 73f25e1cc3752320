#!/usr/bin/env bash
# Usage: scripts/rehearsal.sh [--short] [WORK_DIR]
# Summary: the whole campaign rehearsed on this machine: the real runner driving boxes that run the real trainer
#
# Only the vast.ai service and ssh are stood in for: tests/fakes/fake_vast.py on loopback, driven
# by the real vastai CLI, and tests/runner/bin/fake_ssh.sh, which runs each "box" as a local
# sandbox from an empty environment: its own folder, and a file standing for the container's first
# process holding the image's Env (nix/trainer-image.nix, adjusted for this machine's paths:
# tests/runner/bin/box_environ.sh) and the instance's CONTAINER_ID/CONTAINER_API_KEY, from which
# runner/box/entry.sh imports what it needs. Everything else is real: runner/launch.sh (its
# config check included), runner/reaper.sh, runner/box/entry.sh, the image's smoke check
# (container/trainer/smoke_check.sh in its CPU mode: HEARSAY_SMOKE_DEVICE=cpu, every check but
# `cuda`, which needs a GPU), `hearsay train --cpu-smoke` (the tiny model), rclone on a local
# remote as the store.
#
# Stages (one summary line each; the first that fails is named and ends the run):
#   corpus, bundle     hearsay demo-data, splits make, bundle (--codec-copies box: the clips and
#                      the codec recipe, no copies)
#   bundle_put         runner/bundle_put.sh: into the store, verified by tree-sha, without copies
#   reaper             runner/reaper.sh started (one for the whole campaign)
#   ablation           two tiny recipes from the one bundle (RUNNER_RECIPES: core_only, whose
#                      selection keeps train_scope core rows, and core_extra, every row) on inner
#                      fold 0 under the GPU-hour cap; each run's run_meta "selection" counts are
#                      checked (core_only drops the extra rows, core_extra none);
#                      runner/collect_ablation.sh pins each (scored here), hearsay compare ranks
#                      them: models/ablation/decision.json (assemble --ablation)
#   extra              the extra corpus's decision before the campaign's recipe is piloted: hearsay
#                      corpus-probe (the extra synthetic rows against the core ones, on the recipe's
#                      augmentation, with the per-source landing), each ablation recipe's fold-0
#                      box scored the probe set (fold0_probe.csv, collected with its run), the drop
#                      rule at each recipe's own out-of-fold threshold, the decision file
#                      models/ablation/corpus_decision.json; train.json cites its sha256
#                      (selection.corpus_decision; assemble --corpus-decision)
#   pilot, pilot_gate  a fold launch is refused before the pilot; the pilot (1 epoch, its own config
#                      of the campaign's recipe) reaches DONE and the reaper's destroy opens the gate
#                      for this bundle + recipe
#   pilot_e            runner/epochs.sh from-pilot applies the E rule (--factor 3 on the 1-epoch
#                      pilot: E = 3); a fold launch trained for another epoch count is refused;
#                      train.json gets E
#   fan_out            the bundle's fold runs (fold0..fold<n-1>, n its fold file's n_folds) and full
#                      launched at once, at E
#   kill_resume        fold2's box killed after its first checkpoint (the host vanished: processes
#                      killed, instance destroyed), the job relaunched: it resumes from the store
#   all_done           every job DONE, its box destroyed by the reaper; the codec copies were made
#                      by exactly one box (hearsay bundle codecs at setup) and stored at
#                      codecs/<tree_sha>/<key>/; every other box pulled and verified them
#   codecs_here        those stored copies pulled into this machine's bundle and verified
#                      (hearsay bundle codecs: nothing encoded), for the stages that read it
#   collect            runner/collect.sh: the six runs and their boxes' scores back, final_runs.json
#                      written with the parity record (parity A + B required)
#   box_scores         every run's rows were scored on its box after training (hearsay score-run,
#                      the trainer's CPU fp32 here), in the store with sidecars naming its weights;
#                      each box's include the probe set (<key>_probe.csv: fold probe's bona
#                      fide clips, with its set sha256)
#   export             hearsay export onnx into models/<stamp>/export (parity A)
#   parity             hearsay parity --box-logits: ONNX fp32 here vs the full box's logits (B)
#   bar                a stand-in earlier detector (clip length: hearsay.demo.write_length_detector)
#                      on our inner, holdout and probe clips; hearsay bar picks it by its train
#                      field and writes the bar folder with its own probe record
#   assemble           hearsay assemble --pinned --bar (F1-F6, F6 on the parity record), reusing
#                      every box file: meta.json "rescored_here" must be 0; the gate's probe check
#                      reads the full box's probe file and is measured (pass or fail); the
#                      ablation's decision and the extra corpus's (--corpus-decision: the gate's
#                      extra-corpus line)
#   deploy             hearsay-score on the corpus audio with the exported model
#   teardown           reaper stopped; runner/teardown_check.sh exits 0
#   ledger             ledger rows = instances the API created, every row closed
# --short (what make test runs): a small corpus, then bundle_put, reaper, one job (fold2, pilot
# gate overridden) killed and resumed, all_done, codecs_here, box_scores, teardown, ledger.
#
# WORK_DIR (default: a new folder under $TMPDIR) keeps everything, logs included (WORK_DIR/logs).
# Exit codes: 0 every stage passed; 1 a stage failed (named on stderr); 2 usage.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
short=0 W=""
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
    --short) short=1 ;;
    -*) echo "rehearsal: unknown option $1 (see scripts/rehearsal.sh --help)" >&2; exit 2 ;;
    *) W=$1 ;;
  esac
  shift
done
[ -n "$W" ] || W=$(mktemp -d "${TMPDIR:-/tmp}/rehearsal.XXXXXX")
mkdir -p "$W/logs"
W=$(cd "$W" && pwd)
export PATH="$REPO/.venv/bin:$PATH"
t_all=$(date +%s)
LOGS=$W/logs

# --- the stand-ins and the runner's settings (as tests/runner/helpers.bash sets them) ---------------
API_KEY="vastkey-rehearsal-$$"
export HOME=$W/home XDG_CONFIG_HOME=$W/home/.config XDG_STATE_HOME=$W/home/.state XDG_CACHE_HOME=$W/home/.cache
export VAST_API_KEY=$API_KEY VASTAI_NO_UPDATE_CHECK=1
export RUNNER_STATE=$W/state LEDGER=$W/ledger.csv FAKE_BOX_ROOT=$W/boxes
export RUNNER_SSH="$REPO/tests/runner/bin/fake_ssh.sh" RUNNER_RCLONE=rclone
export RUNNER_RCLONE_CONF=$W/rclone.conf RUNNER_STORE="store:$W/bucket/hearsay"
export RUNNER_OPERATOR=rehearsal   # its run folders: RUNNER_STORE/runs/rehearsal/JOB
export RUNNER_IMAGE="registry.invalid/hearsay-trainer@sha256:rehearsal-only"
export RUNNER_OFFER_QUERY="num_gpus=1" RUNNER_CLI_TIMEOUT_S=60
export RUNNER_POLL_S=0.3 RUNNER_CONFIRM_WAIT_S=0.2 RUNNER_CONFIRM_CHECKS=5 RUNNER_DESTROY_TRIES=3
export RUNNER_BOOT_DEADLINE_S=120 RUNNER_CHAIN_DEADLINE_S=600 RUNNER_LABEL_LAG_S=5 RUNNER_SSH_TIMEOUT_S=60
export RUNNER_REAPER_POLL_S=0.5 RUNNER_REAPER_MAX_BACKOFF_S=2 RUNNER_REAPER_MODE=refuse   # the reaper stage starts it
export RUNNER_BOX_TRAIN="hearsay train --cpu-smoke" HEARSAY_PUSH_WAIT_S=0.2 HEARSAY_BOX_WAIT_S=120
# the campaign's hard stop, as an operator sets it (an absolute UTC time): three hours on, so every
# launch below runs under it and each job's deadline is clamped to it (runner/lib/campaign.sh)
export RUNNER_CAMPAIGN_DEADLINE="${RUNNER_CAMPAIGN_DEADLINE:-$(date -u -d '+3 hours' +%Y-%m-%dT%H:%M:%SZ)}"
# What reaches a box besides the image's Env and vast.ai's variables: the CPU mode of the image's
# smoke check (as a test image would set it), and in the ssh session the fake API's address and
# the short timings. The chain deadline covers the smoke check (about a minute here).
export HEARSAY_SMOKE_DEVICE=cpu HEARSAY_SMOKE_ONLY="weights ffmpeg rclone hearsay versions train"
export FAKE_IMAGE_EXTRA="HEARSAY_SMOKE_DEVICE HEARSAY_SMOKE_ONLY"
export FAKE_SSH_PASS="VAST_URL HEARSAY_PUSH_WAIT_S HEARSAY_BOX_WAIT_S PYTHONPATH"   # PYTHONPATH: when set
export RUNNER_BUNDLE_META=$W/bundle/bundle_meta.json RUNNER_TRAIN_CONFIG=$W/train.json
unset RUNNER_DEBUG RUNNER_CONFIG HEARSAY_SMOKE_CHECK
mkdir -p "$HOME" "$RUNNER_STATE" "$FAKE_BOX_ROOT" "$W/bucket"

cleanup() {
  local p
  set +e   # every process this script started is stopped, even when some are already gone
  [ -f "$W/reaper.pid" ] && kill "$(cat "$W/reaper.pid")" 2>/dev/null
  for p in "$W"/boxes/*/run/train.pid "$W"/boxes/*/run/entry.pid "$W/fake.pid"; do
    [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null
  done
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

ABLATION_DECISION=""   # set once the ablation stage passed (assemble --ablation)
CORPUS_DECISION=""   # set once the extra stage passed (assemble --corpus-decision)
# The stages live in scripts/lib/rehearsal_*.sh (the harness, then the world, the campaign and
# its results, in the order they run); this file sets the stand-ins and runs them in order.
# shellcheck source=scripts/lib/rehearsal_harness.sh
. "$REPO/scripts/lib/rehearsal_harness.sh"
# shellcheck source=scripts/lib/rehearsal_world.sh
. "$REPO/scripts/lib/rehearsal_world.sh"
# shellcheck source=scripts/lib/rehearsal_campaign.sh
. "$REPO/scripts/lib/rehearsal_campaign.sh"
# shellcheck source=scripts/lib/rehearsal_results.sh
. "$REPO/scripts/lib/rehearsal_results.sh"

stage corpus do_corpus
stage bundle do_bundle
BUNDLE=$(hearsay bundle info "$RUNNER_BUNDLE_META" --tree-sha)
JOBS=$(hearsay pin keys "$RUNNER_BUNDLE_META" | tr '\n' ' ')
stage world do_world
VAST_URL=$(cat "$W/url")
export VAST_URL
stage bundle_put do_bundle_put
stage reaper do_reaper
if [ "$short" = 1 ]; then
  JOBS=fold2 GATE_OPT=--no-pilot-gate
  do_fan_out() {
    start_killer fold2
    launch --no-pilot-gate fold 2 2>"$LOGS/launch.fold2.err" || { fail "launch fold 2 failed"; return 1; }
    say_detail "fold2 launched (pilot gate overridden)"
  }
  stage launch do_fan_out
  stage kill_resume do_kill_resume
  stage all_done do_all_done
  stage codecs_here do_codecs_here
  stage box_scores do_box_scores
else
  stage ablation do_ablation         # pilot -> E, ablation (begin)
  ABLATION_DECISION=$W/models/ablation/decision.json   # set in the stage's subshell; here too
  stage extra do_extra               # the recipe cites the extra corpus's decision, then its pilot
  CORPUS_DECISION=$W/models/ablation/corpus_decision.json
  stage pilot do_pilot
  stage pilot_gate do_pilot_gate
  stage pilot_e do_pilot_e           # (end)
  stage fan_out do_fan_out
  stage kill_resume do_kill_resume
  stage all_done do_all_done
  stage codecs_here do_codecs_here
  stage collect do_collect
  stage box_scores do_box_scores
  stage export do_export
  stage parity do_parity
  stage bar do_bar
  stage assemble do_assemble
  stage deploy do_deploy
fi
stage teardown do_teardown
stage ledger do_ledger
echo "rehearsal: every stage passed in $(($(date +%s) - t_all)) s (work dir $W)"
