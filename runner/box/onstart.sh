#!/usr/bin/env bash
# Usage: runner/box/onstart.sh [BOX_DIR]
# Summary: the box's own guard from its first second: ends a box never provisioned, a chain killed without its trap, a box past its deadline
#
# runner/launch.sh creates every instance with this script as its on-start command (vast.ai runs it
# when the container starts, before the laptop reaches the box over ssh, and again after a restart)
# and with the job's HEARSAY_DEADLINE and HEARSAY_PROVISION_BY (epoch s) in the container's
# environment. It starts one guard for BOX_DIR (default $HEARSAY_BOX_DIR, else /run/hearsay) in the
# background, its output appended to BOX_DIR/onstart.log, and returns. The guard reads the
# container's environment from $HEARSAY_INIT_ENVIRON (default /proc/1/environ): PATH and the image's
# names, CONTAINER_ID and CONTAINER_API_KEY (it destroys this instance with them), HEARSAY_DEADLINE
# and HEARSAY_PROVISION_BY. Then, every HEARSAY_GUARD_POLL_S (5 s), the first that applies:
#   - no chain started (no BOX_DIR/entry.pid) by HEARSAY_PROVISION_BY: the laptop never provisioned
#     this box (gone after the create): destroy it
#   - the chain's entry.sh is gone but its entry.lock is still there: it died without its EXIT
#     trap (killed, out of memory, a container restart): FAIL and a REASON saying so in the store
#     (where job.env names it), then destroy
#   - the chain ended (its EXIT trap removed entry.lock and destroyed the box): destroy again, in
#     case that destroy was not confirmed
#   - HEARSAY_DEADLINE + HEARSAY_DEADLINE_GRACE_S (the job contract's grace_s, from the create; 600
#     without it) + HEARSAY_GUARD_MARGIN_S (300) passed
#     (entry.sh's own deadline watchdog did not end the box): destroy
# A destroy that is not confirmed is retried on the next poll. One guard per BOX_DIR
# (BOX_DIR/guard.lock holds its pid; a lock whose guard is gone is taken over).
#
# How vast.ai runs the on-start command, and why this works whatever shell runs it:
#   - the vastai CLI (1.9.1: vastai/cli/commands/instances.py create_instance_impl,
#     vastai/api/instances.py build_create_instance_payload) sends --onstart-cmd's text verbatim as
#     the create's "onstart" field; it names no shell. vast.ai's docs (docs.vast.ai, "Launch Modes"
#     and "Creating Instances with API") say only that in the ssh/jupyter launch modes (the runner
#     creates with --ssh --direct) the image's entrypoint is replaced and the onstart "shell
#     commands" run as part of vast.ai's own entrypoint; the CLI's own example copies the
#     environment to /etc/environment from the on-start (`env | grep _ >> /etc/environment`), so
#     the create's -e variables are in the on-start's environment and not in ssh sessions.
#   - the shell itself is not in those docs; a measurement on a rented box published by a third
#     party (github.com/inference-book/inference-plane, its vast provider's Deploy comment) shows
#     pid 1 = `/bin/sh -c while [ ! -e /.launch ]; do sleep 1; done; bash /.launch` (vast.ai's
#     launcher, started by docker with the container's environment) and the on-start text written
#     to /root/onstart.sh and run as `bash /root/onstart.sh`.
#   So the create's command (runner/lib/launch_create.sh) is one POSIX line, `bash ${HEARSAY_ONSTART:-
#   …} ${HEARSAY_BOX_DIR:-…}`: any sh runs it, and it runs this script with bash itself (the image
#   has bash, and vast.ai's launcher needs /bin/sh). The guard reads the container's environment
#   from /proc/1/environ (pid 1 = that launcher, docker's environment), not from its own, so an
#   on-start run with a trimmed environment still finds HEARSAY_DEADLINE, HEARSAY_PROVISION_BY,
#   CONTAINER_ID and CONTAINER_API_KEY. Not verified against the real service: that vast.ai's
#   launcher keeps the -e variables in pid 1's environment today (the measurement above implies it).
#   tests/runner/box_deadline.bats runs the create's command under bash (as measured) and under
#   dash (a POSIX sh), each from an empty environment (tests/runner/bin/fake_boot.sh).
# Exit codes: 0 the guard runs (or already ran); 2 usage.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case ${1:-} in
  -h | --help) sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
  --guard) shift ;;
  -*) echo "onstart: unknown option $1 (see --help)" >&2; exit 2 ;;
  *)   # the on-start command itself: start the guard and return at once
    d=${1:-${HEARSAY_BOX_DIR:-/run/hearsay}}
    (umask 077; mkdir -p "$d")
    nohup bash "$0" --guard "$d" </dev/null >>"$d/onstart.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
    exit 0 ;;
esac
BOX_DIR=${1:?--guard needs BOX_DIR}
umask 077
# shellcheck source=runner/lib/guard.sh
. "$here/../lib/guard.sh"
# shellcheck source=runner/box/status.sh
. "$here/status.sh"
# shellcheck source=runner/lib/bundles.sh
. "$here/../lib/bundles.sh"
# shellcheck source=runner/box/job.sh
. "$here/job.sh"

say() { echo "onstart: $(date -u +%Y-%m-%dT%H:%M:%SZ) $*"; }

# alive PIDFILE: the process it names runs and is entry.sh (a restarted container reuses pids).
alive() {
  local p
  p=$(cat "$1" 2>/dev/null || true)
  case $p in '' | *[!0-9]*) return 1 ;; esac
  kill -0 "$p" 2>/dev/null && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'entry\.sh'
}

if ! mkdir "$BOX_DIR/guard.lock" 2>/dev/null; then
  if kill -0 "$(cat "$BOX_DIR/guard.lock/pid" 2>/dev/null || echo x)" 2>/dev/null; then exit 0; fi
  rm -rf "$BOX_DIR/guard.lock"
  mkdir "$BOX_DIR/guard.lock" 2>/dev/null || exit 0
fi
echo "$$" >"$BOX_DIR/guard.lock/pid"

# the container's environment: the names entry.sh imports, the create's two epochs and the final
# push's grace (the job's contract, runner/lib/contract.sh)
xt=""
case $- in *x*) xt=1; set +x ;; esac   # RUNNER_DEBUG's xtrace must never print the instance key
src=${HEARSAY_INIT_ENVIRON:-/proc/1/environ}
if [ -r "$src" ]; then
  while IFS= read -r -d '' kv; do
    case " $BOX_ENV_NAMES HEARSAY_DEADLINE HEARSAY_DEADLINE_GRACE_S HEARSAY_PROVISION_BY " in *" ${kv%%=*} "*) export "${kv%%=*}=${kv#*=}" ;; esac
  done <"$src"
fi
[ -z "$xt" ] || set -x
is_epoch() { [[ ${1:-} =~ ^[0-9]+$ ]]; }
is_epoch "${HEARSAY_PROVISION_BY:-}" || say "no HEARSAY_PROVISION_BY in the container's environment: only the deadline applies"
is_epoch "${HEARSAY_DEADLINE:-}" || say "no HEARSAY_DEADLINE in the container's environment: no deadline of its own"
[[ ${HEARSAY_DEADLINE_GRACE_S:-} =~ ^[0-9]+$ ]] || HEARSAY_DEADLINE_GRACE_S=600   # a box created without it
last_at=$(( ${HEARSAY_DEADLINE:-0} + HEARSAY_DEADLINE_GRACE_S + ${HEARSAY_GUARD_MARGIN_S:-300} ))
say "guarding instance ${CONTAINER_ID:-?}: provision by ${HEARSAY_PROVISION_BY:-never}, deadline ${HEARSAY_DEADLINE:-none}"

# chain_died: FAIL and REASON in the store for the generation job.env names (when it does).
chain_died() {
  local why
  why="the chain's entry.sh (pid $(cat "$BOX_DIR/entry.pid" 2>/dev/null)) is gone without its exit trap (killed, out of memory, or the container restarted): the box's on-start guard ends it"
  say "$why"
  [ -s "$BOX_DIR/job.env" ] || return 0
  (
    set +e
    set -a
    # shellcheck source=/dev/null
    . "$BOX_DIR/job.env"
    set +a
    export RCLONE_CONFIG="$BOX_DIR/rclone.conf"
    RUNNER_STORE=$HEARSAY_STORE
    RUN_PATH=$(guard_path "$HEARSAY_RUN_PATH") || exit 0
    phase=$(cat "$BOX_DIR/PHASE" 2>/dev/null || echo "?")
    box_reason "$why"
    box_status FAIL
  )
}

acted=""
while :; do
  now=$(date -u +%s)
  why=""
  if [ ! -e "$BOX_DIR/entry.pid" ]; then
    if is_epoch "${HEARSAY_PROVISION_BY:-}" && [ "$now" -ge "$HEARSAY_PROVISION_BY" ]; then
      why="no chain started by HEARSAY_PROVISION_BY=$HEARSAY_PROVISION_BY: this box was never provisioned"
    fi
  elif [ -d "$BOX_DIR/entry.lock" ]; then
    if ! alive "$BOX_DIR/entry.pid"; then
      sleep 1   # entry.sh removes its lock as the last step of its EXIT trap: look again
      if [ -d "$BOX_DIR/entry.lock" ] && ! alive "$BOX_DIR/entry.pid"; then
        [ -n "$acted" ] || chain_died
        why="the chain died without its exit trap"
      fi
    fi
  else
    why="the chain has ended"
  fi
  if [ -z "$why" ] && is_epoch "${HEARSAY_DEADLINE:-}" && [ "$now" -ge "$last_at" ]; then
    why="deadline $HEARSAY_DEADLINE passed by over HEARSAY_DEADLINE_GRACE_S + HEARSAY_GUARD_MARGIN_S and the box still runs"
  fi
  if [ -n "$why" ]; then
    [ -n "$acted" ] || say "$why: destroying instance ${CONTAINER_ID:-?}"
    acted=1
    if box_destroy_self; then exit 0; fi
    say "destroy not confirmed: trying again"
  fi
  sleep "${HEARSAY_GUARD_POLL_S:-5}"
done
