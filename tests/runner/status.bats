#!/usr/bin/env bats
# runner/status.sh: every job's generation, state, instance, age and spend from the local records.

setup() {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  export RUNNER_STATE=$BATS_TEST_TMPDIR/state
  now=$(date -u +%s)
  for j in pilot fold3; do mkdir -p "$RUNNER_STATE/jobs/$j"; done
  d=$RUNNER_STATE/jobs/pilot
  echo g-p >"$d/gen"; echo PROVISIONED >"$d/state"; echo 111 >"$d/instance"; echo 2.0 >"$d/dph"
  echo $((now - 1800)) >"$d/created_at"; echo "$now $$" >"$d/HOLD"
  d=$RUNNER_STATE/jobs/fold3
  echo g-f >"$d/gen"; echo ORPHAN >"$d/state"; echo 222 >"$d/instance"; echo 1.0 >"$d/dph"
  echo $((now - 3600)) >"$d/created_at"
}

@test "one line per job: generation, state, instance, age, spend, hold" {
  run "$REPO/runner/status.sh"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  [[ "${lines[0]}" == "JOB     GENERATION"*"STATE"*"INSTANCE"*"AGE"*"SPEND HOLD" ]]
  read -r j g s i a sp h <<<"$(printf '%s\n' "$output" | grep '^fold3')"
  [ "$g $s $i $a $h" = "g-f ORPHAN 222 60m -" ]
  [[ "$sp" == '$1.00'* ]]     # $1/h for an hour (plus the seconds the test took)
  read -r j g s i a sp h <<<"$(printf '%s\n' "$output" | grep '^pilot')"
  [ "$g $s $i $a $h" = "g-p PROVISIONED 111 30m held" ]
  [[ "$sp" == '$1.00'* ]]     # $2/h for half an hour
}

@test "no records: only the header; --help prints the usage" {
  rm -rf "$RUNNER_STATE/jobs"
  run "$REPO/runner/status.sh"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 1 ]
  run "$REPO/runner/status.sh" --help
  [ "${lines[0]}" = "Usage: runner/status.sh [[--why] JOB]" ]
}
