#!/usr/bin/env bash
# Usage: scripts/free-space.sh DIR GB [WHAT]
# Summary: exit 1, saying so, when the filesystem holding DIR (or its nearest existing parent)
#   has fewer than GB gibibytes free: a full disk otherwise surfaces minutes later as pip's
#   "OSError: [Errno 28] No space left on device", half a virtual environment left behind.
# Exit codes: 0 enough space; 1 too little (the message names the fix); 2 usage.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,6p "$0" >&2; exit 2; }
dir=$1 need_gb=$2 what=${3:-this}
case $need_gb in '' | *[!0-9]*) echo "free-space: GB must be a whole number, got '$need_gb'" >&2; exit 2 ;; esac
while [ ! -d "$dir" ]; do dir=$(dirname "$dir"); done
free_kb=$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')
if [ "$free_kb" -lt $((need_gb * 1024 * 1024)) ]; then
  echo "free-space: $what needs about $need_gb GiB free on the filesystem of $dir;" \
    "$((free_kb / 1024 / 1024)) GiB are. Free some space there (old clones, benchmark" \
    "folders under /tmp), or put the environment elsewhere with VENV=/path/.venv." >&2
  exit 1
fi
