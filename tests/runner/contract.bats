#!/usr/bin/env bats
# The box contract (runner/lib/contract.sh): written once at launch into jobs/JOB/contract, the same
# numbers in the box's create environment and job.env; the $/h read back after the create and the
# price ceiling checked against it; an image that does not beat refused unless told; the final push's
# grace at a job's own deadline.

load helpers

setup() { world; }
teardown() { world_end; }

field() { sed -n "s/^$2=//p" "$RUNNER_STATE/jobs/$1/contract"; }
env_of() { curl -fsS "$VAST_URL/_control/state" | jq -r ".instances[] | select(.id == $1) | .env.$2"; }
billed_of() { curl -fsS "$VAST_URL/_control/state" | jq -r ".instances[] | select(.id == $1) | .dph_total"; }

@test "a launch writes the box contract once; the box's create environment and job.env carry its numbers" {
  export RUNNER_FINAL_PUSH_GRACE_S=480 RUNNER_HEARTBEAT_S=30 RUNNER_HEARTBEAT_STALE_S=600
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  id=${lines[${#lines[@]}-1]}
  [ "$(field probe store)" = "$RUNNER_STORE" ]
  [ "$(field probe run_path)" = "$RUNNER_STORE/runs/$RUNNER_OPERATOR/probe" ]
  [ "$(field probe gen)" = "$(cat "$RUNNER_STATE/jobs/probe/gen")" ]
  [ "$(field probe deadline)" = "$(cat "$RUNNER_STATE/jobs/probe/deadline")" ]
  [ -z "$(field probe campaign_deadline)" ]
  [ "$(field probe grace_s)" = 480 ]
  [ "$(field probe heartbeat_s)" = 30 ]
  [ "$(field probe heartbeat_stale_s)" = 600 ]
  [ "$(field probe beats)" = yes ]
  [ "$(field probe dph)" = "$(billed_of "$id")" ]                  # what the instance bills, read back
  [ "$(env_of "$id" HEARSAY_DEADLINE)" = "$(field probe deadline)" ]
  [ "$(env_of "$id" HEARSAY_DEADLINE_GRACE_S)" = 480 ]           # the on-start guard's grace
  envf=$(echo "$W"/boxes/box-*/run/job.env)
  grep -qx "HEARSAY_DEADLINE_GRACE_S=480" "$envf"                 # the watchdog's
  grep -qx "HEARSAY_HEARTBEAT_S=30" "$envf"
  grep -qx "HEARSAY_GEN=$(field probe gen)" "$envf"
  grep -qx "HEARSAY_RUN_PATH=$RUNNER_STORE/runs/$RUNNER_OPERATOR/probe" "$envf"
}

@test "an image that does not beat is refused unless --no-heartbeat; its contract then says beats=no" {
  RUNNER_IMAGE_BEATS=no run launch --yes probe
  echo "$output"; [ "$status" -eq 2 ]
  [[ "$output" == *"runner: RUNNER_IMAGE does not write HEARTBEAT (RUNNER_IMAGE_BEATS=no): a chain killed without its trap would bill until its deadline (use an image that beats, or pass --no-heartbeat to rent it so deliberately)"* ]]
  [ "$(created_count)" -eq 0 ]
  RUNNER_IMAGE_BEATS=no run launch --yes --no-heartbeat probe
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(field probe beats)" = no ]
}

@test "the price ceiling is checked against the instance's own \$/h: over it, destroyed (exit 17), its ledger row closed PRICE_CEILING at that \$/h" {
  ctl POST settings '{"bill_markup": 5}' >/dev/null                # the search says one price, the bill another
  run launch --yes probe
  echo "$output"; [ "$status" -eq 17 ]
  [[ "$output" == *"runner: instance "*" bills \$5."*"/h, above the price ceiling RUNNER_OFFER_MAX_DPH=\$1.50/h (its offer was searched at \$0."*"/h): destroyed, nothing else rented"* ]]
  [ "$(created_count)" -eq 1 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
  id=$(cut -d, -f1 "$LEDGER" | sed -n 2p)
  grep -qx "$id,probe,[^,]*,[^,]*,5\.[0-9]*,[^,]*,,,,[^,]*,[^,]*,[^,]*," "$LEDGER"          # its row: the billed $/h
  grep -qx "$id,probe,[^,]*,[^,]*,5\.[0-9]*,.*,PRICE_CEILING" "$LEDGER"
  [ "$(cat "$RUNNER_STATE"/archive/probe-*/result)" = LAUNCH_FAILED ]
}

@test "at its own deadline a box TRAINING or PUSHING gets its final push's grace from the reaper; FAIL ends it at once" {
  export RUNNER_FINAL_PUSH_GRACE_S=60
  id=$(rent pilot PROVISIONED g-1)
  echo $(($(date -u +%s) - 5)) >"$RUNNER_STATE/jobs/pilot/deadline"
  put_status pilot "g-1 TRAINING $(date -u +%s)"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id" ]
  [[ "$output" == *"job pilot: its deadline has passed while its box is TRAINING: it stops its trainer and pushes its checkpoints first; destroyed at "*" at the latest (grace_s=60)"* ]]
  put_status pilot "g-1 PUSHING $(date -u +%s)"
  run reaper_once
  [ "$(live_ids)" = "$id" ]
  put_status pilot "g-1 FAIL $(date -u +%s)"                       # its push done, it reported its end
  run reaper_once
  echo "$output"
  [ "$(live_count)" -eq 0 ]
  [[ "$output" == *"job pilot: deadline passed, destroying instance $id"* ]]
  id=$(rent fold1 PROVISIONED g-2)
  echo $(($(date -u +%s) - 61)) >"$RUNNER_STATE/jobs/fold1/deadline"
  put_status fold1 "g-2 PUSHING $(date -u +%s)"                     # past deadline + grace: cut
  run reaper_once
  echo "$output"
  [[ "$output" == *"job fold1: deadline passed, after its final push's grace_s=60 s, destroying instance $id"* ]]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
}

@test "two operators, one job name: a launch refuses a run folder where a generation it never launched is live" {
  put_status pilot "g-other-operator TRAINING $(date -u +%s)"      # another RUNNER_STATE's pilot trains there
  run launch --yes pilot
  echo "$output"; [ "$status" -eq 4 ]
  [[ "$output" == *"runner: job pilot's run folder $RUNNER_STORE/runs/$RUNNER_OPERATOR/pilot shows generation g-other-operator in phase TRAINING, which this RUNNER_STATE never launched: another operator's pilot trains there (give each operator its own RUNNER_OPERATOR (unset: each RUNNER_STATE's own identity); or wait until that generation ends (DONE or FAIL))"* ]]
  [ "$(created_count)" -eq 0 ]
  put_status pilot "g-other-operator DONE $(date -u +%s)"          # ended: the folder is free
  run launch --yes pilot
  echo "$output"; [ "$status" -eq 0 ]
}

@test "two operators launch pilot at once against one store: two run folders, neither reads the other's STATUS or HEARTBEAT" {
  unset RUNNER_OPERATOR                                            # each RUNNER_STATE's own identity
  export FAKE_TRAIN_S=4                                            # both boxes train at the same time
  mkdir -p "$W/state-b"
  (launch --yes pilot >"$W/a.out" 2>&1; echo $? >"$W/a.rc") 3>&- &
  (RUNNER_STATE=$W/state-b LEDGER=$W/ledger-b.csv launch --yes pilot >"$W/b.out" 2>&1; echo $? >"$W/b.rc") 3>&- &
  wait
  cat "$W/a.out" "$W/b.out"
  [ "$(cat "$W/a.rc") $(cat "$W/b.rc")" = "0 0" ]
  a=$(cat "$RUNNER_STATE/operator") b=$(cat "$W/state-b/operator")
  [ "$a" != "$b" ]
  [ "$(field pilot run_path)" = "$RUNNER_STORE/runs/$a/pilot" ]
  [ "$(sed -n 's/^run_path=//p' "$W/state-b/jobs/pilot/contract")" = "$RUNNER_STORE/runs/$b/pilot" ]
  ga=$(cat "$RUNNER_STATE/jobs/pilot/gen") gb=$(cat "$W/state-b/jobs/pilot/gen")
  wait_for 10 test -s "$W/bucket/hearsay/runs/$a/pilot/HEARTBEAT"
  wait_for 10 test -s "$W/bucket/hearsay/runs/$b/pilot/HEARTBEAT"
  [ "$(cut -d' ' -f1 "$W/bucket/hearsay/runs/$a/pilot/STATUS") $(cut -d' ' -f1 "$W/bucket/hearsay/runs/$a/pilot/HEARTBEAT")" = "$ga $ga" ]
  [ "$(cut -d' ' -f1 "$W/bucket/hearsay/runs/$b/pilot/STATUS") $(cut -d' ' -f1 "$W/bucket/hearsay/runs/$b/pilot/HEARTBEAT")" = "$gb $gb" ]
  run "$REPO/runner/status.sh" --why pilot                         # each reads its own generation's
  [[ "${lines[0]}" == "STATUS $ga "* ]]
  RUNNER_STATE=$W/state-b run "$REPO/runner/status.sh" --why pilot
  [[ "${lines[0]}" == "STATUS $gb "* ]]
}

@test "boxes found by their label (every create dropped after renting) get ledger rows at the \$/h each bills, never the search's" {
  ctl POST settings '{"bill_markup": 5}' >/dev/null                # the search says one price, the bill another
  fault '[{"op": "create", "kind": "drop", "apply": true, "times": 3}]'
  run launch --yes probe
  echo "$output"; [ "$status" -eq 1 ]
  [ "$(created_count)" -eq 3 ]                                      # one adopted, two duplicates
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
  for id in $(curl -fsS "$VAST_URL/_control/state" | jq -r '.instances[].id'); do
    billed=$(billed_of "$id")
    [ "$(grep -c "^$id,probe,[^,]*,[^,]*,$billed," "$LEDGER")" -eq 2 ]   # its creation and closing rows
    [ "$(grep -c "^$id," "$LEDGER")" -eq 2 ]
  done
}

@test "a box whose launcher died before its bill was read back and before its ledger row: the reaper's closing row carries the \$/h it bills" {
  ctl POST settings '{"bill_markup": 5}' >/dev/null
  id=$(rent probe CREATED g-1)                                      # a record the launcher left mid-launch
  sed -i "/^$id,/d" "$LEDGER"                                       # killed before its creation row
  printf 'run_path=%s\ndph=pending\n' "$RUNNER_STORE/runs/$RUNNER_OPERATOR/probe" >"$RUNNER_STATE/jobs/probe/contract"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  billed=$(billed_of "$id")
  [[ "$billed" == 5.* ]]
  grep -q "^$id,probe,g-1,[^,]*,$billed,.*,ABANDONED$" "$LEDGER"   # the closing row, at the bill
}

@test "a box whose launcher died before its bill was read back, ended before anyone read it: its closing row says PRICE_UNKNOWN" {
  ctl POST settings '{"bill_markup": 5}' >/dev/null
  id=$(rent probe CREATED g-1)
  sed -i "/^$id,/d" "$LEDGER"
  printf 'run_path=%s\ndph=pending\n' "$RUNNER_STORE/runs/$RUNNER_OPERATOR/probe" >"$RUNNER_STATE/jobs/probe/contract"
  ctl POST settings '{"lag_listings": 0, "lag_s": 0}' >/dev/null  # gone at once: nothing shows it any more
  vastai destroy instance "$id" -y >/dev/null                       # its on-start guard ended it
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  grep -q "^$id,probe,g-1,[^,]*,0\.5,.*,PRICE_UNKNOWN: ABANDONED; its bill was never read back: the \$/h is the search's$" "$LEDGER"
}
