#!/usr/bin/env bash
# Usage: start_fake_vast.sh URL_FILE PID_FILE [fake_vast.py options...]
# Summary: start the fake vast.ai API on a free loopback port, in the background
#
# Writes the base URL (for VAST_URL) to URL_FILE and the server's PID to PID_FILE, and
# returns once the server answers GET /_control/health. The server keeps none of the
# caller's file descriptors (bats waits on fd 3 until every holder exits), so it is safe
# to call from a bats test; stop it with `kill "$(cat PID_FILE)"` (SIGTERM: clean exit).
# Options after the two files go to fake_vast.py (--api-key, --seed, --set k=v, --faults,
# --log, --dump-state). Python: $FAKE_VAST_PYTHON, else python3. Works under bash 3.2.
#
# Exit codes: 0 started; 1 it did not answer within 10 s (its stderr is shown); 2 usage.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x

if [ "$#" -lt 2 ] || [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ] && exit 0
  exit 2
fi
url_file=$1
pid_file=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
python=${FAKE_VAST_PYTHON:-python3}
err_file="$url_file.stderr"
rm -f "$url_file" "$pid_file"

# Close fds 3-9 (bats' own) and detach stdin/stdout; the server also closes 3-255 itself.
"$python" "$here/fake_vast.py" --url-file "$url_file" "$@" \
  </dev/null >/dev/null 2>"$err_file" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
pid=$!
echo "$pid" >"$pid_file"

i=0
while [ "$i" -lt 100 ]; do
  if [ -s "$url_file" ] && "$python" - "$(cat "$url_file")" <<'PY' 3>&- 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/_control/health", timeout=2).read()
PY
  then
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
  sleep 0.1
  i=$((i + 1))
done
echo "start_fake_vast: the fake did not come up (stderr below; check the options)" >&2
cat "$err_file" >&2 || true
kill "$pid" 2>/dev/null || true
exit 1
