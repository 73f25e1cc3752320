#!/usr/bin/env bats
# runner/teardown_check.sh: 0 only on a successful listing with zero instances (and a clean secrets
# sweep after it; 3 when the sweep is not clean); 1 lists them; 2 unknown; 64 usage.

load helpers

setup() { world --set page_size=2; }
teardown() { world_end; }

@test "exit 0 on a successful, empty listing, then the secrets sweep's clean line" {
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "teardown confirmed: 0 instances listed" ]
  [[ "${lines[1]}" == "secrets sweep: clean: "* ]]
  [ "${#lines[@]}" -eq 2 ]
}

@test "teardown confirmed but a secret in a box's pushed log: exit 3, the file named" {
  mkdir -p "$W/bucket/hearsay/runs/fold0"
  echo "VAST_API_KEY=$API_KEY" >"$W/bucket/hearsay/runs/fold0/train.log"
  run "$REPO/runner/teardown_check.sh"
  echo "$output"
  [ "$status" -eq 3 ]
  [ "${lines[0]}" = "teardown confirmed: 0 instances listed" ]
  [[ "${lines[1]}" == "runner: a secret is in $RUNNER_STORE/runs/fold0/train.log (delete it there"* ]]
  grep -q "secrets_sweep\] secrets sweep: .* hits=1 store=read " "$RUNNER_STATE/runner.log"
}

@test "exit 1 lists every instance left, across pages" {
  for j in a b c d e; do rent "job$j" PROVISIONED >/dev/null; done
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "runner: 5 instance(s) still listed (destroy them: vastai destroy instance ID -y)" ]
  [ "$(printf '%s\n' "$output" | grep -c ' hearsay\.[0-9a-z]*:job')" -eq 5 ]
}

@test "exit 2 when it cannot confirm: error, {}, null, empty, non-JSON, truncated, 429, bad key, timeout" {
  for kind in error empty_object null empty non_json truncated; do
    fault "[{\"op\": \"list\", \"kind\": \"$kind\"}]"
    run "$REPO/runner/teardown_check.sh"
    echo "$kind -> $status"
    [ "$status" -eq 2 ]
    [ "$output" = "runner: cannot confirm teardown: the instance listing failed (retry; check VAST_URL and the key)" ]
  done
  fault '[{"op": "list", "kind": "rate_limit", "times": 3}]'
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
  VAST_API_KEY=not-the-key run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
  fault '[{"op": "list", "kind": "delay", "delay_s": 5}]'
  RUNNER_CLI_TIMEOUT_S=1 run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
}

@test "a fault on the second page is not an empty account" {
  for j in a b c; do rent "job$j" PROVISIONED >/dev/null; done
  fault '[{"op": "list", "kind": "empty_object", "skip": 1}]'
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
}

@test "no key at all: exit 11 with the fix named" {
  unset VAST_API_KEY
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 11 ]
  [[ "$output" == "runner: no vast.ai API key (export VAST_API_KEY, or keep it in "*"mode 600, without putting it on a command line"* ]]
}

@test "a usage error has its own exit code (64), never 2 (cannot confirm)" {
  run "$REPO/runner/teardown_check.sh" --bogus
  [ "$status" -eq 64 ]
  [ "$output" = "runner: unknown argument: --bogus (it takes none) (run runner/teardown_check.sh without arguments; see --help)" ]
  run "$REPO/runner/teardown_check.sh" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"64 usage"* ]]
  [ -z "$(grep "show instances" "$RUNNER_STATE/runner.log" 2>/dev/null)" ]   # nothing was asked of the API
}

# A well-formed, empty listing page (an API hiccup that is valid JSON), for good.
empty_listings() { fault '[{"op": "list", "kind": "error", "status": 200, "body": {"instances": [], "total_instances": 0}, "times": null}]'; }

@test "a second laptop (no records, the ledger from git): an open ledger row is exit 2 until that box is proven gone" {
  id=$(rent pilot PROVISIONED g-1)
  rm -rf "$RUNNER_STATE/jobs"                                      # this laptop's state is lost
  empty_listings                                                   # one empty page, while the box bills
  run "$REPO/runner/teardown_check.sh"
  echo "$output"
  [ "$status" -eq 2 ]
  [[ "$output" == "runner: cannot confirm teardown: the listing is empty, but the ledger $LEDGER holds open rentals not proven gone: $id (job pilot) "* ]]
  ctl POST faults '{"rules": [], "replace": true}' >/dev/null
  vastai destroy instance "$id" -y --raw >/dev/null               # gone now: show instance agrees
  empty_listings
  run "$REPO/runner/teardown_check.sh"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "teardown confirmed: 0 instances listed" ]
}
