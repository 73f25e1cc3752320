# shellcheck shell=bash
# runner/lib/guard.sh — the guards: where the API key comes from, which remote paths may be touched.
# Also sourced on the box by runner/box/entry.sh, so it needs nothing but bash.

# key_guard: the vast.ai key comes from VAST_API_KEY or the CLI's own key file, never from argv. The
# key file must be readable by its owner only (mode 600): a looser one is refused, naming the chmod.
# Never expands the key itself (RUNNER_DEBUG's set -x would print it).
key_guard() {
  local file="${XDG_CONFIG_HOME:-$HOME/.config}/vastai/vast_api_key" perms
  [ -n "${VAST_API_KEY:+set}" ] && return 0
  if [ -s "$file" ]; then
    # shellcheck disable=SC2012  # one known path; ls -ln prints its mode the same on Linux and macOS
    perms=$(ls -ln "$file" 2>/dev/null | cut -c5-10)   # group and other bits of e.g. -rw-------
    if [ "$perms" != "------" ]; then
      echo "runner: the API key file $file is readable by others (run: chmod 600 $file)" >&2
      return 11
    fi
    return 0
  fi
  echo "runner: no vast.ai API key (export VAST_API_KEY, or keep it in $file, mode 600, without putting it on a command line: (umask 077; mkdir -p \"\$(dirname $file)\"; cat >$file), paste the key, then Ctrl-D)" >&2
  return 11
}

# store_conf_guard: the store's credentials (RUNNER_RCLONE_CONF) must be readable, and by their owner
# only (mode 600), like the key file: a looser file is refused, naming the chmod. 10 (said) otherwise.
store_conf_guard() {
  local f=$RUNNER_RCLONE_CONF perms
  if [ ! -r "$f" ]; then
    echo "runner: no store credentials at $f (set RUNNER_RCLONE_CONF to the store's rclone config, mode 600)" >&2
    return 10
  fi
  # shellcheck disable=SC2012  # one known path; ls -ln prints its mode the same on Linux and macOS
  perms=$(ls -lnL "$f" 2>/dev/null | cut -c5-10)
  if [ "$perms" != "------" ]; then
    echo "runner: the store credentials $f are readable by others (run: chmod 600 $f)" >&2
    return 10
  fi
}

# guard_path REMOTE_PATH: print it when it lies under RUNNER_STORE (remote:prefix), else refuse (exit
# status 12). Refuses `..` and `.` segments, empty segments, and anything on another remote.
guard_path() {
  local p=$1 base=${RUNNER_STORE:?RUNNER_STORE unset}
  base=${base%/}
  case "/$p/" in
    */../* | */./*) echo "runner: remote path refused: $p (no '.' or '..' segments)" >&2; return 12 ;;
  esac
  case $p in
    *//*) echo "runner: remote path refused: $p (empty path segment)" >&2; return 12 ;;
  esac
  case $p in
    "$base" | "$base"/*) printf '%s\n' "$p" ;;
    *) echo "runner: remote path refused: $p (outside $base; set RUNNER_STORE)" >&2; return 12 ;;
  esac
}
