#!/usr/bin/env bats
# runner/bundle_put.sh with the real rclone on a local store, and the launcher's refusal to rent
# for a bundle the store does not hold verified.

load helpers

setup() {
  world
  small_bundle "$W/b2"
  echo "more audio" >"$W/b2/audio/b.flac"                      # another bundle than the world's
  BUNDLE_SHA=$(bash -c '. "$1/runner/lib/bundles.sh" && local_tree_sha "$2"' _ "$REPO" "$W/b2")
  printf '{"tree_sha": "%s"}\n' "$BUNDLE_SHA" >"$W/b2/bundle_meta.json"
  dest=$W/bucket/hearsay/bundles/$BUNDLE_SHA
}
teardown() { world_end; }

@test "a bundle is copied, read back, its tree-sha matched and only then marked VERIFIED" {
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 0 ]
  [ "${lines[${#lines[@]}-1]}" = "$BUNDLE_SHA" ]
  [ "$(cat "$dest/VERIFIED")" = "$BUNDLE_SHA" ]
  [ "$(cat "$dest/audio/b.flac")" = "more audio" ]
  echo stray >"$dest/audio/stray.flac"                          # a stray in the store's copy is removed
  rm "$dest/VERIFIED"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 0 ]
  [ ! -e "$dest/audio/stray.flac" ]
  [ -f "$dest/VERIFIED" ]
}

@test "the tree-sha is hearsay.bundle's: the shell and Python agree on the same files" {
  py=$(python -c 'import sys; from pathlib import Path; from hearsay.bundle import tree_sha; print(tree_sha(Path(sys.argv[1])))' "$W/b2")
  [ "$py" = "$BUNDLE_SHA" ]
}

@test "a bundle whose files changed since its build is refused, nothing copied" {
  echo "edited" >>"$W/b2/manifest.csv"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 3 ]
  [[ "$output" == *"runner: $W/b2 hashes to tree-sha "*", bundle_meta.json says $BUNDLE_SHA (its files changed since the build: rebuild it with hearsay bundle)"* ]]
  [ ! -e "$dest" ]
}

@test "a store copy that does not hash back to the tree-sha is never marked VERIFIED" {
  printf '#!/usr/bin/env bash\nif [ "$1" = hashsum ]; then rclone "$@"; echo "0000  audio/lost.flac"; else exec rclone "$@"; fi\n' >"$W/rclone_lossy"
  chmod +x "$W/rclone_lossy"
  RUNNER_RCLONE=$W/rclone_lossy run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 5 ]
  [[ "$output" == *"the store's copy at $RUNNER_STORE/bundles/$BUNDLE_SHA hashes to tree-sha "*", not $BUNDLE_SHA: not marked VERIFIED"* ]]
  [ ! -e "$dest/VERIFIED" ]
}

@test "launch refuses to rent when the store lacks the verified bundle: no offer searched, no box, no row" {
  rm "$W/bucket/hearsay/bundles/$(jq -r .tree_sha "$RUNNER_BUNDLE_META")/VERIFIED"
  run launch --yes pilot
  [ "$status" -eq 14 ]
  [[ "$output" == *"runner: the store holds no verified bundle $(jq -r .tree_sha "$RUNNER_BUNDLE_META") ("*"VERIFIED is missing or unreadable): nothing rented (put it there first: runner/bundle_put.sh $W/bundle)"* ]]
  [ "$(created_count)" -eq 0 ]
  [ ! -s "$LEDGER" ]
  [ -z "$(grep "search offers" "$RUNNER_STATE/runner.log")" ]
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
}
