#!/usr/bin/env bash
# Usage: scripts/fetch_gpu_wheels.sh [--help]
# Summary: download into .whl/ the wheels a bare GPU machine lacks for scripts/gpu_check.sh.
#   A GPU machine image (python3 3.12, torch, onnxruntime, numpy, scipy, pandas ... preinstalled,
#   no network) has no soundfile or soxr, which hearsay.audio imports at module level; soundfile
#   needs cffi, cffi needs pycparser. Versions come from requirements.lock; the wheels are the
#   cp312 manylinux x86-64 builds (that image's tags), fetched with pip's ordinary client, no deps.
#   imageio-ffmpeg is NOT fetched: the checks read and write only FLAC (soundfile), and
#   hearsay.audio imports imageio_ffmpeg only as a fallback decoder for other formats.
#   hearsay itself does not travel as a wheel: gpu_check.sh puts src/ on PYTHONPATH
#   (hearsay.export is inside the package).
#   .whl/ is ignored by the project's .gitignore (/.whl/): copy it to the GPU machine with the
#   checkout (e.g. rsync -a .whl/ box:hearsay/.whl/).
# Exit codes: 0 wheels in .whl/ (one version of each), 1 a download failed, 2 usage,
#   3 requirements.lock lacks a pin.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) echo "fetch_gpu_wheels: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
names=(soundfile soxr cffi pycparser)
dest=.whl
py="${PYTHON:-python3}"

pins=()
for n in "${names[@]}"; do
  v="$(sed -n "s/^${n}==\([^ ;]*\).*/\1/p" requirements.lock)"
  if [ -z "$v" ]; then
    echo "fetch_gpu_wheels: requirements.lock has no pin for $n (add it to the lock)" >&2
    exit 3
  fi
  pins+=("$n==$v")
done

mkdir -p "$dest"
for n in "${names[@]}"; do rm -f "$dest/$n"-*.whl; done  # one version of each, or pip stops
# The device README's recipe: cp312, manylinux x86-64 tags, binary only, no dependencies.
if ! "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$dest" "${pins[@]}"; then
  echo "fetch_gpu_wheels: pip download failed for ${pins[*]} (network? registry?)" >&2
  exit 1
fi
for n in "${names[@]}"; do
  count="$(find "$dest" -maxdepth 1 -name "$n-*.whl" | wc -l)"
  if [ "$count" -ne 1 ]; then
    echo "fetch_gpu_wheels: $count wheels for $n in $dest (want exactly 1)" >&2
    exit 1
  fi
done
echo "fetch_gpu_wheels: ${pins[*]} -> $dest/ ($(du -sh "$dest" | cut -f1)); carry [\".whl\"]"
