#!/usr/bin/env bash
# Usage: rclone_drop.sh RCLONE_ARGS...   (as HEARSAY_RCLONE on a sandbox box)
# Summary: a store that acknowledges writes and keeps nothing: rclone, except that a `copy` into the store exits 0 and keeps nothing
#
# $FAKE_STORE_DROP says what is dropped: "all" (default) = every `copy` to a remote answers 0 and
# copies nothing;
# a file name = the copy is made, then every file of that name under its destination is deleted
# (a store that lost one object). Every other command (rcat, copyto, cat, hashsum, …) is rclone's.
set -euo pipefail
args=("$@")
words=()
for a in "$@"; do case $a in -*) ;; *) words+=("$a") ;; esac; done
# box_rclone passes "--retries 1 --low-level-retries 1": the numbers are words too, so find `copy`
for k in "${!words[@]}"; do
  [ "${words[$k]}" = copy ] || continue
  dst=${words[$((k + 2))]:-}
  case $dst in [A-Za-z0-9_-]*:*) ;; *) break ;; esac   # a pull (to a local folder) is a read: kept
  case ${FAKE_STORE_DROP:-all} in
    all) exit 0 ;;
    *) rclone "${args[@]}" && rclone delete "$dst" --include "$FAKE_STORE_DROP" 2>/dev/null; exit 0 ;;
  esac
done
exec rclone "${args[@]}"
