#!/usr/bin/env bats
# runner/ledger.sh: sums spend per job and in total; open rows are named and make it exit 1.

teardown() { umount "$BATS_TEST_TMPDIR/mnt" 2>/dev/null || true; }

# ledger_on_tmpfs: the test's ledger moved onto a 16 KiB tmpfs at $mnt (root only, else skip)
ledger_on_tmpfs() {
  mnt=$BATS_TEST_TMPDIR/mnt
  mkdir -p "$mnt"
  mount -t tmpfs -o size=16k tmpfs "$mnt" 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  export LEDGER=$mnt/ledger.csv
  cp "$BATS_TEST_TMPDIR/ledger.csv" "$LEDGER"
}

setup() {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  export LEDGER=$BATS_TEST_TMPDIR/ledger.csv
  cat >"$LEDGER" <<'CSV'
id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost
1,pilot,g1,9,2.0,2026-11-30T00:00:00Z,2026-11-30T01:30:00Z,1.5000,3.0000
2,fold3,g2,9,1.0,2026-11-30T00:00:00Z,2026-11-30T02:00:00Z,2.0000,2.0000
3,fold3,g3,9,1.0,2026-11-30T03:00:00Z,2026-11-30T03:30:00Z,0.5000,0.5000
CSV
}

@test "totals per job and overall" {
  run "$REPO/runner/ledger.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"fold3    rentals   2  hours    2.5000  spend \$   2.5000"* ]]
  [[ "$output" == *"pilot    rentals   1  hours    1.5000  spend \$   3.0000"* ]]
  [ "${lines[2]}" = "total    rentals   3  hours    4.0000  spend \$   5.5000" ]
}

@test "an open row (no confirmed destruction) is named and exits 1" {
  echo "4,full,g4,9,3.0,2026-11-30T04:00:00Z,,," >>"$LEDGER"
  run "$REPO/runner/ledger.sh"
  [ "$status" -eq 1 ]
  [ "${lines[-1]}" = "open     1 row(s) not confirmed destroyed: 4" ]
}

@test "a 9-column ledger with 13-field rows appended (offer and reason columns) is summed; a row of another length is named" {
  echo "4,full,g4,9,3.0,2026-11-30T04:00:00Z,,,,A100 SXM4,32,13.0," >>"$LEDGER"
  echo "4,full,g4,9,3.0,2026-11-30T04:00:00Z,2026-11-30T05:00:00Z,1.0000,3.0000,A100 SXM4,32,13.0,CAMPAIGN_DEADLINE" >>"$LEDGER"
  run "$REPO/runner/ledger.sh"
  echo "$output"; [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "total    rentals   4  hours    5.0000  spend \$   8.5000" ]
  echo "5,full,g5,9,3.0,2026-11-30T04:00:00Z,,,,A100 SXM4" >>"$LEDGER"   # cut short
  run "$REPO/runner/ledger.sh"
  [ "$status" -eq 1 ]
  [[ "$output" == *"malformed 1 row(s) (a write cut short?) at line(s): 7"* ]]
  sed '1s/$/,gpu_name,cpu_cores,driver_cuda,reason/' "$LEDGER" | sed '$d' >"$BATS_TEST_TMPDIR/new.csv"   # a ledger begun with 13
  run "$REPO/runner/ledger.sh" "$BATS_TEST_TMPDIR/new.csv"
  [ "$status" -eq 0 ]
}

@test "a file that is not the ledger is refused (exit 2)" {
  echo "a,b" >"$BATS_TEST_TMPDIR/x.csv"
  run "$REPO/runner/ledger.sh" "$BATS_TEST_TMPDIR/x.csv"
  [ "$status" -eq 2 ]
  [ "$output" = "runner: $BATS_TEST_TMPDIR/x.csv has no ledger header (is it the runner's ledger?)" ]
}

@test "the library appends a closing row (never rewrites): hours and cost from the confirmed destruction" {
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    export RUNNER_STATE='$BATS_TEST_TMPDIR/st'
    ledger_append 5 probe g5 9 2.0 1796000000
    ledger_append 5 probe g5 9 2.0 1796000000
    ledger_complete 5 probe g5 9 2.0 1796000000 1796005400
    ledger_complete 5 probe g5 9 2.0 1796000000 1796005400"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^5,' "$LEDGER")" -eq 2 ]
  grep -qx '5,probe,g5,9,2.0,2026-11-30T[0-9:]*Z,,,,,,,' "$LEDGER"
  grep -qx '5,probe,g5,9,2.0,2026-11-30T[0-9:]*Z,2026-11-30T[0-9:]*Z,1.5000,3.0000,,,,' "$LEDGER"
  run "$REPO/runner/ledger.sh"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "total    rentals   4  hours    5.5000  spend \$   8.5000" ]
}

@test "a full disk never truncates the ledger: the failed append is loud, spooled, and appended once there is room" {
  ledger_on_tmpfs
  for i in $(seq 10 90); do echo "$i,fold1,g$i,9,1.0,2026-11-30T00:00:00Z,,," >>"$LEDGER"; done
  rows=$(wc -l <"$LEDGER")
  cp "$LEDGER" "$BATS_TEST_TMPDIR/before.csv"
  head -c 100000 /dev/zero >"$mnt/fill" 2>/dev/null || true     # the disk is full now, but for
  truncate -s -4096 "$mnt/fill"                                   # one page (room for a lock's owner)
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    export RUNNER_STATE='$BATS_TEST_TMPDIR/st' RUNNER_LEDGER_TRIES=2 RUNNER_LEDGER_BACKOFF_S=0.05
    mkdir -p \"\$RUNNER_STATE\"
    for i in \$(seq 10 90); do ledger_complete \$i fold1 g\$i 9 1.0 1796000000 1796005400 || exit 1; done"
  echo "$output"
  [ "$status" -eq 0 ]                                             # every row kept: ledger or spool
  [[ "$output" == *"runner: LEDGER WRITE FAILED after 2 tries: "*"the row is spooled in $BATS_TEST_TMPDIR/st/ledger.spool"* ]]
  [ "$(sed -n "1,${rows}p" "$LEDGER" | cksum)" = "$(cksum <"$BATS_TEST_TMPDIR/before.csv")" ]
  [ "$(wc -l <"$LEDGER")" -ge "$rows" ]                           # nothing lost, at most a row gained
  grep -q '^90,fold1,g90,.*,1.5000,1.5000,,,,$' "$BATS_TEST_TMPDIR/st/ledger.spool"
  rm -f "$mnt/fill"
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    export RUNNER_STATE='$BATS_TEST_TMPDIR/st'
    ledger_flush"                                                 # what each reaper cycle runs
  [ "$status" -eq 0 ]
  [ ! -s "$BATS_TEST_TMPDIR/st/ledger.spool" ]
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [[ "$output" != *"open "* ]]                                   # every rental closed
  [ "$(grep -c '^90,' "$LEDGER")" -eq 2 ]                         # each row once
  # at most the one row the disk cut short is named malformed; the full row follows it
  [ "$status" -eq 0 ] || [[ "${lines[-1]}" =~ ^malformed\ 1\ row ]]
}

@test "ledger and spool both on a full disk: the append is loud and returns 1 (the caller keeps its record)" {
  ledger_on_tmpfs
  mkdir -p "$mnt/st"
  head -c 100000 /dev/zero >"$mnt/fill" 2>/dev/null || true
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    export RUNNER_STATE='$mnt/st' RUNNER_LEDGER_TRIES=1
    ledger_append 77 fold2 g77 9 1.0 1796000000"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"the spool $mnt/st/ledger.spool cannot be written either: the job record is kept and the row retried"* ]]
  ! grep -q '^77,' "$LEDGER"
}

@test "rows waiting in the spool are appended by the summary; rows that still cannot be are counted, exit 1" {
  export RUNNER_STATE=$BATS_TEST_TMPDIR/st
  mkdir -p "$RUNNER_STATE"
  printf '%s\n' "7,probe,g7,9,2.0,2026-11-30T05:00:00Z,,," "7,probe,g7,9,2.0,2026-11-30T05:00:00Z,2026-11-30T05:30:00Z,0.5000,1.0000" \
    >"$RUNNER_STATE/ledger.spool"
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "total    rentals   4  hours    4.5000  spend \$   6.5000" ]
  [ ! -s "$RUNNER_STATE/ledger.spool" ]
  [ "$(grep -c '^7,' "$LEDGER")" -eq 2 ]
  echo "8,full,g8,9,1.0,2026-11-30T06:00:00Z,,," >"$RUNNER_STATE/ledger.spool"
  bash -c ". '$REPO/runner/lib/common.sh'; lock_take '$LEDGER.lock' 1 && exec sleep 60" 3>&- &
  local holder=$!                                                  # a live owner: the lock is not stale
  while [ ! -s "$LEDGER.lock/owner" ]; do sleep 0.1; done
  RUNNER_LEDGER_TRIES=1 run "$REPO/runner/ledger.sh"
  kill "$holder"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${lines[-1]}" = "spooled  1 row(s) not yet in the ledger (its disk full or its lock stuck?): $RUNNER_STATE/ledger.spool" ]
}

@test "a ledger whose folder does not exist yet: the folder is made and the row appended, none spooled" {
  export RUNNER_STATE=$BATS_TEST_TMPDIR/st LEDGER=$BATS_TEST_TMPDIR/new/deeper/ledger.csv
  mkdir -p "$RUNNER_STATE"
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    RUNNER_LEDGER_TRIES=2 RUNNER_LEDGER_BACKOFF_S=0 ledger_append 77 fold2 g77 9 1.0 1796000000"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  [ "$(grep -c '^77,fold2,g77,' "$LEDGER")" -eq 1 ]
  [ ! -s "$RUNNER_STATE/ledger.spool" ]
  rm -r "$BATS_TEST_TMPDIR/new"                                      # and a row already spooled
  echo "8,full,g8,9,1.0,2026-11-30T06:00:00Z,,," >"$RUNNER_STATE/ledger.spool"
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [ ! -s "$RUNNER_STATE/ledger.spool" ]
  grep -q '^8,full,g8,' "$LEDGER"
}

@test "a closing row with an empty cost is cost unknown, never \$0: named, left out of the total, exit 1" {
  echo "4,full,g4,9,3.0,2026-11-30T04:00:00Z,,," >>"$LEDGER"
  echo "4,full,g4,9,3.0,2026-11-30T04:00:00Z,2026-11-30T05:00:00Z,1.0000," >>"$LEDGER"
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"total    rentals   4  hours    5.0000  spend \$   5.5000"* ]]
  [ "${lines[-1]}" = "unknown  1 closed rental(s) with no cost (cost unknown, not \$0; left out of the total): 4" ]
}

@test "rows with later columns after cost (offer GPU, ...) sum like rows without them" {
  { echo "id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost,gpu,cpu_cores"
    tail -n +2 "$LEDGER"
    echo "5,full,g5,9,3.0,2026-11-30T04:00:00Z,2026-11-30T05:00:00Z,1.0000,3.0000,H100,16"; } >"$BATS_TEST_TMPDIR/wide.csv"
  run "$REPO/runner/ledger.sh" "$BATS_TEST_TMPDIR/wide.csv"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "total    rentals   4  hours    5.0000  spend \$   8.5000" ]
}

@test "a spool replayed after a re-opened rental's rows were appended writes none of them twice, and never closes it again" {
  export RUNNER_STATE=$BATS_TEST_TMPDIR/st
  mkdir -p "$RUNNER_STATE"
  c1="7,probe,g7,9,2.0,2026-11-30T05:00:00Z,2026-11-30T05:30:00Z,0.5000,1.0000,A100,32,13.0,"
  re="7,probe,g7,9,2.0,2026-11-30T05:00:00Z,,,,A100,32,13.0,REOPENED 2026-11-30T05:40:00Z"
  c2="7,probe,g7,9,2.0,2026-11-30T05:00:00Z,2026-11-30T06:00:00Z,1.0000,2.0000,A100,32,13.0,DONE"
  echo "7,probe,g7,9,2.0,2026-11-30T05:00:00Z,,,,A100,32,13.0," >>"$LEDGER"
  printf '%s\n' "$c1" "$re" >>"$LEDGER"                            # judged gone, then seen running
  printf '%s\n' "$c1" >"$RUNNER_STATE/ledger.spool"               # a replay of the first closing row
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [ "$status" -eq 1 ]                                              # still open: not closed by the replay
  [ "${lines[-1]}" = "open     1 row(s) not confirmed destroyed: 7" ]
  [ "$(grep -c '^7,' "$LEDGER")" -eq 3 ]
  printf '%s\n' "$c2" >>"$LEDGER"
  printf '%s\n' "$c1" "$re" "$c2" >"$RUNNER_STATE/ledger.spool"   # the whole story replayed
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^7,' "$LEDGER")" -eq 4 ]
  [ "${lines[-1]}" = "total    rentals   4  hours    5.0000  spend \$   7.5000" ]
  [ ! -s "$RUNNER_STATE/ledger.spool" ]
}

@test "a spooled re-open row is appended after its rental's closing row, the rental open again; replayed twice, once" {
  export RUNNER_STATE=$BATS_TEST_TMPDIR/st
  mkdir -p "$RUNNER_STATE"
  c1="7,probe,g7,9,2.0,2026-11-30T05:00:00Z,2026-11-30T05:30:00Z,0.5000,1.0000,A100,32,13.0,"
  re="7,probe,g7,9,2.0,2026-11-30T05:00:00Z,,,,A100,32,13.0,REOPENED 2026-11-30T05:40:00Z"
  echo "7,probe,g7,9,2.0,2026-11-30T05:00:00Z,,,,A100,32,13.0," >>"$LEDGER"
  printf '%s\n' "$c1" >>"$LEDGER"                                  # judged gone: closed
  printf '%s\n' "$re" >"$RUNNER_STATE/ledger.spool"               # seen running: its re-open row spooled
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(tail -n 1 "$LEDGER")" = "$re" ]
  [ "${lines[-1]}" = "open     1 row(s) not confirmed destroyed: 7" ]
  printf '%s\n' "$re" >"$RUNNER_STATE/ledger.spool"               # the same row again: not twice
  run "$REPO/runner/ledger.sh"
  [ "$(grep -c '^7,' "$LEDGER")" -eq 3 ]
}
