# shellcheck shell=bash
# runner/box/job.sh — the job's own steps on the box, sourced by runner/box/entry.sh after status.sh
# and lib/bundles.sh, whose globals it uses: BOX_DIR RUN_PATH phase HEARSAY_* (from job.env).
#
#   box_env_import   the container's environment, written into BOX_DIR/box.env and exported
#   box_fail MSG     the FAIL path: MSG to stderr and to RUN_PATH/REASON, then exit 1
#   box_pull_bundle  bundles/<HEARSAY_BUNDLE_SHA> into BOX_DIR/bundle, its tree-sha checked
#   box_train        the trainer, start-or-resume, its exit code and last lines kept on failure
# shellcheck disable=SC2154  # phase is entry.sh's

# The names the chain needs from the container's own environment. A chain started over ssh sees
# the ssh session's environment, not the one the image (PATH, LD_LIBRARY_PATH for the driver
# libraries, HEARSAY_GIT_SHA, HEARSAY_FFMPEG) and vast.ai (CONTAINER_ID, CONTAINER_API_KEY) gave
# the container, so they are read from its first process and written down, never assumed.
BOX_ENV_NAMES="PATH LD_LIBRARY_PATH HEARSAY_GIT_SHA HEARSAY_FFMPEG CONTAINER_ID CONTAINER_API_KEY"

# box_env_import: each name found in $HEARSAY_INIT_ENVIRON (default /proc/1/environ, the
# container's first process; NUL-separated NAME=VALUE) wins over the session's; the resulting values
# of every name are written to BOX_DIR/box.env (mode 600: it holds the instance's API key) and
# exported. An unreadable file is said on stderr and the session's values are kept.
box_env_import() {
  local src=${HEARSAY_INIT_ENVIRON:-/proc/1/environ} kv name xtrace=0
  case $- in *x*) xtrace=1; set +x ;; esac   # RUNNER_DEBUG's xtrace must never print the instance key
  if [ -r "$src" ]; then
    while IFS= read -r -d '' kv; do
      name=${kv%%=*}
      case " $BOX_ENV_NAMES " in *" $name "*) export "$name=${kv#*=}" ;; esac
    done <"$src"
  else
    echo "entry: cannot read the container's environment at $src: keeping the ssh shell's own" >&2
  fi
  : >"$BOX_DIR/box.env"
  chmod 600 "$BOX_DIR/box.env"
  for name in $BOX_ENV_NAMES; do
    [ -n "${!name+set}" ] && printf '%s=%q\n' "$name" "${!name}" >>"$BOX_DIR/box.env"
  done
  echo "entry: container environment in $BOX_DIR/box.env: $(cut -d= -f1 "$BOX_DIR/box.env" | tr '\n' ' ')" >&2
  [ "$xtrace" = 0 ] || set -x
}

# box_fail MSG [LOG]: say MSG, write "GEN PHASE" + MSG (+ LOG's last 20 lines) to RUN_PATH/REASON
# (runner/status.sh --why JOB reads it once the box is gone), then exit 1: the EXIT trap writes
# FAIL and destroys the box.
box_fail() {
  echo "entry: $1" >&2
  {
    printf '%s %s %s\n%s\n' "$HEARSAY_GEN" "$phase" "$(date -u +%s)" "$1"
    if [ -n "${2:-}" ] && [ -s "$2" ]; then echo "--- last lines of $2:"; tail -n 20 "$2"; fi
  } >"$BOX_DIR/REASON"
  box_rclone copyto "$BOX_DIR/REASON" "$RUN_PATH/REASON" </dev/null 2>/dev/null \
    || echo "entry: could not write $RUN_PATH/REASON" >&2
  exit 1
}

# box_pull_bundle: the bundle the job was launched with, or FAIL saying which of the two went wrong.
box_pull_bundle() {
  local src got
  src=$(store_bundle_path "$HEARSAY_BUNDLE_SHA") || box_fail "bundle path refused: $HEARSAY_BUNDLE_SHA"
  box_rclone copy "$src" "$BOX_DIR/bundle" </dev/null 2>"$BOX_DIR/pull.log" \
    || box_fail "bundle pull from $src failed (rclone: $(tail -n 1 "$BOX_DIR/pull.log")); is it in the store? on the laptop: runner/bundle_put.sh BUNDLE_DIR"
  got=$(local_tree_sha "$BOX_DIR/bundle")
  [ -f "$BOX_DIR/bundle/manifest.csv" ] \
    || box_fail "bundle pull from $src brought no manifest.csv: the store has no bundle $HEARSAY_BUNDLE_SHA (runner/bundle_put.sh BUNDLE_DIR)"
  [ "$got" = "$HEARSAY_BUNDLE_SHA" ] \
    || box_fail "pulled bundle hashes to tree-sha $got, job.env says HEARSAY_BUNDLE_SHA=$HEARSAY_BUNDLE_SHA (the store's copy is incomplete or another bundle: runner/bundle_put.sh BUNDLE_DIR)"
  echo "entry: bundle $got pulled and verified" >&2
}

# box_train STORE SEL...: `$HEARSAY_TRAIN --bundle … SEL --out BOX_DIR/run --store STORE --resume auto
# --config BOX_DIR/train.json`: the first launch of a job starts fresh, a relaunch (same bundle
# and config, hence the same STORE) continues from its latest complete checkpoint. Output goes
# to BOX_DIR/train.log; CHAIN says "GEN running" once it has started. A non-zero exit is a FAIL
# whose REASON carries the trainer's exit code (hearsay train --help lists them) and last lines.
box_train() {
  local store=$1 rc=0
  shift
  # shellcheck disable=SC2086  # HEARSAY_TRAIN is a command line by design
  $HEARSAY_TRAIN --bundle "$BOX_DIR/bundle" "$@" --out "$BOX_DIR/run" --store "$store" \
    --resume auto --config "$BOX_DIR/train.json" </dev/null >>"$BOX_DIR/train.log" 2>&1 &
  local train=$!
  echo "$train" >"$BOX_DIR/train.pid"
  echo "$HEARSAY_GEN running" >"$BOX_DIR/CHAIN"
  # The box's own hard deadline (HEARSAY_DEADLINE, epoch s, the record's): past it the trainer is
  # stopped (TERM, KILL after 10 s), what it has is pushed, and the run ends FAIL, so the EXIT trap
  # destroys the box even with the laptop and its reaper gone.
  while kill -0 "$train" 2>/dev/null; do
    if [ -n "${HEARSAY_DEADLINE:-}" ] && [ "$(date -u +%s)" -ge "$HEARSAY_DEADLINE" ]; then
      echo "entry: deadline $HEARSAY_DEADLINE passed: stopping the trainer, pushing what it has" >&2
      kill -TERM "$train" 2>/dev/null; sleep "${HEARSAY_STOP_WAIT_S:-10}"; kill -KILL "$train" 2>/dev/null
      box_status PUSHING
      box_push "$BOX_DIR/run" "$store" || true
      box_fail "deadline $HEARSAY_DEADLINE passed: trainer stopped, what it had pushed to $store" "$BOX_DIR/train.log"
    fi
    sleep 1
  done
  wait "$train" || rc=$?
  [ "$rc" -eq 0 ] || box_fail "trainer exit $rc ($HEARSAY_TRAIN; see hearsay train --help for the codes)" "$BOX_DIR/train.log"
}
