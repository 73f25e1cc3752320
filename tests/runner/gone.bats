#!/usr/bin/env bats
# The one rule for "gone" (runner/lib/gone.sh): an absence counts only in a listing that still shows
# the account's other known boxes of ours, or when `show instance` agrees; otherwise unknown, and
# unknown never closes a ledger row or archives a record. Every caller: destroy, duplicate sweep,
# label adoption, the reaper, a relaunch, runner/teardown_check.sh.

load helpers

setup() { world; }
teardown() { world_end; }

# A well-formed, empty listing page (an API hiccup that is valid JSON), N times (null: for good).
empty_listings() { fault "[{\"op\": \"list\", \"kind\": \"error\", \"status\": 200, \"body\": {\"instances\": [], \"total_instances\": 0}, \"times\": $1}]"; }
# show instance ID answers an error (it cannot say), or lies "no such instance".
show_cannot_say() { fault "[{\"op\": \"show\", \"kind\": \"error\", \"instance\": $1, \"times\": null}]"; }
show_lies_gone() { fault "[{\"op\": \"show\", \"kind\": \"error\", \"status\": 200, \"body\": {\"instances\": null}, \"instance\": $1, \"times\": null}]"; }

@test "a failed destroy answered by empty pages is never confirmed: record kept ORPHAN, row open, box live" {
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 DONE 1"
  fault '[{"op": "destroy", "kind": "error", "times": null}]'
  empty_listings null
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id" ]
  [ "$(cat "$RUNNER_STATE/jobs/pilot/state")" = ORPHAN ]
  [ "$(open_rows)" -eq 1 ]
  [ ! -d "$RUNNER_STATE/archive" ]
  [[ "$output" == *"instance $id of job pilot could NOT be confirmed destroyed"* ]]
}

@test "the same destroy with a truthful show instance is confirmed through the empty pages" {
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 DONE 1"
  empty_listings null
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
  [ "$(open_rows)" -eq 0 ]
}

@test "an absence counts in a listing that still shows our other box, never in one that lacks it" {
  a=$(rent fold0 PROVISIONED g-1)
  b=$(rent fold1 PROVISIONED g-1)
  vastai destroy instance "$a" -y >/dev/null        # fold0's box ended itself
  show_cannot_say "$a"
  # one known other box (fold1's), lacking from the listing too (an empty page): unknown
  empty_listings 2
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ -d "$RUNNER_STATE/jobs/fold0" ]
  [ "$(open_rows)" -eq 2 ]
  # the listing shows fold1's box: fold0's absence counts, without show instance
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/fold0" ]
  [ "$(cat "$RUNNER_STATE"/archive/fold0-*/result)" = GONE ]
  [ "$(open_rows)" -eq 1 ]
  [ "$(live_ids)" = "$b" ]
}

@test "a listing that shows one of our other boxes but lacks another vouches for no absence" {
  a=$(rent fold0 PROVISIONED g-1)
  b=$(rent fold1 PROVISIONED g-1)
  c=$(rent fold2 PROVISIONED g-1)
  vastai destroy instance "$a" -y >/dev/null        # fold0's and fold2's boxes ended themselves
  vastai destroy instance "$c" -y >/dev/null
  show_cannot_say "$a"
  show_cannot_say "$c"
  # the listing shows fold1's box but lacks fold2's (and fold0's): neither absence counts
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ -d "$RUNNER_STATE/jobs/fold0" ]
  [ -d "$RUNNER_STATE/jobs/fold2" ]
  [ ! -d "$RUNNER_STATE/archive" ]
  [ "$(open_rows)" -eq 3 ]
  [[ "$output" == *"job fold0: instance $a is missing from the listing but not confirmed gone (show instance): kept"* ]]
  [[ "$output" == *"job fold2: instance $c is missing from the listing but not confirmed gone (show instance): kept"* ]]
  grep -q "instance $a missing from a listing that cannot vouch for it (partial, or lacks a known box; show instance does not agree): unknown" "$RUNNER_STATE/runner.log"
  # show instance agrees: both gone, fold1's box alone left
  ctl DELETE faults >/dev/null
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/fold0-*/result)" = GONE ]
  [ "$(cat "$RUNNER_STATE"/archive/fold2-*/result)" = GONE ]
  [ "$(open_rows)" -eq 1 ]
  [ "$(live_ids)" = "$b" ]
}

@test "no other box known: a listing without the box is unknown until show instance agrees" {
  id=$(rent pilot PROVISIONED g-1)
  vastai destroy instance "$id" -y >/dev/null
  show_cannot_say "$id"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"instance $id is missing from the listing but not confirmed gone (show instance): kept"* ]]
  [ -s "$RUNNER_STATE/jobs/pilot/gone_since" ]
  sleep 1.1
  run reaper_once                                   # however long: unknown never archives
  [ -d "$RUNNER_STATE/jobs/pilot" ]
  [ "$(open_rows)" -eq 1 ]
  ctl DELETE faults >/dev/null
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-*/result)" = GONE ]
  [ "$(open_rows)" -eq 0 ]
}

@test "label adoption never says 'confirmed none' on a page that lacks our other box" {
  other=$(rent pilot PROVISIONED g-1)
  d=$RUNNER_STATE/jobs/fold4
  mkdir -p "$d"
  echo CREATING >"$d/state"; echo g-9 >"$d/gen"; own_label fold4 g-9 >"$d/label"; echo fold >"$d/kind"
  echo 999999 >"$d/launcher"; echo 1 >"$d/asked"; echo 0.5 >"$d/dph"; echo 1 >"$d/offer"
  echo $(($(date -u +%s) - 60)) >"$d/created_at"; echo $(($(date -u +%s) + 3600)) >"$d/deadline"
  empty_listings null
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ -d "$d" ]                                       # unknown: kept
  [ "$(cat "$d/state")" != DESTROYED ]
  ctl DELETE faults >/dev/null
  run reaper_once                                   # the listing shows pilot's box: none carries the label
  echo "$output"; [ "$status" -eq 0 ]
  [ ! -d "$d" ]
  [ "$(cat "$RUNNER_STATE"/archive/fold4-*/result)" = ABANDONED ]
  [ "$(live_ids)" = "$other" ]
}

@test "a duplicate's open row is never completed from a page that cannot vouch for its absence" {
  id=$(rent fold3 PROVISIONED g-5)
  dup=$(vastai create instance "$(cat "$RUNNER_STATE/jobs/fold3/offer")" --image "$RUNNER_IMAGE" --label "$(cat "$RUNNER_STATE/jobs/fold3/label")" --raw | jq '.new_contract')
  echo "$dup,fold3,g-5,1,0.5,2026-11-30T00:00:00Z,,," >>"$LEDGER"   # swept once, not confirmed then
  empty_listings null
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(open_rows)" -eq 2 ]
  [ "$(live_count)" -eq 2 ]
  ctl DELETE faults >/dev/null
  vastai destroy instance "$dup" -y >/dev/null
  run reaper_once                                   # now the listing shows fold3's own box: gone
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(open_rows)" -eq 1 ]
}

@test "a relaunch needs positive evidence that the old box is gone, never one empty listing" {
  id=$(rent probe PROVISIONED g-1)
  echo 999999 >"$RUNNER_STATE/jobs/probe/launcher"
  empty_listings 1
  run launch --yes probe
  echo "$output"; [ "$status" -eq 5 ]
  [[ "$output" == *"previous instance $id is missing from the listing but show instance does not confirm it gone"* ]]
  [ "$(cat "$RUNNER_STATE/jobs/probe/instance")" = "$id" ]
  [ "$(created_count)" -eq 1 ]
  [ "$(open_rows)" -eq 1 ]
}

@test "teardown_check: an empty listing while a record is live or creating is 'cannot confirm' (2)" {
  id=$(rent pilot PROVISIONED g-1)
  empty_listings 1
  run "$REPO/runner/teardown_check.sh"
  echo "$output"; [ "$status" -eq 2 ]
  [[ "$output" == "runner: cannot confirm teardown: the listing is empty, but job records under $RUNNER_STATE/jobs are live: pilot (PROVISIONED, instance $id, judged KEEP: alive or unknown)"* ]]
  put_status pilot "g-1 DONE 1"                     # the judge's verdict on it, as the reaper would act
  empty_listings 1
  run "$REPO/runner/teardown_check.sh"
  echo "$output"; [ "$status" -eq 2 ]
  [[ "$output" == *"pilot (PROVISIONED, instance $id, judged END_DONE: STATUS DONE)"* ]]
  vastai destroy instance "$id" -y >/dev/null
  echo CREATING >"$RUNNER_STATE/jobs/pilot/state"; rm "$RUNNER_STATE/jobs/pilot/instance" "$RUNS/pilot/STATUS"
  run "$REPO/runner/teardown_check.sh"
  echo "$output"; [ "$status" -eq 2 ]
  [[ "$output" == *"pilot (CREATING, instance not yet known, judged END_ABANDONED: launch abandoned in state CREATING)"* ]]
  mv "$RUNNER_STATE/jobs/pilot" "$W/pilot.archived"
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 0 ]
}

@test "teardown_check with exactly one instance left exits 1; zero exits 0" {
  id=$(vastai create instance "$(vastai search offers 'num_gpus=1' --limit 1 --raw | jq '.[0].id')" --image x --label someone --raw | jq .new_contract)
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "runner: 1 instance(s) still listed (destroy them: vastai destroy instance ID -y)" ]
  [[ "${lines[1]}" == "$id "*" someone "* ]]
  vastai destroy instance "$id" -y >/dev/null
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 0 ]
}

@test "a box archived GONE by a lying show instance is re-adopted when seen again, never destroyed" {
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 TRAINING 1"
  export RUNNER_ORPHAN_GRACE_S=0
  empty_listings 2
  show_lies_gone "$id"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-*/result)" = "GONE TRAINING" ]   # fooled: the rule trusts show
  run reaper_once                                   # listed again
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"instance $id (label $(cat "$RUNNER_STATE/jobs/pilot/label")) is listed again after job pilot was archived GONE: re-adopted"* ]]
  [ "$(live_ids)" = "$id" ]
  [ "$(cat "$RUNNER_STATE/jobs/pilot/state")" = PROVISIONED ]
  [ "$(cat "$RUNNER_STATE/jobs/pilot/instance")" = "$id" ]
  [ ! -e "$RUNNER_STATE/jobs/pilot/result" ]
  [ "$(ledger_rows)" -eq 1 ]                        # no second creation row for the same rental
  put_status pilot "g-1 DONE 2"
  ctl DELETE faults >/dev/null
  run reaper_once
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
}

@test "a box re-adopted after a GONE archive has its ledger row open again until it ends; one rental, closed once at the end" {
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 TRAINING 1"
  export RUNNER_ORPHAN_GRACE_S=0
  empty_listings 2
  show_lies_gone "$id"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-*/result)" = "GONE TRAINING" ]
  [ "$(open_rows)" -eq 0 ]                          # judged gone: the row closed
  run reaper_once                                   # listed again: re-adopted
  echo "$output"; [ "$status" -eq 0 ]
  [ -d "$RUNNER_STATE/jobs/pilot" ]
  [ "$(open_rows)" -eq 1 ]                          # billing again: open, not counted as spent
  [ "$(ledger_rows)" -eq 1 ]                        # the same rental: rows = creations
  [ "$(grep -c "^$id," "$LEDGER")" -eq 3 ]          # creation, closing, re-open
  tail -n 1 "$LEDGER" | grep -q "^$id,pilot,g-1,.*,,,,.*,REOPENED 20"
  run "$REPO/runner/ledger.sh"                      # the one reader agrees
  [ "$status" -eq 1 ]
  [[ "$output" == *"open     1 row(s) not confirmed destroyed: $id"* ]]
  run reaper_once                                   # a second cycle writes nothing more
  [ "$(grep -c "^$id," "$LEDGER")" -eq 3 ]
  put_status pilot "g-1 DONE 2"
  ctl DELETE faults >/dev/null
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(grep -c "^$id," "$LEDGER")" -eq 4 ]          # closed anew, its reason DONE
  tail -n 1 "$LEDGER" | grep -q "^$id,pilot,g-1,.*,DONE$"
  run "$REPO/runner/ledger.sh"
  echo "$output"; [ "$status" -eq 0 ]
}

@test "a box archived GONE whose job is relaunched meanwhile is swept as unrecorded, its rental re-opened and closed anew" {
  a=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 TRAINING 1"
  export RUNNER_ORPHAN_GRACE_S=0
  empty_listings 2
  show_lies_gone "$a"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-*/result)" = "GONE TRAINING" ]
  b=$(rent pilot PROVISIONED g-2)                   # the job relaunched: jobs/pilot is g-2's now
  put_status pilot "g-2 TRAINING 1"
  run reaper_once                                   # a (g-1, no live STATUS) is listed again
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$b" ]
  [ "$(grep -c "^$a," "$LEDGER")" -eq 4 ]           # creation, closing, re-open, closing anew
  grep "^$a," "$LEDGER" | sed -n 3p | grep -q ",REOPENED 20"
  grep "^$a," "$LEDGER" | tail -n 1 | cut -d, -f7 | grep -q .
  [ "$(open_rows)" -eq 1 ]                          # b's only
  [ "$(ledger_rows)" -eq 2 ]
}

@test "an unrecorded box of ours is never destroyed while its generation's STATUS is live; a finished or other generation is" {
  export RUNNER_ORPHAN_GRACE_S=0
  offer=$(vastai search offers 'num_gpus=1' --limit 1 --raw | jq '.[0].id')
  id=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label fold2 g-5 $(($(date -u +%s) + 3600)))" --raw | jq .new_contract)
  put_status fold2 "g-5 TRAINING 1"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"has no job record of ours, but the judge keeps generation g-5 of job fold2: its STATUS reports TRAINING (never destroyed while it is live): left running"* ]]
  [ "$(live_ids)" = "$id" ]
  put_status fold2 "g-4 TRAINING 1"                 # another generation's STATUS: not this box's
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
}

@test "an unrecorded box whose STATUS is still live past its label's deadline + the grace is destroyed (the judge's deadline rows)" {
  export RUNNER_ORPHAN_GRACE_S=0 RUNNER_FINAL_PUSH_GRACE_S=120   # no contract: this machine's grace
  offer=$(vastai search offers 'num_gpus=1' --limit 1 --raw | jq '.[0].id')
  id=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label fold2 g-5 $(($(date -u +%s) - 2)))" --raw | jq .new_contract)
  put_status fold2 "g-5 PUSHING 1"
  run reaper_once                                   # inside the grace: its final push runs
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"but the judge keeps generation g-5 of job fold2: its box is PUSHING: it stops its trainer and pushes its checkpoints first"* ]]
  [ "$(live_ids)" = "$id" ]
  RUNNER_FINAL_PUSH_GRACE_S=1 run reaper_once      # past deadline + grace: ended though its STATUS is live
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
}
