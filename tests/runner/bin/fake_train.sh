#!/usr/bin/env bash
# Usage: fake_train.sh --bundle DIR (--fold K | --full | --pilot) --out RUN_DIR --store URI --resume --config FILE
# Summary: stands in for `hearsay train` on the sandbox box: writes a checkpoint and run_meta.json
# after $FAKE_TRAIN_S seconds (default 0.3); exits $FAKE_TRAIN_RC (default 0). Its argv is logged to
# RUN_DIR/../train.args and the sha256 of the --config file it was given (or "none") to
# RUN_DIR/../train.config_sha, so tests can check what the box asked for and what it trained on;
# the names (not values) of its environment go to RUN_DIR/../train.env_names.
# With $FAKE_TRAIN_PUSH_S set, it pushes its checkpoint the way hearsay.store publishes one while
# it trains: the folder, then its marker checkpoints/epoch_0001.complete, by an `rclone` child
# process each (a wrapper that waits FAKE_TRAIN_PUSH_S seconds first: a slow store), started once
# the checkpoint is written and the clock reads $FAKE_TRAIN_PUSH_AT (epoch s; default at once).
# `--check-config` (what runner/launch.sh asks before renting) is answered "ok" at once: the
# launcher's tests of a refused config use the real `hearsay train`.
set -euo pipefail
case " $* " in *" --check-config "*) echo "fake_train: config not checked (stand-in)"; exit 0 ;; esac
out="" config="" store=""
args="$*"
while [ $# -gt 0 ]; do
  case $1 in --out) out=$2; shift 2 ;; --config) config=$2; shift 2 ;; --store) store=$2; shift 2 ;; *) shift ;; esac
done
mkdir -p "$out/checkpoints/epoch_0001"
echo "$args" >"$out/../train.args"
env | cut -d= -f1 | LC_ALL=C sort >"$out/../train.env_names"
if [ -n "$config" ]; then sha256sum "$config" | cut -d' ' -f1; else echo none; fi >"$out/../train.config_sha"
if [ -n "${FAKE_TRAIN_PUSH_S:-}" ]; then
  echo weights >"$out/checkpoints/epoch_0001/model.safetensors"
  wrap=$out/../push-bin
  mkdir -p "$wrap"
  # a slow store: the wrapper is named rclone, as the real push's process is
  printf '#!/usr/bin/env bash
sleep %s
exec "%s" "$@"
' "$FAKE_TRAIN_PUSH_S" "$(command -v rclone)" >"$wrap/rclone"
  chmod +x "$wrap/rclone"
  while [ "$(date -u +%s)" -lt "${FAKE_TRAIN_PUSH_AT:-0}" ]; do sleep 0.2; done
  echo "fake_train: pushing checkpoints/epoch_0001 to $store" >&2
  "$wrap/rclone" copy "$out/checkpoints/epoch_0001" "$store/checkpoints/epoch_0001" \
    && echo marker >"$out/checkpoints/epoch_0001.complete" \
    && "$wrap/rclone" copyto "$out/checkpoints/epoch_0001.complete" "$store/checkpoints/epoch_0001.complete" &
fi
sleep "${FAKE_TRAIN_S:-0.3}"
echo '{"complete": true}' >"$out/run_meta.json"
echo weights >"$out/checkpoints/epoch_0001/model.safetensors"
exit "${FAKE_TRAIN_RC:-0}"
