# shellcheck shell=bash
# runner/lib/heartbeat.sh — a PROVISIONED box's heartbeat as the store holds it. The box's chain
# writes RUN_PATH/HEARTBEAT, "GEN SEQ EPOCH", every HEARSAY_HEARTBEAT_S seconds (its contract's
# heartbeat_s; runner/box/job.sh box_heartbeat) while it runs; a chain killed without its EXIT trap
# (the container's OOM killer, a restart) stops beating and leaves STATUS at its last phase. Whether
# that line shows progress, and what its absence means, is the judge's (runner/lib/judge.sh).

# store_heartbeat JOB: print the HEARTBEAT line of the record's generation, or "none" when the store
# has none of it (absent, or another generation's); 1 when the store cannot be read.
store_heartbeat() {
  local gen line rc=0
  gen=$(rec_get "$1" gen)
  line=$(store_cat "$1" HEARTBEAT) || rc=$?   # rclone's code; 1 when the path is refused
  case $rc in
    0) ;;
    3 | 4) echo none; return 0 ;;   # rclone: directory / file not found
    *) return 1 ;;
  esac
  line=${line%%$'\n'*}
  if [ -z "$gen" ] || [ "${line%% *}" != "$gen" ]; then echo none; else printf '%s\n' "$line"; fi
}
