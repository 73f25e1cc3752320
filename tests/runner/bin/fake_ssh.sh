#!/usr/bin/env bash
# Usage: fake_ssh.sh -p PORT USER@HOST 'remote command'   (what RUNNER_SSH is called with)
# Summary: "the box" for tests: runs the remote command locally in a per-instance sandbox, from an empty environment
#
# The sandbox is $FAKE_BOX_ROOT/box-PORT. The remote command starts as an ssh session on a vast.ai
# box does: from an empty environment (env -i), with only what sshd gives a session (HOME, a
# bare PATH of /usr/bin:/bin) plus the sandbox's seams: HEARSAY_BOX_DIR (into the sandbox),
# HEARSAY_ENTRY (this tree's runner/box/entry.sh) and HEARSAY_INIT_ENVIRON (the sandbox's
# init.environ, standing for /proc/1/environ). Nothing of the caller's environment reaches the box
# but the names the harness lists in FAKE_SSH_PASS (the fakes' own knobs and short timings, e.g.
# VAST_URL for the fake API, FAKE_TRAIN_S, HEARSAY_PUSH_WAIT_S: never a variable the container
# defines). init.environ, written once per instance as a container's environment is set once at
# its start, is what tests/runner/bin/box_environ.sh makes: the image's Env (nix/trainer-image.nix)
# adjusted for this machine, then vast.ai's container variables: CONTAINER_ID, CONTAINER_API_KEY and
# the create's -e variables, read from the fake API's control state. runner/box/entry.sh imports
# what it needs from it. Faults: a number N in $FAKE_BOX_ROOT/ssh_fail makes the next N calls fail
# with 255 (ssh's connection error). Every call is logged (argv only) to $FAKE_BOX_ROOT/ssh.log, so
# tests can check that no secret was ever on a command line.
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
if [ ! -s "$box/init.environ" ]; then
  vars=$(curl -fsS "$VAST_URL/_control/state" | jq -r --argjson p "$port" '
    [.instances[] | select(.ssh_port == $p and .destroyed_at == null)][0]
    | "CONTAINER_ID=\(.id)", "CONTAINER_API_KEY=\(.instance_api_key)",
      ((.env // {}) | to_entries[] | "\(.key)=\(.value)")')
  mapfile -t container <<<"$vars"
  "$here/tests/runner/bin/box_environ.sh" "$box" "$box/init.environ" "${container[@]}"
fi
session=(HOME="$box/home" PATH=/usr/bin:/bin HEARSAY_INIT_ENVIRON="$box/init.environ"
  HEARSAY_BOX_DIR="$box/run" HEARSAY_ENTRY="$here/runner/box/entry.sh")
for name in ${FAKE_SSH_PASS:-}; do
  [ -z "${!name+set}" ] || session+=("$name=${!name}")
done
cd "$box"
exec env -i "${session[@]}" bash -c "$cmd" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
