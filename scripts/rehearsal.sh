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

# stage NAME FUNCTION: run it in a subshell under set -e (a function called in an `||` list would
# run with -e off), print one summary line; the first failure ends the rehearsal. A stage says
# what it did (or why it failed) in $W/.detail.
stage() {
  local name=$1 t0 rc=0
  t0=$(date +%s)
  : >"$W/.detail"
  set +e
  (set -e; "$2") >>"$LOGS/$name.log" 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "rehearsal: FAILED at stage $name (exit $rc): $(cat "$W/.detail")" >&2
    tail -n 15 "$LOGS/$name.log" | sed 's/^/  | /' >&2
    exit 1
  fi
  printf 'rehearsal: %-12s ok  %4ds  %s\n' "$name" $(($(date +%s) - t0)) "$(cat "$W/.detail")"
}
say_detail() { printf '%s' "$1" >"$W/.detail"; }
fail() { say_detail "$1"; echo "rehearsal: $1" >&2; return 1; }

# wait_until SECONDS WHAT CMD...: poll CMD every 0.2 s.
wait_until() {
  local t=$1 what=$2 until
  shift 2
  until=$(($(date +%s) + t))
  while ! "$@"; do
    [ "$(date +%s)" -lt "$until" ] || { fail "$what: not after ${t}s"; return 1; }
    sleep 0.2
  done
}
cfg_sha() { sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1; }
run_dir() { printf '%s/bucket/hearsay/runs/rehearsal/%s/%s/%s' "$W" "$1" "$BUNDLE" "$(cfg_sha)"; }
archived_result() {   # JOB: the result of its newest archived record
  local d
  d=$(find "$RUNNER_STATE/archive" -maxdepth 1 -name "$1-*" 2>/dev/null | LC_ALL=C sort | tail -n 1)
  [ -n "$d" ] && cat "$d/result" 2>/dev/null
}
launch() { "$REPO/runner/launch.sh" --yes "$@" </dev/null 3>&-; }

# --- the stages ----------------------------------------------------------------------------------
do_corpus() {
  local opt=()
  [ "$short" = 0 ] || opt=(--inner-groups 5 --per-group 2 --holdout-groups 1 --test-groups 1 --probe-groups 1 --extra-rows 4 --min-s 1 --max-s 3 --bad-files 0)
  hearsay demo-data "$W/corpus" ${opt[@]+"${opt[@]}"}
  echo '{"holdout_families": ["phq"], "family_exclusion": {"0": ["smear"]}}' >"$W/splits.json"
  hearsay splits make "$W/corpus/manifest.csv" --out "$W/splits" --name demo --config "$W/splits.json"
  say_detail "$(($(wc -l <"$W/corpus/manifest.csv") - 1)) clips"
}
do_bundle() {
  hearsay bundle "$W/corpus/manifest.csv" "$W/bundle" --folds "$W/splits/demo.folds.json" \
    --max-fail-frac 0.02 --workers 2 --no-progress --codec-copies box
  [ -f "$W/bundle/codec_recipe.json" ] && [ ! -e "$W/bundle/codecs" ] || { fail "the bundle is not a codec recipe without copies"; return 1; }
  say_detail "tree-sha $(hearsay bundle info "$RUNNER_BUNDLE_META" --tree-sha), codec recipe $(jq -r '.codecs | keys | join(",")' "$W/bundle/codec_recipe.json"), no copies"
}
do_world() {
  (umask 077; printf '[store]\ntype = local\n' >"$RUNNER_RCLONE_CONF")
  # Training config of the whole campaign (its sha256 is what the pilot gate and the store path name):
  # the campaign's recipe, configs/m5.json (the amended augmentation), with three epochs, so that a
  # box killed after its first checkpoint has training left to resume.
  jq -c '.train = ((.train // {}) + {"epochs": 3, "batches_per_epoch": 6})' "$REPO/configs/m5.json" >"$RUNNER_TRAIN_CONFIG"
  "$REPO/tests/fakes/start_fake_vast.sh" "$W/url" "$W/fake.pid" --api-key "$API_KEY" --seed 7 \
    --set created_s=0.3 --set loading_s=0.5 --set initial_credit=1000 --log "$LOGS/fake_vast.requests"
  say_detail "recipe configs/m5.json ($(jq -r '.augment | "p_aug \(.p_aug), band-limit weight \(.w_bandlimit) (chosen), RawBoost \(.w_rawboost) of \(([.[]] | add) - .p_aug)"' "$RUNNER_TRAIN_CONFIG")), fake vast.ai at $(cat "$W/url"), store $RUNNER_STORE, campaign deadline $RUNNER_CAMPAIGN_DEADLINE"
}
do_bundle_put() {
  local got
  got=$("$REPO/runner/bundle_put.sh" "$W/bundle")
  [ "$got" = "$BUNDLE" ] || { fail "bundle_put printed $got, expected $BUNDLE"; return 1; }
  [ "$(cat "$W/bucket/hearsay/bundles/$BUNDLE/VERIFIED")" = "$BUNDLE" ] || { fail "no VERIFIED marker"; return 1; }
  [ ! -e "$W/bucket/hearsay/bundles/$BUNDLE/codecs" ] || { fail "codec copies were uploaded with the bundle"; return 1; }
  say_detail "bundles/$BUNDLE/VERIFIED, $(du -sb "$W/bucket/hearsay/bundles/$BUNDLE" | cut -f1) bytes, no codec copies"
}
do_reaper() {
  "$REPO/runner/reaper.sh" </dev/null >>"$LOGS/reaper.log" 2>&1 3>&- &
  echo $! >"$W/reaper.pid"
  sleep 1
  kill -0 "$(cat "$W/reaper.pid")" || { fail "the reaper exited at once (see $LOGS/reaper.log)"; return 1; }
  say_detail "pid $(cat "$W/reaper.pid")"
}
# why JOB: its last STATUS and REASON, as runner/status.sh --why shows them, on one line.
why() { "$REPO/runner/status.sh" --why "$1" 2>&1 | head -n 8 | tr '\n' ' '; }
# done_by_reaper JOB: its record archived by the reaper with result DONE.
done_by_reaper() { [ ! -d "$RUNNER_STATE/jobs/$1" ] && [ "$(archived_result "$1")" = DONE ]; }
gone() { [ ! -d "$RUNNER_STATE/jobs/$1" ] && [ -n "$(archived_result "$1")" ]; }
# --- pilot -> E, ablation (begin) ------------------------------------------------------------------
# The pilot trains the campaign's recipe for 1 epoch (its own config: train.json's recipe, another
# epoch count); the E rule turns its fold-4 readout into the finals' epoch count.
recipe_of() { bash -c '. "$1/runner/lib/common.sh" && . "$1/runner/lib/bundles.sh" && . "$1/runner/lib/recipe.sh" && recipe_hash "$2"' _ "$REPO" "$1"; }
do_pilot() {
  local rc=0 pdir readout
  launch fold 0 || rc=$?
  [ "$rc" -eq 6 ] || { fail "fold 0 before the pilot: exit $rc, expected 6 (no DONE pilot)"; return 1; }
  jq -c '.train.epochs = 1' "$RUNNER_TRAIN_CONFIG" >"$W/pilot.json"
  RUNNER_TRAIN_CONFIG=$W/pilot.json launch pilot
  wait_until 900 "pilot ended and destroyed" gone pilot
  done_by_reaper pilot || { fail "pilot ended $(archived_result pilot): $(RUNNER_TRAIN_CONFIG=$W/pilot.json why pilot)"; return 1; }
  pdir=$W/bucket/hearsay/runs/rehearsal/pilot/$BUNDLE/$(sha256sum "$W/pilot.json" | cut -d' ' -f1)
  readout=$(RUNNER_TRAIN_CONFIG=$W/pilot.json "$REPO/runner/status.sh" --why pilot | grep '^READOUT') \
    || { fail "runner/status.sh --why pilot shows no READOUT of the pilot"; return 1; }
  say_detail "fold 0 refused before it (exit 6); pilot $(jq -r '.steps' "$pdir/run_meta.json") steps, DONE; $readout"
}
do_pilot_gate() {
  [ -f "$RUNNER_STATE/pilots/$BUNDLE-$(recipe_of "$RUNNER_TRAIN_CONFIG")" ] || { fail "no pilot marker for bundle $BUNDLE recipe $(recipe_of "$RUNNER_TRAIN_CONFIG")"; return 1; }
  say_detail "pilots/$BUNDLE-$(recipe_of "$RUNNER_TRAIN_CONFIG" | cut -c1-12)… (the recipe: train.json without train.epochs)"
}
do_pilot_e() {
  local e rc=0
  e=$("$REPO/runner/epochs.sh" from-pilot --pilot-config "$W/pilot.json" --factor 3 | tail -n 1)
  [ "$e" = 3 ] || { fail "E from the 1-epoch pilot x 3 is $e, expected 3"; return 1; }
  RUNNER_TRAIN_CONFIG=$W/pilot.json launch fold 0 || rc=$?   # 1 epoch, not E
  [ "$rc" -eq 6 ] || { fail "a fold launch at 1 epoch with E = 3 recorded: exit $rc, expected 6"; return 1; }
  jq -c --argjson e "$e" '.train.epochs = $e' "$RUNNER_TRAIN_CONFIG" >"$W/train.e.json" && mv "$W/train.e.json" "$RUNNER_TRAIN_CONFIG"
  say_detail "E = $e ($(sed -n 2p "$RUNNER_STATE/epochs/$BUNDLE-$(recipe_of "$RUNNER_TRAIN_CONFIG")" | cut -c1-60)…); fold 0 at 1 epoch refused (exit 6)"
}
# Two tiny recipes on inner fold 0 from the one bundle: core only (the recipe's selection keeps the
# train_scope core rows) vs core + extra (every row the fold protocol allows), each one rental under
# RUNNER_ABLATION_GPU_HOURS (2 x 0.5 h x the deadline factor 1.5 = 1.5 h of 2 h), pinned, scored
# here, ranked by hearsay compare.
ABLATION_DECISION=""   # set once the ablation stage passed (assemble --ablation)
do_ablation() {
  local r dir=$W/models/ablation
  export RUNNER_RECIPES=$W/recipes
  mkdir -p "$RUNNER_RECIPES" "$dir"
  echo '{"train": {"epochs": 1, "batches_per_epoch": 6}, "selection": {"rules": [{"action": "keep", "train_scope": ["core"]}]}}' >"$RUNNER_RECIPES/core_only.json"
  echo '{"train": {"epochs": 1, "batches_per_epoch": 6}}' >"$RUNNER_RECIPES/core_extra.json"
  for r in core_only core_extra; do launch ablate "$r" fold 0 >"$LOGS/launch.ablate-$r.out" 2>"$LOGS/launch.ablate-$r.err"; done
  for r in core_only core_extra; do
    wait_until 900 "ablate-$r-fold0 ended and destroyed" gone "ablate-$r-fold0"
    done_by_reaper "ablate-$r-fold0" || { fail "ablate-$r-fold0 ended $(archived_result "ablate-$r-fold0")"; return 1; }
    "$REPO/runner/collect_ablation.sh" --score "$W/bundle" "$r" 0 "$dir/$r" >/dev/null
  done
  # the two runs trained on different rows of the same bundle: core_only without the extra rows
  local q='"\(.selection.rows_before) \(.selection.rows_after) \(.bundle_tree_sha)"' cb ca csha eb ea esha
  read -r cb ca csha <<<"$(jq -r "$q" "$dir/core_only/runs/fold0/run_meta.json")"
  read -r eb ea esha <<<"$(jq -r "$q" "$dir/core_extra/runs/fold0/run_meta.json")"
  [ "$csha" = "$BUNDLE" ] && [ "$esha" = "$BUNDLE" ] || { fail "the ablation runs trained on bundles $csha and $esha, not $BUNDLE"; return 1; }
  [ "$cb" = "$eb" ] && [ "$ea" = "$eb" ] && [ "$ca" -lt "$cb" ] || { fail "run_meta selection rows (before after): core_only $cb $ca, core_extra $eb $ea; expected core_only to drop the extra rows and core_extra none"; return 1; }
  hearsay compare --recipe "core_only=$dir/core_only/ablation_runs.json" --recipe "core_extra=$dir/core_extra/ablation_runs.json" \
    --bundle "$W/bundle" --json "$dir/decision.json" --markdown "$dir/decision.md"
  say_detail "2 recipes on fold 0 from bundle ${BUNDLE:0:12}… (core_only trained $ca of $cb rows, core_extra $ea), $(jq -r .n_clips "$dir/decision.json") clips; chosen $(jq -r .chosen "$dir/decision.json"), flips: $(jq -r '.flips | length' "$dir/decision.json"); $(grep -o 'ablation cap: [^<]*' "$RUNNER_STATE/runner.log" | tail -n 1)"
}
# The extra corpus's decision from the ablation's two recipes (core_only: without the extra rows,
# core_extra: with them), made before the campaign's recipe is piloted: that recipe cites it.
CORPUS_DECISION=""   # set once the extra stage passed (assemble --corpus-decision)
do_extra() {
  local dir=$W/models/ablation r sha
  echo '{"min_per_side": 8}' >"$W/corpus_probe.json"   # the demo corpus has 8 extra synthetic clips
  hearsay corpus-probe "$W/corpus/manifest.csv" --corpus train_scope=extra --against train_scope=core --label spoof \
    --recipe "$RUNNER_TRAIN_CONFIG" --config "$W/corpus_probe.json" --json "$dir/corpus_probe.json"
  # each recipe's probe scores are its fold box's (scores/fold0_probe.csv, brought back by
  # collect_ablation): nothing is scored here
  for r in core_only core_extra; do
    [ "$(jq -r '.config.device' "$dir/$r/scores/fold0_probe.csv.meta.json")" = cpu ] \
      || { fail "$r: no probe file scored on its box (scores/fold0_probe.csv)"; return 1; }
  done
  hearsay corpus-probe --drop-rule --bundle "$W/bundle" --config "$W/corpus_probe.json" \
    --without "$dir/core_only/ablation_runs.json" --with "$dir/core_extra/ablation_runs.json" \
    --probe-result "$dir/corpus_probe.json" --decision "$dir/corpus_decision.json"
  sha=$(sha256sum "$dir/corpus_decision.json" | cut -d' ' -f1)
  jq -c --arg sha "$sha" '.selection.corpus_decision = $sha' "$RUNNER_TRAIN_CONFIG" >"$W/train.d.json" && mv "$W/train.d.json" "$RUNNER_TRAIN_CONFIG"
  say_detail "$(jq -r '"\(.decision): \(.why); probe false alarms \(.drop_rule.fa_without) without, \(.drop_rule.fa_with) with"' "$dir/corpus_decision.json" | cut -c1-240); train.json cites ${sha:0:12}…"
}
# --- pilot -> E, ablation (end) --------------------------------------------------------------------
# JOBS (set once the bundle is built, below): the campaign's runs, fold0..fold<n-1> and full, n the
# bundle's fold file's n_folds as `hearsay pin keys` reads it.
do_fan_out() {
  local j pids="" rc=0 p
  start_killer fold2
  for j in $JOBS; do
    case $j in fold*) launch fold "${j#fold}" >"$LOGS/launch.$j.out" 2>"$LOGS/launch.$j.err" & ;;
      *) launch full >"$LOGS/launch.$j.out" 2>"$LOGS/launch.$j.err" & ;; esac
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || rc=$?; done
  for j in $JOBS; do cat "$LOGS/launch.$j.err"; done
  [ "$rc" -eq 0 ] || { fail "a launch of the fan-out failed (exit $rc; see $LOGS/launch.*.err)"; return 1; }
  say_detail "$(echo "$JOBS" | wc -w) launched at once, $(find "$W/boxes" -maxdepth 1 -name 'box-*' | wc -l) boxes so far"
}
# killer JOB: started before JOB is launched, in the background. Once JOB's first checkpoint is
# whole in the store, its box is killed as a vanished host would be: trainer and entry SIGKILLed
# (no trap, no STATUS), the instance destroyed. Writes $W/killed.JOB: "killed ID EPOCHS" or "late".
killer() {
  local job=$1 ck id port box
  ck="$(run_dir "$job")/checkpoints"
  while [ ! -e "$ck/epoch_0001.complete" ]; do
    if gone "$job"; then echo ended >"$W/killed.$job"; return 0; fi
    sleep 0.1
  done
  id=$(cat "$RUNNER_STATE/jobs/$job/instance")
  port=$(cut -d: -f2 "$RUNNER_STATE/jobs/$job/ssh")
  box=$W/boxes/box-$port/run
  if [ -e "$(run_dir "$job")/final" ]; then echo late >"$W/killed.$job"; return 0; fi
  kill -KILL "$(cat "$box/train.pid")" "$(cat "$box/entry.pid")"
  vastai destroy instance "$id" -y --raw >/dev/null
  echo "killed $id $(find "$ck" -maxdepth 1 -name '*.complete' | wc -l)" >"$W/killed.$job"
  echo "$(date -u +%T) killed $job's box (instance $id) with $(find "$ck" -mindepth 1 -maxdepth 1 | sed 's|.*/||' | LC_ALL=C sort | tr '\n' ' ')in the store"
}
start_killer() { killer "$1" >>"$LOGS/killer.log" 2>&1 </dev/null 3>&- & }
do_kill_resume() {
  local job=fold2 what
  wait_until 600 "fold2's box killed after its first checkpoint" test -s "$W/killed.$job"
  read -r what id n <"$W/killed.$job"
  case $what in
    killed) ;;
    ended) fail "fold2 ended $(archived_result fold2) before its first checkpoint: $(why fold2)"; return 1 ;;
    *) fail "fold2 finished before its box could be killed (raise batches_per_epoch)"; return 1 ;;
  esac
  wait_until 300 "the reaper records fold2's instance gone" gone "$job"
  launch ${GATE_OPT:+"$GATE_OPT"} fold 2
  say_detail "instance $id killed with $n complete checkpoint(s) in the store; fold2 relaunched"
}
do_all_done() {
  local j
  for j in $JOBS; do
    wait_until 900 "$j ended and destroyed" gone "$j"
    done_by_reaper "$j" || { fail "$j ended $(archived_result "$j"): $(why "$j")"; return 1; }
  done
  local from made pulled
  made=$(grep -l '^codecs: .*: made ' "$W"/boxes/box-*/run/codecs.log 2>/dev/null | wc -l)
  pulled=$(grep -l '^codecs: .*: verified ' "$W"/boxes/box-*/run/codecs.log 2>/dev/null | wc -l)
  [ "$made" -eq 1 ] || { fail "$made boxes made the codec copies, expected 1 (the others pull them)"; return 1; }
  [ -n "$(find "$W/bucket/hearsay/codecs/$BUNDLE" -name codec_pass.json 2>/dev/null)" ] || { fail "no codec copies stored at codecs/$BUNDLE/"; return 1; }
  from=$(jq -r .resumed_from_epoch "$(run_dir fold2)/run_meta.json")
  case $from in [1-9]*) ;; *) fail "fold2 did not resume (resumed_from_epoch $from)"; return 1 ;; esac
  say_detail "$(echo "$JOBS" | wc -w) DONE, each box destroyed by the reaper; codec copies made on 1 box, pulled by $pulled; fold2 resumed from epoch $from and completed $(jq -r .steps "$(run_dir fold2)/run_meta.json") of $(jq -r .total_steps "$(run_dir fold2)/run_meta.json") steps"
}
# The stored copies into this machine's bundle (what a rescore here would read), verified by the
# pass: their record, their files re-hashed; nothing encoded.
do_codecs_here() {
  local key
  key=$(hearsay bundle codecs "$W/bundle" --key)   # this machine's ffmpeg is the boxes' here
  rclone copy "$RUNNER_STORE/codecs/$BUNDLE/$key" "$W/bundle/codecs" --config "$RUNNER_RCLONE_CONF"
  hearsay bundle codecs "$W/bundle" --no-progress | tee "$W/.codecs_here"
  grep -q ': verified ' "$W/.codecs_here" || { fail "the stored copies did not verify here"; return 1; }
  say_detail "$(head -n 1 "$W/.codecs_here" | cut -c1-140)"
}
do_collect() {
  # the recipe's budget: 3 epochs x 6 batches on one CPU "GPU", grad_accum 1 (do_world's train.json)
  "$REPO/runner/collect.sh" --name rehearsal --min-steps 18 "$W/models/rehearsal"
  say_detail "$(jq -r '.runs | keys | join(" ")' "$W/models/rehearsal/final_runs.json") pinned"
}
do_assemble() {
  hearsay assemble --pinned "$W/models/rehearsal/final_runs.json" --bundle "$W/bundle" \
    --ledger "$LEDGER" --outputs "$W/outputs" --reports "$W/reports" ${ABLATION_DECISION:+--ablation "$ABLATION_DECISION"} \
    ${CORPUS_DECISION:+--corpus-decision "$CORPUS_DECISION"} --bar "$W/models/rehearsal/bar1" \
    --runner-log "$RUNNER_STATE/runner.log"
  assemble_used_box_scores
  gate_probe_measured
  gate_noise_and_runtime_read
  say_detail "$(($(wc -l <"$W/outputs/detector_scores/rehearsal.csv") - 1)) rows, F1-F6 passed (F6: parity A and B); rescored_here 0: every file from the boxes; gate $(jq -r .gate.outcome "$W/models/rehearsal/meta.json"), $(jq -r '.gate.bars[0].probe.why' "$W/models/rehearsal/meta.json"); margin against noise: $(jq -r .gate.noise.verdict "$W/models/rehearsal/meta.json"); G2 $(jq -r .runtime.G2.outcome "$W/models/rehearsal/meta.json")"
}
# gate_noise_and_runtime_read: the report states the margin against its noise (paired bootstrap, the
# 0.15 holdout band) and the runtime checks read from the ledger and the runner's event log.
gate_noise_and_runtime_read() {
  local meta=$W/models/rehearsal/meta.json report=$W/reports/rehearsal.md
  case $(jq -r .gate.noise.verdict "$meta") in
    "within noise" | "beyond noise") ;;
    *) fail "the gate's margin was not read against its noise: $(jq -c .gate.noise "$meta")"; return 1 ;;
  esac
  grep -q "^\*\*Margin against noise: $(jq -r .gate.noise.verdict "$meta")\*\*" "$report" \
    || { fail "$report has no 'Margin against noise' line"; return 1; }
  grep -q "^- G2 (boxes ended by the reaper): \*\*" "$report" || { fail "$report has no runtime checks"; return 1; }
  [ "$(jq -r .runtime.G2.event_log "$meta")" = read ] || { fail "the runner's event log was not read: $(jq -r .runtime.G2.event_log "$meta")"; return 1; }
}
do_export() {
  hearsay export onnx "$W/models/rehearsal/runs/full" --out "$EXPORT" --no-int8
  say_detail "parity A max |dlogit| $(jq -r '.parity_a.max_abs_dlogit' "$EXPORT/parity.json")"
}
do_deploy() {
  hearsay-score "$W/corpus/audio" -o "$W/deploy_scores.csv" --model "$EXPORT"
  say_detail "$(($(wc -l <"$W/deploy_scores.csv") - 1)) clips scored"
}
do_teardown() {
  kill "$(cat "$W/reaper.pid")" && rm -f "$W/reaper.pid"
  "$REPO/runner/teardown_check.sh"
  say_detail "0 instances listed"
}
do_ledger() {
  local rows created
  rows=$(awk -F, 'NR > 1 { print $1 }' "$LEDGER" | sort -u | wc -l | tr -d ' ')   # one rental per id (the ledger appends a closing row)
  created=$(curl -fsS "$VAST_URL/_control/state" | jq .created_total)
  "$REPO/runner/ledger.sh" "$LEDGER"
  [ "$rows" = "$created" ] || { fail "ledger rows $rows != instances created $created"; return 1; }
  say_detail "$rows rentals in the ledger = $created creations, all closed"
}

# --- box scoring and parity B: each box scores its run's rows after training, the full box records
# the parity B logits; the laptop compares ONNX with them and assembles without scoring a clip ---
EXPORT=$W/models/rehearsal/export   # where the pin's parity record points (runner/collect.sh)
# do_box_scores: every file of each finished job's rows is in its store folder, scored on its box
# in the trainer's precision (CPU fp32 here), its sidecar naming the run's own weights.
do_box_scores() {
  local j f n=0 want got weights
  for j in $JOBS; do
    weights=$(sha256sum "$(run_dir "$j")/final/model.safetensors" | cut -d' ' -f1)
    want=2   # inner_oof, probe
    [ "$j" != full ] || want=7   # holdout x5 (clean, augmented, codecs, test lengths, whole), test, probe
    got=0
    for f in "$(run_dir "$j")/scores/${j}_"*.csv; do
      [ -f "$f.meta.json" ] || { fail "$f: no sidecar"; return 1; }
      [ "$(jq -r '"\(.config.device) \(.config.precision) \(.weights_sha256)"' "$f.meta.json")" = "cpu fp32 $weights" ] \
        || { fail "$f.meta.json: not scored on its box with the run's weights ($(jq -c .config "$f.meta.json"))"; return 1; }
      got=$((got + 1))
    done
    [ "$got" -eq "$want" ] || { fail "$j: $got score file(s) in the store, expected $want"; return 1; }
    n=$((n + got))
  done
  say_detail "$n file(s) scored on the boxes (cpu fp32, the trainer's): $(find "$(run_dir "${JOBS%% *}")/scores" -maxdepth 1 -name '*.csv' | sed 's|.*/||' | LC_ALL=C sort | tr '\n' ' ')…$(probe_line)"
}
# probe_line: the full box's probe file, when this rehearsal ran the full job (its rows, set sha).
probe_line() {
  local f
  f="$(run_dir full)/scores/full_probe.csv.meta.json"
  [ -f "$f" ] || return 0
  jq -r '"; probe set: \(.n_rows) bona fide probe clips, set sha256 \(.set_sha256[:12])…"' "$f"
}
# do_bar: the stand-in earlier detector's scores and meta.json, then hearsay bar, as an operator
# makes the bar from an earlier detector's score file (RUNBOOK, "The probe set").
PROBE_CSV=$W/models/rehearsal/scores/full_probe.csv   # the full box's, brought back by collect
do_bar() {
  # shellcheck disable=SC2016  # the Python line is single-quoted on purpose
  python -c 'import sys; from hearsay import demo; demo.write_length_detector(*sys.argv[1:])' \
    "$W/bundle" "$PROBE_CSV" "$W/earlier/length"
  hearsay bar --from "$W/earlier" --pick "train=none: clip duration" --bundle "$W/bundle" \
    --probe "$PROBE_CSV" --out "$W/models/rehearsal/bar1"
  [ "$(jq -r .probe.set_sha256 "$W/models/rehearsal/bar1/meta.json")" = "$(jq -r .set_sha256 "$PROBE_CSV.meta.json")" ] \
    || { fail "the bar's probe record is of other clips than the full box's probe set"; return 1; }
  say_detail "bar1 picked by train=none: clip duration; its probe false-alarm rate $(jq -r .probe.false_alarm_rate "$W/models/rehearsal/bar1/meta.json") on the box's probe set"
}
# gate_probe_measured: the gate read the full box's probe file and measured it (pass or fail).
gate_probe_measured() {
  local meta=$W/models/rehearsal/meta.json
  [ "$(jq -r .probe.file "$meta")" = "$PROBE_CSV" ] || { fail "the gate read the probe $(jq -r .probe.file "$meta"), not the full box's $PROBE_CSV"; return 1; }
  case $(jq -r '.gate.bars[0].probe.outcome' "$meta") in
    pass | fail) ;;
    *) fail "the gate's probe check: $(jq -r '.gate.bars[0].probe.why' "$meta")"; return 1 ;;
  esac
}
do_parity() {
  hearsay parity "$EXPORT" --box-logits "$W/models/rehearsal/scores/full_parity_logits.json" --bundle "$W/bundle"
  [ "$(jq -r .parity_b.passed "$EXPORT/parity.json")" = true ] || { fail "parity B did not pass"; return 1; }
  say_detail "$(jq -r '.parity_b | "\(.clips) test clips, ONNX fp32 here vs the box (\(.box_device) \(.box_precision)): spearman \(.box_vs_ort.spearman), max |dlogit| \(.box_vs_ort.max_abs_dlogit)"' "$EXPORT/parity.json")"
}
# assemble_used_box_scores: assemble scored no clip here, and its F6 read the parity record.
assemble_used_box_scores() {
  local meta=$W/models/rehearsal/meta.json
  [ "$(jq -r .rescored_here "$meta")" = 0 ] || { fail "assemble re-scored $(jq -r .rescored_here "$meta") rows here: $(jq -c .scoring.files_scored_here "$meta")"; return 1; }
  [ "$(jq -r '.checks | index("F6") != null' "$meta")" = true ] || { fail "F6 did not run"; return 1; }
}
# --- end box scoring and parity B ---

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
