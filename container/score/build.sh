#!/usr/bin/env bash
# Usage: container/score/build.sh MODEL_DIR [IMAGE]      (default IMAGE: hearsay-score)
# Summary: build the CPU deploy image with the exported model in MODEL_DIR baked in.
#   1. checks MODEL_DIR against its SHA256SUMS (and that file against $MODEL_SUMS_SHA256 when
#      given: SHA256SUMS lists every file, so its sha pins the whole folder)
#   2. makes a build context: Dockerfile, model/, wheels/ (the scorer's wheels pinned from
#      requirements.lock, fetched by the host's pip into $HEARSAY_WHEEL_CACHE), app/ (hearsay's)
#   3. $ENGINE build --platform linux/amd64 (podman by default; docker works too) with BASE and
#      MODEL_SUMS_SHA256 build args; run it as: docker run --rm -v "$PWD:/data" IMAGE clips/
# Environment: BASE (default: localhost/hearsay-base:bookworm-py311 when that image exists, else
#   the Dockerfile's digest-pinned python:3.11.10-slim-bookworm, pulled from docker.io), ENGINE,
#   MODEL_SUMS_SHA256 (expected sha256 of MODEL_DIR/SHA256SUMS; default: its sha now),
#   HEARSAY_WHEEL_CACHE (~/.cache/hearsay-wheels), BUILD_LABEL (KEY=VALUE put on the image, so
#   whoever built it can find and remove it later).
# Exit codes: 0 built, 1 build failed, 2 usage, 3 model folder fails its checks, 4 no engine.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
model=$1 image=${2:-hearsay-score}
engine=${ENGINE:-podman}
py=${PYTHON:-$repo/.venv/bin/python}
[ -x "$py" ] || py=python3
command -v "$engine" >/dev/null || { echo "build: $engine not found (scripts/system-deps.sh installs podman)" >&2; exit 4; }
[ "$engine" = podman ] && export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}

# 1. the model folder must match its own manifest before anything is built from it
[ -f "$model/SHA256SUMS" ] || { echo "build: $model/SHA256SUMS missing (export with \`hearsay export onnx\`)" >&2; exit 3; }
(cd "$model" && sha256sum --check --strict --quiet SHA256SUMS) || { echo "build: $model does not match its SHA256SUMS" >&2; exit 3; }
grep -q '  model\.onnx$' "$model/SHA256SUMS" || { echo "build: model.onnx not listed in $model/SHA256SUMS" >&2; exit 3; }
want=${MODEL_SUMS_SHA256:-$(sha256sum "$model/SHA256SUMS" | cut -d' ' -f1)}

# 2. the build context: nothing from the network at build time
ctx=$(mktemp -d "${TMPDIR:-/tmp}/hearsay-score-ctx.XXXXXX")
constraints=$(mktemp "${TMPDIR:-/tmp}/hearsay-score-constraints.XXXXXX")
trap 'rm -rf "$ctx" "$constraints"' EXIT
cp "$here/Dockerfile" "$ctx/"
mkdir "$ctx/model" "$ctx/wheels" "$ctx/app" "$ctx/src"
cp "$model"/* "$ctx/model/"
cache=${HEARSAY_WHEEL_CACHE:-$HOME/.cache/hearsay-wheels}
mkdir -p "$cache"
pins=()
for name in numpy soundfile soxr onnxruntime tqdm imageio-ffmpeg; do
  pin=$(grep -i "^$name==" "$repo/requirements.lock") || { echo "build: $name not pinned in requirements.lock" >&2; exit 1; }
  pins+=("${pin%% *}")   # a lock line is `name==version --hash=sha256:… # wheel`
done
# the lock's name==version parts: hashes in a constraints file would switch pip's hash mode on
# for every requirement of the download
sed -n 's/^\([A-Za-z0-9][^ =]*==[^ ;#]*\).*/\1/p' "$repo/requirements.lock" >"$constraints"
# cp311 manylinux wheels for the image's python3.11, whatever the host runs: fetched into the
# cache (network), then exactly the pinned set copied into the context from it (no network)
target=(--only-binary=:all: --python-version 3.11 --implementation cp
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 -c "$constraints")
"$py" -m pip download -q --dest "$cache" "${target[@]}" "${pins[@]}" >&2
"$py" -m pip download -q --no-index --find-links "$cache" --dest "$ctx/wheels" "${target[@]}" \
  "${pins[@]}" >&2
# hearsay's own wheel, byte-reproducible (fixed zip times) so unchanged code keeps the layer cache
cp -r "$repo/pyproject.toml" "$repo/README.md" "$repo/src" "$ctx/src/"  # hearsay.export is in src/
find "$ctx/src" -name __pycache__ -prune -exec rm -rf {} +
SOURCE_DATE_EPOCH=315532800 "$py" -m pip wheel -q --no-deps --wheel-dir "$ctx/app" "$ctx/src" >&2
rm -rf "$ctx/src"

# 3. build
base_args=()
if [ -n "${BASE:-}" ]; then
  base_args=(--build-arg "BASE=$BASE")
elif "$engine" image exists localhost/hearsay-base:bookworm-py311 2>/dev/null; then
  base_args=(--build-arg "BASE=localhost/hearsay-base:bookworm-py311")
fi
[ -n "${BUILD_LABEL:-}" ] && base_args+=(--label "$BUILD_LABEL")
echo "build: $image from ${BASE:-${base_args[1]:-the Dockerfile default}} with SHA256SUMS $want" >&2
"$engine" build --platform linux/amd64 "${base_args[@]}" --build-arg HEARSAY_CONTEXT=build.sh \
  --build-arg "MODEL_SUMS_SHA256=$want" -t "$image" "$ctx" >&2 \
  || { echo "build: $engine build failed" >&2; exit 1; }
echo "build: $image built" >&2
