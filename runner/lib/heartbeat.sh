# shellcheck shell=bash
# runner/lib/heartbeat.sh — the reaper's liveness check of a PROVISIONED box. The box's chain writes
# RUN_PATH/HEARTBEAT, "GEN SEQ EPOCH", every HEARSAY_HEARTBEAT_S seconds (job.env's, from
# RUNNER_HEARTBEAT_S; runner/box/job.sh box_heartbeat) while it runs; a chain killed without its EXIT
# trap (the container's OOM killer, a restart) stops beating and leaves STATUS at its last phase.
# The box's clock is never compared with this one: the reaper keeps the last line it read and when
# it first read it, on its own clock (jobs/JOB/beat, "EPOCH LINE"), and a line unchanged (or still
# absent) for RUNNER_HEARTBEAT_STALE_S seconds is a dead chain. A store that cannot be read changes
# nothing (unknown is never stale); RUNNER_HEARTBEAT_STALE_S=0 turns the check off.

# store_heartbeat JOB: print the HEARTBEAT line of the record's generation, or "none" when the store
# has none of it (absent, or another generation's); 1 when the store cannot be read.
store_heartbeat() {
  local gen path line rc=0
  gen=$(rec_get "$1" gen)
  path=$(store_job_path "$1") || return 1
  # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
  line=$(RCLONE_CONFIG="$RUNNER_RCLONE_CONF" with_timeout "$RUNNER_CLI_TIMEOUT_S" \
    $RUNNER_RCLONE cat "$path/HEARTBEAT" --retries 1 --low-level-retries 1 2>/dev/null </dev/null) || rc=$?
  case $rc in
    0) ;;
    3 | 4) echo none; return 0 ;;   # rclone: directory / file not found
    *) return 1 ;;
  esac
  line=${line%%$'\n'*}
  if [ -z "$gen" ] || [ "${line%% *}" != "$gen" ]; then echo none; else printf '%s\n' "$line"; fi
}

# heartbeat_stale JOB: 0 when the job's box has shown no new heartbeat for RUNNER_HEARTBEAT_STALE_S
# seconds of this machine's clock (hb_why says so in words); 1 when it beats, when this is the first
# look at its line, or when the store cannot be read.
heartbeat_stale() {
  local line seen first last age
  hb_why=""
  [ "$RUNNER_HEARTBEAT_STALE_S" != 0 ] || return 1
  line=$(store_heartbeat "$1") || return 1
  seen=$(rec_get "$1" beat)
  first=${seen%% *}
  last=${seen#* }
  if ! is_number "$first" || [ "$last" != "$line" ]; then
    rec_set "$1" beat "$(now) $line" 2>/dev/null || true   # unwritable (full disk): looked at again next cycle
    return 1
  fi
  age=$(($(now) - first))
  [ "$age" -ge "$RUNNER_HEARTBEAT_STALE_S" ] || return 1
  if [ "$line" = none ]; then
    hb_why="no heartbeat of generation $(rec_get "$1" gen) in the store for $age s"
  else
    hb_why="heartbeat unchanged for $age s (last: ${line#* })"
  fi
  hb_why="$hb_why, limit RUNNER_HEARTBEAT_STALE_S=$RUNNER_HEARTBEAT_STALE_S s: its chain stopped without its exit trap (killed, out of memory, or the container restarted)"
}
