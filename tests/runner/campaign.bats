#!/usr/bin/env bats
# The offers as the campaign chose them and its hard stop. The default offer query (runner/config.sh:
# an A100 SXM4 with floors on vCPUs, reliability, bandwidth and the driver's CUDA, and the price
# ceiling RUNNER_OFFER_MAX_DPH) reaches the API, and the chosen offer's GPU, vCPUs, driver CUDA and
# $/h are in its ledger rows. RUNNER_CAMPAIGN_DEADLINE (runner/lib/campaign.sh): past it a launch is
# refused (exit 16), the reaper ends every box of the campaign (REASON, closing row with reason
# CAMPAIGN_DEADLINE) and teardown_check confirms none is left; a box ends itself at it, and a
# checkpoint push in flight then finishes before the box is destroyed (bounded).

load helpers

setup() { world; }
teardown() { world_end; }

# offer_search: the filters of the last offer search that picks the rental (the one after it counts
# offers without the CUDA floor), as the API got them from the real CLI.
offer_search() { curl -fsS "$VAST_URL/_control/requests" | jq -c '[.requests[] | select(.op == "offers" and (.body | has("cuda_max_good")))] | last | .body'; }
offer_of() { curl -fsS "$VAST_URL/_control/state" | jq -c ".offers[] | select(.id == $1)"; }
rented_offer() { curl -fsS "$VAST_URL/_control/state" | jq -r ".instances[] | select(.id == $1) | .offer_id"; }
past() { echo $(($(date -u +%s) - 1)); }

@test "the default offer query carries the A100 SXM4, vCPU, reliability, bandwidth and driver CUDA floors and the price ceiling; the ledger rows record the offer" {
  unset RUNNER_OFFER_QUERY                        # runner/config.sh's own default
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  id=${lines[${#lines[@]}-1]}
  body=$(offer_search)
  echo "$body"
  [ "$(jq -c '.gpu_name' <<<"$body")" = '{"eq":"A100 SXM4"}' ]
  [ "$(jq -c '.cpu_cores_effective' <<<"$body")" = '{"gte":"32"}' ]
  [ "$(jq -c '.reliability' <<<"$body")" = '{"gt":"0.98"}' ]
  [ "$(jq -c '.inet_down' <<<"$body")" = '{"gte":"500"}' ]
  [ "$(jq -c '.cuda_max_good' <<<"$body")" = '{"gte":"13.0"}' ]
  [ "$(jq -c '.dph_total' <<<"$body")" = '{"lte":"1.50"}' ]
  # the fake's cheaper A100 offers lack a floor each (16 vCPUs; reliability 0.972): the 32-vCPU one is rented
  offer=$(offer_of "$(rented_offer "$id")")
  [ "$(jq -r '.gpu_name' <<<"$offer")" = "A100 SXM4" ]
  [ "$(jq -r '.cpu_cores_effective' <<<"$offer")" = 32 ]
  dph=$(cat "$RUNNER_STATE/jobs/probe/dph")
  grep -qx "$id,probe,[^,]*,$(jq -r '.id' <<<"$offer"),$dph,[^,]*,,,,A100 SXM4,32,13.0," "$LEDGER"
  [[ "$output" == *"(A100 SXM4, 32 vCPUs, driver CUDA 13.0) at \$$dph/h"* ]]
  wait_for 30 grep -q DONE "$RUNS/probe/STATUS"
  run reaper_once                                 # the closing row keeps the offer, adds the reason
  echo "$output"; [ "$status" -eq 0 ]
  grep -qx "$id,probe,[^,]*,[^,]*,$dph,[^,]*,[^,]*,[0-9.]*,[0-9.]*,A100 SXM4,32,13.0,DONE" "$LEDGER"
}

@test "the price ceiling: no offer at or under RUNNER_OFFER_MAX_DPH is exit 8, nothing rented; a ceiling that is not a price too" {
  unset RUNNER_OFFER_QUERY
  RUNNER_OFFER_MAX_DPH=0.90 run launch --yes probe   # the one A100 with every floor costs more
  echo "$output"; [ "$status" -eq 8 ]
  [[ "$output" == *"and dph_total<=0.90 (RUNNER_OFFER_MAX_DPH); the CUDA floor cuda_max_good>=13.0 excludes 0 of the 0 offers matching RUNNER_OFFER_QUERY and dph_total<=0.90 (loosen RUNNER_OFFER_QUERY in runner/config.sh, raise RUNNER_OFFER_MAX_DPH deliberately, or for an image built against another CUDA point RUNNER_LOCK at its lock (docs/RUNBOOK.md 2.1))"* ]]
  [ "$(jq -c '.dph_total' <<<"$(offer_search)")" = '{"lte":"0.90"}' ]
  RUNNER_OFFER_MAX_DPH=cheap run launch --yes probe
  [ "$status" -eq 8 ]
  [[ "$output" == *"RUNNER_OFFER_MAX_DPH=cheap is not a price"* ]]
  [ "$(created_count)" -eq 0 ]
}

@test "a launch after the campaign deadline is refused with exit 16 before anything is listed or rented" {
  RUNNER_CAMPAIGN_DEADLINE=$(past) run launch --yes probe
  echo "$output"; [ "$status" -eq 16 ]
  [[ "$output" == *"runner: the campaign deadline "*"Z (RUNNER_CAMPAIGN_DEADLINE) has passed: nothing is rented"* ]]
  RUNNER_CAMPAIGN_DEADLINE=$(date -u -d @"$(past)" +%Y-%m-%dT%H:%M:%SZ) run launch --yes probe   # ISO-8601 UTC
  [ "$status" -eq 16 ]
  [ "$(created_count)" -eq 0 ]
  ! grep -q "vastai show instances\|vastai search offers" "$RUNNER_STATE/runner.log"
}

@test "a malformed campaign deadline is refused with exit 2 naming both forms, by the launch and the reaper" {
  for bad in tomorrow 2026-02-30T10:00:00Z 2026-12-05T20:00:00 17965008 "2026-12-05 20:00:00Z"; do
    RUNNER_CAMPAIGN_DEADLINE=$bad run launch --yes probe
    echo "$bad: $output"; [ "$status" -eq 2 ]
    [[ "$output" == *"RUNNER_CAMPAIGN_DEADLINE='$bad' is not a time (give epoch seconds, 10 digits, e.g. 1796500800, or ISO-8601 UTC ending in Z, e.g. 2026-12-05T20:00:00Z; empty for none)"* ]]
  done
  RUNNER_CAMPAIGN_DEADLINE=tomorrow run reaper_once
  [ "$status" -eq 2 ]
  RUNNER_FINAL_PUSH_GRACE_S=10m run reaper_once
  [ "$status" -eq 2 ]
  [[ "$output" == *"RUNNER_FINAL_PUSH_GRACE_S=10m is not a whole number of seconds"* ]]
  [ "$(created_count)" -eq 0 ]
}

@test "a launch before the campaign deadline: the job's deadline is the campaign's, on the record, the label and the box" {
  cdl=$(($(date -u +%s) + 600))                   # before the probe's own deadline (RUNNER_HOURS_PROBE x 1.5)
  RUNNER_CAMPAIGN_DEADLINE=$(date -u -d @"$cdl" +%Y-%m-%dT%H:%MZ) run launch --yes probe   # minutes only
  echo "$output"; [ "$status" -eq 0 ]
  cdl=$((cdl / 60 * 60))
  id=${lines[${#lines[@]}-1]}
  [ "$(cat "$RUNNER_STATE/jobs/probe/deadline")" = "$cdl" ]
  [ "$(cat "$RUNNER_STATE/jobs/probe/campaign_deadline")" = "$cdl" ]
  st=$(curl -fsS "$VAST_URL/_control/state")
  [ "$(jq -r ".instances[] | select(.id == $id) | .env.HEARSAY_DEADLINE" <<<"$st")" = "$cdl" ]
  [ "$(jq -r ".instances[] | select(.id == $id) | .env.HEARSAY_CAMPAIGN_DEADLINE" <<<"$st")" = "$cdl" ]
  [[ "$(jq -r ".instances[] | select(.id == $id) | .label" <<<"$st")" == *":$cdl" ]]
  grep -qx "HEARSAY_DEADLINE=$cdl" "$W"/boxes/box-*/run/job.env
  grep -qx "HEARSAY_CAMPAIGN_DEADLINE=$cdl" "$W"/boxes/box-*/run/job.env
}

@test "past the campaign deadline the reaper ends every box of the campaign: REASON, closing row CAMPAIGN_DEADLINE; teardown_check is clean" {
  a=$(rent pilot PROVISIONED g-1)                 # a ledger begun with the 9-column header (rent)
  b=$(rent fold3 PROVISIONED g-3)
  put_status pilot "g-1 SMOKE $(date -u +%s)"
  echo "$(past)" >"$RUNNER_STATE/jobs/fold3/campaign_deadline"   # launched under a deadline this reaper lacks
  cdl=$(($(date -u +%s) + 3600))
  RUNNER_CAMPAIGN_DEADLINE=$cdl run reaper_once   # not yet for pilot: only fold3's own deadline passed
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$a" ]
  [[ "$output" == *"job fold3: REASON the campaign deadline "*" passed (RUNNER_CAMPAIGN_DEADLINE) with the box without a STATUS; destroying instance $b"* ]]
  [ "$(cat "$RUNNER_STATE"/archive/fold3-g-3-*/result)" = CAMPAIGN_DEADLINE ]
  RUNNER_CAMPAIGN_DEADLINE=$(past) run reaper_once   # set after pilot's launch: its box was never told
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"job pilot: REASON the campaign deadline "*" passed (RUNNER_CAMPAIGN_DEADLINE, set after this box's launch: the box was never told it and is ended without its final push); destroying instance $a"* ]]
  [ "$(live_count)" -eq 0 ]
  [ -z "$(ls "$RUNNER_STATE/jobs")" ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-g-1-*/why)" = "$(grep -o 'the campaign deadline .* without its final push)' <<<"$output")" ]
  grep -qx "$a,pilot,g-1,[^,]*,0.5,[^,]*,[^,]*,[0-9.]*,[0-9.]*,,,,CAMPAIGN_DEADLINE" "$LEDGER"
  grep -qx "$b,fold3,g-3,[^,]*,0.5,[^,]*,[^,]*,[0-9.]*,[0-9.]*,,,,CAMPAIGN_DEADLINE" "$LEDGER"
  [ "$(open_rows)" -eq 0 ]
  run "$REPO/runner/ledger.sh"                    # a 9-column header with 13-field rows appended: read
  echo "$output"; [ "$status" -eq 0 ]
  run "$REPO/runner/teardown_check.sh"
  echo "$output"; [ "$status" -eq 0 ]
  [ "${lines[0]}" = "teardown confirmed: 0 instances listed" ]
  [[ "${lines[1]}" == "secrets sweep: clean: "* ]]
}

@test "a box pushing at the campaign deadline it was told is left to finish, for its final push's grace at most" {
  a=$(rent pilot PROVISIONED g-1)
  b=$(rent fold3 PROVISIONED g-3)
  put_status pilot "g-1 PUSHING $(date -u +%s)"
  put_status fold3 "g-3 TRAINING $(date -u +%s)"   # stopping its trainer, about to push
  cdl=$(past)
  echo "$cdl" >"$RUNNER_STATE/jobs/pilot/campaign_deadline"   # launched under it: the box was told
  echo "$cdl" >"$RUNNER_STATE/jobs/fold3/campaign_deadline"
  export RUNNER_CAMPAIGN_DEADLINE=$cdl RUNNER_FINAL_PUSH_GRACE_S=60
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 2 ]
  [[ "$output" == *"job pilot: its deadline has passed while its box is PUSHING: it stops its trainer and pushes its checkpoints first; destroyed at "*" at the latest (grace_s=60)"* ]]
  put_status fold3 "g-3 FAIL $(date -u +%s)"       # its push done, it failed itself: ended now
  run reaper_once
  [ "$(live_ids)" = "$a" ]
  [[ "$output" == *"job fold3: REASON the campaign deadline "*" with the box in phase FAIL; destroying instance $b"* ]]
  cdl=$(($(date -u +%s) - 61))                     # the grace is over: a push still running is cut
  echo "$cdl" >"$RUNNER_STATE/jobs/pilot/campaign_deadline"
  RUNNER_CAMPAIGN_DEADLINE=$cdl run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [[ "$output" == *"job pilot: REASON the campaign deadline "*" with the box in phase PUSHING, after its final push's grace_s=60 s; destroying instance $a"* ]]
  grep -qx "$a,pilot,.*,CAMPAIGN_DEADLINE" "$LEDGER"
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 0 ]
}

@test "a box reaching the campaign deadline mid-checkpoint push lets that push finish, then ends itself, no reaper; the reaper closes its row" {
  export RUNNER_CAMPAIGN_DEADLINE=$(($(date -u +%s) + 40))   # time for the launch on a slow machine
  # the trainer's checkpoint push (folder, then marker; 6 s each) starts 2 s before the deadline
  export FAKE_TRAIN_S=120 FAKE_TRAIN_PUSH_S=6 FAKE_TRAIN_PUSH_AT=$((RUNNER_CAMPAIGN_DEADLINE - 2))
  export HEARSAY_STOP_WAIT_S=0.2 RUNNER_FINAL_PUSH_GRACE_S=60
  export FAKE_SSH_PASS="$FAKE_SSH_PASS FAKE_TRAIN_PUSH_S FAKE_TRAIN_PUSH_AT"
  run launch --yes pilot
  echo "$output"; [ "$status" -eq 0 ]
  id=${lines[${#lines[@]}-1]}
  run_dir=$(echo "$W"/boxes/box-*/run)
  cfg=$(sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1)
  ckpt=$RUNS/pilot/$BUNDLE_SHA/$cfg/checkpoints
  wait_for 60 grep -q "pushing checkpoints/epoch_0001" "$run_dir/train.log"
  [ "$(date -u +%s)" -lt "$RUNNER_CAMPAIGN_DEADLINE" ]   # the push runs across the deadline
  wait_for 60 none_live                             # the box ends itself, no reaper running
  [ -f "$ckpt/epoch_0001.complete" ]                # the checkpoint's marker arrived before the box went
  grep -q "the trainer is pushing to the store: that push finishes first" "$run_dir/entry.log"
  grep -q "campaign deadline $RUNNER_CAMPAIGN_DEADLINE (the campaign's hard stop) passed: trainer stopped" "$RUNS/pilot/REASON"
  [ "$(cut -d' ' -f2 <<<"$(status_of pilot)")" = FAIL ]
  run reaper_once
  echo "$output"
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
  grep -qx "$id,pilot,.*,CAMPAIGN_DEADLINE" "$LEDGER"
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 0 ]
}
