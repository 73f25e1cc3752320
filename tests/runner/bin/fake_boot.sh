#!/usr/bin/env bash
# Usage: fake_boot.sh ID SSH_PORT   (the fake API's boot_cmd: tests/fakes/README.md)
# Summary: "the box" starting: runs instance ID's on-start command in its sandbox, as vast.ai does at container start
#
# The sandbox is $FAKE_BOX_ROOT/box-PORT, the one tests/runner/bin/fake_ssh.sh uses for the same
# instance. The container's environment (the image's Env, CONTAINER_ID, CONTAINER_API_KEY and the
# create's -e variables) is written by box_environ.sh to the sandbox's boot.environ: the same names
# as fake_ssh.sh's init.environ, without the test image's extras (the fake's own environment is not
# the test's).
# The on-start command, read from the fake's control state, runs from an empty environment with
# what the container's first shell has here: HOME, a bare PATH, HEARSAY_INIT_ENVIRON (standing for
# /proc/1/environ), HEARSAY_BOX_DIR (into the sandbox), HEARSAY_ONSTART (this tree's
# runner/box/onstart.sh), VAST_URL (the fake) and each name of FAKE_BOOT_PASS (the fakes' knobs).
# The command is written to the sandbox's onstart.sh and run as `bash onstart.sh`, as vast.ai runs
# /root/onstart.sh (runner/box/onstart.sh's header has the source), or by the shell named in
# $FAKE_BOX_ROOT/boot_shell (e.g. sh: a POSIX shell, to show the command needs no bash of its own).
# Its output goes to the sandbox's boot.log. The fake kills its process session when the instance is
# destroyed (the container goes).
set -euo pipefail
id=${1:?usage: fake_boot.sh ID SSH_PORT}
port=${2:?usage: fake_boot.sh ID SSH_PORT}
root=${FAKE_BOX_ROOT:?FAKE_BOX_ROOT unset}
here=$(cd "$(dirname "$0")/../../.." && pwd)
box="$root/box-$port"
mkdir -p "$box/run"
state=$(curl -fsS "$VAST_URL/_control/state")
onstart=$(jq -r --argjson i "$id" '.instances[] | select(.id == $i) | .onstart // ""' <<<"$state")
[ -n "$onstart" ] || exit 0
vars=$(jq -r --argjson i "$id" '.instances[] | select(.id == $i)
  | "CONTAINER_ID=\(.id)", "CONTAINER_API_KEY=\(.instance_api_key)",
    ((.env // {}) | to_entries[] | "\(.key)=\(.value)")' <<<"$state")
mapfile -t container <<<"$vars"
FAKE_IMAGE_EXTRA="" "$here/tests/runner/bin/box_environ.sh" "$box" "$box/boot.environ" "${container[@]}"
session=(HOME="$box/home" PATH=/usr/bin:/bin HEARSAY_INIT_ENVIRON="$box/boot.environ"
  HEARSAY_BOX_DIR="$box/run" HEARSAY_ONSTART="$here/runner/box/onstart.sh" VAST_URL="$VAST_URL")
for name in ${FAKE_BOOT_PASS:-}; do
  [ -z "${!name+set}" ] || session+=("$name=${!name}")
done
shell=bash
[ ! -s "$root/boot_shell" ] || shell=$(cat "$root/boot_shell")
printf '%s\n' "$onstart" >"$box/onstart.sh"
cd "$box"
exec env -i "${session[@]}" "$shell" "$box/onstart.sh" </dev/null >>"$box/boot.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
