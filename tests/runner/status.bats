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

@test "--why JOB prints the judge's verdict, read from the job's contract and the store it names" {
  export PATH="$REPO/.venv/bin:$PATH" RUNNER_RCLONE=rclone RUNNER_RCLONE_CONF=$BATS_TEST_TMPDIR/rclone.conf
  printf '[store]\ntype = local\n' >"$RUNNER_RCLONE_CONF"
  export RUNNER_STORE="store:$BATS_TEST_TMPDIR/other"             # this shell's store is not the job's
  mkdir -p "$BATS_TEST_TMPDIR/bucket/runs/fold3"
  echo "g-f TRAINING $now" >"$BATS_TEST_TMPDIR/bucket/runs/fold3/STATUS"
  echo PROVISIONED >"$RUNNER_STATE/jobs/fold3/state"
  printf 'store=store:%s\ngen=g-f\ndeadline=%s\ncampaign_deadline=\ngrace_s=600\nheartbeat_s=60\nheartbeat_stale_s=900\nbeats=yes\ndph=1.0\n' \
    "$BATS_TEST_TMPDIR/bucket" $((now - 10)) >"$RUNNER_STATE/jobs/fold3/contract"
  run "$REPO/runner/status.sh" --why fold3
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "STATUS g-f TRAINING $now" ]
  [[ "${lines[1]}" == "JUDGE WAIT_PUSH: its box is TRAINING: it stops its trainer and pushes its checkpoints first; destroyed at "*" at the latest (grace_s=600)" ]]
  [ ! -e "$RUNNER_STATE/jobs/fold3/beat" ]                         # a look of status's is not the reaper's
}
