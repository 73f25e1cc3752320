# shellcheck shell=bash
# runner/lib/common.sh — errors, logging, time, timeouts and locks shared by every runner script.
# Bash 3.2 safe: no associative arrays, mapfile, ${x,,}; empty arrays expanded as ${a[@]+"${a[@]}"}.

RUNNER_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=runner/config.sh
. "$RUNNER_ROOT/config.sh"
export VASTAI_NO_UPDATE_CHECK=1   # the CLI's upgrade nudge must never touch the network or stderr

# die EXIT_CODE "what" "how to fix": the house error format, on stderr.
die() {
  local code=$1 what=$2 fix=${3:-}
  if [ -n "$fix" ]; then
    echo "runner: $what ($fix)" >&2
  else
    echo "runner: $what" >&2
  fi
  log_event "error: $what"
  exit "$code"
}

# say "message": progress for the person, on stderr (stdout is kept for results).
say() { echo "runner: $*" >&2; }

now() { date -u +%s; }

# iso EPOCH -> 2026-11-30T01:33:00Z (GNU date or BSD date).
iso() {
  date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r "$1" +%Y-%m-%dT%H:%M:%SZ
}

# epoch_of 2026-11-30T01:33:00Z -> EPOCH (GNU date or BSD date); empty when it does not parse.
epoch_of() {
  date -u -d "$1" +%s 2>/dev/null || date -u -j -f %Y-%m-%dT%H:%M:%SZ "$1" +%s 2>/dev/null || true
}

# log_event "text": append to the runner's event log (never secrets: callers pass ids and states only).
log_event() {
  [ -n "${RUNNER_STATE:-}" ] || return 0
  mkdir -p "$RUNNER_STATE" 2>/dev/null || return 0
  echo "$(iso "$(now)") [$$ ${RUNNER_SCRIPT:-runner}] $*" >>"$RUNNER_STATE/runner.log" 2>/dev/null || true
}

# need CMD...: dependencies checked up front.
need() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || die 10 "missing dependency: $c" "install $c or put it on PATH"
  done
}

# usage_from FILE: print the script's `# Usage:` / `# Summary:` header (what --help shows).
usage_from() {
  sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p;}' "$1"
}

# with_timeout SECONDS CMD...: run CMD, kill it after SECONDS (portable: no coreutils timeout on macOS).
# Returns CMD's status (non-zero, e.g. 143, when it was killed).
with_timeout() {
  local t=$1
  shift
  "$@" <&0 &   # explicit: an async command would otherwise read /dev/null
  local pid=$! watcher rc=0
  # The watcher keeps none of the caller's descriptors (bats waits on fd 3) and takes its sleep with it.
  (
    exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
    sleep "$t" &
    sp=$!
    trap 'kill "$sp" 2>/dev/null; exit 0' TERM
    wait "$sp" && kill -TERM "$pid" 2>/dev/null && sleep 2 && kill -KILL "$pid" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  watcher=$!
  wait "$pid" || rc=$?
  if kill -0 "$watcher" 2>/dev/null; then
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
  else
    rc=124
  fi
  return "$rc"
}

# proc_start PID: the process's identity at its start, free of clock, time zone and locale, or
# nothing when no such process exists. With the pid it names one process for good: a pid the system
# reused for another program has another start. Where /proc exists (Linux): "ticks:T@BOOT", T the
# start in clock ticks after boot (/proc/PID/stat field 22) and BOOT the kernel's boot id, so a
# wall-clock step or another TZ never changes it. Elsewhere (macOS): `ps -o lstart=` under LC_ALL=C
# and TZ=UTC, so a caller in another zone or locale reads the same text. RUNNER_PROC_ROOT (default
# /proc) exists for tests of the ps path.
proc_start() {
  local root=${RUNNER_PROC_ROOT:-/proc} t boot
  case $1 in '' | *[!0-9]*) return 0 ;; esac
  if [ -r "$root/self/stat" ]; then
    # the command name (field 2) may hold spaces and ')': cut up to the last ") ", then field 22
    # of the line is the 20th of what is left
    t=$(sed 's/^.*) //' "$root/$1/stat" 2>/dev/null | awk '{ print $20 }')
    [ -n "$t" ] || return 0
    boot=$(cat "$root/sys/kernel/random/boot_id" 2>/dev/null || true)
    printf 'ticks:%s@%s\n' "$t" "${boot:-unknown}"
    return 0
  fi
  LC_ALL=C TZ=UTC ps -o lstart= -p "$1" 2>/dev/null | sed 's/^ *//; s/ *$//'
}

# proc_is PID START: PID runs and is the process that started at START (an empty START: pid only,
# for records written before start times were kept).
proc_is() {
  local st
  st=$(proc_start "$1")
  [ -n "$st" ] || return 1
  [ -z "$2" ] || [ "$st" = "$2" ]
}

# mtime_of PATH: modification time, epoch seconds (GNU stat, else BSD stat); nothing when unreadable.
mtime_of() { stat -c %Y "$1" 2>/dev/null || stat -f %m "$1" 2>/dev/null || true; }

# Locks are directories (mkdir is atomic everywhere). The owner file DIR/owner holds "PID START"
# (proc_start), written to a temp file inside DIR and renamed into place, so it is either whole or
# absent. A lock is stale when its owner is not running (or its pid now names a younger process),
# or when it has no readable owner and is older than RUNNER_LOCK_STALE_S (a taker killed between
# mkdir and rename, or a disk that was full). Stale locks are broken under DIR.break (one breaker
# at a time, so two breakers never remove a lock a third process has just taken).
: "${RUNNER_LOCK_STALE_S:=30}"

# lock_stale DIR: 0 when DIR may be broken.
lock_stale() {
  local v pid st t
  v=$(cat "$1/owner" 2>/dev/null || true)
  if [ -n "$v" ]; then
    pid=${v%% *}
    st=${v#"$pid"}
    st=${st# }
    ! proc_is "$pid" "$st"
    return
  fi
  t=$(mtime_of "$1")
  is_number "$t" || return 1          # vanished meanwhile: not ours to judge, try mkdir again
  [ $(($(now) - t)) -ge "$RUNNER_LOCK_STALE_S" ]
}

# lock_break DIR: remove DIR if it is (still) stale; 0 when it is gone.
lock_break() {
  local b=$1.break t
  if ! mkdir "$b" 2>/dev/null; then
    t=$(mtime_of "$b")
    if is_number "$t" && [ $(($(now) - t)) -ge "$RUNNER_LOCK_STALE_S" ]; then rm -rf "$b"; fi
    return 1
  fi
  if [ -d "$1" ] && lock_stale "$1"; then
    log_event "breaking stale lock $1 (owner: $(cat "$1/owner" 2>/dev/null || echo none))"
    rm -rf "$1"
  fi
  rmdir "$b" 2>/dev/null
  [ ! -d "$1" ]
}

# lock_take DIR [TRIES]: take the lock, waiting 0.1 s between TRIES (default 50); a stale lock is
# broken. 1 when it stays held; 2 when the owner file cannot be written (a full disk: then no lock
# is left).
lock_take() {
  local dir=$1 tries=${2:-50} i=0
  while ! mkdir "$dir" 2>/dev/null; do
    if lock_stale "$dir" && lock_break "$dir"; then continue; fi
    [ -d "$(dirname "$dir")" ] || return 1
    i=$((i + 1))
    [ "$i" -lt "$tries" ] || return 1
    sleep 0.1
  done
  if ! { printf '%s %s\n' "$$" "$(proc_start "$$")" >"$dir/.owner.$$"; } 2>/dev/null \
    || ! mv -f "$dir/.owner.$$" "$dir/owner" 2>/dev/null; then
    rm -rf "$dir"
    echo "runner: cannot write the owner of lock $dir (disk full?)" >&2
    return 2
  fi
}

# lock_owner DIR: the pid holding DIR, or nothing.
lock_owner() { local v; v=$(cat "$1/owner" 2>/dev/null || true); printf '%s\n' "${v%% *}"; }

# lock_drop DIR: release a lock this process holds (another's is left alone).
lock_drop() {
  [ -d "$1" ] || return 0
  [ "$(lock_owner "$1")" = "$$" ] || return 0
  rm -rf "$1"
}

# is_number X: a plain decimal (what jq printed), never empty.
is_number() {
  case $1 in
    '' | *[!0-9.]* | *.*.* | .) return 1 ;;
  esac
  return 0
}

# calc 'EXPRESSION' [NAME=VALUE...]: floating point via awk (bash has integers only). EXPRESSION is
# program text written in the caller's source, never built from data: every value travels as an awk
# variable (-v NAME=VALUE; NAME lower-case letters and _, VALUE a plain decimal), so nothing a
# listing, record or setting holds can change the program. The result is assigned before printf, so
# a '>' in EXPRESSION is a comparison, never an output redirection. Prints 4 decimals; 1 on a bad pair.
calc() {
  local expr=$1 a args=""
  shift
  for a in "$@"; do
    case ${a%%=*} in '' | *[!a-z_]*) echo "runner: calc: bad variable name in $a" >&2; return 1 ;; esac
    is_number "${a#*=}" || { echo "runner: calc: ${a%%=*} is not a number (${a#*=})" >&2; return 1; }
    args="$args -v $a"
  done
  # shellcheck disable=SC2086  # args is "-v name=decimal" words, each checked above (no spaces)
  awk $args "BEGIN { x = ($expr); printf \"%.4f\", x }"
}

# gt A B: A > B for decimals.
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

[ -n "${RUNNER_DEBUG:-}" ] && set -x
true
