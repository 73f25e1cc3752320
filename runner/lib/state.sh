# shellcheck shell=bash
# runner/lib/state.sh — job records under $RUNNER_STATE/jobs/JOB/, one small file per field.
#
# Fields: gen kind fold state instance label offer dph created_at deadline launcher bundle_sha config_hash
# States: CREATING (create asked, id not yet known) → CREATED (id persisted) → RUNNING (box up) →
#         PROVISIONED (chain confirmed running) ; DESTROYING ; ORPHAN (destroy not confirmed).
# A record leaves jobs/ (moved to archive/) only after its instance is confirmed gone.

rec_dir() { printf '%s/jobs/%s\n' "$RUNNER_STATE" "$1"; }

rec_exists() { [ -d "$(rec_dir "$1")" ]; }

# rec_get JOB FIELD: the value, or empty.
rec_get() { cat "$(rec_dir "$1")/$2" 2>/dev/null || true; }

# rec_set JOB FIELD VALUE: atomic (write + rename), so a killed writer never leaves half a value.
rec_set() {
  local d
  d=$(rec_dir "$1")
  [ -d "$d" ] || { echo "runner: record of job $1 is gone (another runner archived it)" >&2; return 1; }
  printf '%s\n' "$3" >"$d/.$2.$$"
  mv -f "$d/.$2.$$" "$d/$2"
}

# rec_new JOB: create the record directory (fails if one exists: never overwrite a live record).
rec_new() { mkdir -p "$RUNNER_STATE/jobs" && mkdir "$(rec_dir "$1")"; }

# rec_lock JOB / rec_unlock JOB: serialise changes to one record (launcher vs reaper).
rec_lock() { lock_take "$RUNNER_STATE/jobs/.$1.lock" "${2:-600}"; }
rec_unlock() { lock_drop "$RUNNER_STATE/jobs/.$1.lock"; }

rec_state() { rec_get "$1" state; }

# rec_archive JOB: move the record out of jobs/ (only once its instance is confirmed gone).
rec_archive() {
  local d a
  d=$(rec_dir "$1")
  a="$RUNNER_STATE/archive/$1-$(rec_get "$1" gen)-$(now)-$$"
  mkdir -p "$RUNNER_STATE/archive"
  rec_set "$1" state DESTROYED
  mv "$d" "$a"
  log_event "job $1 archived to $a"
}

# jobs_list: the job names with a live record.
jobs_list() {
  local d
  for d in "$RUNNER_STATE"/jobs/[!.]*; do
    [ -d "$d" ] && basename "$d"
  done
  return 0
}

# HOLD: "EPOCH PID" in jobs/JOB/HOLD. Fresh = younger than RUNNER_HOLD_TTL_S and its setter alive.
hold_set() { rec_set "$1" HOLD "$(now) $$"; }

hold_release() { rm -f "$(rec_dir "$1")/HOLD"; }

hold_fresh() {
  local v t p
  v=$(rec_get "$1" HOLD)
  [ -n "$v" ] || return 1
  t=${v%% *}
  p=${v#* }
  is_number "$t" || return 1
  [ $(($(now) - t)) -lt "$RUNNER_HOLD_TTL_S" ] || return 1
  if [ -n "$p" ] && [ "$p" != "$v" ]; then kill -0 "$p" 2>/dev/null || return 1; fi
  return 0
}

# launcher_alive JOB: the launch.sh that owns the record is still running.
launcher_alive() {
  local p
  p=$(rec_get "$1" launcher)
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null
}

# new_gen: a generation id, unique per launch.
new_gen() { printf 'g%s-%s-%s\n' "$(date -u +%Y%m%dT%H%M%SZ)" "$$" "$RANDOM$RANDOM"; }
