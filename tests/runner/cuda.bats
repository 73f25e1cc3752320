#!/usr/bin/env bats
# The CUDA the image's torch needs (requirements.lock's nvidia-cuda-runtime pin): only offers whose
# host driver runs it are rented (real vastai CLI against the fake API, whose cheapest offer is a
# host with CUDA 12.4), and a box whose driver is older refuses before anything else runs
# (runner/box/driver_check.sh, a stand-in nvidia-smi on PATH).

load helpers

setup() { world; }
teardown() { world_end; }

offers() { curl -fsS "$VAST_URL/_control/state" | jq -c "$1"; }
rented_offers() { curl -fsS "$VAST_URL/_control/state" | jq -c '[.instances[].offer_id]'; }

@test "the cheapest offer's host driver is older than the lock's CUDA: it is never rented" {
  old=$(offers '[.offers[] | select(.cuda_max_good < 13.0) | .id]')
  [ "$old" = "$(offers '[.offers | min_by(.dph_base) | .id]')" ]   # without the filter, it would be
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(created_count)" -eq 1 ]
  got=$(rented_offers)
  [ "$(jq -n --argjson g "$got" --argjson o "$old" '$g - $o == $g')" = true ]
  [ "$(offers ".offers[] | select(.id == $(jq '.[0]' <<<"$got")) | .cuda_max_good >= 13.0")" = true ]
}

@test "when only old-driver hosts match, nothing is rented (exit 8, naming the lock's CUDA)" {
  RUNNER_OFFER_QUERY="num_gpus=1 gpu_name=RTX_4080" run launch --yes probe
  [ "$status" -eq 8 ]
  [[ "$output" == *"runner: no offer matches RUNNER_OFFER_QUERY with cuda_max_good>=13.0 (the CUDA of "*"requirements.lock's torch) and dph_total<=1.50 (RUNNER_OFFER_MAX_DPH); the CUDA floor cuda_max_good>=13.0 excludes 1 of the 1 offers matching RUNNER_OFFER_QUERY and dph_total<=1.50 (loosen RUNNER_OFFER_QUERY in runner/config.sh, raise RUNNER_OFFER_MAX_DPH deliberately, or for an image built against another CUDA point RUNNER_LOCK at its lock (docs/RUNBOOK.md 2.1))"* ]]
  [ "$(created_count)" -eq 0 ]
}

@test "a launch says how many offers the CUDA floor excludes: the same search with and without it" {
  cheap=$(offers '[.offers[] | select(.cuda_max_good < 13.0)] | length')
  [ "$cheap" -eq 1 ]
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"runner: offer search: the CUDA floor cuda_max_good>=13.0 excludes 1 of the "*" offers matching RUNNER_OFFER_QUERY and dph_total<=1.50"* ]]
  # the count is the launch's own search (with the floor) and one more, the same without it
  n=$(sed -n 's/.*excludes 1 of the \([0-9][0-9]*\) offers.*/\1/p' <<<"$output")
  [ "$n" -ge 2 ]
  floors=$(curl -fsS "$VAST_URL/_control/requests" | jq -c '[.requests[] | select(.op == "offers") | (.body.q // .body | has("cuda_max_good"))]')
  [ "$floors" = "[true,false]" ]
  # a floor no offer meets: every matching offer is excluded, and the message says so
  sed 's/^nvidia-cuda-runtime==13\.0\./nvidia-cuda-runtime==99.0./' "$REPO/requirements.lock" >"$W/lock"
  wait_for 120 none_live
  RUNNER_LOCK=$W/lock run launch --yes probe
  [ "$status" -eq 8 ]
  [[ "$output" == *"; the CUDA floor cuda_max_good>=99.0 excludes $n of the $n offers matching RUNNER_OFFER_QUERY and dph_total<=1.50 ("* ]]
}

@test "a count search that fails says the floor excludes an unknown number, and the launch goes on" {
  ctl POST faults '{"rules": [{"op": "offers", "kind": "error", "skip": 1, "times": 1}]}' >/dev/null
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"runner: offer search: the CUDA floor cuda_max_good>=13.0 excludes an unknown number of offers (the count search failed)"* ]]
  [ "$(created_count)" -eq 1 ]
}

@test "the CUDA filter is the lock's pin, read at launch; a lock without the pin refuses before any search" {
  sed 's/^nvidia-cuda-runtime==13\.0\./nvidia-cuda-runtime==12.4./' "$REPO/requirements.lock" >"$W/lock"
  grep -q '^nvidia-cuda-runtime==12\.4\.96 ' "$W/lock"
  RUNNER_LOCK=$W/lock run launch --yes probe                   # a CUDA 12.4 torch may run there
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(rented_offers)" = "$(offers '[.offers[] | select(.cuda_max_good < 13.0) | .id]')" ]
  # the probe's box ends its job and destroys itself; until then a second launch of the job is
  # refused earlier, for its previous instance (exit 4), and never reaches the lock
  wait_for 120 none_live
  grep -v '^nvidia-cuda-runtime==' "$REPO/requirements.lock" >"$W/lock"
  RUNNER_LOCK=$W/lock run launch --yes probe
  [ "$status" -eq 8 ]
  [[ "$output" == *"runner: $W/lock has no nvidia-cuda-runtime==X.Y.Z pin: the CUDA version offers must support is unknown (point RUNNER_LOCK at the image's requirements.lock)"* ]]
  [ "$(created_count)" -eq 1 ]                                  # only the first launch's
}

@test "driver_check: a driver running the lock's CUDA or newer passes; an older one exits 18 naming both" {
  export PATH="$REPO/tests/runner/bin/gpu:$PATH"
  run "$REPO/runner/box/driver_check.sh"
  [ "$status" -eq 0 ]
  [ "$output" = "driver_check: ok   driver 580.65.06 runs CUDA 13.0 >= 13.0 (the lock's)" ]
  FAKE_NVIDIA_CUDA=13.1 run "$REPO/runner/box/driver_check.sh"
  [ "$status" -eq 0 ]
  FAKE_NVIDIA_CUDA=12.4 FAKE_NVIDIA_DRIVER=550.54.15 run "$REPO/runner/box/driver_check.sh"
  [ "$status" -eq 18 ]
  [ "$output" = "driver_check: host driver 550.54.15 runs CUDA 12.4, the image's torch needs CUDA >= 13.0 ($REPO/requirements.lock: nvidia-cuda-runtime) (rent a host with cuda_max_good >= 13.0: runner/launch.sh filters on it)" ]
}

@test "driver_check: no nvidia-smi, no CUDA version in it, or no pin in the lock cannot measure (exit 19), never a pass" {
  HEARSAY_NVIDIA_SMI=$W/none run "$REPO/runner/box/driver_check.sh"
  [ "$status" -eq 19 ]
  [[ "$output" == "driver_check: cannot measure: $W/none failed or is missing"* ]]
  printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."\n' >"$W/smi"
  chmod +x "$W/smi"
  HEARSAY_NVIDIA_SMI=$W/smi run "$REPO/runner/box/driver_check.sh"
  [ "$status" -eq 19 ]
  [[ "$output" == "driver_check: cannot measure: no \"CUDA Version: X.Y\" in the output of $W/smi"* ]]
  : >"$W/lock"
  PATH="$REPO/tests/runner/bin/gpu:$PATH" run "$REPO/runner/box/driver_check.sh" "$W/lock"
  [ "$status" -eq 19 ]
  [[ "$output" == "driver_check: cannot measure: $W/lock has no nvidia-cuda-runtime==X.Y.Z pin"* ]]
  run "$REPO/runner/box/driver_check.sh" a b
  [ "$status" -eq 2 ]
}

@test "a box whose driver is older than the image's CUDA ends FAIL at STARTED, before the smoke check, with a REASON" {
  box_world
  # the box's PATH is the image's (entry.sh imports it), so the stand-in nvidia-smi is named directly
  export HEARSAY_NVIDIA_SMI="$REPO/tests/runner/bin/gpu/nvidia-smi" HEARSAY_DRIVER_CHECK="$REPO/runner/box/driver_check.sh"
  FAKE_NVIDIA_CUDA=12.4 FAKE_NVIDIA_DRIVER=550.54.15 run "$REPO/runner/box/entry.sh" "$box"
  [ "$status" -eq 1 ]
  [ "$(sed -n 's/^entry: g-7 \([A-Z]*\)$/\1/p' <<<"$output" | tr '\n' ' ')" = "STARTED FAIL " ]
  reason=$(cat "$RUNS/pilot/REASON")
  [[ "$reason" == *"driver_check: host driver 550.54.15 runs CUDA 12.4, the image's torch needs CUDA >= 13.0"*"(driver check exit 18)" ]]
  [ ! -e "$box/train.args" ]
  [ "$(cat "$box/CHAIN")" = "g-7 failed" ]
  wait_for 10 test "$(live_count)" -eq 0                      # and it destroyed itself
  rm "$box/CHAIN" "$box/REASON"
  rmdir "$box/entry.lock" 2>/dev/null || true
  run "$REPO/runner/box/entry.sh" "$box"                       # a CUDA 13.0 driver: the run goes on
  [ "$status" -eq 0 ]
  [[ "$output" == *"entry: driver_check: ok   driver 580.65.06 runs CUDA 13.0 >= 13.0 (the lock's)"* ]]
}
