#!/usr/bin/env bats
# runner/reaper.sh: the order ORPHAN → deadline → HOLD → STATUS → abandoned, and "unknown is never gone".

load helpers

setup() { world; }
teardown() { world_end; }

@test "STATUS DONE of the record's generation: destroyed, confirmed, ledger row completed, pilot gate opened" {
  id=$(rent pilot PROVISIONED g-2)
  put_status pilot "g-2 DONE 1764460000"
  run reaper_once
  [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
  [ "$(open_rows)" -eq 0 ]
  grep -q "^$id,pilot,g-2,.*,2026-.*Z,[0-9.]*,[0-9.]*,[^,]*,[^,]*,[^,]*,DONE$" "$LEDGER"
  [ "$(cat "$RUNNER_STATE/pilots/tree-aaaa-rcp")" = g-2 ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-g-2-*/result)" = DONE ]
}

@test "a stale FAIL from another generation does not act on the newer one" {
  id=$(rent fold3 PROVISIONED g-new)
  put_status fold3 "g-old FAIL 1764460000"
  run reaper_once
  [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id" ]
  [ "$(cat "$RUNNER_STATE/jobs/fold3/state")" = PROVISIONED ]
  put_status fold3 "g-new FAIL 1764460001"
  run reaper_once
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/fold3" ]
}

@test "a failed listing changes nothing: error, {}, null and empty answers are never 'gone'" {
  id=$(rent pilot PROVISIONED g-1)
  ctl POST instances/$id '{"phase": "exited"}' >/dev/null
  for kind in error empty_object null empty; do
    fault "[{\"op\": \"list\", \"kind\": \"$kind\"}]"
    run reaper_once
    [ "$status" -eq 5 ]
    [ "$(cat "$RUNNER_STATE/jobs/pilot/state")" = PROVISIONED ]
    [ "$(cat "$RUNNER_STATE/jobs/pilot/instance")" = "$id" ]
  done
  [ "$(open_rows)" -eq 1 ]
}

@test "ORPHAN: destroyed again; DESTROYED only once a listing lacks it (destroy errors, listing lag)" {
  id=$(rent probe ORPHAN g-1)
  touch "$RUNNER_STATE/jobs/probe/HOLD"; echo "$(date -u +%s) $$" >"$RUNNER_STATE/jobs/probe/HOLD"
  ctl POST settings '{"lag_listings": 20}' >/dev/null
  run reaper_once
  [ "$(cat "$RUNNER_STATE/jobs/probe/state")" = ORPHAN ]   # destroyed but still listed: not confirmed
  [ "$(open_rows)" -eq 1 ]
  ctl POST settings '{"lag_listings": 0}' >/dev/null
  ctl POST reset >/dev/null 2>&1 || true
  run reaper_once
  [ "$status" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/probe" ]
  [ "$(open_rows)" -eq 0 ]
}

@test "deadline beats a fresh HOLD; a fresh HOLD alone defers STATUS; a stale HOLD does not" {
  id1=$(rent pilot PROVISIONED g-1)
  echo "$(date -u +%s) $$" >"$RUNNER_STATE/jobs/pilot/HOLD"
  echo $(($(date -u +%s) - 5)) >"$RUNNER_STATE/jobs/pilot/deadline"
  id2=$(rent fold1 PROVISIONED g-1)
  echo "$(date -u +%s) $$" >"$RUNNER_STATE/jobs/fold1/HOLD"
  put_status fold1 "g-1 DONE 1"
  id3=$(rent fold2 PROVISIONED g-1)
  echo "$(($(date -u +%s) - 901)) $$" >"$RUNNER_STATE/jobs/fold2/HOLD"
  put_status fold2 "g-1 FAIL 1"
  run reaper_once
  [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id2" ]
  [ -d "$RUNNER_STATE/jobs/fold1" ]
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
  [ ! -d "$RUNNER_STATE/jobs/fold2" ]
}

@test "an abandoned launch (launcher gone before PROVISIONED) is destroyed; a labelled create with no id is adopted" {
  id1=$(rent fold0 RUNNING g-1)
  echo 999999 >"$RUNNER_STATE/jobs/fold0/launcher"
  id2=$(rent fold4 CREATING g-9)
  rm "$RUNNER_STATE/jobs/fold4/instance"
  sed -i "/^$id2,/d" "$LEDGER"          # the launcher died before it could persist id and row
  echo 1 >"$RUNNER_STATE/jobs/fold4/asked"
  run reaper_once
  [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(ledger_rows)" -eq 2 ]
  [ "$(open_rows)" -eq 0 ]
  grep -q "^$id2,fold4,g-9," "$LEDGER"
}

@test "one reaper for all: a second exits 4; the loop backs off on 429 and then ends the job" {
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 DONE 1"
  fault '[{"op": "list", "kind": "rate_limit", "times": 6}]'
  "$REPO/runner/reaper.sh" >"$W/reaper.out" 2>&1 3>&- &
  echo $! >"$W/reaper.pid"
  wait_for 20 test -d "$RUNNER_STATE/reaper.lock"
  run "$REPO/runner/reaper.sh" --once
  [ "$status" -eq 4 ]
  [[ "$output" == "runner: another reaper is running"* ]]
  wait_for 180 test ! -d "$RUNNER_STATE/jobs/pilot"
  grep -q "listing failed; next try in" "$W/reaper.out"
  [ "$(live_count)" -eq 0 ]
}

@test "a TERM ends the looping reaper at once, even in its poll sleep, and its lock is dropped" {
  RUNNER_REAPER_POLL_S=60 "$REPO/runner/reaper.sh" >"$W/reaper.out" 2>&1 3>&- &
  rp=$!
  echo "$rp" >"$W/reaper.pid"
  wait_for 30 grep -q "vastai show instances" "$RUNNER_STATE/runner.log"
  sleep 2   # its first cycle is over: it sleeps its 60 s poll
  kill -TERM "$rp"
  wait_for 5 test ! -d "$RUNNER_STATE/reaper.lock"
  # its EXIT trap drops the lock a moment before the process ends: wait for that too, briefly
  wait_for 5 process_gone "$rp"                    # the reaper process is gone
  run "$REPO/runner/reaper.sh" --once
  [ "$status" -eq 0 ]
}

@test "a duplicate of a record's label is destroyed (row written and closed); others' instances are not" {
  id=$(rent fold3 PROVISIONED g-5)
  offer=$(cat "$RUNNER_STATE/jobs/fold3/offer")
  dup=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(cat "$RUNNER_STATE/jobs/fold3/label")" --raw | jq '.new_contract')
  other=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label someone:fold3:g-5 --raw | jq '.new_contract')
  # a record still CREATING with no id: its labelled instance is the launcher's (adopt_by_label), untouched
  mkdir -p "$RUNNER_STATE/jobs/probe"
  echo CREATING >"$RUNNER_STATE/jobs/probe/state"; own_label probe g-9 >"$RUNNER_STATE/jobs/probe/label"
  echo "$$" >"$RUNNER_STATE/jobs/probe/launcher"
  echo $(($(date -u +%s) + 3600)) >"$RUNNER_STATE/jobs/probe/deadline"
  adopt=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label probe g-9)" --raw | jq '.new_contract')
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids | sort -n | tr '\n' ' ')" = "$(printf '%s\n' "$id" "$other" "$adopt" | sort -n | tr '\n' ' ')" ]
  [ "$(cat "$RUNNER_STATE/jobs/fold3/state")" = PROVISIONED ]
  # its rows at the $/h the listing says it bills (the record's 0.5 is its own box's)
  billed=$(curl -fsS "$VAST_URL/_control/state" | jq -r ".instances[] | select(.id == $dup) | .dph_total")
  grep -q "^$dup,fold3,g-5,$offer,$billed,.*Z,[0-9.]*,[0-9.]*,[^,]*,[^,]*,[^,]*,[^,]*$" "$LEDGER"
  [ "$(open_rows)" -eq 1 ]
}

@test "a record that never got an id, its launcher gone, several boxes with its label: all destroyed, a row each" {
  mkdir -p "$RUNNER_STATE/jobs/fold4"
  d=$RUNNER_STATE/jobs/fold4
  echo CREATING >"$d/state"; echo g-9 >"$d/gen"; own_label fold4 g-9 >"$d/label"; echo fold >"$d/kind"
  echo 999999 >"$d/launcher"; echo 1 >"$d/asked"; echo 0.5 >"$d/dph"
  date -u +%s >"$d/created_at"; echo $(($(date -u +%s) + 3600)) >"$d/deadline"
  offer=$(vastai search offers 'num_gpus=1' --order dph_total --limit 1 --raw | jq '.[0].id')
  echo "$offer" >"$d/offer"
  for n in 1 2 3; do
    vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label fold4 g-9)" --raw >/dev/null
  done
  other=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label fold4 g-8)" --raw | jq '.new_contract')
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$other" ]                   # another generation's box is not this record's
  [ ! -d "$d" ]
  [ "$(ledger_rows)" -eq 3 ]
  [ "$(open_rows)" -eq 0 ]
  [ "$(grep ',fold4,g-9,' "$LEDGER" | cut -d, -f1 | sort -u | wc -l)" -eq 3 ]   # 3 rentals (a creation and a closing row each)
}

# asked_record JOB PROVISION_BY: a record whose create was asked 300 s ago and never gave an id, its
# launcher gone (what a launcher SIGKILLed mid-create leaves), with the box's provision-by given.
asked_record() {
  local d=$RUNNER_STATE/jobs/$1
  mkdir -p "$d"
  echo CREATING >"$d/state"; echo g-7 >"$d/gen"; own_label "$1" g-7 >"$d/label"; echo fold >"$d/kind"
  echo 999999 >"$d/launcher"; echo 1 >"$d/asked"; echo 0.5 >"$d/dph"; echo 4242 >"$d/offer"
  echo $(($(date -u +%s) - 300)) >"$d/created_at"; echo "$2" >"$d/provision_by"
  echo $(($(date -u +%s) + 3600)) >"$d/deadline"
}

@test "a lost create judged after its box's provision-by: one closed UNSEEN row, hours to the provision-by; judged before it: no row" {
  pb=$(($(date -u +%s) - 60))                     # the box, if rented, ended itself a minute ago
  asked_record fold2 "$pb"
  label=$(cat "$RUNNER_STATE/jobs/fold2/label")
  asked_record fold3 $(($(date -u +%s) + 600))    # a box rented would still be listed: none was
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/fold2" ]
  [ ! -d "$RUNNER_STATE/jobs/fold3" ]
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(open_rows)" -eq 0 ]
  row=$(grep "^unseen:$label,fold2,g-7,4242,0.5," "$LEDGER")
  echo "$row"
  [ "$(cut -d, -f7 <<<"$row")" = "$(date -u -d "@$pb" +%Y-%m-%dT%H:%M:%SZ)" ]   # closed at its provision-by
  c=$(cat "$RUNNER_STATE"/archive/*fold2*/created_at)
  [ "$(cut -d, -f8 <<<"$row")" = "$(awk -v s=$((pb - c)) 'BEGIN { printf "%.4f", s / 3600 }')" ]   # the most it can have billed
  [[ "$(cut -d, -f13 <<<"$row")" == "UNSEEN: its create's answer never came"* ]]
  [[ "$output" == *"job fold2: its create may have rented a box no listing showed"* ]]
  run "$REPO/runner/ledger.sh"                   # the ledger's reader counts it as spent
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"fold2 "*"rentals   1"* ]]
}

@test "a box no listing ever showed, ended past its provision-by: its row closed and an UNSEEN row for the duplicates none could see" {
  id=$(rent fold1 CREATED g-7)
  d=$RUNNER_STATE/jobs/fold1
  echo 999999 >"$d/launcher"; echo 1 >"$d/asked"; echo 0 >"$d/dups_seen"   # its launcher died at once
  echo $(($(date -u +%s) - 60)) >"$d/provision_by"
  vastai destroy instance "$id" -y --raw >/dev/null                # the box ended itself, unseen
  id2=$(rent fold3 CREATED g-8)                                     # seen once (dups_seen 1): no row
  d3=$RUNNER_STATE/jobs/fold3
  echo 999999 >"$d3/launcher"; echo 1 >"$d3/asked"; echo 1 >"$d3/dups_seen"
  echo $(($(date -u +%s) - 60)) >"$d3/provision_by"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ ! -d "$d" ]
  [ ! -d "$d3" ]
  [ "$(open_rows)" -eq 0 ]
  grep -q "^unseen:$(cat "$RUNNER_STATE"/archive/fold1-*/label),fold1,g-7," "$LEDGER"
  [[ "$(grep "^unseen:.*,fold1," "$LEDGER")" == *"UNSEEN: no listing showed its box before its provision-by"* ]]
  [ "$(grep -c "^unseen:.*,fold3," "$LEDGER")" -eq 0 ]
  grep -q "^$id2,fold3,g-8,.*Z,[0-9.]*,[0-9.]*," "$LEDGER"
}

@test "a listing settles a label when taken RUNNER_LABEL_LAG_S after the create and it vouches (seen), or at the provision-by; judged by when it was taken" {
  id=$(rent fold1 CREATED g-7)
  d=$RUNNER_STATE/jobs/fold1
  t=1000000                    # when the listing was taken: long before now, so "now" would settle all
  settled() {   # settled AT CREATED PROVISION_BY [LISTED_ID]: label_settled on a hand-made listing
    printf '%s\trunning\t%s\t0.1\th\t22\t%s\n' "${4:-$id}" "$(cat "$d/label")" "$2" >"$W/listing"
    rm -f "$W/listing.at"; [ "$1" = unknown ] || echo "$1" >"$W/listing.at"
    echo "$2" >"$d/created_at"; echo "$3" >"$d/provision_by"; echo 0 >"$d/dups_seen"
    RUNNER_LABEL_LAG_S=100 bash -c 'for f in common state ledger vast teardown; do . "$1/runner/lib/$f.sh"; done
      label_settled fold1 "$2"' _ "$REPO" "$W/listing"
  }
  run settled $t $((t - 100)) $((t + 1))           # the lag passed, before the provision-by: seen
  [ "$status" -eq 0 ]
  [ "$(cat "$d/dups_seen")" = 1 ]
  run settled $t $((t - 99)) $((t + 1))            # a second short of the lag: a resent create may land
  [ "$status" -eq 1 ]
  [ "$(cat "$d/dups_seen")" = 0 ]
  run settled $t $((t - 99)) $t                    # at the provision-by: settled, never seen
  [ "$status" -eq 0 ]
  [ "$(cat "$d/dups_seen")" = 0 ]
  run settled $((t - 1)) $((t - 99)) $t            # a second before it, inside the lag: owed
  [ "$status" -eq 1 ]
  run settled unknown $((t - 100)) $((t + 1))      # a listing whose time is unknown
  [ "$status" -eq 1 ]
  run settled $t $((t - 100)) $((t + 1)) 424242    # its own box not in it, no other box of ours known
  [ "$status" -eq 1 ]
  [ "$(cat "$d/dups_seen")" = 0 ]
  # through vast_list: a listing taken now, its create 5 s ago, the lag 2 s; an empty page first
  echo $(($(date -u +%s) - 5)) >"$d/created_at"; echo $(($(date -u +%s) + 600)) >"$d/provision_by"
  sweep() {
    bash -c 'for f in common state ledger vast teardown; do . "$1/runner/lib/$f.sh"; done
      l=$(_vast_tmp) && vast_list "$l" || exit 9
      sweep_label fold1 "$l"; rc=$?; list_rm "$l"; exit $rc' _ "$REPO"
  }
  echo pending >"$d/dup_sweep"
  fault '[{"op": "list", "kind": "error", "status": 200, "body": {"instances": [], "total_instances": 0}}]'
  run sweep                                        # an empty page: its own box not in it
  [ "$status" -eq 2 ]
  [ "$(cat "$d/dups_seen")" = 0 ]
  [ -e "$d/dup_sweep" ]
  run sweep
  [ "$status" -eq 0 ]
  [ "$(cat "$d/dups_seen")" = 1 ]
  [ ! -e "$d/dup_sweep" ]
  [ "$(live_ids)" = "$id" ]
}

@test "a relaunch over a lost create past its provision-by writes the UNSEEN row before clearing the record" {
  asked_record probe $(($(date -u +%s) - 60))
  label=$(cat "$RUNNER_STATE/jobs/probe/label")
  export FAKE_TRAIN_S=0.2
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  grep -q "^unseen:$label,probe,g-7," "$LEDGER"
  [[ "$output" == *"old record of job probe cleared"* ]]
}

@test "a job whose destroy keeps failing backs off (doubling, capped) while the other jobs are ended" {
  bad=$(rent probe ORPHAN g-1)
  id=$(rent pilot PROVISIONED g-2)
  fault "[{\"op\": \"destroy\", \"kind\": \"error\", \"times\": null, \"instance\": $bad}]"
  RUNNER_REAPER_POLL_S=1 RUNNER_REAPER_JOB_BACKOFF_S=2 "$REPO/runner/reaper.sh" >"$W/reaper.out" 2>&1 3>&- &
  echo $! >"$W/reaper.pid"
  wait_for 120 grep -q "job probe not finished this cycle (1 in a row): next try in 1s" "$W/reaper.out"
  put_status pilot "g-2 DONE 1"
  wait_for 120 test ! -d "$RUNNER_STATE/jobs/pilot"
  wait_for 120 grep -q "job probe not finished this cycle (3 in a row): next try in 2s" "$W/reaper.out"
  grep -q "job probe not finished this cycle (2 in a row): next try in 2s" "$W/reaper.out"
  [ "$(cut -d' ' -f1 "$RUNNER_STATE/jobs/probe/retry")" -ge 3 ]
  [ "$(live_ids)" = "$bad" ]
  [ "$(cat "$RUNNER_STATE/jobs/probe/state")" = ORPHAN ]
}

@test "a job backing off is left alone by the looping reaper until its time; --once does not wait" {
  late=$(rent probe ORPHAN g-1)
  echo "3 $(($(date -u +%s) + 600))" >"$RUNNER_STATE/jobs/probe/retry"
  id=$(rent pilot PROVISIONED g-2)
  put_status pilot "g-2 DONE 1"
  RUNNER_REAPER_POLL_S=0.3 "$REPO/runner/reaper.sh" >"$W/reaper.out" 2>&1 3>&- &
  echo $! >"$W/reaper.pid"
  wait_for 120 test ! -d "$RUNNER_STATE/jobs/pilot"
  sleep 2   # more cycles
  [ "$(live_ids)" = "$late" ]
  kill -TERM "$(cat "$W/reaper.pid")"
  wait_for 10 test ! -d "$RUNNER_STATE/reaper.lock"
  run reaper_once
  [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/probe" ]
}

@test "a duplicate destroyed but not confirmed then (listing lag), gone later: its ledger row is completed" {
  id=$(rent fold3 PROVISIONED g-5)
  offer=$(cat "$RUNNER_STATE/jobs/fold3/offer")
  dup=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(cat "$RUNNER_STATE/jobs/fold3/label")" --raw | jq '.new_contract')
  ctl POST settings '{"lag_listings": 6}' >/dev/null   # > the 3 confirming listings after a destroy
  run reaper_once                      # the sweep destroys the duplicate; the lagging listing still shows it
  echo "$output"
  [[ "$output" == *"duplicate instance $dup of job fold3 could NOT be confirmed destroyed"* ]]
  [ "$(open_rows)" -eq 2 ]
  ctl POST settings '{"lag_listings": 0}' >/dev/null
  for i in 1 2 3 4; do vastai show instances --raw >/dev/null; done   # the lag runs out: it is gone
  [ "$(live_ids)" = "$id" ]
  put_status fold3 "g-5 DONE 1"
  run reaper_once
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/fold3" ]
  [ "$(ledger_rows)" -eq 2 ]
  [ "$(open_rows)" -eq 0 ]
  grep -q "^$dup,fold3,g-5,.*,2026-.*Z,[0-9.]*,[0-9.]*,[^,]*,[^,]*,[^,]*,[^,]*$" "$LEDGER"
}

# A well-formed, empty listing (an API hiccup that is valid JSON), served by the fake for N requests.
empty_listings() { fault "[{\"op\": \"list\", \"kind\": \"error\", \"status\": 200, \"body\": {\"instances\": [], \"total_instances\": 0}, \"times\": $1}]"; }

@test "empty listings while a job of ours is live count as unknown: the box is never archived GONE, adopted or destroyed" {
  id=$(rent pilot PROVISIONED g-1)
  export RUNNER_ORPHAN_GRACE_S=0
  empty_listings 2                                  # the cycle's listing and the re-check after it
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"instance $id is missing from the listing but not confirmed gone (show instance): kept"* ]]
  [ "$(cat "$RUNNER_STATE/jobs/pilot/state")" = PROVISIONED ]
  run reaper_once                                   # listed again: still the record's, never "adopted"
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" != *adopting* ]]
  [ "$(live_ids)" = "$id" ]
  [ "$(cat "$RUNNER_STATE/jobs/pilot/state")" = PROVISIONED ]
  [ ! -e "$RUNNER_STATE/jobs/pilot/gone_since" ]
  [ ! -d "$RUNNER_STATE/archive" ]
  [ "$(open_rows)" -eq 1 ]
  vastai destroy instance "$id" -y >/dev/null       # really gone now: show instance confirms it
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-*/result)" = GONE ]
  [ "$(open_rows)" -eq 0 ]
}

@test "two operators on one account: one's reaper never adopts the other's live box, and its budget counts that box's hours left" {
  a_id=$(rent pilot PROVISIONED g-a)               # operator A: this world's RUNNER_STATE
  a_label=$(cat "$RUNNER_STATE/jobs/pilot/label")
  export RUNNER_STATE=$W/state-b RUNNER_ORPHAN_GRACE_S=0 RUNNER_UNKNOWN_COMMIT_H=100
  run reaper_once                                   # operator B's reaper
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$a_id" ]
  [[ "$output" == *"instance $a_id (label $a_label) is not this operator's"* ]]
  [ ! -d "$RUNNER_STATE/jobs" ] || [ -z "$(ls "$RUNNER_STATE/jobs")" ]   # no adopted record either
  [ "$(cat "$W/state/operator")" != "$(cat "$RUNNER_STATE/operator")" ]
  run reaper_once
  [[ "$output" != *"is not this operator's"* ]]    # said once
  [ "$(live_ids)" = "$a_id" ]
  dph=$(vastai show instances --raw | jq ".[] | select(.id == $a_id) | .dph_total")
  RUNNER_MARGIN_USD=1000 run launch --yes probe    # B's budget guard
  echo "$output"; [ "$status" -eq 3 ]
  # A's box has about 1 h left (its label's deadline): about dph x 1 h, never the flat 100 h guess
  k=$(sed -n 's/.*commitments \$\([0-9.]*\) + margin.*/\1/p' <<<"$output")
  awk -v k="$k" -v d="$dph" 'BEGIN { exit !(k > 0.9 * d && k <= d * 1.01) }'
}

@test "a looping reaper ended by TERM mid-listing leaves no temp file behind" {
  mkdir -p "$W/tmp"
  fault '[{"op": "list", "kind": "delay", "delay_s": 4, "times": null}]'
  TMPDIR=$W/tmp RUNNER_REAPER_POLL_S=60 "$REPO/runner/reaper.sh" >"$W/reaper.out" 2>&1 3>&- &
  rp=$!
  echo "$rp" >"$W/reaper.pid"
  tmp_used() { [ -n "$(ls -A "$W/tmp")" ]; }
  wait_for 30 tmp_used                                             # its listing's temp files exist
  kill -TERM "$rp"
  wait_for 10 process_gone "$rp"
  ls -la "$W/tmp"
  [ -z "$(ls -A "$W/tmp")" ]
}
