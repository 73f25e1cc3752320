#!/usr/bin/env bash
# Usage: scripts/build_base_image.sh [IMAGE]   (default IMAGE: localhost/hearsay-base:bookworm-py311)
# Summary: build the deploy image's base offline-friendly: debootstrap --variant=minbase bookworm
#   plus Debian's python3 (3.11) and python3-venv, imported into podman as IMAGE. (ffmpeg comes
#   with the image's wheels: imageio-ffmpeg's static build, the same binary the host uses.)
#   Needs root, debootstrap, podman and a reachable Debian mirror ($DEBIAN_MIRROR); takes a few
#   minutes. Reuses IMAGE when it already exists (HEARSAY_REBUILD_BASE=1 forces a rebuild).
#   Use it as: podman build --build-arg BASE=localhost/hearsay-base:bookworm-py311 container/score
# Exit codes: 0 image present, 1 build failed, 3 a tool is missing.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
image=${1:-localhost/hearsay-base:bookworm-py311}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/container/score/containers.conf}

for tool in debootstrap podman tar; do
  command -v "$tool" >/dev/null || { echo "build_base_image: $tool not found (run scripts/system-deps.sh)" >&2; exit 3; }
done
if [ -z "${HEARSAY_REBUILD_BASE:-}" ] && podman image exists "$image"; then
  echo "build_base_image: $image exists (HEARSAY_REBUILD_BASE=1 to rebuild)" >&2
  exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "build_base_image: debootstrap needs root" >&2; exit 3; }

root=$(mktemp -d /var/tmp/hearsay-base.XXXXXX)
trap 'rm -rf "$root" "$root.log"' EXIT
echo "build_base_image: debootstrap minbase bookworm from $mirror -> $image" >&2
if ! debootstrap --variant=minbase --include=python3,python3-venv \
    bookworm "$root" "$mirror" >"$root.log" 2>&1; then
  tail -20 "$root.log" >&2
  echo "build_base_image: debootstrap failed (is $mirror reachable? set DEBIAN_MIRROR)" >&2
  exit 1
fi
# keep the image small: package lists and caches are not needed at run time
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/*
tar -C "$root" -c . | podman import -q --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "build_base_image: $image built" >&2
