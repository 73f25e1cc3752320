#!/usr/bin/env bash
# Usage: scripts/system-deps.sh
# Summary: install the Debian packages the tests use for real, when missing (needs root + apt).
#   podman, runc  - the deploy image is built and run by a real container engine
#   debootstrap   - builds that image's base locally (images cannot be pulled here)
#   nix-bin       - parses and evaluates flake.nix offline
#   make          - the README's commands
#   jq, curl      - the runner judges every vastai answer with jq; its tests drive the fake API with curl
#   parallel      - GNU parallel: bats runs the runner's suites two at a time with it (--jobs)
# Python tools (ffmpeg, bats, rclone, vastai, shellcheck) come from the pinned wheels instead.
set -euo pipefail
pkgs=(podman runc debootstrap nix-bin make jq curl parallel)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-deps: missing ${missing[*]} (install them with your package manager; tests that need them skip)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "system-deps: installed ${missing[*]}"
