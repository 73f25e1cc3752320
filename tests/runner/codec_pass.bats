#!/usr/bin/env bats
# A bundle uploaded with its codec recipe and no copies (hearsay bundle --codec-copies box): the box
# makes the copies at setup with the image's ffmpeg (runner/box/job.sh box_codec_pass, the real
# `hearsay bundle codecs`), stores them for later boxes, and a later box pulls them instead.

load helpers

# recipe_bundle DIR: a real bundle of four tones whose copies (mp3, mu-law) are left to the boxes.
recipe_bundle() {
  python3 - "$W/corpus" <<'EOF'
import sys, pathlib
import numpy as np, pandas as pd, soundfile as sf
root = pathlib.Path(sys.argv[1]); root.mkdir(parents=True)
rows = []
for i in range(4):
    t = np.arange(int((1.0 + 0.2 * i) * 16000)) / 16000
    sf.write(root / f"c{i}.wav", (0.4 * np.sin(2 * np.pi * (300 + 50 * i) * t)).astype("float32"),
             16000, subtype="PCM_16")
    lab = "bonafide" if i % 2 == 0 else "spoof"
    rows.append({"id": f"c{i}", "path": f"c{i}.wav", "label": lab,
                 "generator": "bonafide" if lab == "bonafide" else "voc-a", "source": "s",
                 "group": f"g{i}", "fold": str(i), "train_scope": "core"})
pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
EOF
  hearsay bundle "$W/corpus/manifest.csv" "$1" --codecs mp3,mulaw --workers 1 --no-progress >/dev/null
}

setup() {
  world
  export RUNNER_BUNDLE_META=$W/rbundle/bundle_meta.json
  recipe_bundle "$W/rbundle"
  BUNDLE_SHA=$(jq -r .tree_sha "$RUNNER_BUNDLE_META")
  export BUNDLE_SHA
  "$REPO/runner/bundle_put.sh" "$W/rbundle" >/dev/null 2>&1
  box_world
}
teardown() { world_end; }

key_of() { hearsay bundle codecs "$1" --key; }

@test "bundle_put uploads a recipe bundle without codec copies, even ones made on this machine" {
  hearsay bundle codecs "$W/rbundle" --jobs 1 --no-progress >/dev/null   # copies made here too
  rm -rf "$W/bucket/hearsay/bundles/$BUNDLE_SHA"
  run "$REPO/runner/bundle_put.sh" "$W/rbundle"
  [ "$status" -eq 0 ]
  [ "${lines[${#lines[@]} - 1]}" = "$BUNDLE_SHA" ]
  [ "$(cat "$W/bucket/hearsay/bundles/$BUNDLE_SHA/VERIFIED")" = "$BUNDLE_SHA" ]
  [ -f "$W/bucket/hearsay/bundles/$BUNDLE_SHA/codec_recipe.json" ]
  [ ! -e "$W/bucket/hearsay/bundles/$BUNDLE_SHA/codecs" ]
  # the shell's tree-sha is Python's, with and without the local copies
  [ "$(bash -c '. "$1/runner/lib/bundles.sh" && local_tree_sha "$2"' _ "$REPO" "$W/rbundle")" = "$BUNDLE_SHA" ]
  [ "$(python3 -c 'import sys; from hearsay.contracts.bundle import tree_sha; print(tree_sha(sys.argv[1]))' "$W/rbundle")" = "$BUNDLE_SHA" ]
}

@test "the recipe is in the tree-sha the shell computes: an edited recipe is refused, nothing copied" {
  sed -i 's/"32k"/"64k"/' "$W/rbundle/codec_recipe.json"
  rm -rf "$W/bucket/hearsay/bundles/$BUNDLE_SHA"
  run "$REPO/runner/bundle_put.sh" "$W/rbundle"
  [ "$status" -eq 3 ]
  [[ "$output" == *"hashes to tree-sha "*", bundle_meta.json says $BUNDLE_SHA"* ]]
  [ ! -e "$W/bucket/hearsay/bundles/$BUNDLE_SHA" ]
}

@test "the first box makes the copies and stores them under the bundle's identity; a later box pulls them" {
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  key=$(key_of "$W/rbundle")
  [[ "$output" == *"entry: codecs: $box/bundle: made 8 copies of 4 clips (mp3, mulaw) by ffmpeg "*"; key $key"* ]]
  [[ "$output" == *"entry: codec copies stored at $RUNNER_STORE/codecs/$BUNDLE_SHA/$key for later boxes"* ]]
  stored=$W/bucket/hearsay/codecs/$BUNDLE_SHA/$key
  [ "$(jq -r .listing_sha256 "$stored/codec_pass.json")" = "$(jq -r .listing_sha256 "$box/bundle/codecs/codec_pass.json")" ]
  [ "$(find "$stored" -name '*.flac' | wc -l)" -eq 8 ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 DONE" ]
  # a relaunch on a fresh box: the stored copies are pulled and verified, nothing encoded
  mv "$box" "$W/box.first"
  box_world
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [[ "$output" == *"entry: codecs: $box/bundle: verified 8 copies of 4 clips (mp3, mulaw) by ffmpeg "*"(already there: nothing encoded); key $key"* ]]
  [[ "$output" != *"codec copies stored"* ]]
  cmp "$box/bundle/codecs/codec_pass.json" "$stored/codec_pass.json"
}

@test "a box whose ffmpeg lacks an encoder records it, makes the others, fakes nothing" {
  real=$(python3 -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())')
  printf '#!/bin/sh\ncase " $* " in *" -encoders "*) "%s" "$@" | grep -v " libmp3lame ";;\n*) exec "%s" "$@";;\nesac\n' "$real" "$real" >"$W/ffmpeg"
  chmod +x "$W/ffmpeg"
  sed -z -i "s|^HEARSAY_FFMPEG=.*|HEARSAY_FFMPEG=$W/ffmpeg|" "$HEARSAY_INIT_ENVIRON"   # the image's ffmpeg
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [[ "$output" == *"entry: codecs: $box/bundle: made 4 copies of 4 clips (mulaw) by ffmpeg "* ]]
  [[ "$output" == *"entry:   encoders missing, copies not made: ['libmp3lame'] (mp3; listed in codecs/codec_pass.json)"* ]]
  [ "$(jq -c '[.codecs, .codecs_missing, .ffmpeg.encoders_missing]' "$box/bundle/codecs/codec_pass.json")" = '[["mulaw"],["mp3"],["libmp3lame"]]' ]
  [ ! -e "$box/bundle/codecs/mp3" ]
  key=$(jq -r .key "$box/bundle/codecs/codec_pass.json")
  [ "$key" != "$(key_of "$W/rbundle")" ]                       # never mixed with a full set's copies
  [ -f "$W/bucket/hearsay/codecs/$BUNDLE_SHA/$key/codec_pass.json" ]
}

@test "a box whose ffmpeg is not the version the recipe expects ends FAIL before training, REASON naming the fix" {
  real=$(python3 -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())')
  printf '#!/bin/sh\ncase " $* " in *" -version "*) echo "ffmpeg version 0.0-other Copyright";;\n*) exec "%s" "$@";;\nesac\n' "$real" >"$W/ffmpeg"
  chmod +x "$W/ffmpeg"
  sed -z -i "s|^HEARSAY_FFMPEG=.*|HEARSAY_FFMPEG=$W/ffmpeg|" "$HEARSAY_INIT_ENVIRON"
  run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [[ "$output" == *"entry: codec pass exit 3 (hearsay bundle codecs; hearsay bundle codecs --help lists the codes)"* ]]
  grep -q "is version 0.0-other, the recipe expects" "$RUNS/pilot/REASON"
  [ ! -e "$box/train.args" ]
  [ "$(cut -d' ' -f1-2 <<<"$(status_of pilot)")" = "g-7 FAIL" ]
}

@test "the chain counts as running once the codec pass starts: the launcher's wait is minutes, a first pass may take an hour" {
  printf '#!/bin/sh\ncase " $* " in *" --key "*) ;; *) cat "%s/CHAIN" >"%s/chain_at_pass" ;; esac\nexec hearsay bundle codecs "$@"\n' "$box" "$W" >"$W/pass.sh"
  chmod +x "$W/pass.sh"
  HEARSAY_CODEC_PASS=$W/pass.sh run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 0 ]
  [ "$(cat "$W/chain_at_pass")" = "g-7 running" ]
  grep -q "^codecs: $box/bundle: made 8 copies" "$box/codecs.log"
}

@test "the pass is sized by the rental's CPU quota (job.env's cpu_cores_effective, else the cgroup's), not the host's nproc" {
  run bash -c '. "$1/runner/box/job.sh" && HEARSAY_CPU_CORES=3 box_cores' _ "$REPO"
  [ "$output" = 3 ]
  run bash -c '. "$1/runner/box/job.sh" && HEARSAY_CPU_CORES=12.0 box_cores' _ "$REPO"
  [ "$output" = 12 ]
  echo "250000 100000" >"$BATS_TEST_TMPDIR/cpu.max"                  # 2.5 CPUs of quota
  run bash -c '. "$1/runner/box/job.sh" && HEARSAY_CPU_CORES= HEARSAY_CGROUP_CPU_MAX=$2 box_cores' _ "$REPO" "$BATS_TEST_TMPDIR/cpu.max"
  [ "$output" = 3 ]
  echo "max 100000" >"$BATS_TEST_TMPDIR/cpu.max"                     # no quota: the CPUs it sees
  run bash -c '. "$1/runner/box/job.sh" && HEARSAY_CPU_CORES= HEARSAY_CGROUP_CPU_MAX=$2 box_cores' _ "$REPO" "$BATS_TEST_TMPDIR/cpu.max"
  [ "$output" = "$(nproc)" ]
  grep -q -- '--jobs "$(box_cores)"' "$REPO/runner/box/job.sh"       # what the pass is given
}
