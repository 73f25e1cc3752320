#!/usr/bin/env bash
# Usage: scripts/fetch_gpu_wheels.sh [--help]
# Summary: download into .whl/ the wheels a bare GPU machine (a rented box, a workstation with
#   torch) lacks for scripts/gpu_check.sh, and put an ffmpeg beside them.
#   A GPU machine image (python3 3.12, torch, onnxruntime, numpy, scipy, pandas ... preinstalled,
#   no network) has no soundfile or soxr, which hearsay.sound.decoder imports at module level; soundfile
#   needs cffi, cffi needs pycparser; nor pydantic, which the configs' type check imports (with
#   pydantic_core, annotated-types and typing-inspection; typing_extensions is there); nor torchao
#   (the fp8 lever's float8 training; abi3, no dependencies). Versions come from requirements.lock; the wheels are the
#   cp312 manylinux x86-64 builds (that image's tags), fetched with pip's ordinary client, no deps.
#   ffmpeg: the preflight's synthetic bundle makes the five codec copies with ffmpeg, which a
#   bare machine may lack. The imageio-ffmpeg wheel's binary of this machine's environment
#   (python's imageio_ffmpeg, e.g. .venv's) is written xz-compressed to .whl/ffmpeg.xz (~50 MB
#   from 165 MB; minutes on a small CPU; skipped when already there, newer than the binary);
#   gpu_check.sh decompresses it. No imageio_ffmpeg here: said, and the wheels still come.
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
names=(soundfile soxr cffi pycparser pydantic pydantic_core annotated-types typing-inspection torchao)
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
for n in "${names[@]}"; do rm -f "$dest/${n//-/_}"-*.whl; done  # one version of each, or pip stops
# The device README's recipe: cp312, manylinux x86-64 tags, binary only, no dependencies.
if ! "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$dest" "${pins[@]}"; then
  echo "fetch_gpu_wheels: pip download failed for ${pins[*]} (network? registry?)" >&2
  exit 1
fi
for n in "${names[@]}"; do
  count="$(find "$dest" -maxdepth 1 -name "${n//-/_}-*.whl" | wc -l)"  # wheel names use _
  if [ "$count" -ne 1 ]; then
    echo "fetch_gpu_wheels: $count wheels for $n in $dest (want exactly 1)" >&2
    exit 1
  fi
done
ff="$("$py" -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())' 2>/dev/null)" || ff=""
if [ -z "$ff" ]; then
  echo "fetch_gpu_wheels: no imageio_ffmpeg in $py: no $dest/ffmpeg.xz (the machine needs its" \
    "own ffmpeg, or HEARSAY_FFMPEG)" >&2
elif [ ! "$dest/ffmpeg.xz" -nt "$ff" ]; then
  echo "fetch_gpu_wheels: compressing $ff -> $dest/ffmpeg.xz" >&2
  xz -T2 -6 -c "$ff" >"$dest/ffmpeg.xz.part" && mv "$dest/ffmpeg.xz.part" "$dest/ffmpeg.xz"
fi
echo "fetch_gpu_wheels: ${pins[*]} -> $dest/ ($(du -sh "$dest" | cut -f1)); carry [\".whl\"]"
