# shellcheck shell=bash
# runner/lib/bundles.sh — bundles in the store, and where each run of a recipe lives there.
# Sourced by runner/launch.sh (via launch_steps.sh), runner/bundle_put.sh, runner/collect.sh and, on
# the box, runner/box/entry.sh; the path and hash helpers need bash, coreutils and awk only
# (bundle_info asks hearsay).
#
# Layout under RUNNER_STORE (every path passes guard_path):
#   bundles/<tree_sha>/            the bundle as built (manifest.csv, selection.json, audio/, codecs/,
#                                  bundle_meta.json), or with codec_recipe.json in place of codecs/
#                                  (built with --codec-copies box: each box makes the copies)
#   codecs/<tree_sha>/<key>/       the codec copies the first box made from that bundle's recipe
#                                  (codec_pass.json + <codec>/<id>.flac; <key> = `hearsay bundle
#                                  codecs --key`: recipe, ffmpeg version, encoders): later boxes of
#                                  the same image pull and verify them instead of re-encoding
#   bundles/<tree_sha>/VERIFIED    "<tree_sha>": written by runner/bundle_put.sh once the store's
#                                  copy hashed to it; runner/launch.sh rents only when it is there
#   runs/<op>/<job>/               the job's run folder (runner/lib/store.sh: <op> keeps operators
#                                  apart; the job's contract names it, job.env's HEARSAY_RUN_PATH)
#   runs/<op>/<job>/STATUS, REASON the box's phase line ("GEN PHASE EPOCH") and, after a FAIL, why
#   runs/<op>/<job>/<tree_sha>/<cfg>/  one run: the trainer's --store (checkpoints/, final/,
#                                  run_meta.json, config.json); <cfg> = sha256 of train.json's bytes,
#                                  so a new bundle or recipe never meets an old run's checkpoints and
#                                  a relaunch of the same one resumes

# bundle_info META [--tree-sha | --n-folds | --fold K]: what hearsay.contracts.bundle reads from a
# bundle's meta (`hearsay bundle info`: the bundle folder or its bundle_meta.json), never jq: the
# tree-sha, the fold count of its fold file (its fold models are 0..n-1), or whether fold K is one
# of them (exit 4 and the reason on stderr when not; 3 when the meta records no such field). The
# one helper here that needs hearsay (RUNNER_HEARSAY, default hearsay on PATH; a command line).
bundle_info() {
  # shellcheck disable=SC2086  # RUNNER_HEARSAY is a command line by design
  ${RUNNER_HEARSAY:-hearsay} bundle info "$@"
}

# store_bundle_path TREE_SHA: RUNNER_STORE/bundles/TREE_SHA, guarded.
store_bundle_path() { guard_path "${RUNNER_STORE%/}/bundles/$1"; }

# store_codecs_path TREE_SHA KEY: RUNNER_STORE/codecs/TREE_SHA/KEY, guarded.
store_codecs_path() { guard_path "${RUNNER_STORE%/}/codecs/$1/$2"; }

# store_run_path JOB_PATH TREE_SHA CONFIG_SHA: the run of one (job, bundle, training config) inside
# the job's run folder JOB_PATH (the box's HEARSAY_RUN_PATH; runner/lib/store.sh store_job_path on
# this machine), guarded.
store_run_path() { guard_path "${1%/}/$2/$3"; }

_sha256_stdin() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum | cut -d' ' -f1; else shasum -a 256 | cut -d' ' -f1; fi
}

# sha256_file FILE: its sha256 (hex), with sha256sum or, where that is missing (macOS), shasum.
sha256_file() { _sha256_stdin <"$1"; }

# tree_sha_of_listing: stdin = "HASH  PATH" lines (sha256sum's, or `rclone hashsum sha256`'s) for
# a bundle's files; prints the bundle tree-sha exactly as hearsay.bundle.tree_sha makes it: only
# manifest.csv, selection.json (what decides the training rows), audio/** and codecs/**, sorted
# bytewise by path, re-listed, hashed; when codec_recipe.json is listed (the box makes the copies),
# it instead of codecs/**.
tree_sha_of_listing() {
  awk '{ h = $1; p = $0; sub(/^[^ ]+ [ *]/, "", p); n++; P[n] = p; H[n] = h; if (p == "codec_recipe.json") r = 1 }
       END { for (i = 1; i <= n; i++) { p = P[i]
               if (p == "manifest.csv" || p == "selection.json" || p ~ /^audio\// \
                   || (r && p == "codec_recipe.json") || (!r && p ~ /^codecs\//)) printf "%s\t%s\n", p, H[i] } }' \
    | LC_ALL=C sort | awk -F '\t' '{ printf "%s  %s\n", $2, $1 }' | _sha256_stdin
}

# local_tree_sha DIR: the tree-sha of a bundle folder on this machine.
# sha256sum or, where that is missing (macOS), shasum -a 256: both print "HASH  PATH" lines.
# shellcheck disable=SC2086  # $sum is a command and its words ("shasum -a 256")
local_tree_sha() {
  local sum=sha256sum
  command -v sha256sum >/dev/null 2>&1 || sum="shasum -a 256"
  (
    cd "$1" || exit 1
    set -- manifest.csv selection.json codec_recipe.json audio codecs
    for p in "$@"; do [ -e "$p" ] && printf '%s\0' "$p"; done \
      | xargs -0 -I{} find {} -type f -print0 \
      | xargs -0 -r $sum 2>/dev/null || true
  ) | tree_sha_of_listing
}

# bundle_identity_matches DIR: true when DIR/bundle_meta.json's "folds" and "selection" (each less
# its "path") are what the hashed DIR/selection.json says: hearsay.contracts.bundle.check_identity
# judges it (`hearsay bundle info DIR --identity`; its reason on stderr when not).
bundle_identity_matches() { bundle_info "$1" --identity; }

# step_bundle_in_store TREE_SHA: the launcher's check, before any offer is searched or money spent:
# the store must hold bundles/TREE_SHA/VERIFIED saying TREE_SHA (exit 14 otherwise).
step_bundle_in_store() {
  local sha=$1 path got
  [ "$sha" = none ] && return 0   # probe: no bundle
  path=$(store_bundle_path "$sha") || exit 12
  # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
  got=$(RCLONE_CONFIG="$RUNNER_RCLONE_CONF" with_timeout "$RUNNER_CLI_TIMEOUT_S" \
    $RUNNER_RCLONE cat "$path/VERIFIED" --retries 1 --low-level-retries 1 2>/dev/null </dev/null | head -n 1) || true
  [ "$got" = "$sha" ] && return 0
  die 14 "the store holds no verified bundle $sha ($path/VERIFIED is missing or unreadable): nothing rented" \
    "put it there first: runner/bundle_put.sh $(dirname "$RUNNER_BUNDLE_META")"
}
