# shellcheck shell=bash
# scripts/lib/rehearsal_harness.sh: the rehearsal's harness, sourced by scripts/rehearsal.sh: `stage`
# (one stage in a subshell, its summary line), say_detail/fail, wait_until, and the questions the
# stages ask of the runner's state (run_dir, archived_result, why, done_by_reaper, gone); launch.

# stage NAME FUNCTION: run it in a subshell under set -e (a function called in an `||` list would
# run with -e off), print one summary line; the first failure ends the rehearsal. A stage says
# what it did (or why it failed) in $W/.detail.
stage() {
  local name=$1 t0 rc=0
  t0=$(date +%s)
  : >"$W/.detail"
  set +e
  (set -e; "$2") >>"$LOGS/$name.log" 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "rehearsal: FAILED at stage $name (exit $rc): $(cat "$W/.detail")" >&2
    tail -n 15 "$LOGS/$name.log" | sed 's/^/  | /' >&2
    exit 1
  fi
  printf 'rehearsal: %-12s ok  %4ds  %s\n' "$name" $(($(date +%s) - t0)) "$(cat "$W/.detail")"
}
say_detail() { printf '%s' "$1" >"$W/.detail"; }
fail() { say_detail "$1"; echo "rehearsal: $1" >&2; return 1; }

# wait_until SECONDS WHAT CMD...: poll CMD every 0.2 s.
wait_until() {
  local t=$1 what=$2 until
  shift 2
  until=$(($(date +%s) + t))
  while ! "$@"; do
    [ "$(date +%s)" -lt "$until" ] || { fail "$what: not after ${t}s"; return 1; }
    sleep 0.2
  done
}
cfg_sha() { sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1; }
run_dir() { printf '%s/bucket/hearsay/runs/rehearsal/%s/%s/%s' "$W" "$1" "$BUNDLE" "$(cfg_sha)"; }
archived_result() {   # JOB: the result of its newest archived record
  local d
  d=$(find "$RUNNER_STATE/archive" -maxdepth 1 -name "$1-*" 2>/dev/null | LC_ALL=C sort | tail -n 1)
  [ -n "$d" ] && cat "$d/result" 2>/dev/null
}
launch() { "$REPO/runner/launch.sh" --yes "$@" </dev/null 3>&-; }

# why JOB: its last STATUS and REASON, as runner/status.sh --why shows them, on one line.
why() { "$REPO/runner/status.sh" --why "$1" 2>&1 | head -n 8 | tr '\n' ' '; }
# done_by_reaper JOB: its record archived by the reaper with result DONE.
done_by_reaper() { [ ! -d "$RUNNER_STATE/jobs/$1" ] && [ "$(archived_result "$1")" = DONE ]; }
gone() { [ ! -d "$RUNNER_STATE/jobs/$1" ] && [ -n "$(archived_result "$1")" ]; }
