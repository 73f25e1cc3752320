# shellcheck shell=bash
# scripts/lib/rehearsal_world.sh: the rehearsal's first stages, sourced by scripts/rehearsal.sh:
# corpus, bundle (a codec recipe, no copies), world (the store, the campaign's train.json, the fake
# vast.ai), bundle_put and reaper.
# shellcheck disable=SC2154  # short: set by scripts/rehearsal.sh (--short)

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
