#!/usr/bin/env bash
# Usage: runner/collect_ablation.sh [--score BUNDLE_DIR] RECIPE FOLDS OUT_DIR
# Summary: bring one ablation recipe's fold runs back from the store and pin them for hearsay compare
#
# RECIPE is a name of runner/launch.sh ablate (RUNNER_RECIPES/RECIPE.json, its training config);
# FOLDS the inner folds it was launched on, e.g. "0 1". Each run is
# RUNNER_STORE/runs/OPERATOR/ablate-RECIPE-foldK/ (its record's run folder, runner/lib/store.sh)/<tree_sha of RUNNER_BUNDLE_META>/<sha256 of RECIPE.json>/:
# its final/, run_meta.json and config.json are copied to OUT_DIR/runs/foldK/ and checked by
# `hearsay run check` (complete, job fold, fold K, the bundle's tree-sha), and the per-run score files
# its box left (scores/foldK_inner_oof.csv, and the probe set's scores/foldK_probe.csv when the bundle
# has a probe fold, each with its .meta.json) to OUT_DIR/scores/: `hearsay corpus-probe --drop-rule`
# reads the probe files from there. Then `hearsay pin
# write --recipe` pins them in OUT_DIR/ablation_runs.json ({"name", "recipe", "bundle_tree_sha",
# "runs": {"foldK": {"dir", "config_hash", "weights_sha256"}}}): `hearsay compare --recipe
# RECIPE=OUT_DIR/ablation_runs.json` ranks it, reading OUT_DIR/scores/foldK_inner_oof.csv checked
# against the pinned weights. hearsay is RUNNER_HEARSAY (default: hearsay on PATH).
#
#   --score BUNDLE_DIR  score, on this machine, each fold run that brought no score file
#                       (hearsay score --split inner_oof --fold K; on the CPU unless HEARSAY_DEVICE)
#
# Exit codes: 0 pinned; 1 the old pin cannot be removed or the new one written, or a score failed; 2 usage (no such
#   recipe); 3 a run is missing or not complete in the store, or has no score file without --score;
#   4 a run's identity is wrong; 10 missing dependency or store credentials; 12 remote path refused.
set -euo pipefail
export RUNNER_SCRIPT=collect_ablation
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/bundles.sh
. "$RUNNER_ROOT/lib/bundles.sh"
# shellcheck source=runner/lib/store.sh
. "$RUNNER_ROOT/lib/store.sh"

score="" args=()
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage_from "$0"; exit 0 ;;
    --score) score=${2:?--score needs the bundle folder}; shift ;;
    -*) die 2 "unknown option $1" "see runner/collect_ablation.sh --help" ;;
    *) args+=("$1") ;;
  esac
  shift
done
[ "${#args[@]}" -eq 3 ] || die 2 "want RECIPE FOLDS OUT_DIR" "runner/collect_ablation.sh core_only \"0 1\" models/abl-core_only"
recipe=${args[0]} folds=${args[1]} out=${args[2]%/}
config=$RUNNER_RECIPES/$recipe.json
[ -r "$config" ] || die 2 "no recipe $recipe: $config is missing" "name a recipe of runner/launch.sh ablate (RUNNER_RECIPES)"
HEARSAY=${RUNNER_HEARSAY:-hearsay}   # word-split: the hearsay command line of this machine
need "${RUNNER_RCLONE%% *}" "${HEARSAY%% *}"
store_conf_guard || exit 10
[ -r "$RUNNER_BUNDLE_META" ] || die 2 "no bundle meta at $RUNNER_BUNDLE_META" "set RUNNER_BUNDLE_META"
# shellcheck disable=SC2086  # HEARSAY is a command line by design
keys=$($HEARSAY pin keys "$RUNNER_BUNDLE_META") || die 2 "$RUNNER_BUNDLE_META names no fold count (hearsay pin keys said why above)" "rebuild the bundle with hearsay bundle"
for k in $folds; do
  case " $(tr '\n' ' ' <<<"$keys")" in *" fold$k "*) ;; *) die 2 "fold $k is not an inner fold of this bundle (its runs: $(tr '\n' ' ' <<<"$keys"))" "FOLDS like \"0 1\"" ;; esac
done
export RCLONE_CONFIG=$RUNNER_RCLONE_CONF
bundle=$(bundle_info "$RUNNER_BUNDLE_META" --tree-sha) \
  || die 2 "$RUNNER_BUNDLE_META gives no tree-sha (hearsay bundle info said why above)" "rebuild the bundle with hearsay bundle"
cfg=$(sha256_file "$config")
mkdir -p "$out/runs" "$out/scores"
rm -f "$out/ablation_runs.json" || die 1 "cannot remove the old pin $out/ablation_runs.json" "check OUT_DIR's permissions"

missing="" runs=()
for k in $folds; do
  jp=$(store_job_path "ablate-$recipe-fold$k") || exit 12
  src=$(store_run_path "$jp" "$bundle" "$cfg") || exit 12
  dest=$out/runs/fold$k
  rm -rf "$dest" && mkdir -p "$dest"
  # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
  for f in run_meta.json config.json; do $RUNNER_RCLONE copyto "$src/$f" "$dest/$f" </dev/null 2>/dev/null || true; done
  # shellcheck disable=SC2086
  $RUNNER_RCLONE copy "$src/final" "$dest/final" </dev/null 2>/dev/null || true
  rc=0
  why=$($HEARSAY run check "$dest" --key "fold$k" --bundle "$bundle" 2>&1) || rc=$?
  case $rc in
    0) ;;
    3) missing="$missing fold$k"; continue ;;
    4) die 4 "$src/run_meta.json holds another run: ${why#*another run: }" "that folder holds another run: inspect it" ;;
    *) die 2 "hearsay run check failed on $dest (exit $rc): $why" "is hearsay installed here (RUNNER_HEARSAY)?" ;;
  esac
  csv=$out/scores/fold${k}_inner_oof.csv
  # shellcheck disable=SC2086
  for f in "fold${k}_inner_oof.csv" "fold${k}_inner_oof.csv.meta.json" "fold${k}_probe.csv" "fold${k}_probe.csv.meta.json"; do
    rm -f "$out/scores/$f"   # a file of an earlier collect never stands in for this run's
    $RUNNER_RCLONE copyto "$src/scores/$f" "$out/scores/$f" </dev/null 2>/dev/null || true
  done
  if [ ! -s "$csv.meta.json" ]; then
    [ -n "$score" ] || die 3 "run ablate-$recipe-fold$k brought no scores/fold${k}_inner_oof.csv" "pass --score BUNDLE_DIR to score it here"
    # shellcheck disable=SC2086  # HEARSAY is a command line by design
    $HEARSAY score --bundle "$score" --run "$dest" --split inner_oof --fold "$k" \
      --device "${HEARSAY_DEVICE:-cpu}" -o "$csv" >&2 || die 1 "scoring fold$k of $recipe failed (its message above)" "fix it and collect again"
  fi
  runs+=(--run "fold$k=$dest")
done
[ -z "$missing" ] || die 3 "not complete in the store for recipe $recipe (bundle $bundle, $recipe.json sha256 $cfg):$missing" "let those jobs reach DONE (runner/status.sh --why ablate-$recipe-foldK), or relaunch them"
# shellcheck disable=SC2086  # HEARSAY is a command line by design
$HEARSAY pin write "$out/ablation_runs.json" --name "$recipe" --recipe "$recipe" --bundle "$bundle" ${runs[@]+"${runs[@]}"} >/dev/null \
  || die 1 "cannot write the pin $out/ablation_runs.json (hearsay pin write said why above)" "check OUT_DIR's permissions and free space"
log_event "collected ablation recipe $recipe folds $folds into $out"
say "recipe $recipe: fold runs $folds pinned in $out/ablation_runs.json"
printf '%s\n' "$out/ablation_runs.json"
