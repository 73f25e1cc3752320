#!/usr/bin/env bats
# runner/lib/guard.sh: the remote path guard and where the API key may come from.

setup() {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  . "$REPO/runner/lib/guard.sh"
  export RUNNER_STORE="r2:bucket/hearsay" HOME=$BATS_TEST_TMPDIR XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/cfg
}

@test "paths under the prefix pass through unchanged" {
  run guard_path "r2:bucket/hearsay/runs/fold3/STATUS"
  [ "$status" -eq 0 ]
  [ "$output" = "r2:bucket/hearsay/runs/fold3/STATUS" ]
  run guard_path "r2:bucket/hearsay"
  [ "$status" -eq 0 ]
}

@test "outside the prefix, '..', '.', empty segments and look-alike prefixes are refused (exit 12)" {
  for p in "r2:bucket/other" "r2:bucket/hearsay-evil/x" "r2:bucket/hearsay/../x" "r2:bucket/hearsay/runs/.." \
           "r2:bucket/hearsay/./x" "r2:bucket/hearsay//x" "other:bucket/hearsay/x" "/etc/passwd" ""; do
    run guard_path "$p"
    [ "$status" -eq 12 ]
    [[ "$output" == "runner: remote path refused: $p ("* ]]
  done
}

@test "the key comes from VAST_API_KEY or the CLI's key file, and is never printed" {
  unset VAST_API_KEY
  run key_guard
  [ "$status" -eq 11 ]
  f=$XDG_CONFIG_HOME/vastai/vast_api_key
  [ "$output" = "runner: no vast.ai API key (export VAST_API_KEY, or keep it in $f, mode 600, without putting it on a command line: (umask 077; mkdir -p \"\$(dirname $f)\"; cat >$f), paste the key, then Ctrl-D)" ]
  mkdir -p "$XDG_CONFIG_HOME/vastai" && (umask 077; echo "filekey-SECRET" >"$f")
  run key_guard
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  rm "$XDG_CONFIG_HOME/vastai/vast_api_key"
  VAST_API_KEY=envkey-SECRET RUNNER_DEBUG=1 run bash -c ". '$REPO/runner/lib/guard.sh'; set -x; key_guard"
  [ "$status" -eq 0 ]
  [[ "$output" != *envkey-SECRET* ]]
}
