#!/usr/bin/env bats
# The RUNBOOK's commands as an operator types them: every command docs/RUNBOOK.md gives to start the
# reaper, run exactly as written from the checkout, on a fresh home folder (nothing under ~ yet:
# no ~/.local/state), with the runner's settings in the environment as RUNBOOK section 2.1 says
# (VAST_API_KEY, RUNNER_IMAGE exported; the store's rclone.conf under ~/.config/hearsay).

load helpers

setup() { world; }
teardown() {
  local p
  for p in "${started[@]}"; do kill "$p" 2>/dev/null || true; done
  world_end
}

# listings: how many account listings the fake API has answered.
listings() { ctl GET requests | jq '[.requests[] | select(.op == "list")] | length'; }

listed_since() { [ "$(listings)" -gt "$1" ]; }

# runbook_reaper_commands: each command of docs/RUNBOOK.md that starts a looping reaper (a line of a
# code block, or a `...` span, that runs runner/reaper.sh without --once or --help), one a line.
runbook_reaper_commands() {
  {
    awk '/^```/ { code = !code; next } code' "$REPO/docs/RUNBOOK.md" | sed 's/[[:space:]]*#.*$//' \
      | grep -E '^(nohup )?runner/reaper\.sh' || true
    # shellcheck disable=SC2016  # the backquotes are the RUNBOOK's inline code marks, not expansions
    grep -o '`[^`]*runner/reaper\.sh[^`]*`' "$REPO/docs/RUNBOOK.md" | tr -d '`' || true
  } | grep -v -e '--once' -e '--help' | sort -u
}

@test "every RUNBOOK command that starts the reaper works as typed on a fresh home folder" {
  mapfile -t cmds < <(runbook_reaper_commands)
  printf 'RUNBOOK reaper command: %s\n' "${cmds[@]}"
  [ "${#cmds[@]}" -ge 1 ]
  started=()
  for cmd in "${cmds[@]}"; do
    fresh=$BATS_TEST_TMPDIR/home-$RANDOM
    mkdir "$fresh"                                     # a new, empty home folder
    mkdir -p "$fresh/.config/hearsay" && (umask 077; cp "$RUNNER_RCLONE_CONF" "$fresh/.config/hearsay/rclone.conf")
    asked=$(listings)
    run env -u RUNNER_STATE -u XDG_STATE_HOME -u XDG_CONFIG_HOME -u XDG_CACHE_HOME -u RUNNER_RCLONE_CONF \
      HOME="$fresh" VAST_API_KEY="$API_KEY" RUNNER_IMAGE="$RUNNER_IMAGE" RUNNER_REAPER_MODE=start \
      bash -c "cd '$REPO' && $cmd" 3>&-
    echo "$cmd -> $status: $output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"(pid )"* ]]
    state=$fresh/.local/state/hearsay-runner           # RUNNER_STATE's default on this home
    wait_for 20 test -s "$state/reaper.lock/owner" || { cat "$state/reaper.out" "$fresh"/.local/state/hearsay-runner/*.out 2>/dev/null; false; }
    pid=$(cut -d' ' -f1 "$state/reaper.lock/owner")
    started+=("$pid")
    kill -0 "$pid"                                     # it runs, and keeps running
    sleep 2
    kill -0 "$pid"
    wait_for 30 listed_since "$asked"                  # its cycles list the account
    [ -e "$state/reaper.out" ]                         # its output where the RUNBOOK says
    ! grep -q -e "No such file" -e "cannot" -e "runner: " "$state/reaper.out"
    kill "$pid"
    wait_for 10 process_gone "$pid"
  done
}
