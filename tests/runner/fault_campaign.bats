#!/usr/bin/env bats
# The short fault campaign (CI): seeded random faults at every step, killed launchers, relaunches,
# deadlines; the goal is 0 instances left, ledger rows = creations, 0 rows open, 0 secrets seen.
# The full 200-scenario figure is in docs/BENCHMARKS.md ("Runner fault campaign").

@test "12 seeded fault scenarios: nothing left billing, every creation in the ledger, no secret seen" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  run "$REPO/scripts/fault_campaign.sh" --scenarios 12 --seed 7 --jobs 3 --keep "$BATS_TEST_TMPDIR/c" 3>&-
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" =~ ^scenarios\ 12\ \|\ instances\ left\ 0\ \|\ ledger\ rows\ ([0-9]+)\ vs\ creations\ ([0-9]+)\ \|\ rows\ open\ 0\ \|\ secrets\ seen\ 0 ]]
  [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
}
