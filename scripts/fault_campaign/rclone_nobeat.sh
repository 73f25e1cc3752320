#!/usr/bin/env bash
# Usage: rclone_nobeat.sh RCLONE_ARGS...   (as HEARSAY_RCLONE on a sandbox box)
# Summary: an image that does not beat: rclone, except that an rcat to a HEARTBEAT keeps nothing and answers 0
#
# Every other command goes to $FAKE_RCLONE_NEXT (rclone; tests/runner/bin/rclone_drop.sh where the
# scenario's store also drops pushes).
set -euo pipefail
case " $* " in
  *" rcat "*/HEARTBEAT" "*) cat >/dev/null; exit 0 ;;
esac
exec "${FAKE_RCLONE_NEXT:-rclone}" "$@"
