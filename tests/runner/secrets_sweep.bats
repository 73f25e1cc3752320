#!/usr/bin/env bats
# runner/secrets_sweep.sh: the runner's secrets (the API key, the store config's secret values)
# searched in the state folder, the ledger and the store's run folders (a real rclone local remote);
# 0 clean, 1 a secret found (paths named), 2 could not sweep; one event-log line each time.

load helpers

setup() {
  world
  run_dir=$W/bucket/hearsay/runs/fold0/$BUNDLE_SHA/cfg   # what a box pushed, as runner/box/ lays it out
  mkdir -p "$run_dir/logs"
  echo "g-1 DONE 3" >"$run_dir/STATUS"
  printf 'step 1 loss 0.69\nstep 2 loss 0.61\n' >"$run_dir/train.log"
  echo "epoch 1 done" >"$run_dir/logs/step.log"
}
teardown() { world_end; }

sweep_line() { grep ' \[[0-9]* secrets_sweep\] secrets sweep: ' "$RUNNER_STATE/runner.log" | tail -n 1 | sed 's/^.*\] //'; }
store_files() { find "$W/bucket/hearsay/runs" -type f | wc -l | tr -d ' '; }

@test "a clean campaign: exit 0, the files counted, one event line with no hit" {
  mkdir -p "$RUNNER_STATE"
  echo "2026-12-01T00:00:00Z [1 launch] go-ahead for fold0 by --yes" >"$RUNNER_STATE/runner.log"
  echo 'id,job' >"$LEDGER"
  run "$REPO/runner/secrets_sweep.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  n=$(($(store_files) + 2))   # the run folder's files, runner.log, the ledger
  [ "$output" = "secrets sweep: clean: $n files (RUNNER_STATE, the ledger, $RUNNER_STORE/runs; 0 over 64 MiB not read) hold none of 2 secrets" ]
  [ "$(sweep_line)" = "secrets sweep: files=$n secrets=2 hits=0 store=read over_cap=0 where=-" ]
}

@test "a key in a pushed step log and the store secret in a job record: exit 1 naming both paths, never the secret" {
  echo "curl -H 'Authorization: Bearer $API_KEY'" >>"$run_dir/logs/step.log"
  mkdir -p "$RUNNER_STATE/jobs/fold0"
  echo "$STORE_SECRET" >"$RUNNER_STATE/jobs/fold0/why"
  cp "$RUNNER_RCLONE_CONF" "$RUNNER_STATE/rclone.conf"   # the config itself, wherever it lies, is not a hit
  export RUNNER_RCLONE_CONF=$RUNNER_STATE/rclone.conf
  run "$REPO/runner/secrets_sweep.sh"
  echo "$output"
  [ "$status" -eq 1 ]
  remote=$RUNNER_STORE/runs/fold0/$BUNDLE_SHA/cfg/logs/step.log
  fix="(delete it there, then rotate that secret: the vast.ai key or the store's token)"
  [ "$(printf '%s\n' "$output" | sort)" = "$(printf 'runner: a secret is in %s %s\nrunner: a secret is in %s %s\n' "$RUNNER_STATE/jobs/fold0/why" "$fix" "$remote" "$fix" | sort)" ]
  line=$(sweep_line)
  [[ "$line" == "secrets sweep: files="*" secrets=2 hits=2 store=read over_cap=0 where="* ]]
  [[ "$line" == *"$remote"* ]]
  [[ "$line" == *"$RUNNER_STATE/jobs/fold0/why"* ]]
  [[ "$output$line" != *SECRET* ]]
}

@test "the key from the CLI's key file (no VAST_API_KEY) is found in the ledger" {
  unset VAST_API_KEY
  f=$XDG_CONFIG_HOME/vastai/vast_api_key
  mkdir -p "$(dirname "$f")"
  (umask 077; printf '%s\n' "$API_KEY" >"$f")            # a trailing newline, as an editor leaves it
  printf 'id,job\n1,%s\n' "$API_KEY" >"$LEDGER"
  run "$REPO/runner/secrets_sweep.sh"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "runner: a secret is in $LEDGER (delete it there, then rotate that secret: the vast.ai key or the store's token)" ]
}

@test "an unreadable store is exit 2, recorded store=unreadable, never clean" {
  export RUNNER_STORE="store:$W/no-such-bucket/hearsay"
  run "$REPO/runner/secrets_sweep.sh"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == "runner: the store $RUNNER_STORE cannot be read, so its run folders are not swept (check RUNNER_STORE and RUNNER_RCLONE_CONF; rclone said: "*"directory not found)" ]]
  [[ "$output" != *clean* ]]
  [[ "$(sweep_line)" == "secrets sweep: files=0 secrets=2 hits=0 store=unreadable over_cap=0 where=-" ]]
}

@test "a file over RUNNER_SWEEP_MAX_MB is counted, not read" {
  head -c 4096 /dev/zero >"$run_dir/checkpoint.safetensors"
  echo "$API_KEY" >>"$run_dir/checkpoint.safetensors"
  RUNNER_SWEEP_MAX_MB=0.001 run "$REPO/runner/secrets_sweep.sh"   # 1,048 bytes
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$(sweep_line)" == *" hits=0 store=read over_cap=1 where=-" ]]
}

@test "under RUNNER_DEBUG's trace no secret is printed; a usage error is 64" {
  echo "$API_KEY" >>"$run_dir/train.log"
  RUNNER_DEBUG=1 run "$REPO/runner/secrets_sweep.sh"
  [ "$status" -eq 1 ]
  [[ "$output" != *SECRET* ]]
  run "$REPO/runner/secrets_sweep.sh" --bogus
  [ "$status" -eq 64 ]
  [ "$output" = "runner: unknown argument: --bogus (it takes none) (run runner/secrets_sweep.sh without arguments; see --help)" ]
}
