#!/usr/bin/env bats
# runner/ledger.sh: sums spend per job and in total; open rows are named and make it exit 1.

teardown() { umount "$BATS_TEST_TMPDIR/mnt" 2>/dev/null || true; }

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
  grep -qx '5,probe,g5,9,2.0,2026-11-30T[0-9:]*Z,,,' "$LEDGER"
  grep -qx '5,probe,g5,9,2.0,2026-11-30T[0-9:]*Z,2026-11-30T[0-9:]*Z,1.5000,3.0000' "$LEDGER"
  run "$REPO/runner/ledger.sh"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "total    rentals   4  hours    5.5000  spend \$   8.5000" ]
}

@test "a full disk never truncates the ledger: the failed append is loud, retried, returns 1, the rows stay" {
  mnt=$BATS_TEST_TMPDIR/mnt
  mkdir -p "$mnt"
  mount -t tmpfs -o size=16k tmpfs "$mnt" 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
  export LEDGER=$mnt/ledger.csv
  cp "$BATS_TEST_TMPDIR/ledger.csv" "$LEDGER"
  for i in $(seq 10 90); do echo "$i,fold1,g$i,9,1.0,2026-11-30T00:00:00Z,,," >>"$LEDGER"; done
  rows=$(wc -l <"$LEDGER")
  cp "$LEDGER" "$BATS_TEST_TMPDIR/before.csv"
  head -c 100000 /dev/zero >"$mnt/fill" 2>/dev/null || true     # the disk is full now, but for
  truncate -s -4096 "$mnt/fill"                                   # one page (room for a lock's owner)
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    export RUNNER_STATE='$BATS_TEST_TMPDIR/st' RUNNER_LEDGER_TRIES=2
    for i in \$(seq 10 90); do ledger_complete \$i fold1 g\$i 9 1.0 1796000000 1796005400 || exit 1; done"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"runner: LEDGER WRITE FAILED after 2 tries: "* ]]
  [ "$(sed -n "1,${rows}p" "$LEDGER" | cksum)" = "$(cksum <"$BATS_TEST_TMPDIR/before.csv")" ]
  [ "$(wc -l <"$LEDGER")" -ge "$rows" ]                           # nothing lost, at most a row gained
  grep -q '^90,fold1,g90,' "$LEDGER"
  rm -f "$mnt/fill"
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    export RUNNER_STATE='$BATS_TEST_TMPDIR/st'
    for i in \$(seq 10 90); do ledger_complete \$i fold1 g\$i 9 1.0 1796000000 1796005400 || exit 1; done"
  [ "$status" -eq 0 ]
  run "$REPO/runner/ledger.sh"
  echo "$output"
  [[ "$output" != *"open "* ]]                                   # every rental closed
  # at most the one row the disk cut short is named malformed; the full row follows it
  [ "$status" -eq 0 ] || [[ "${lines[-1]}" =~ ^malformed\ 1\ row ]]
}
