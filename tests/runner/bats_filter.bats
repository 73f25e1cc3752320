#!/usr/bin/env bats
# A filter that selects no test must not read as green: `bats -f NAME tests/runner` with a NAME no
# test carries (a typo, a test renamed) exits non-zero and says so. bats-core 1.14.0
# (requirements.lock) does this itself ("ERROR: Found no tests."); this holds it against a bats
# that would not, one file or the whole folder, one job or two.

REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

@test "a bats filter that matches no test exits non-zero and says it found none" {
  for target in "$REPO/tests/runner" "$REPO/tests/runner/bats_filter.bats"; do
    run "$REPO/.venv/bin/bats" -f 'no test is named this' "$target"
    echo "$target: $status: $output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Found no tests"* ]]
    [[ "$output" != *"ok 1"* ]]
  done
  # the other side: a filter that matches runs exactly that test (the bats below this one)
  run "$REPO/.venv/bin/bats" -f 'the filter.s own match' "$REPO/tests/runner/bats_filter.bats"
  echo "$output"; [ "$status" -eq 0 ]
  [ "${lines[0]}" = "1..1" ]
  [[ "${lines[1]}" == "ok 1 the filter's own match"* ]]
}

@test "the filter's own match" {
  true
}
