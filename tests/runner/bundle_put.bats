#!/usr/bin/env bats
# runner/bundle_put.sh with the real rclone on a local store, and the launcher's refusal to rent
# for a bundle the store does not hold verified.

load helpers

setup() {
  world
  small_bundle "$W/b2"
  echo "more audio" >"$W/b2/audio/b.flac"                      # another bundle than the world's
  # what decides the training rows, hashed (hearsay.bundle.write_identity's shape)
  printf '{"folds": {"config": {"family_exclusion": {"full": []}}, "sha256": "f0"}, "selection": {"config": {"seed": 1}, "outcome": {"dropped": []}}}\n' >"$W/b2/selection.json"
  BUNDLE_SHA=$(bash -c '. "$1/runner/lib/bundles.sh" && local_tree_sha "$2"' _ "$REPO" "$W/b2")
  printf '{"tree_sha": "%s", "folds": {"path": "/x/f.folds.json", "sha256": "f0", "config": {"family_exclusion": {"full": []}}}, "selection": {"path": null, "config": {"seed": 1}, "outcome": {"dropped": []}}}\n' "$BUNDLE_SHA" >"$W/b2/bundle_meta.json"
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
  py=$(python -c 'import sys; from pathlib import Path; from hearsay.contracts.bundle import tree_sha; print(tree_sha(Path(sys.argv[1])))' "$W/b2")
  [ "$py" = "$BUNDLE_SHA" ]
}

@test "a bundle whose files changed since its build is refused, nothing copied" {
  echo "edited" >>"$W/b2/manifest.csv"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 3 ]
  [[ "$output" == *"runner: $W/b2 hashes to tree-sha "*", bundle_meta.json says $BUNDLE_SHA (its files changed since the build: rebuild it with hearsay bundle)"* ]]
  [ ! -e "$dest" ]
}

@test "the tree-sha covers selection.json: a bundle whose selection changed since its build is refused, nothing copied" {
  sed -i 's/"seed": 1/"seed": 2/' "$W/b2/selection.json"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 3 ]
  [[ "$output" == *"runner: $W/b2 hashes to tree-sha "*", bundle_meta.json says $BUNDLE_SHA"* ]]
  [ ! -e "$dest" ]
}

@test "a bundle_meta.json whose fold or selection config was edited after the build is refused, nothing copied" {
  jq -c '.folds.config.family_exclusion.full = ["voc"]' "$W/b2/bundle_meta.json" >"$W/meta" && mv "$W/meta" "$W/b2/bundle_meta.json"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 3 ]
  [[ "$output" == *"runner: $W/b2/bundle_meta.json's folds or selection differ from the hashed $W/b2/selection.json (the fold and selection configs decide the training rows and are build inputs: rebuild it with hearsay bundle)"* ]]
  [ ! -e "$dest" ]
  jq -c '.folds.config.family_exclusion.full = [] | .selection.outcome.dropped = [{"id": "a"}]' "$W/b2/bundle_meta.json" >"$W/meta" && mv "$W/meta" "$W/b2/bundle_meta.json"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 3 ]
  [ ! -e "$dest" ]
  # where the fold file was read is no part of the identity
  jq -c '.selection.outcome.dropped = [] | .folds.path = "/elsewhere"' "$W/b2/bundle_meta.json" >"$W/meta" && mv "$W/meta" "$W/b2/bundle_meta.json"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 0 ]
  [ -f "$dest/VERIFIED" ]
  [ -f "$dest/selection.json" ]
}

@test "a bundle built before selection.json existed, whose meta records folds, is refused" {
  rm "$W/b2/selection.json"
  sha=$(bash -c '. "$1/runner/lib/bundles.sh" && local_tree_sha "$2"' _ "$REPO" "$W/b2")
  jq -c --arg s "$sha" '.tree_sha = $s' "$W/b2/bundle_meta.json" >"$W/meta" && mv "$W/meta" "$W/b2/bundle_meta.json"
  run "$REPO/runner/bundle_put.sh" "$W/b2"
  [ "$status" -eq 3 ]
  [[ "$output" == *"folds or selection differ from the hashed $W/b2/selection.json"* ]]
}

@test "a real hearsay bundle with a selection: bundle_put's re-hash and identity check agree with Python's" {
  python - "$W/real" "$REPO/tests/bundle" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from test_bundle_identity import SELECTION, small, write
from hearsay.bundle.build import main
t = Path(sys.argv[1]); t.mkdir()
sys.exit(main([str(small(t)), str(t / "b"), "--selection", str(write(t / "s.json", SELECTION)),
               "--codecs", "", "--workers", "1", "--no-progress"]))
PY
  run "$REPO/runner/bundle_put.sh" "$W/real/b"
  [ "$status" -eq 0 ]
  sha=$(jq -r .tree_sha "$W/real/b/bundle_meta.json")
  [ "${lines[${#lines[@]}-1]}" = "$sha" ]
  [ -f "$W/bucket/hearsay/bundles/$sha/selection.json" ]
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

@test "a bundle's tree-sha is the same with shasum where sha256sum is missing (macOS)" {
  nosha=$(bin_without sha256sum)
  run env PATH="$nosha" bash -c '. "$1/runner/lib/bundles.sh" && local_tree_sha "$2"' _ "$REPO" "$W/b2"
  [ "$status" -eq 0 ]
  [ "$output" = "$BUNDLE_SHA" ]
}
