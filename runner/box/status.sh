# shellcheck shell=bash
# runner/box/status.sh — the box's side of the store and of its own end: STATUS lines, pushes with
# retries, and the EXIT trap that writes FAIL and destroys the instance. Sourced by entry.sh, whose
# globals it uses: BOX_DIR RUN_PATH phase HEARSAY_GEN.

# box_rclone ARGS...: the store, with rclone's own retries off (ours are counted).
box_rclone() { ${HEARSAY_RCLONE:-rclone} --retries 1 --low-level-retries 1 "$@"; }

# box_push_log: BOX_DIR/train.log (the trainer's output) to RUN_PATH/train.log, headed by
# "# GEN train.log", for runner/logs.sh; one try, a failure said and survived (the next beat tries
# again). Called at each heartbeat and before each STATUS, so a DONE or FAIL finds the whole log there.
box_push_log() {
  [ -f "$BOX_DIR/train.log" ] || return 0
  { printf '# %s train.log\n' "$HEARSAY_GEN"; cat "$BOX_DIR/train.log"; } \
    | box_rclone rcat "$RUN_PATH/train.log" 2>/dev/null || echo "entry: train.log not copied to the store" >&2
}

# box_status PHASE: "GEN PHASE EPOCH" to RUN_PATH/STATUS (three tries; a lost STATUS is survivable,
# the reaper's deadline still ends the box), plus " beats=yes" once the chain's heartbeat runs
# (BOX_BEATS, set by entry.sh): the box's own word that it beats, which the judge (runner/lib/judge.sh)
# needs before a stale HEARTBEAT can mean a dead chain.
box_status() {
  local i=0
  phase=$1
  box_push_log
  echo "$1" >"$BOX_DIR/PHASE" 2>/dev/null || true   # what the deadline watchdog reads
  echo "entry: $HEARSAY_GEN $1" >&2
  while [ "$i" -lt 3 ]; do
    i=$((i + 1))
    printf '%s %s %s%s\n' "$HEARSAY_GEN" "$1" "$(date -u +%s)" "${BOX_BEATS:+ beats=$BOX_BEATS}" \
      | box_rclone rcat "$RUN_PATH/STATUS" 2>/dev/null && return 0
    sleep "${HEARSAY_PUSH_WAIT_S:-2}"
  done
  echo "entry: could not write STATUS $1" >&2
  return 0
}

# box_push DIR REMOTE: copy DIR to REMOTE; three failures → 1.
box_push() {
  local i=0
  while [ "$i" -lt 3 ]; do
    i=$((i + 1))
    box_rclone copy "$1" "$2" </dev/null && return 0
    echo "entry: push of $1 failed (try $i of 3)" >&2
    sleep "${HEARSAY_PUSH_WAIT_S:-2}"
  done
  return 1
}

# box_verify DIR REMOTE: the store keeps what was pushed. Every file under DIR is hashed here (sha256,
# BOX_DIR/pushed.sha256: "HASH  PATH" relative to DIR), then REMOTE's files are read back from the store
# and hashed there (`rclone hashsum sha256 --download`: the bytes, never a size or a date the store
# reports); each line of the list must be among them. 0 = every file read back equal; 1 = not
# (BOX_DIR/verify.txt names the files missing or different, the first three on stderr).
box_verify() {
  local list=$BOX_DIR/pushed.sha256 back=$BOX_DIR/readback.sha256 bad
  # bash's globstar, not find: the image carries coreutils, not findutils
  (cd "$1" && shopt -s globstar nullglob dotglob && for f in **; do [ ! -f "$f" ] || [ -L "$f" ] || sha256sum "$f"; done | LC_ALL=C sort) >"$list" || return 1
  box_rclone hashsum sha256 --download "$2" </dev/null 2>"$BOX_DIR/verify.log" | LC_ALL=C sort >"$back" || true
  LC_ALL=C comm -23 "$list" "$back" | sed 's/^[0-9a-f]*  //' >"$BOX_DIR/verify.txt"
  [ -s "$list" ] || { echo "nothing under $1 to verify" >"$BOX_DIR/verify.txt"; return 1; }
  [ -s "$BOX_DIR/verify.txt" ] || return 0
  bad=$(head -n 3 "$BOX_DIR/verify.txt" | tr '\n' ' ')
  echo "entry: $(wc -l <"$BOX_DIR/verify.txt") of $(wc -l <"$list") pushed files do not read back from $2: ${bad% }" >&2
  return 1
}

# box_destroy_self: vast.ai's CONTAINER_ID / CONTAINER_API_KEY; the key goes by environment only, and
# xtrace is off here (RUNNER_DEBUG's set -x would print the key's assignment). The CLI exits 0 on API
# errors, so no answer is trusted: each destroy is followed by `show instance` until it answers
# {"instances": null} (absent). HEARSAY_DESTROY_TRIES destroys (5), 3 checks after each.
# 0 = confirmed gone; 1 = not confirmed (the reaper or the box's deadline on the laptop side acts).
box_destroy_self() {
  local i=0 k out xt=""
  case $- in *x*) xt=1 ;; esac
  { set +x; } 2>/dev/null
  if [ -z "${CONTAINER_ID:-}" ] || [ -z "${CONTAINER_API_KEY:+set}" ]; then
    echo "entry: no CONTAINER_ID/CONTAINER_API_KEY: cannot destroy this box (the reaper will)" >&2
    [ -z "$xt" ] || set -x
    return 1
  fi
  while [ "$i" -lt "${HEARSAY_DESTROY_TRIES:-5}" ]; do
    i=$((i + 1))
    VAST_API_KEY=$CONTAINER_API_KEY VASTAI_NO_UPDATE_CHECK=1 ${HEARSAY_VASTAI:-vastai} destroy instance "$CONTAINER_ID" -y --raw \
      </dev/null >/dev/null 2>&1
    k=0
    while [ "$k" -lt 3 ]; do
      k=$((k + 1))
      sleep "${HEARSAY_PUSH_WAIT_S:-2}"
      out=$(VAST_API_KEY=$CONTAINER_API_KEY VASTAI_NO_UPDATE_CHECK=1 ${HEARSAY_VASTAI:-vastai} show instance "$CONTAINER_ID" --raw \
        </dev/null 2>/dev/null) || out=""
      if printf '%s' "$out" | tr -d ' \n' | grep -qx '{"instances":null}'; then
        echo "entry: instance $CONTAINER_ID confirmed destroyed (try $i)" >&2
        [ -z "$xt" ] || set -x
        return 0
      fi
    done
    echo "entry: destroy of instance $CONTAINER_ID not confirmed (try $i of ${HEARSAY_DESTROY_TRIES:-5})" >&2
  done
  [ -z "$xt" ] || set -x
  return 1
}

# box_exit: the EXIT trap. FAIL unless DONE was reached (with REASON when the deadline watchdog
# stopped the job); then the box destroys itself. Further INT/TERM/HUP are ignored from here on:
# nothing interrupts the destroy.
box_exit() {
  local rc=$?
  trap - EXIT ERR
  trap '' INT TERM HUP
  set +e
  [ -z "${watchdog:-}" ] || kill "$watchdog" 2>/dev/null
  [ -z "${heartbeat:-}" ] || kill "$heartbeat" 2>/dev/null
  if [ "${phase:-}" != DONE ]; then
    if [ -s "$BOX_DIR/DEADLINE_HIT" ] && [ -n "${RUN_PATH:-}" ]; then
      box_reason "deadline $(cut -d' ' -f1 "$BOX_DIR/DEADLINE_HIT") passed in phase $(cut -d' ' -f2 "$BOX_DIR/DEADLINE_HIT"): the box's watchdog stopped the job"
    fi
    [ -z "${HEARSAY_GEN:-}" ] || echo "$HEARSAY_GEN failed" >"$BOX_DIR/CHAIN"
    [ -z "${RUN_PATH:-}" ] || box_status FAIL
    [ "$rc" -ne 0 ] || rc=1
  fi
  box_destroy_self || echo "entry: this box could NOT be confirmed destroyed (the reaper's deadline ends it)" >&2
  rm -rf "$BOX_DIR/entry.lock"
  exit "$rc"
}
