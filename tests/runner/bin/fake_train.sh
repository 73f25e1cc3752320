#!/usr/bin/env bash
# Usage: fake_train.sh --bundle DIR (--fold K | --full | --pilot) --out RUN_DIR --store URI --resume
# Summary: stands in for `hearsay train` on the sandbox box: writes a checkpoint and run_meta.json
# after $FAKE_TRAIN_S seconds (default 0.3); exits $FAKE_TRAIN_RC (default 0). Its argv is logged to
# RUN_DIR/../train.args so tests can check what the box asked for.
set -euo pipefail
out=""
args="$*"
while [ $# -gt 0 ]; do
  case $1 in --out) out=$2; shift 2 ;; *) shift ;; esac
done
mkdir -p "$out/checkpoints/epoch_0001"
echo "$args" >"$out/../train.args"
sleep "${FAKE_TRAIN_S:-0.3}"
echo '{"complete": true}' >"$out/run_meta.json"
echo weights >"$out/checkpoints/epoch_0001/model.safetensors"
exit "${FAKE_TRAIN_RC:-0}"
