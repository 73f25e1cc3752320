#!/usr/bin/env bash
# Usage: runner/box/entry.sh [BOX_DIR]
# Summary: the trainer image's command: one training job on the box, STATUS at every phase, then destroy itself
#
# BOX_DIR (default $HEARSAY_BOX_DIR, else /run/hearsay) receives from runner/launch.sh over ssh stdin:
# rclone.conf (mode 600, the store's credentials), train.json (the training config's exact bytes; not
# for probe) and last job.env (HEARSAY_JOB, _KIND, _FOLD, _GEN, _STORE, _RUN_PATH, _BUNDLE_SHA,
# _CONFIG_HASH = train.json's sha256, _TRAIN, _DEADLINE = the job's hard deadline, epoch s). Without job.env it waits up to HEARSAY_BOX_WAIT_S
# (1800 s), then gives up, and the box destroys itself.
#
# Phases, each written to RUN_PATH/STATUS as "GEN PHASE EPOCH" (the reaper ignores other generations):
#   STARTED (train.json missing or its sha256 != HEARSAY_CONFIG_HASH: FAIL) → SMOKE
#   (container/trainer/smoke_check.sh, $HEARSAY_SMOKE_CHECK, when present) → TRAINING (`$HEARSAY_TRAIN
#   --bundle … --fold K|--full|--pilot --out … --store RUN_PATH/run --resume --config BOX_DIR/train.json`)
#   → PUSHING (the run directory to RUN_PATH/run; three failed pushes end the run FAIL) → DONE | FAIL.
# BOX_DIR/CHAIN says "GEN running" once training has started (what the launcher waits for) or
# "GEN failed". On EXIT and ERR the box writes FAIL unless DONE was written, and destroys itself
# with CONTAINER_ID / CONTAINER_API_KEY (vast.ai sets both inside an instance).
# Exit codes: 0 DONE; 1 FAIL (the run failed, a push failed three times, or train.json is missing or
#   not the hashed config); 3 no job.env in time.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=runner/lib/guard.sh
. "$here/../lib/guard.sh"
# shellcheck source=runner/box/status.sh
. "$here/status.sh"

case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;; esac
BOX_DIR=${1:-${HEARSAY_BOX_DIR:-/run/hearsay}}
umask 077
mkdir -p "$BOX_DIR"
mkdir "$BOX_DIR/entry.lock" 2>/dev/null || { echo "entry: already running in $BOX_DIR" >&2; exit 0; }
echo "$$" >"$BOX_DIR/entry.pid"

phase=WAITING
trap box_exit EXIT
trap 'exit 1' ERR INT TERM HUP

waited=0
while [ ! -s "$BOX_DIR/job.env" ]; do
  [ "$waited" -lt "${HEARSAY_BOX_WAIT_S:-1800}" ] || { echo "entry: no job.env after ${waited}s" >&2; exit 3; }
  sleep 1
  waited=$((waited + 1))
done
set -a   # job.env's names are exported: the smoke check and the trainer read HEARSAY_STORE and co.
# shellcheck source=/dev/null
. "$BOX_DIR/job.env"
set +a
export RCLONE_CONFIG="$BOX_DIR/rclone.conf"
: "${HEARSAY_GEN:?job.env lacks HEARSAY_GEN}" "${HEARSAY_STORE:?job.env lacks HEARSAY_STORE}"
RUNNER_STORE=$HEARSAY_STORE             # the guard's prefix
RUN_PATH=$(guard_path "$HEARSAY_RUN_PATH")

box_status STARTED
config=$BOX_DIR/train.json
if [ "$HEARSAY_KIND" != probe ]; then   # train on exactly the config the pilot gate hashed, or not at all
  [ -f "$config" ] || { echo "entry: no $config (the launcher sends it before job.env)" >&2; exit 1; }
  got=$(sha256sum "$config" | cut -d' ' -f1)
  [ "$got" = "${HEARSAY_CONFIG_HASH:-}" ] \
    || { echo "entry: $config has sha256 $got, job.env says HEARSAY_CONFIG_HASH=${HEARSAY_CONFIG_HASH:-} (relaunch)" >&2; exit 1; }
fi
if [ -n "${HEARSAY_SMOKE_CHECK:-}" ] || [ -x /opt/hearsay/container/trainer/smoke_check.sh ]; then
  box_status SMOKE
  "${HEARSAY_SMOKE_CHECK:-/opt/hearsay/container/trainer/smoke_check.sh}" >&2
fi

case $HEARSAY_KIND in
  fold) sel=(--fold "$HEARSAY_FOLD") ;;
  full) sel=(--full) ;;
  pilot) sel=(--pilot) ;;
  probe) sel=() ;;
  *) echo "entry: unknown job kind $HEARSAY_KIND" >&2; exit 1 ;;
esac

box_status TRAINING
if [ "$HEARSAY_KIND" != probe ]; then
  box_rclone copy "$(guard_path "${HEARSAY_STORE%/}/bundles/$HEARSAY_BUNDLE_SHA")" "$BOX_DIR/bundle" </dev/null || true
  # shellcheck disable=SC2086  # HEARSAY_TRAIN is a command line by design
  $HEARSAY_TRAIN --bundle "$BOX_DIR/bundle" ${sel[@]+"${sel[@]}"} --out "$BOX_DIR/run" \
    --store "$(guard_path "$RUN_PATH/run")" --resume --config "$config" &
  train=$!
  echo "$HEARSAY_GEN running" >"$BOX_DIR/CHAIN"
  # The box's own hard deadline (HEARSAY_DEADLINE, epoch s, the record's): past it the trainer is
  # stopped (TERM, KILL after 10 s), what it has is pushed, and the run ends FAIL, so the EXIT trap
  # destroys the box even with the laptop and its reaper gone.
  while kill -0 "$train" 2>/dev/null; do
    if [ -n "${HEARSAY_DEADLINE:-}" ] && [ "$(date -u +%s)" -ge "$HEARSAY_DEADLINE" ]; then
      echo "entry: deadline $HEARSAY_DEADLINE passed: stopping the trainer, pushing what it has" >&2
      kill -TERM "$train" 2>/dev/null; sleep "${HEARSAY_STOP_WAIT_S:-10}"; kill -KILL "$train" 2>/dev/null
      box_status PUSHING
      box_push "$BOX_DIR/run" "$(guard_path "$RUN_PATH/run")" || true
      exit 1
    fi
    sleep 1
  done
  wait "$train"
  box_status PUSHING
  box_push "$BOX_DIR/run" "$(guard_path "$RUN_PATH/run")" || { echo "entry: checkpoint push failed 3 times" >&2; exit 1; }
else
  echo "$HEARSAY_GEN running" >"$BOX_DIR/CHAIN"
fi
box_status DONE
phase=DONE
exit 0
