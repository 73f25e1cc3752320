#!/usr/bin/env bash
# Usage: fake_ssh.sh -p PORT USER@HOST 'remote command'   (what RUNNER_SSH is called with)
# Summary: "the box" for tests: runs the remote command locally in a per-instance sandbox
#
# The sandbox is $FAKE_BOX_ROOT/box-PORT; HEARSAY_BOX_DIR points into it, HEARSAY_ENTRY at this
# tree's runner/box/entry.sh, and HEARSAY_INIT_ENVIRON at the sandbox's init.environ: the
# container's environment (CONTAINER_ID / CONTAINER_API_KEY of the instance, read from the fake
# API's control state as vast.ai sets them, and PATH), which entry.sh imports itself. Faults: a number N in $FAKE_BOX_ROOT/ssh_fail
# makes the next N calls fail with 255 (ssh's connection error). Every call is logged (argv only)
# to $FAKE_BOX_ROOT/ssh.log, so tests can check that no secret was ever on a command line.
set -euo pipefail
port="" target=""
while [ $# -gt 0 ]; do
  case $1 in
    -p) port=$2; shift 2 ;;
    -o) shift 2 ;;
    *) target=$1; shift; break ;;
  esac
done
cmd=${1:?no remote command}
root=${FAKE_BOX_ROOT:?FAKE_BOX_ROOT unset}
echo "ssh -p $port $target $cmd" >>"$root/ssh.log"
if [ -s "$root/ssh_fail" ]; then
  n=$(cat "$root/ssh_fail")
  if [ "$n" -gt 0 ]; then
    echo $((n - 1)) >"$root/ssh_fail"
    echo "ssh: connect to host ${target#*@} port $port: Connection refused" >&2
    exit 255
  fi
fi
box="$root/box-$port"
mkdir -p "$box/run"
here=$(cd "$(dirname "$0")/../../.." && pwd)
ids=$(curl -fsS "$VAST_URL/_control/state" | jq -r --argjson p "$port" \
  '[.instances[] | select(.ssh_port == $p and .destroyed_at == null)][0] | "\(.id) \(.instance_api_key)"')
# The container's own environment, as its first process would hold it (NUL-separated): the chain
# reads it from there (HEARSAY_INIT_ENVIRON), so nothing here is injected into the session itself.
printf 'CONTAINER_ID=%s\0CONTAINER_API_KEY=%s\0PATH=%s\0' "${ids%% *}" "${ids#* }" "$PATH" >"$box/init.environ"
export HEARSAY_INIT_ENVIRON="$box/init.environ"
export HEARSAY_BOX_DIR="$box/run" HEARSAY_ENTRY="$here/runner/box/entry.sh"
cd "$box"
exec bash -c "$cmd" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
