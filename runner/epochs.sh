#!/usr/bin/env bash
# Usage: runner/epochs.sh from-pilot [--pilot-config FILE] [--tol T] [--factor F] | set E [--why TEXT] | show
# Summary: record the finals' epoch count E for this bundle + recipe, from the pilot's readouts or by hand
#
# The recipe is RUNNER_TRAIN_CONFIG without its step budget (runner/lib/recipe.sh), the bundle
# RUNNER_BUNDLE_META's tree-sha. E goes to RUNNER_STATE/epochs/<tree_sha>-<recipe_hash> (line 1: E,
# line 2: how it was chosen) and a line of the event log; runner/launch.sh refuses fold/full jobs
# whose train.epochs differs from it (unless --any-epochs, logged).
#
#   from-pilot  bring the DONE pilot's run_meta.json from the store (runs/OPERATOR/pilot/<tree_sha>/<sha256 of
#               the pilot's config>/: --pilot-config FILE, default RUNNER_TRAIN_CONFIG) and apply
#               the rule of `hearsay pilot-epochs` (its --help): the first epoch whose fold-4
#               minDCF (pi 0.3) is within --tol of the lowest, times --factor, rounded up. The pilot
#               config must be the same recipe as RUNNER_TRAIN_CONFIG. Its choice is kept beside E
#               as <tree_sha>-<recipe_hash>.json.
#   set E       the operator's own E (a whole number >= 1), recorded as set by hand (--why TEXT)
#   show        print the recorded E
#
# Exit codes: 0 recorded (or shown); 1 RUNNER_STATE cannot be written; 2 usage, or the pilot config is another recipe; 3 nothing
#   recorded (show), or the store has no complete pilot run_meta.json; 4 hearsay pilot-epochs
#   refused the pilot (its message said); 10 missing dependency; 12 remote path refused.
set -euo pipefail
export RUNNER_SCRIPT=epochs
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
# shellcheck source=runner/lib/bundles.sh
. "$RUNNER_ROOT/lib/bundles.sh"
# shellcheck source=runner/lib/store.sh
. "$RUNNER_ROOT/lib/store.sh"
# shellcheck source=runner/lib/recipe.sh
. "$RUNNER_ROOT/lib/recipe.sh"

verb=${1:-}
[ $# -eq 0 ] || shift
case $verb in
  -h | --help) usage_from "$0"; exit 0 ;;
  from-pilot | set | show) ;;
  *) die 2 "unknown or missing verb: ${verb:-none}" "runner/epochs.sh from-pilot | set E | show" ;;
esac
hs=${RUNNER_HEARSAY:-hearsay}   # word-split: the hearsay command line of this machine
need jq "${hs%% *}"
[ -r "$RUNNER_BUNDLE_META" ] || die 2 "no bundle meta at $RUNNER_BUNDLE_META" "set RUNNER_BUNDLE_META to the bundle's bundle_meta.json"
[ -r "$RUNNER_TRAIN_CONFIG" ] || die 2 "no training config at $RUNNER_TRAIN_CONFIG" "set RUNNER_TRAIN_CONFIG"
bundle=$(bundle_info "$RUNNER_BUNDLE_META" --tree-sha) \
  || die 2 "$RUNNER_BUNDLE_META gives no tree-sha (hearsay bundle info said why above)" "rebuild the bundle with hearsay bundle"
recipe=$(recipe_hash "$RUNNER_TRAIN_CONFIG") || die 2 "$RUNNER_TRAIN_CONFIG is not JSON" "fix it"
file=$(epochs_file "$bundle" "$recipe")

# record E HOW: E and how it was chosen, written whole (tmp + mv), then the event log.
record() {
  mkdir -p "$(dirname "$file")"
  { printf "%s\n%s\n" "$1" "$2" >"$file.tmp" && mv -f "$file.tmp" "$file"; } || die 1 "cannot write $file" "free space under RUNNER_STATE"
  log_event "epochs E=$1 recorded for bundle $bundle recipe $recipe: $2"
  say "E = $1 for bundle $bundle recipe $recipe ($2)"
  printf '%s\n' "$1"
}

case $verb in
  show)
    e=$(recorded_epochs "$bundle" "$recipe")
    [ -n "$e" ] || die 3 "no E recorded for bundle $bundle recipe $recipe" "runner/epochs.sh from-pilot, or runner/epochs.sh set E"
    sed -n 2p "$file" >&2
    printf '%s\n' "$e" ;;
  set)
    e=${1:-}
    case $e in '' | *[!0-9]* | 0*) die 2 "set needs a whole number of epochs >= 1" "runner/epochs.sh set 3" ;; esac
    shift
    why="set by hand"
    if [ "${1:-}" = --why ]; then why="set by hand: ${2:?--why needs a text}"; fi
    record "$e" "$why" ;;
  from-pilot)
    pilot_cfg=$RUNNER_TRAIN_CONFIG pass=()
    while [ $# -gt 0 ]; do
      case $1 in
        --pilot-config) pilot_cfg=${2:?--pilot-config needs a file}; shift ;;
        --tol | --factor) pass+=("$1" "${2:?$1 needs a value}"); shift ;;
        *) die 2 "unknown option $1" "see runner/epochs.sh --help" ;;
      esac
      shift
    done
    [ -r "$pilot_cfg" ] || die 2 "no pilot config at $pilot_cfg" "pass the config the pilot was launched with"
    [ "$(recipe_hash "$pilot_cfg")" = "$recipe" ] \
      || die 2 "the pilot config $pilot_cfg is another recipe than $RUNNER_TRAIN_CONFIG (they may differ in train.epochs only)" "launch a pilot of this recipe, or record E by hand: runner/epochs.sh set E"
    need "${RUNNER_RCLONE%% *}" "${RUNNER_HEARSAY:-hearsay}"
    src=$(store_run_path "$(store_job_path pilot)" "$bundle" "$(sha256_file "$pilot_cfg")") || exit 12
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/runner.epochs.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
    RCLONE_CONFIG=$RUNNER_RCLONE_CONF $RUNNER_RCLONE copyto "$src/run_meta.json" "$tmp/run_meta.json" </dev/null 2>/dev/null || true
    [ -s "$tmp/run_meta.json" ] || die 3 "no pilot run_meta.json at $src" "let the pilot reach DONE (runner/status.sh --why pilot)"
    rc=0
    # shellcheck disable=SC2086  # RUNNER_HEARSAY is a command line by design
    e=$(${RUNNER_HEARSAY:-hearsay} pilot-epochs "$tmp" --json "$tmp/choice.json" --how "$tmp/how" ${pass[@]+"${pass[@]}"}) || rc=$?
    case $rc in 0) ;; 3) die 3 "the pilot at $src cannot give E (hearsay pilot-epochs said why above)" "let it complete, or runner/epochs.sh set E" ;;
      *) die 4 "hearsay pilot-epochs refused the pilot at $src (exit $rc, its message above)" "fix what it names, or runner/epochs.sh set E --why TEXT" ;; esac
    mkdir -p "$(dirname "$file")"
    { cp "$tmp/choice.json" "$file.json.tmp" && mv -f "$file.json.tmp" "$file.json"; } || die 1 "cannot write $file.json" "free space under RUNNER_STATE"
    record "$e" "from pilot $src: $(cat "$tmp/how")" ;;
esac
