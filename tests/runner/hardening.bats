#!/usr/bin/env bats
# The runner at campaign scale: stuck and empty locks, full disks, empty ids and labels, unrecorded
# boxes, pid reuse, a second signal, no reaper, and exit codes that tell the truth.

load helpers

setup() { world; }
teardown() {
  umount "$BATS_TEST_TMPDIR/mnt" 2>/dev/null || true
  [ -z "${sleeper:-}" ] || kill "$sleeper" 2>/dev/null || true
  world_end
}

# old PATH: set PATH's mtime a minute back (an empty lock left by a crash or a full disk)
old() { touch -d "@$(($(date -u +%s) - 60))" "$1"; }

# full_state [SIZE]: RUNNER_STATE on a small tmpfs (256k), filled but for one page (room for one
# lock's owner)
full_state() {
  local mnt=$BATS_TEST_TMPDIR/mnt
  mkdir -p "$mnt"
  mount -t tmpfs -o "size=${1:-256k}" tmpfs "$mnt" 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  cp -a "$RUNNER_STATE/." "$mnt/"
  export RUNNER_STATE=$mnt
  head -c 4000000 /dev/zero >"$mnt/fill" 2>/dev/null || true
  truncate -s -4096 "$mnt/fill"
}

@test "an empty ledger lock left behind is broken once older than RUNNER_LOCK_STALE_S: the launch writes its row" {
  mkdir "$LEDGER.lock"; old "$LEDGER.lock"
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(created_count)" -eq 1 ]
  grep -q "breaking stale lock $LEDGER.lock" "$RUNNER_STATE/runner.log"
}

@test "an empty reaper lock and an empty record lock are broken: the reaper runs and ends a past-deadline box" {
  rent pilot PROVISIONED g-1 >/dev/null
  echo $(($(date -u +%s) - 5)) >"$RUNNER_STATE/jobs/pilot/deadline"
  mkdir "$RUNNER_STATE/reaper.lock" "$RUNNER_STATE/jobs/.pilot.lock"
  old "$RUNNER_STATE/reaper.lock"; old "$RUNNER_STATE/jobs/.pilot.lock"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
}

@test "a young empty lock is not broken (a taker may be between mkdir and its owner's rename)" {
  mkdir "$RUNNER_STATE/reaper.lock"
  run reaper_once
  [ "$status" -eq 4 ]
}

@test "pid reuse: a lock or launcher pid now naming another process (other start time) is not the owner" {
  sleep 300 3>&- & sleeper=$!
  id=$(rent fold0 RUNNING g-1)
  echo "$sleeper" >"$RUNNER_STATE/jobs/fold0/launcher"
  echo "Thu Jan  1 00:00:00 1970" >"$RUNNER_STATE/jobs/fold0/launcher_start"
  mkdir "$RUNNER_STATE/reaper.lock"
  echo "$sleeper Thu Jan  1 00:00:00 1970" >"$RUNNER_STATE/reaper.lock/owner"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/fold0-*/result)" = ABANDONED ]
  kill -0 "$sleeper"                                # the unrelated process was left alone
}

@test "a deadline passing while a live launcher's create is in flight (no id yet) never archives its record" {
  sleep 300 3>&- & sleeper=$!
  mkdir -p "$RUNNER_STATE/jobs/pilot"
  d=$RUNNER_STATE/jobs/pilot
  echo CREATING >"$d/state"; echo g-9 >"$d/gen"; own_label pilot g-9 >"$d/label"; echo pilot >"$d/kind"
  echo 1 >"$d/asked"; echo 0.5 >"$d/dph"; echo "$sleeper" >"$d/launcher"
  bash -c '. "$1/runner/lib/common.sh" && proc_start "$2"' _ "$REPO" "$sleeper" >"$d/launcher_start"   # the launcher's own identity
  echo $(($(date -u +%s) - 60)) >"$d/created_at"; echo $(($(date -u +%s) - 5)) >"$d/deadline"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ -d "$d" ]                                       # the launcher persists the id (or adopts) itself
  kill "$sleeper"; sleeper=""                       # once the launcher is gone the reaper gives up on it
  run reaper_once
  [ ! -d "$d" ]
}

@test "state disk full during label adoption: an id that did not persist is never 'confirmed gone'" {
  id=$(rent fold4 CREATING g-9)
  rm "$RUNNER_STATE/jobs/fold4/instance"
  echo 1 >"$RUNNER_STATE/jobs/fold4/asked"; echo 999999 >"$RUNNER_STATE/jobs/fold4/launcher"
  full_state
  run reaper_once
  echo "$output"
  [ -z "$(grep "instance  confirmed gone" "$RUNNER_STATE/runner.log")" ]
  [ -z "$(grep "destroy instance  " "$RUNNER_STATE/runner.log")" ]
  [ -d "$RUNNER_STATE/jobs/fold4" ]                 # not archived: nothing was confirmed
  [ "$(live_ids)" = "$id" ]
  rm -f "$RUNNER_STATE/fill"                        # the disk is freed: the next cycle finishes it
  run reaper_once
  [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/fold4" ]
}

@test "a full state disk at the launch's start is named as such (exit 1), never as another launch holding the lock (4)" {
  full_state
  head -c 8192 /dev/zero >>"$RUNNER_STATE/fill" 2>/dev/null || true   # not one page left
  run launch --yes probe
  echo "$output"; [ "$status" -eq 1 ]
  [[ "$output" == *"nothing can be written under RUNNER_STATE=$RUNNER_STATE (disk full?): nothing was rented"* ]]
  [[ "$output" != *"another launch"* ]]
  [ "$(created_count)" -eq 0 ]
}

@test "the state disk filling before the create: nothing is rented (exit 1, the full disk named); the record that cannot be archived is removed" {
  full_state
  rm "$RUNNER_STATE/fill"                           # room for the launch's steps up to the go-ahead
  mkfifo "$W/answer"
  launch probe <"$W/answer" 2>"$W/err" 3>&- &
  pid=$!
  exec 4>"$W/answer"
  until grep -q "rent it?" "$W/err"; do kill -0 "$pid"; sleep 0.1; done   # the launch waits for its go-ahead
  head -c 1000000 /dev/zero >"$RUNNER_STATE/fill" 2>/dev/null || true   # full while the offer is read,
  truncate -s -4096 "$RUNNER_STATE/fill"            # but for one page (the record's first field)
  echo y >&4
  exec 4>&-
  rc=0; wait "$pid" || rc=$?
  cat "$W/err"
  [ "$rc" -eq 1 ]                                   # not 7: no box can be left behind
  [ "$(created_count)" -eq 0 ]                      # the record comes first: no create without it
  grep -qx "runner: cannot write job probe's record under $RUNNER_STATE before its create: nothing was rented (free space under RUNNER_STATE, then launch again)" "$W/err"
  [ "$(tail -n 1 "$W/err")" = "runner: job probe's record could not be archived under $RUNNER_STATE (disk full?): removed, its ending complete (the ledger holds whatever it rented)" ]
  [ ! -d "$RUNNER_STATE/jobs/probe" ]               # nothing left for the reaper to judge
  rm "$RUNNER_STATE/fill"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(created_count)" -eq 0 ]
  [ ! -s "$LEDGER" ] || [ "$(ledger_rows)" -eq 0 ]
}

@test "the state disk filling while the create is in flight: the record's reserve lets the box be destroyed, its label settled and the record archived (exit 1, not 7)" {
  full_state
  rm "$RUNNER_STATE/fill"                           # room for the launch up to its create
  export RUNNER_LABEL_LAG_S=3
  fault '[{"op": "create", "kind": "delay", "delay_s": 3}]'
  launch --yes probe 2>"$W/err" 3>&- &
  pid=$!
  wait_for 60 test -e "$RUNNER_STATE/jobs/probe/asked"   # the create is asked, its answer 3 s away
  [ "$(stat -c %s "$RUNNER_STATE/jobs/probe/.reserve")" -eq $((64 * 1024)) ]
  head -c 1000000 /dev/zero >"$RUNNER_STATE/fill" 2>/dev/null || true   # full, to the last page
  rc=0; wait "$pid" || rc=$?
  cat "$W/err"
  [ "$rc" -eq 1 ]                                   # the launch failed; nothing is left billing
  grep -q "^runner: cannot persist instance [0-9]* of job probe" "$W/err"
  grep -q "^runner: instance [0-9]* of job probe destroyed (confirmed gone" "$W/err"
  [[ "$(cat "$W/err")" != *"could NOT be confirmed"* ]]   # its label settled: the sweep knew its id
  [ "$(created_count)" -eq 1 ]
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/probe" ]
  [ "$(cat "$RUNNER_STATE"/archive/probe-*/result)" = LAUNCH_FAILED ]
  [ -z "$(find "$RUNNER_STATE" -name .reserve)" ]  # the ballast is not archived
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(open_rows)" -eq 0 ]
  [ "$(tail -n 1 "$LEDGER" | awk -F, '{ print $13 }')" = LAUNCH_FAILED ]
}

@test "the same with no reserve (RUNNER_RECORD_RESERVE_KB=0): the launcher's own id settles the label; the record, not archivable, is removed (exit 1, not 7)" {
  full_state
  rm "$RUNNER_STATE/fill"
  export RUNNER_LABEL_LAG_S=3 RUNNER_RECORD_RESERVE_KB=0
  fault '[{"op": "create", "kind": "delay", "delay_s": 3}]'
  launch --yes probe 2>"$W/err" 3>&- &
  pid=$!
  wait_for 60 test -e "$RUNNER_STATE/jobs/probe/asked"
  head -c 1000000 /dev/zero >"$RUNNER_STATE/fill" 2>/dev/null || true   # full, to the last page
  rc=0; wait "$pid" || rc=$?
  cat "$W/err"
  [ "$rc" -eq 1 ]
  grep -q "^runner: job probe: instance [0-9]* could not be written to its record; destroying it anyway" "$W/err"
  grep -q "^runner: instance [0-9]* of job probe destroyed (confirmed gone" "$W/err"
  [[ "$(cat "$W/err")" != *"could NOT be confirmed"* ]]   # the sweep used the id it holds
  grep -q "^runner: job probe's record could not be archived .*: removed" "$W/err"
  [ "$(created_count)" -eq 1 ]
  [ "$(live_count)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/probe" ]
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(open_rows)" -eq 0 ]
  rm "$RUNNER_STATE/fill"
  run reaper_once                                   # nothing left to judge: no unseen row either
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(ledger_rows)" -eq 1 ]
}

@test "the state disk full when the reaper ends a campaign's six boxes past their deadlines: each record's reserve gives its ending room (one cycle: all destroyed, rows closed with their reason, archived)" {
  for job in pilot fold0 fold1 fold2 fold3 fold4; do
    rent "$job" PROVISIONED g-1 >/dev/null
    head -c $((64 * 1024)) /dev/zero >"$RUNNER_STATE/jobs/$job/.reserve"   # what the launch wrote
    echo $(($(date -u +%s) - 5)) >"$RUNNER_STATE/jobs/$job/deadline"
  done
  full_state 1m
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(ledger_rows)" -eq 6 ]
  [ "$(open_rows)" -eq 0 ]
  [ "$(awk -F, 'NF == 13 && $13 == "DEADLINE"' "$LEDGER" | wc -l)" -eq 6 ]   # each closing row
  [ -z "$(ls "$RUNNER_STATE/jobs")" ]
  [ "$(cat "$RUNNER_STATE"/archive/*/result | sort | uniq -c | awk '{ print $1, $2 }')" = "6 DEADLINE" ]
}

@test "a reserve a full disk took is written again once the disk has room (16 times it free), never into the last free pages" {
  rent fold0 PROVISIONED g-1 >/dev/null
  echo 1 >"$RUNNER_STATE/jobs/fold0/asked"
  head -c $((64 * 1024)) /dev/zero >"$RUNNER_STATE/jobs/fold0/.reserve"   # what the launch wrote
  full_state 2m
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 1 ]                        # a healthy box runs on
  [ ! -e "$RUNNER_STATE/jobs/fold0/.reserve" ]      # given back: its lock's owner needed the room
  truncate -s -$((512 * 1024)) "$RUNNER_STATE/fill"   # 512 KiB free: under 16 x 64 KiB
  run reaper_once
  [ "$status" -eq 0 ]
  [ ! -e "$RUNNER_STATE/jobs/fold0/.reserve" ]
  rm "$RUNNER_STATE/fill"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(stat -c %s "$RUNNER_STATE/jobs/fold0/.reserve")" -eq $((64 * 1024)) ]
  [ "$(live_count)" -eq 1 ]
}

@test "a malformed RUNNER_RECORD_RESERVE_KB never ends the reaper; a launch under it names it and rents nothing" {
  rent fold0 PROVISIONED g-1 >/dev/null
  echo 1 >"$RUNNER_STATE/jobs/fold0/asked"           # a live record without its reserve
  RUNNER_RECORD_RESERVE_KB=64k run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 1 ]
  [ ! -e "$RUNNER_STATE/jobs/fold0/.reserve" ]
  RUNNER_RECORD_RESERVE_KB=64k run launch --yes probe
  echo "$output"; [ "$status" -eq 1 ]
  [[ "$output" == *"RUNNER_RECORD_RESERVE_KB must be a whole number of KiB, not '64k'"* ]]
  [ "$(created_count)" -eq 1 ]                     # fold0's box only
}

@test "an unlabelled instance in the account: the budget reads its dph_total (empty fields kept) and counts it" {
  # on an offer the launcher could rent too (the fake's cheapest host has a CUDA 12.4 driver)
  offer=$(vastai search offers 'num_gpus=1 cuda_max_good>=13.0' --order dph_total --limit 1 --raw | jq '.[0].id')
  vastai create instance "$offer" --image "$RUNNER_IMAGE" --raw >/dev/null
  run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  [[ "$output" == *"commitments \$0.2"* ]]           # its $/h x RUNNER_UNKNOWN_COMMIT_H (1 h)
}

@test "an empty record directory never adopts: an unlabelled instance (someone else's) is left alone" {
  offer=$(vastai search offers 'num_gpus=1' --order dph_total --limit 1 --raw | jq '.[0].id')
  other=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --raw | jq '.new_contract')
  mkdir -p "$RUNNER_STATE/jobs/fold2"               # a launcher stopped before writing any field
  old "$RUNNER_STATE/jobs/fold2"
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$other" ]
  [ ! -s "$LEDGER" ] || [ "$(ledger_rows)" -eq 0 ]
  [ ! -d "$RUNNER_STATE/jobs/fold2" ]               # given up: it never asked for a create
}

@test "a create that answers after the label window: the box has no record, the reaper adopts it after the grace, with a row" {
  # what the launcher leaves: it gave up on the label (archived LAUNCH_FAILED), then the box appeared
  offer=$(vastai search offers 'num_gpus=1' --order dph_total --limit 1 --raw | jq '.[0].id')
  late=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label probe g-late)" --raw | jq '.new_contract')
  other=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label someone:probe:g-late --raw | jq '.new_contract')
  RUNNER_ORPHAN_GRACE_S=0 run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$other" ]                      # only our prefix is ours
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(open_rows)" -eq 0 ]
  grep -q "^$late,probe,g-late," "$LEDGER"          # job and generation read off its label
}

@test "an adopted box whose destroy is not confirmed gets a record (ORPHAN): its row is completed once it is gone" {
  offer=$(vastai search offers 'num_gpus=1' --order dph_total --limit 1 --raw | jq '.[0].id')
  late=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label probe g-lag)" --raw | jq '.new_contract')
  export RUNNER_DESTROY_TRIES=1 RUNNER_CONFIRM_WAIT_S=0.5
  fault '[{"op": "destroy", "kind": "error", "status": 500, "times": 100}]'
  RUNNER_ORPHAN_GRACE_S=0 run reaper_once
  echo "$output"
  [ "$(cat "$RUNNER_STATE/jobs/adopted-$late/state")" = ORPHAN ]
  [ "$(cat "$RUNNER_STATE/jobs/adopted-$late/instance")" = "$late" ]
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(open_rows)" -eq 1 ]
  [ "$(live_count)" -eq 1 ]
  ctl DELETE faults >/dev/null
  RUNNER_ORPHAN_GRACE_S=0 run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
  grep -q "^$late,probe,g-lag,.*,[0-9.]*,[0-9.]*,,,,$" "$LEDGER"   # the closing row keeps the label's job
  [ ! -d "$RUNNER_STATE/jobs/adopted-$late" ]
  [ "$(cat "$RUNNER_STATE"/archive/adopted-"$late"-*/result)" = ORPHAN ]
}

@test "the same through a real launch: the create answered with an error lands 6 s later, after the label window" {
  export RUNNER_LABEL_LAG_S=2
  fault '[{"op": "create", "kind": "late", "delay_s": 6}]'
  run launch --yes probe
  echo "$output"; [ "$status" -eq 1 ]
  [ "$(cat "$RUNNER_STATE"/archive/probe-*/result)" = LAUNCH_FAILED ]
  wait_for 40 created_is 1
  RUNNER_ORPHAN_GRACE_S=0 run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 0 ]
  [ "$(ledger_rows)" -eq 1 ]
  [ "$(open_rows)" -eq 0 ]
}

@test "an unrecorded labelled box younger than RUNNER_ORPHAN_GRACE_S is left for now" {
  offer=$(vastai search offers 'num_gpus=1' --order dph_total --limit 1 --raw | jq '.[0].id')
  vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$(own_label fold1 g-x)" --raw >/dev/null
  RUNNER_ORPHAN_GRACE_S=600 run reaper_once
  [ "$status" -eq 0 ]
  [ "$(live_count)" -eq 1 ]
}

@test "a second signal cannot interrupt the cleanup: TERM while RUNNING, TERM again while DESTROYING -> ORPHAN, exit 7" {
  printf '#!/bin/sh\nsleep 30\nexec "%s" "$@"\n' "$RUNNER_SSH" >"$W/slow_ssh.sh"; chmod +x "$W/slow_ssh.sh"
  export RUNNER_SSH=$W/slow_ssh.sh RUNNER_CONFIRM_WAIT_S=0.5 RUNNER_DESTROY_TRIES=3
  fault '[{"op": "destroy", "kind": "error", "status": 500, "times": 100}]'
  "$REPO/runner/launch.sh" --yes probe >"$W/l.out" 2>&1 3>&- &
  pid=$!
  wait_for 60 grep -qx RUNNING "$RUNNER_STATE/jobs/probe/state"
  kill -TERM "$pid"
  wait_for 30 grep -qx DESTROYING "$RUNNER_STATE/jobs/probe/state"
  kill -TERM "$pid"
  rc=0; wait "$pid" || rc=$?
  cat "$W/l.out"
  [ "$rc" -eq 7 ]
  [ "$(cat "$RUNNER_STATE/jobs/probe/state")" = ORPHAN ]
  [ ! -d "$RUNNER_STATE/launch.lock" ]
  [ ! -d "$RUNNER_STATE/launch.probe.lock" ]
  [ ! -d "$RUNNER_STATE/jobs/.probe.lock" ]
  ctl DELETE faults >/dev/null
  run reaper_once
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
}

@test "no live reaper: the launch starts one (RUNNER_REAPER_MODE=start) or refuses naming the command (refuse, exit 13)" {
  RUNNER_REAPER_MODE=refuse run launch --yes probe
  [ "$status" -eq 13 ]
  [[ "$output" == *"(start it first: runner/reaper.sh --background)" ]]
  [ "$(created_count)" -eq 0 ]
  RUNNER_REAPER_MODE=start run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  lock_pid=$(cut -d' ' -f1 "$RUNNER_STATE/reaper.lock/owner")
  echo "$lock_pid" >"$W/reaper.pid"
  kill -0 "$lock_pid"
  wait_for 120 none_live            # the started reaper (or the box) ends the job at its DONE
  wait_for 120 test ! -d "$RUNNER_STATE/jobs/probe"   # and the reaper closes its record and row
  [ "$(open_rows)" -eq 0 ]
}

@test "the RUNBOOK's reaper command works on a fresh HOME (its state folder is made)" {
  export HOME=$W/fresh
  unset XDG_STATE_HOME RUNNER_STATE
  run "$REPO/runner/reaper.sh" --background
  echo "$output"; [ "$status" -eq 0 ]
  st=$W/fresh/.local/state/hearsay-runner
  cut -d' ' -f1 "$st/reaper.lock/owner" >"$W/reaper.pid"
  [ -f "$st/reaper.out" ]
  kill -0 "$(cat "$W/reaper.pid")"
}

@test "truthful exit codes: TMPDIR missing -> 2; stdout on /dev/full or closed -> 0 when PROVISIONED" {
  TMPDIR=$W/no-such-dir run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
  "$REPO/runner/launch.sh" --yes probe >/dev/full 2>"$W/full.err" 3>&- || { cat "$W/full.err"; false; }
  [ "$(cat "$RUNNER_STATE/jobs/probe/state")" = PROVISIONED ]
  grep -q "cannot print instance" "$W/full.err"
  "$REPO/runner/launch.sh" --yes --no-pilot-gate fold 1 >&- 2>"$W/closed.err" 3>&- || { cat "$W/closed.err"; false; }
  [ "$(cat "$RUNNER_STATE/jobs/fold1/state")" = PROVISIONED ]
}

@test "mixed job words are a usage error (exit 2), never a merged job" {
  run launch --yes fold 3 pilot
  [ "$status" -eq 2 ]
  [[ "$output" == *"one job per launch: got fold 3 and then pilot"* ]]
  run launch --yes fold 3 fold 4
  [ "$status" -eq 2 ]
  run launch --yes pilot probe
  [ "$status" -eq 2 ]
  [ "$(created_count)" -eq 0 ]
}

@test "the key file must be mode 600 (a looser one is refused naming the chmod); the key is never in argv" {
  unset VAST_API_KEY
  f=$XDG_CONFIG_HOME/vastai/vast_api_key
  mkdir -p "$(dirname "$f")"
  (umask 022; printf '%s' "$API_KEY" >"$f")
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 11 ]
  [ "$output" = "runner: the API key file $f is readable by others (run: chmod 600 $f)" ]
  chmod 600 "$f"
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 0 ]
  rm "$f"
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 11 ]
  [[ "$output" == *"without putting it on a command line"* ]]
  [[ "$output" != *"set api-key"* ]]
}
