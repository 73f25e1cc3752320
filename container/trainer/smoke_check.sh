#!/usr/bin/env bash
# Usage: container/trainer/smoke_check.sh [--help]
# Summary: the trainer image's proof that this box can train, run by runner/box/entry.sh before
#   any work and runnable by hand inside the image. It runs every check, names each failure, and
#   exits with the code of the first one, so a box that cannot train dies at start (a few minutes
#   at most) instead of crashing at its first step after the bundle download.
#
# Checks (exit code on failure):
#   10 cuda        torch sees a CUDA device ($PYTHON -c torch.cuda.is_available()); nvidia-smi, when
#                  the NVIDIA hook mounted it, must list a GPU too
#   11 weights     $HEARSAY_WEIGHTS_DIR/pytorch_model.bin has sha256 $HEARSAY_WEIGHTS_SHA256
#   12 ffmpeg      `$HEARSAY_FFMPEG -encoders` lists libmp3lame libopus aac libopencore_amrnb pcm_mulaw,
#                  and a test signal goes through all five codec copies and back (smoke_train.py codecs)
#   13 rclone      the remote of $HEARSAY_STORE ("name:path", from the runner's job.env) is configured
#                  in rclone's config ($RCLONE_CONFIG; entry.sh points it at the box's rclone.conf)
#   14 hearsay     hearsay imports, its version equals $HEARSAY_VERSION (when set) and
#                  $HEARSAY_GIT_SHA is a 40-hex git revision (a "-dirty" one only with
#                  HEARSAY_SMOKE_ALLOW_DIRTY=1)
#   17 versions    every installed package is exactly requirements.lock's (scripts/check_versions.py)
#   15 train       `hearsay train` itself on $HEARSAY_SMOKE_DEVICE, on a synthetic bundle made
#                  here (~2 s): 2 optimiser steps of the tiny model with the config's code paths
#                  (on CUDA: bf16, fused AdamW, 2 loader workers, pinned memory, GPU augmentation;
#                  code defaults <- $HEARSAY_SMOKE_CONFIG), a validation readout per step; then
#                  on CUDA one forward/backward/AdamW step of XLS-R 300M from the sha-checked
#                  weights (smoke_train.py train). The FAIL line names the trainer's exit code
#                  and its error.
#   16 checkpoint  the trainer's epoch-1 checkpoint, published to the store
#                  ($HEARSAY_RUN_PATH/smoke/<UTC time>-<pid>, else $HEARSAY_STORE/smoke/...),
#                  pulled back, sha256-verified and loaded (Detector, AdamW, RNG)
#    2             usage error
#
# Environment (the image sets all but HEARSAY_STORE, HEARSAY_RUN_PATH and RCLONE_CONFIG, which
# entry.sh exports from job.env):
#   HEARSAY_WEIGHTS_DIR     default /opt/hearsay/weights/xls-r-300m
#   HEARSAY_WEIGHTS_SHA256  default the pin in docs/DESIGN.md
#   HEARSAY_FFMPEG          default `ffmpeg` on PATH
#   HEARSAY_LOCK            default requirements.lock two folders up (/opt/hearsay in the image)
#   HEARSAY_SMOKE_DEVICE    default cuda; `cpu` runs the train step on the CPU (the trainer's
#                           --cpu-smoke preset; make test does: ~10 s of CPU)
#   HEARSAY_SMOKE_CONFIG    the job's `hearsay train --config` JSON (optional): the train check
#                           runs its code paths (bf16, compile, gpu_augment, ...) at smoke sizes
#   HEARSAY_SMOKE_TIMEOUT_S each python step's limit, default 300
#   HEARSAY_SMOKE_ONLY      run only these checks (names as above, space-separated); the summary
#                           then says which ran. Unset on a box.
#   PYTHON                  default python3
#   RUNNER_DEBUG            set -x
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") ;;
  *) echo "smoke_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

PINNED_WEIGHTS_SHA256=d5e490574712ad0a6736923b9ed11d4cd51c78609c36205f704fc4e87b11d2e0
ENCODERS=(libmp3lame libopus aac libopencore_amrnb pcm_mulaw)
CHECKS=(cuda weights ffmpeg rclone hearsay versions train)  # train also does `checkpoint`
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
py="${PYTHON:-python3}"
limit="${HEARSAY_SMOKE_TIMEOUT_S:-300}"
first_fail=0
only=()
if [ -n "${HEARSAY_SMOKE_ONLY:-}" ]; then
  read -ra only <<<"$HEARSAY_SMOKE_ONLY"
  for c in "${only[@]}"; do
    [[ " ${CHECKS[*]} " == *" $c "* ]] \
      || { echo "smoke_check: HEARSAY_SMOKE_ONLY names '$c' (checks: ${CHECKS[*]})" >&2; exit 2; }
  done
fi

ok() { echo "smoke_check: ok   $1: $2" >&2; }
fail() { # fail CODE CHECK MESSAGE
  echo "smoke_check: FAIL $2: $3" >&2
  [ "$first_fail" -ne 0 ] || first_fail="$1"
}
have() { command -v "$1" >/dev/null 2>&1; }
wanted() { [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" $1 "* ]]; }

# py_check CHECK CODE ARGS...: run smoke_train.py ARGS under the time limit, pass on its
# `ok`/`FAIL` lines; its exit code is the failed check's (12, 15, 16). A crash or a timeout is
# CHECK's failure, with CODE.
py_check() {
  local check=$1 code=$2 out rc=0
  shift 2
  out=$(timeout "$limit" "$py" "$here/smoke_train.py" "$@" 2>&1) || rc=$?
  grep -E '^(ok  |FAIL) ' <<<"$out" | sed 's/^/smoke_check: /' >&2 || true
  case "$rc" in
    0) ;;
    12 | 15 | 16) [ "$first_fail" -ne 0 ] || first_fail="$rc" ;;
    124) fail "$code" "$check" "timed out after ${limit}s (HEARSAY_SMOKE_TIMEOUT_S)" ;;
    *) fail "$code" "$check" "smoke_train.py exited $rc: ${out##*$'\n'}" ;;
  esac
}

check_cuda() {
  local out
  if have nvidia-smi; then
    if ! out=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$out"; then
      fail 10 cuda "nvidia-smi lists no GPU: ${out:-no output} (was the box started with --gpus / the NVIDIA runtime?)"
      return
    fi
  fi
  if ! have "$py"; then
    fail 10 cuda "no python ('$py') to ask torch (set PYTHON or fix PATH)"
    return
  fi
  # exit 0: a device; 3: torch loaded but sees none; anything else: torch itself is broken.
  local rc=0
  out=$("$py" -c 'import sys, torch
ok = torch.cuda.is_available()
print(f"{torch.cuda.device_count()} device(s), torch {torch.__version__}, cuda {torch.version.cuda}")
sys.exit(0 if ok else 3)' 2>&1) || rc=$?
  case "$rc" in
    0) ok cuda "$out" ;;
    3) fail 10 cuda "torch sees no CUDA device ($out; is libcuda.so.1 under LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}?)" ;;
    *) fail 10 cuda "cannot ask torch: ${out##*$'\n'}" ;;
  esac
}

check_weights() {
  local dir="${HEARSAY_WEIGHTS_DIR:-/opt/hearsay/weights/xls-r-300m}"
  local want="${HEARSAY_WEIGHTS_SHA256:-$PINNED_WEIGHTS_SHA256}" got
  if [ ! -f "$dir/pytorch_model.bin" ]; then
    fail 11 weights "$dir/pytorch_model.bin is missing (set HEARSAY_WEIGHTS_DIR, or rebuild the image)"
    return
  fi
  got=$(sha256sum "$dir/pytorch_model.bin") || { fail 11 weights "cannot read $dir/pytorch_model.bin"; return; }
  got="${got%% *}"
  if [ "$got" = "$want" ]; then
    ok weights "$dir/pytorch_model.bin sha256 $got"
  else
    fail 11 weights "$dir/pytorch_model.bin sha256 is $got, expected $want (corrupt or wrong revision)"
  fi
}

check_ffmpeg() {
  local ff="${HEARSAY_FFMPEG:-ffmpeg}" list missing=()
  if ! list=$("$ff" -hide_banner -encoders 2>&1); then
    fail 12 ffmpeg "'$ff -encoders' failed: ${list##*$'\n'} (set HEARSAY_FFMPEG to a working ffmpeg)"
    return
  fi
  for enc in "${ENCODERS[@]}"; do
    grep -Eq "^ [A-Z.]{6} ${enc}( |$)" <<<"$list" || missing+=("$enc")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    ok ffmpeg "$ff has ${ENCODERS[*]}"
    HEARSAY_FFMPEG="$ff" py_check ffmpeg 12 codecs
  else
    fail 12 ffmpeg "$ff lacks encoder(s) ${missing[*]} (the image's ffmpeg is nix/ffmpeg.nix)"
  fi
}

check_rclone() {
  local spec="${HEARSAY_STORE:-}" name remotes
  if [ -z "$spec" ]; then
    fail 13 rclone "HEARSAY_STORE is not set (runner/box/entry.sh must export it from job.env)"
    return
  fi
  name="${spec%%:*}"
  if ! have rclone; then fail 13 rclone "rclone is not on PATH"; return; fi
  if ! remotes=$(rclone listremotes 2>&1); then
    fail 13 rclone "'rclone listremotes' failed: ${remotes##*$'\n'}"
    return
  fi
  if grep -qxF "$name:" <<<"$remotes"; then
    ok rclone "remote '$name:' configured"
  else
    fail 13 rclone "no rclone remote '$name:' (have: $(tr '\n' ' ' <<<"$remotes")); pass its config (RCLONE_CONFIG or RCLONE_CONFIG_${name^^}_*)"
  fi
}

check_hearsay() {
  local version sha="${HEARSAY_GIT_SHA:-}"
  if ! version=$("$py" -c 'import hearsay; print(hearsay.__version__)' 2>&1); then
    fail 14 hearsay "cannot import hearsay: ${version##*$'\n'}"
    return
  fi
  if [ -n "${HEARSAY_VERSION:-}" ] && [ "$version" != "$HEARSAY_VERSION" ]; then
    fail 14 hearsay "hearsay is $version but the image says HEARSAY_VERSION=$HEARSAY_VERSION (stale image?)"
    return
  fi
  if [[ "$sha" =~ ^[0-9a-f]{40}$ ]]; then
    ok hearsay "version $version, git $sha"
  elif [[ "$sha" =~ ^[0-9a-f]{40}-dirty$ ]] && [ -n "${HEARSAY_SMOKE_ALLOW_DIRTY:-}" ]; then
    ok hearsay "version $version, git $sha (dirty, allowed by HEARSAY_SMOKE_ALLOW_DIRTY)"
  else
    fail 14 hearsay "HEARSAY_GIT_SHA='$sha' is not a clean 40-hex revision (build the image from a committed tree)"
  fi
}

check_versions() {
  local lock="${HEARSAY_LOCK:-$root/requirements.lock}" out rc=0
  out=$("$py" "$root/scripts/check_versions.py" --lock "$lock" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ]; then
    out="${out##*$'\n'}"
    ok versions "${out#check_versions: }"
  else
    fail 17 versions "$(grep -v '^check_versions: [0-9]* difference' <<<"$out" | sed 's/^check_versions: //' | tr '\n' ';' | sed 's/;$//') (exit $rc: this image was not built from $lock)"
  fi
}

check_train() {
  local target=""
  if [ -n "${HEARSAY_RUN_PATH:-}" ]; then
    target="${HEARSAY_RUN_PATH%/}/smoke"
  elif [ -n "${HEARSAY_STORE:-}" ]; then
    target="${HEARSAY_STORE%/}/smoke"
  fi
  if [ -z "$target" ]; then  # the step still runs: a broken model is worth knowing about too
    py_check train 15 train --device "${HEARSAY_SMOKE_DEVICE:-cuda}"
    fail 16 checkpoint "no store: HEARSAY_STORE is not set (runner/box/entry.sh exports it from job.env)"
    return
  fi
  py_check train 15 train --device "${HEARSAY_SMOKE_DEVICE:-cuda}" --store "$target"
}

ran=()
for c in "${CHECKS[@]}"; do
  if wanted "$c"; then
    "check_$c"
    ran+=("$c")
  fi
done
if [ "$first_fail" -ne 0 ]; then
  echo "smoke_check: FAILED (exit $first_fail)" >&2
  exit "$first_fail"
fi
if [ ${#only[@]} -eq 0 ]; then
  echo "smoke_check: all checks passed"
else
  echo "smoke_check: passed ${ran[*]} (HEARSAY_SMOKE_ONLY; the other checks did not run)"
fi
