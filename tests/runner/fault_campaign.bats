#!/usr/bin/env bats
# The short fault campaign (CI): seeded random faults at every step, killed launchers, relaunches,
# deadlines, full disks, empty locks, second signals, slow creates, a killed reaper, pid reuse, a
# vanished laptop, and one whole campaign (a pilot, then six jobs launched at once); the goal is 0
# instances left, ledger rentals = creations, 0 open, 0 secrets in any output or file.
# The full figures are in docs/BENCHMARKS.md ("Runner fault campaign").

@test "5 seeded fault scenarios, one a whole campaign: nothing left billing, every creation in the ledger, no secret seen" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  run "$REPO/scripts/fault_campaign.sh" --scenarios 5 --seed 7 --jobs 5 --campaign-every 5 --keep "$BATS_TEST_TMPDIR/c" 3>&-
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *" CAMPAIGN"* ]]
  [[ "${lines[-1]}" =~ ^scenarios\ 5\ \|\ instances\ left\ 0\ \|\ ledger\ rows\ ([0-9]+)\ vs\ creations\ ([0-9]+)\ \|\ rows\ open\ 0\ \|\ secrets\ seen\ 0 ]]
  [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
}
