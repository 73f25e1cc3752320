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
# Every variable the chain needs is imported explicitly, each from one source, listed in one place
# (runner/box/job.sh, BOX_*_NAMES): the image's Env (PATH, LD_LIBRARY_PATH, HEARSAY_WEIGHTS_DIR,
# HEARSAY_FFMPEG, HEARSAY_GIT_SHA, SSL_CERT_FILE, HF_HUB_OFFLINE, …) and vast.ai's CONTAINER_ID and
# CONTAINER_API_KEY from $HEARSAY_INIT_ENVIRON (default /proc/1/environ: a chain started over ssh
# does not inherit the container's environment), written to BOX_DIR/box.env (mode 600) before
# anything runs; the job's HEARSAY_* from job.env. One missing from either is a FAIL whose REASON
# names it.
#
# Phases, each written to RUN_PATH/STATUS as "GEN PHASE EPOCH beats=yes" (the reaper ignores other
# generations; beats=yes: this chain writes HEARTBEAT, which the judge trusts only on the box's word):
#   STARTED (a required variable missing; runner/box/driver_check.sh, $HEARSAY_DRIVER_CHECK, when
#   present: the host driver does not run the lock's CUDA; train.json missing or its sha256 !=
#   HEARSAY_CONFIG_HASH: FAIL) → SMOKE (container/trainer/smoke_check.sh beside this runner/, or
#   $HEARSAY_SMOKE_CHECK; its FAIL lines go to REASON) → TRAINING (pull
#   STORE/bundles/BUNDLE_SHA and check its tree-sha; a failed pull or another tree-sha is a FAIL
#   that says so; a bundle carrying a codec recipe gets its copies: STORE/codecs/BUNDLE_SHA/KEY
#   pulled, or made here on every core and stored there (box_codec_pass); then `$HEARSAY_TRAIN --bundle … --fold K|--full|--pilot --out … --store RUN
#   --resume auto --config BOX_DIR/train.json`, RUN = RUN_PATH/BUNDLE_SHA/CONFIG_HASH, so a
#   job's first launch starts fresh and a relaunch of the same bundle + config resumes from its
#   latest complete checkpoint) → PUSHING (the run directory to RUN; three failed pushes end the run
#   FAIL) → SCORING (fold and full jobs: `hearsay score-run`, or $HEARSAY_SCORE_RUN, scores the run's
#   rows of record on this device in the trainer's precision, and the probe set (fold probe's bona
#   fide clips: scores/<key>_probe.csv, every run its own), the full job also the parity B logits;
#   RUN/scores pulled first so a relaunch keeps what is scored, then pushed there; a scorer
#   failure is a FAIL with its exit code and last lines in REASON) → DONE | FAIL. DONE only once
#   every file of the run directory reads back from RUN with its sha256 (box_verify: a store that
#   acknowledged a push and kept nothing, or lost a file, is a FAIL naming the files). Every FAIL this script names (the trainer's exit code and its last 20 lines
#   included) is also written to RUN_PATH/REASON (runner/status.sh --why JOB).
# From STARTED on, RUN_PATH/HEARTBEAT gets "GEN SEQ EPOCH" every HEARSAY_HEARTBEAT_S (job.env's, 60 s
# without it) while this script runs: runner/reaper.sh ends a box whose heartbeat stops.
# BOX_DIR/CHAIN says "GEN running" once training (or a codec pass before it) has started (what the
# launcher waits for) or
# "GEN failed". On EXIT and ERR the box writes FAIL unless DONE was written, and destroys itself
# with CONTAINER_ID / CONTAINER_API_KEY (vast.ai sets both inside an instance).
# The deadline (HEARSAY_DEADLINE; the campaign's, RUNNER_CAMPAIGN_DEADLINE, when that is earlier)
# holds in every phase after job.env: the trainer is stopped at it (a store push it has in flight
# finishes first, at most HEARSAY_PUSH_FINISH_S, 300 s) and what it has pushed; a smoke check, pull or push still running at it is stopped (TERM) and the
# run ends FAIL with a REASON naming the phase (the wait for job.env is bounded by HEARSAY_BOX_WAIT_S).
# Exit codes: 0 DONE; 1 FAIL (the run failed, scoring failed, a push failed three times or did not read
#   back, the bundle could not be
#   pulled or is not the launched tree-sha, train.json is missing or not the hashed config, or the
#   host driver cannot run the image's CUDA: runner/box/driver_check.sh's exit 18/19 in REASON);
#   3 no job.env in time. A deadline that passes is a FAIL (1).
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=runner/lib/guard.sh
. "$here/../lib/guard.sh"
# shellcheck source=runner/box/status.sh
. "$here/status.sh"
# shellcheck source=runner/lib/bundles.sh
. "$here/../lib/bundles.sh"
# shellcheck source=runner/box/job.sh
. "$here/job.sh"

case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;; esac
BOX_DIR=${1:-${HEARSAY_BOX_DIR:-/run/hearsay}}
umask 077
mkdir -p "$BOX_DIR"
mkdir "$BOX_DIR/entry.lock" 2>/dev/null || { echo "entry: already running in $BOX_DIR" >&2; exit 0; }
echo "$$" >"$BOX_DIR/entry.pid"

phase=WAITING
trap box_exit EXIT
trap 'exit 1' ERR INT TERM HUP
box_env_import   # first: even a box that never gets its job.env can destroy itself

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
# Without these three no REASON can be written: said in entry.log, and the box destroys itself.
: "${HEARSAY_GEN:?job.env lacks HEARSAY_GEN}" "${HEARSAY_STORE:?job.env lacks HEARSAY_STORE}" \
  "${HEARSAY_RUN_PATH:?job.env lacks HEARSAY_RUN_PATH}"
RUNNER_STORE=$HEARSAY_STORE             # the guard's prefix
RUN_PATH=$(guard_path "$HEARSAY_RUN_PATH")
watchdog="" heartbeat=""
if [[ ${HEARSAY_DEADLINE:-} =~ ^[0-9]+$ ]]; then   # the deadline holds in every phase from here on
  box_watchdog "$$" &
  watchdog=$!
fi

box_heartbeat "$$" &   # liveness for the reaper, from the first phase on (runner/lib/heartbeat.sh)
heartbeat=$!
BOX_BEATS=yes          # and every STATUS line from the first says so (runner/box/status.sh)
box_status STARTED
box_env_check   # every variable the box needs, from the container or job.env, or a FAIL naming it
# Then, before torch is loaded: a host driver older than the image's CUDA is a FAIL naming both.
if [ -n "${HEARSAY_DRIVER_CHECK:-}" ] || [ -x /opt/hearsay/runner/box/driver_check.sh ]; then
  driver_rc=0
  why=$("${HEARSAY_DRIVER_CHECK:-/opt/hearsay/runner/box/driver_check.sh}" 2>&1) || driver_rc=$?
  [ "$driver_rc" -eq 0 ] || box_fail "$(printf '%s\n' "$why" | tail -n 1) (driver check exit $driver_rc)"
  echo "entry: $why" >&2
fi
config=$BOX_DIR/train.json
if [ "$HEARSAY_KIND" != probe ]; then   # train on exactly the config the pilot gate hashed, or not at all
  [ -f "$config" ] || box_fail "no $config (the launcher sends it before job.env)"
  got=$(sha256sum "$config" | cut -d' ' -f1)
  [ "$got" = "${HEARSAY_CONFIG_HASH:-}" ] \
    || box_fail "$config has sha256 $got, job.env says HEARSAY_CONFIG_HASH=${HEARSAY_CONFIG_HASH:-} (relaunch)"
fi
box_status SMOKE   # the image's own check (/opt/hearsay/container/trainer/ in the image), or the override
smoke=${HEARSAY_SMOKE_CHECK:-$(cd "$here/../.." && pwd)/container/trainer/smoke_check.sh}
[ -x "$smoke" ] || box_fail "no smoke check at $smoke (the image ships container/trainer/smoke_check.sh)"
rc=0
"$smoke" >"$BOX_DIR/smoke.log" 2>&1 </dev/null || rc=$?
cat "$BOX_DIR/smoke.log" >&2
[ "$rc" -eq 0 ] || box_fail "the image's smoke check failed (exit $rc): $({ grep -m 3 'FAIL ' "$BOX_DIR/smoke.log" || tail -n 1 "$BOX_DIR/smoke.log"; } | tr '\n' ' ')" "$BOX_DIR/smoke.log"

case $HEARSAY_KIND in
  fold) sel=(--fold "$HEARSAY_FOLD") ;;
  full) sel=(--full) ;;
  pilot) sel=(--pilot) ;;
  probe) sel=() ;;
  *) box_fail "unknown job kind $HEARSAY_KIND" ;;
esac

box_status TRAINING
if [ "$HEARSAY_KIND" != probe ]; then
  run_store=$(store_run_path "$RUN_PATH" "$HEARSAY_BUNDLE_SHA" "$HEARSAY_CONFIG_HASH")
  box_pull_bundle
  box_codec_pass   # a bundle with a codec recipe: its copies pulled from the store, or made here
  box_train "$run_store" ${sel[@]+"${sel[@]}"}
  box_status PUSHING
  box_push "$BOX_DIR/run" "$run_store" || box_fail "checkpoint push to $run_store failed 3 times"
  case $HEARSAY_KIND in fold | full) box_status SCORING; box_score "$run_store" ;; esac
  # DONE only for a run the store keeps: every file pushed (scores included) read back, hashes equal
  box_verify "$BOX_DIR/run" "$run_store" \
    || box_fail "the store does not keep the run: $(wc -l <"$BOX_DIR/verify.txt") of $(wc -l <"$BOX_DIR/pushed.sha256") pushed files do not read back from $run_store with their sha256 ($(head -n 3 "$BOX_DIR/verify.txt" | tr '\n' ' ')); the push said it succeeded: check the store" "$BOX_DIR/verify.log"
else
  echo "$HEARSAY_GEN running" >"$BOX_DIR/CHAIN"
fi
box_status DONE
phase=DONE
exit 0
