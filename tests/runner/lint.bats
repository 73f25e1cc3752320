#!/usr/bin/env bats
# Every runner script: --help tells the truth (Usage, Summary, exit codes); no bash-4-only constructs
# (macOS ships bash 3.2); shellcheck -x clean.

setup() { REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd); }

scripts() { ls "$REPO"/runner/*.sh "$REPO"/runner/box/entry.sh | grep -v '/config.sh$'; }

@test "--help prints Usage, Summary and the exit codes, exit 0" {
  for s in $(scripts); do
    run "$s" --help
    [ "$status" -eq 0 ]
    [[ "${lines[0]}" == "Usage: runner/"* ]]
    [[ "${lines[1]}" == "Summary: "* ]]
    [[ "$output" == *"Exit codes:"* ]]
  done
}

@test "no bash-4-only constructs in the runner (associative arrays, mapfile, case folding, wait -n, ...)" {
  files=$(find "$REPO/runner" -name '*.sh')
  # comment lines (which name the rules) are not code
  code() { grep -n -H "$@" $files | grep -v -E '^[^:]+:[0-9]+:[[:space:]]*#' || true; }
  [ -z "$(code -E 'declare -A|local -A|mapfile|readarray|\$\{[a-zA-Z_]+(,,|\^\^)|wait -n|\|&|&>>|coproc|declare -n|local -n|EPOCHSECONDS|\$\{[a-zA-Z_]+@[QEPAa]\}')" ]
  # an empty array expanded bare is an error under set -u before bash 4.4
  [ -z "$(code -P '(?<!\+)"\$\{\w+\[@\]\}"')" ]
}

@test "shellcheck -x passes on every runner script" {
  sc=$REPO/.venv/bin/shellcheck
  [ -x "$sc" ] || sc=$(command -v shellcheck) || skip "shellcheck not installed"
  cd "$REPO"
  run "$sc" -x runner/*.sh runner/lib/*.sh runner/box/*.sh scripts/fault_campaign.sh tests/runner/bin/*.sh
  [ "$status" -eq 0 ]
}

@test "make lint fails on a bare ! that is not a bats test's last command (SC2314)" {
  sc=$REPO/.venv/bin/shellcheck
  { [ -x "$sc" ] && [ -x "$REPO/.venv/bin/ruff" ]; } || skip "shellcheck or ruff not in .venv"
  # a copy holding only what `make lint` reads, against this venv; -o: make never remakes the
  # venv's stamp from the copy (an install there would point the venv's editable hearsay at it)
  c=$BATS_TEST_TMPDIR/copy
  mkdir -p "$c/tests/runner" "$c/src" "$c/scripts" "$c/nix" "$c/container" "$c/runner"
  cp -p "$REPO/Makefile" "$REPO/pyproject.toml" "$REPO/requirements.lock" "$c/"
  cp "$REPO"/tests/runner/*.bats "$c/tests/runner/"
  run make -s -C "$c" lint VENV="$REPO/.venv" -o "$REPO/.venv/.installed"
  echo "$output"; [ "$status" -eq 0 ]
  printf '@test "planted" {\n  ! true\n  true\n}\n' >>"$c/tests/runner/guard.bats"
  run make -s -C "$c" lint VENV="$REPO/.venv" -o "$REPO/.venv/.installed"
  echo "$output"; [ "$status" -ne 0 ]
  [[ "$output" == *"tests/runner/guard.bats line "*"SC2314"* ]]
}

@test "no bats assertion is the first half of an && list (a failure there never fails the test)" {
  # bash's errexit, which bats relies on, ignores every command of an && list but the last:
  # `[ "$a" -eq 1 ] && [ "$b" -eq 2 ]` passes with a = 0. One assertion per line instead.
  cd "$REPO"
  run grep -nE '^[[:space:]]*\[\[? .*\]\]? && \[' tests/runner/*.bats
  echo "$output"
  [ "$status" -eq 1 ]
}
