#!/usr/bin/env bash
# Usage: runner/collect.sh [--name NAME] [--no-parity] --min-steps N OUT_DIR
# Summary: bring the finished runs (fold0..fold<n-1>, full) back from the store and pin them for hearsay assemble
#
# The runs are those of this bundle and training config (RUNNER_BUNDLE_META, RUNNER_TRAIN_CONFIG, as
# runner/launch.sh uses them): JOB's run folder/<tree_sha>/<sha256 of train.json>/, JOB each
# of `hearsay pin keys RUNNER_BUNDLE_META` (fold0..fold<n-1> and full, n the fold file's n_folds).
# (the run folder: its record's contract while it has one, else RUNNER_STORE/runs/RUNNER_OPERATOR/JOB:
# collect from another machine with the campaign's RUNNER_OPERATOR). For each job its final/, run_meta.json and config.json are copied to OUT_DIR/runs/JOB/
# (checkpoints stay in the store) and checked by `hearsay run check` (the one rule: complete, the
# job and fold, the bundle's tree-sha). Then `hearsay pin write` writes OUT_DIR/final_runs.json
# for `hearsay assemble --pinned`:
# each run by its path, with the TRAINER's config hash (run_meta.json's config_hash: the sha256 of
# the resolved config, what assemble checks; the runner's sha256 of train.json only names the
# store folder) and the sha256 of final/model.safetensors; min_steps = --min-steps.
# Each run's scores/ (what its box scored after training: hearsay score-run) comes back into
# OUT_DIR/scores/ (its files are named by job: fold3_inner_oof.csv, full_test.csv, … + sidecars), where
# hearsay assemble verifies and reuses them. The pin's parity record requires parity A and B:
#   "parity": {"file": "export/parity.json", "require": ["parity_a", "parity_b"],
#              "box_logits": "scores/full_parity_logits.json"}
# so `hearsay export onnx OUT_DIR/runs/full --out OUT_DIR/export` and `hearsay parity OUT_DIR/export
# --box-logits OUT_DIR/scores/full_parity_logits.json --bundle B` run before assemble (whose F6
# checks the record). The full run must have brought its parity logits back, unless --no-parity.
# An old OUT_DIR/final_runs.json is removed before anything is pulled: a collect that fails leaves
# no pin, never one describing other runs.
#
#   --name NAME      the pin's name (default: OUT_DIR's base name) -> outputs/detector_scores/NAME.csv
#   --no-parity      pin without parity B: "parity": {"waived": "…"} (recorded; assemble skips F6)
#   --min-steps N    required: the optimiser steps assemble holds every run to, from the recipe
#                    (epochs x steps per epoch); never the runs' own planned count, which holds a
#                    run to nothing
#
# hearsay is RUNNER_HEARSAY (default: hearsay on PATH, the laptop's install).
#
# Exit codes: 0 pinned; 1 the old pin cannot be removed or the new one written; 2 usage (--min-steps is required); 3 a run
#   is missing from the store or not complete (each named), or the full run has no parity logits; 4 a run's identity is wrong (job, fold
#   or bundle); 6 the store could not be read; 10 missing dependency or store credentials; 12 remote
#   path refused.
set -euo pipefail
export RUNNER_SCRIPT=collect
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/bundles.sh
. "$RUNNER_ROOT/lib/bundles.sh"
# shellcheck source=runner/lib/store.sh
. "$RUNNER_ROOT/lib/store.sh"

name="" min_steps="" out="" no_parity=0
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage_from "$0"; exit 0 ;;
    --name) name=${2:?--name needs a value}; shift ;;
    --no-parity) no_parity=1 ;;
    --min-steps)
      min_steps=${2:-}
      case $min_steps in '' | *[!0-9]* | 0*) die 2 "--min-steps needs a whole number of steps above 0" "--min-steps 2000" ;; esac
      shift ;;
    -*) die 2 "unknown option $1" "see runner/collect.sh --help" ;;
    *) [ -z "$out" ] || die 2 "one OUT_DIR only" "runner/collect.sh models/STAMP"; out=${1%/} ;;
  esac
  shift
done
[ -n "$out" ] || die 2 "no OUT_DIR given" "runner/collect.sh --min-steps N models/STAMP"
[ -n "$min_steps" ] || die 2 "no --min-steps given: the training budget every run is held to" \
  "pass the recipe's optimiser steps (epochs x steps per epoch), e.g. --min-steps 2000"
HEARSAY=${RUNNER_HEARSAY:-hearsay}   # word-split: the hearsay command line of this machine
need awk "${RUNNER_RCLONE%% *}" "${HEARSAY%% *}"
store_conf_guard || exit 10
[ -r "$RUNNER_BUNDLE_META" ] || die 2 "no bundle meta at $RUNNER_BUNDLE_META" "set RUNNER_BUNDLE_META to the bundle's bundle_meta.json"
[ -r "$RUNNER_TRAIN_CONFIG" ] || die 2 "no training config at $RUNNER_TRAIN_CONFIG" "set RUNNER_TRAIN_CONFIG"
export RCLONE_CONFIG=$RUNNER_RCLONE_CONF
bundle=$(bundle_info "$RUNNER_BUNDLE_META" --tree-sha) \
  || die 2 "$RUNNER_BUNDLE_META gives no tree-sha (hearsay bundle info said why above)" "rebuild the bundle with hearsay bundle"
cfg=$(sha256_file "$RUNNER_TRAIN_CONFIG")
# shellcheck disable=SC2086  # HEARSAY is a command line by design
keys=$($HEARSAY pin keys "$RUNNER_BUNDLE_META") || die 2 "$RUNNER_BUNDLE_META names no fold count (hearsay pin keys said why above)" "rebuild the bundle with hearsay bundle"
name=${name:-$(basename "$out")}
mkdir -p "$out/runs"
rm -f "$out/final_runs.json" || die 1 "cannot remove the old pin $out/final_runs.json" "check OUT_DIR's permissions"

# 1. each run pulled and checked (hearsay run check: complete, and this job of this bundle); every
#    missing or incomplete one is named before exiting
missing=""
for job in $keys; do
  jp=$(store_job_path "$job") || exit 12
  src=$(store_run_path "$jp" "$bundle" "$cfg") || exit 12
  dest=$out/runs/$job
  rm -rf "$dest"
  mkdir -p "$dest"
  for f in run_meta.json config.json; do
    # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
    $RUNNER_RCLONE copyto "$src/$f" "$dest/$f" </dev/null 2>/dev/null || true
  done
  # shellcheck disable=SC2086
  $RUNNER_RCLONE copy "$src/final" "$dest/final" </dev/null 2>/dev/null || true
  mkdir -p "$out/scores"
  rm -f "$out/scores/${job}_"*   # only what the store holds now: a stale file never stands in
  # shellcheck disable=SC2086  # the box's scores (none for a run scored nowhere: assemble scores it)
  $RUNNER_RCLONE copy --include "${job}_*" "$src/scores" "$out/scores" </dev/null 2>/dev/null || true
  rc=0
  why=$($HEARSAY run check "$dest" --key "$job" --bundle "$bundle" 2>&1) || rc=$?
  case $rc in
    0) ;;
    3) missing="$missing $job" ;;
    4) die 4 "$src/run_meta.json holds another run: ${why#*another run: }" "that folder holds another run: inspect it" ;;
    *) die 2 "hearsay run check failed on $dest (exit $rc): $why" "is hearsay installed here (RUNNER_HEARSAY)?" ;;
  esac
done
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  $RUNNER_RCLONE lsf "${RUNNER_STORE%/}/runs" </dev/null >/dev/null 2>&1 \
    || die 6 "cannot read $RUNNER_STORE/runs" "check RUNNER_STORE and RUNNER_RCLONE_CONF"
  die 3 "not complete in the store for bundle $bundle and config $cfg:$missing" "let those jobs reach DONE (runner/status.sh --why JOB), or relaunch them"
fi

# 2. the pin, written whole or not at all by hearsay pin write (each run's config hash from its
#    run_meta.json, its weights hashed), with the parity record: A and B required (box logits
#    brought back), or waived by the operator
box_logits=scores/full_parity_logits.json
if [ "$no_parity" = 1 ]; then
  parity=(--parity-waived "runner/collect.sh --no-parity: the operator pinned without parity B")
  parity_said="waived (--no-parity)"
else
  [ -s "$out/$box_logits" ] || die 3 "the full run brought back no $box_logits (its box records parity B's logits after training)" \
    "relaunch the full job with this runner, or pin without parity B: runner/collect.sh --no-parity"
  parity=(--parity-box-logits "$box_logits")
  parity_said="A and B required, B against $box_logits"
fi
runs=()
for job in $keys; do runs+=(--run "$job=$out/runs/$job"); done
$HEARSAY pin write "$out/final_runs.json" --name "$name" --bundle "$bundle" --min-steps "$min_steps" \
  ${parity[@]+"${parity[@]}"} ${runs[@]+"${runs[@]}"} >/dev/null || die 1 "cannot write the pin $out/final_runs.json (hearsay pin write said why above)" "check OUT_DIR's permissions and free space"
n=$(wc -w <<<"$keys" | tr -d ' ')
log_event "collected $n runs of bundle $bundle config $cfg into $out"
say "$n runs of bundle $bundle (train.json sha256 $cfg) pinned in $out/final_runs.json; $(find "$out/scores" -name '*.csv' | wc -l | tr -d ' ') box score file(s) in $out/scores; parity: $parity_said"
printf '%s\n' "$out/final_runs.json"
