#!/usr/bin/env bash
# Usage: runner/box/driver_check.sh [LOCK]
# Summary: refuse a host whose NVIDIA driver cannot run the image's CUDA, before torch is loaded
#
# The CUDA the image's torch is built for is LOCK's nvidia-cuda-runtime pin (MAJOR.MINOR; LOCK
# defaults to the requirements.lock beside runner/, /opt/hearsay/requirements.lock in the image:
# runner/lib/cuda.sh, the same reading the launcher's offer filter uses). The newest CUDA the
# host's driver runs is the "CUDA Version: X.Y" of `nvidia-smi` (mounted by the NVIDIA container
# hook; $HEARSAY_NVIDIA_SMI overrides), printed beside its "Driver Version". runner/box/entry.sh
# runs this check first, so an old host fails within seconds of boot with a REASON naming both
# numbers, instead of in the smoke check's CUDA step.
# Prints "driver_check: ok ..." on stdout, or one "driver_check: ..." line on stderr.
# Exit codes: 0 the driver runs the lock's CUDA; 2 usage; 18 the driver's CUDA is older than the
#   lock's (rent a newer host: the offer filter is cuda_max_good); 19 cannot measure (no nvidia-smi,
#   no "CUDA Version" in its output, or LOCK has no nvidia-cuda-runtime pin).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=runner/lib/cuda.sh
. "$here/../lib/cuda.sh"

case ${1:-} in
  -h | --help) sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
  -*) echo "driver_check: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "driver_check: at most one argument, the lock (see --help)" >&2; exit 2; }
lock=${1:-$(cd "$here/../.." && pwd)/requirements.lock}
smi=${HEARSAY_NVIDIA_SMI:-nvidia-smi}

need=$(lock_cuda "$lock") || {
  echo "driver_check: cannot measure: $lock has no nvidia-cuda-runtime==X.Y.Z pin (the image's lock belongs there)" >&2
  exit 19
}
out=$("$smi" 2>&1) || {
  echo "driver_check: cannot measure: $smi failed or is missing ($(printf '%s\n' "$out" | tail -n 1)); is the NVIDIA container hook mounting it (NVIDIA_DRIVER_CAPABILITIES=compute,utility)?" >&2
  exit 19
}
have=$(printf '%s\n' "$out" | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)
driver=$(printf '%s\n' "$out" | sed -n 's/.*Driver Version: *\([0-9][0-9.]*\).*/\1/p' | head -n 1)
if [ -z "$have" ]; then
  echo "driver_check: cannot measure: no \"CUDA Version: X.Y\" in the output of $smi (driver ${driver:-unknown})" >&2
  exit 19
fi
if ! cuda_at_least "$have" "$need"; then
  echo "driver_check: host driver ${driver:-unknown} runs CUDA $have, the image's torch needs CUDA >= $need ($lock: nvidia-cuda-runtime) (rent a host with cuda_max_good >= $need: runner/launch.sh filters on it)" >&2
  exit 18
fi
echo "driver_check: ok   driver ${driver:-unknown} runs CUDA $have >= $need (the lock's)"
