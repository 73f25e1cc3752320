#!/usr/bin/env bats
# runner/ledger.sh: sums spend per job and in total; open rows are named and make it exit 1.

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

@test "the library completes a row with hours and cost from the confirmed destruction" {
  run bash -c ". '$REPO/runner/lib/common.sh'; . '$REPO/runner/lib/ledger.sh'
    export RUNNER_STATE='$BATS_TEST_TMPDIR/st'
    ledger_append 5 probe g5 9 2.0 1796000000
    ledger_append 5 probe g5 9 2.0 1796000000
    ledger_complete 5 1796000000 1796005400 2.0"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^5,' "$LEDGER")" -eq 1 ]
  grep -qx '5,probe,g5,9,2.0,2026-11-30T[0-9:]*Z,2026-11-30T[0-9:]*Z,1.5000,3.0000' "$LEDGER"
}
