#!/usr/bin/env bash
# Usage: runner/bundle_put.sh BUNDLE_DIR
# Summary: copy a built bundle into the store at bundles/<tree_sha>/ and verify the store's copy by tree-sha
#
# In order: read BUNDLE_DIR/bundle_meta.json's tree_sha; re-hash the local files (a bundle whose
# files changed since it was built is refused: the tree-sha covers manifest.csv, selection.json,
# audio/, codecs/, or codec_recipe.json in place of codecs/ for a bundle whose boxes make its codec
# copies: such a bundle is uploaded without any codecs/ this machine made); check that
# bundle_meta.json's fold and selection records are the hashed selection.json's (one edited
# afterwards is refused: which rows train is part of the identity); `rclone sync` it to
# RUNNER_STORE/bundles/<tree_sha>/
# (the store's copy is made identical: a partial earlier upload is completed, strays removed); hash
# what the store now holds (`rclone hashsum sha256 --download`: every byte is read back, so it
# holds on remotes without sha256 support, R2 included); only when that equals tree_sha write
# bundles/<tree_sha>/VERIFIED. runner/launch.sh rents nothing for a bundle without that marker,
# and every box re-checks the tree-sha of what it pulls.
#
# Settings: RUNNER_STORE, RUNNER_RCLONE, RUNNER_RCLONE_CONF (runner/config.sh).
# Prints the tree-sha on stdout once verified.
# Exit codes: 0 verified; 2 usage, or no tree_sha in BUNDLE_DIR/bundle_meta.json; 3 the local files
#   do not hash to tree_sha, or bundle_meta.json's folds/selection differ from selection.json
#   (rebuild: hearsay bundle); 4 the copy to the store failed; 5 the
#   store's copy does not hash to tree_sha (no VERIFIED written; run again); 10 missing dependency
#   or store credentials; 12 remote path refused.
set -euo pipefail
export RUNNER_SCRIPT=bundle_put
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"
# shellcheck source=runner/lib/bundles.sh
. "$RUNNER_ROOT/lib/bundles.sh"

case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  '') die 2 "no bundle folder given" "runner/bundle_put.sh bundle/" ;;
esac
[ $# -eq 1 ] || die 2 "one bundle folder only" "runner/bundle_put.sh bundle/"
dir=${1%/}
hs=${RUNNER_HEARSAY:-hearsay}   # word-split: the hearsay command line of this machine
need jq awk find xargs "${RUNNER_RCLONE%% *}" "${hs%% *}"
store_conf_guard || exit 10
export RCLONE_CONFIG=$RUNNER_RCLONE_CONF
sha=$(bundle_info "$dir" --tree-sha) \
  || die 2 "$dir/bundle_meta.json gives no tree-sha (hearsay bundle info said why above)" "is $dir a finished bundle? hearsay bundle MANIFEST $dir"
dest=$(store_bundle_path "$sha") || exit 12

# 1. the local files are the bundle bundle_meta.json names
got=$(local_tree_sha "$dir")
[ "$got" = "$sha" ] || die 3 "$dir hashes to tree-sha $got, bundle_meta.json says $sha" "its files changed since the build: rebuild it with hearsay bundle"
bundle_identity_matches "$dir" \
  || die 3 "$dir/bundle_meta.json's folds or selection differ from the hashed $dir/selection.json" "the fold and selection configs decide the training rows and are build inputs: rebuild it with hearsay bundle"

# 2. the store's copy made identical (VERIFIED is not in the source, so sync removes a stale one first)
rclone_store() {
  # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
  $RUNNER_RCLONE "$@"
}
err=$(mktemp "${TMPDIR:-/tmp}/bundle_put.XXXXXX")
trap 'rm -f "$err"' EXIT
excl=(--exclude .stamps.json)
[ ! -f "$dir/codec_recipe.json" ] || excl+=(--exclude 'codecs/**')   # the boxes make them
say "copying bundle $sha to $dest"
rclone_store sync "$dir" "$dest" ${excl[@]+"${excl[@]}"} </dev/null >/dev/null 2>"$err" \
  || { tail -n 3 "$err" >&2; die 4 "copy of $dir to $dest failed" "check the store and its credentials, then run again"; }

# 3. the store's bytes, read back and hashed
stored=$(rclone_store hashsum sha256 --download "$dest" </dev/null 2>"$err" | tree_sha_of_listing) || true
if [ "$stored" != "$sha" ]; then
  die 5 "the store's copy at $dest hashes to tree-sha ${stored:-?}, not $sha: not marked VERIFIED" "run runner/bundle_put.sh $dir again"
fi
printf '%s\n' "$sha" | rclone_store rcat "$dest/VERIFIED" 2>"$err" \
  || die 4 "could not write $dest/VERIFIED" "check the store, then run again"
log_event "bundle $sha put into the store and verified"
say "bundle $sha verified in the store ($dest/VERIFIED)"
printf '%s\n' "$sha"
