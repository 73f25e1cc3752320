#!/usr/bin/env bash
# Usage: destroyed.sh ID SSH_PORT   (the fake API's destroy_cmd, as scripts/fault_campaign.sh sets it)
# Summary: record the phase a sandbox box was in when its instance was destroyed
#
# Appends "ID PHASE EPOCH DEADLINE GRACE_S SSH_PORT" to $FAKE_BOX_ROOT/destroyed.log: PHASE the box's last
# phase (its run/PHASE, written by runner/box/status.sh; "none" before its chain wrote one), EPOCH
# this machine's clock (s), DEADLINE and GRACE_S the create's HEARSAY_DEADLINE and
# HEARSAY_DEADLINE_GRACE_S ("-" for a box that never booted). A box destroyed in PUSHING before
# DEADLINE + GRACE_S had its final push cut. It never calls the fake API: the fake waits for it.
set -uo pipefail
box=${FAKE_BOX_ROOT:?FAKE_BOX_ROOT unset}/box-${2:?usage: destroyed.sh ID SSH_PORT}
phase=$(cat "$box/run/PHASE" 2>/dev/null) || phase=""
# env_of NAME: NAME's value in the box's container environment (NUL-separated), or "-"
env_of() {
  local f v
  for f in "$box/boot.environ" "$box/init.environ"; do
    v=$(tr '\0' '\n' <"$f" 2>/dev/null | awk -v k="$1" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); exit }')
    [ -z "$v" ] || { echo "$v"; return; }
  done
  echo -
}
echo "$1 ${phase:-none} $(date -u +%s) $(env_of HEARSAY_DEADLINE) $(env_of HEARSAY_DEADLINE_GRACE_S) $2" >>"$FAKE_BOX_ROOT/destroyed.log"
