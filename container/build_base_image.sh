#!/usr/bin/env bash
# Usage: container/build_base_image.sh [IMAGE]   (default IMAGE: localhost/hearsay-base:bookworm-py311)
#        container/build_base_image.sh --print-mirror
# Summary: build the deploy image's base offline-friendly: debootstrap --variant=minbase bookworm
#   plus Debian's python3 (3.11) and python3-venv, imported into podman as IMAGE. (ffmpeg comes
#   with the image's wheels: imageio-ffmpeg's static build, the same binary the host uses.)
#   Needs root, debootstrap, podman and a reachable Debian mirror; takes a few minutes. Reuses
#   IMAGE when it already exists (HEARSAY_REBUILD_BASE=1 forces a rebuild).
#   Use it as: podman build --build-arg BASE=localhost/hearsay-base:bookworm-py311 container/score
# Mirror: $DEBIAN_MIRROR when set, else the first source of this machine's apt that serves
#   `deb ... bookworm main` over http(s), ftp or file (one-line *.list and deb822 *.sources, entries
#   with `Enabled: no` skipped). HEARSAY_APT_SOURCES names the files read (space-separated, globs
#   allowed; default /etc/apt/sources.list /etc/apt/sources.list.d/*.list
#   /etc/apt/sources.list.d/*.sources). --print-mirror prints the mirror it would use and exits.
# Exit codes: 0 image present (or mirror printed), 1 build failed, 2 usage, 3 a tool, root or the
#   mirror is missing.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
suite=bookworm
default_sources="/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }

# The apt source files to read, one per line: HEARSAY_APT_SOURCES (globs expanded), missing skipped.
apt_sources() {
  local f
  # shellcheck disable=SC2086  # word splitting and glob expansion are the point here
  for f in ${HEARSAY_APT_SOURCES:-$default_sources}; do
    [ -f "$f" ] && printf '%s\n' "$f"
  done
  return 0
}

# debian_mirror SUITE FILE...: the first URI that serves "deb SUITE main". *.sources files are
# deb822 stanzas (Types/URIs/Suites/Components/Enabled, blank-line separated, continuation lines
# start with a space); everything else is one-line format: deb [options] URI SUITE COMPONENT...
debian_mirror() {
  local want=$1
  shift
  [ "$#" -gt 0 ] || return 0
  awk -v want="$want" '
    function has(list, word,   n, a, i) {
      n = split(list, a, /[ \t]+/)
      for (i = 1; i <= n; i++) if (a[i] == word) return 1
      return 0
    }
    function usable(uri) { return uri ~ /^(https?|ftp|file):\/\// }
    function found(uri) { print uri; done = 1; exit }
    function reset() { types = uris = suites = comps = ""; enabled = 1; key = "" }
    function flush(   n, u, i) {
      if (has(types, "deb") && enabled && has(suites, want) && has(comps, "main")) {
        n = split(uris, u, /[ \t]+/)
        for (i = 1; i <= n; i++) if (usable(u[i])) found(u[i])
      }
      reset()
    }
    function set(k, v) {
      if (k == "types") types = types " " v
      else if (k == "uris") uris = uris " " v
      else if (k == "suites") suites = suites " " v
      else if (k == "components") comps = comps " " v
      else if (k == "enabled") { gsub(/[ \t]/, "", v); enabled = (tolower(v) != "no") }
    }
    FNR == 1 { if (deb822) flush(); deb822 = (FILENAME ~ /\.sources$/); reset() }
    deb822 {
      if ($0 ~ /^#/) next
      if ($0 ~ /^[ \t]*$/) { flush(); next }
      if ($0 ~ /^[ \t]/) { set(key, $0); next }
      i = index($0, ":")
      if (i == 0) next
      key = tolower(substr($0, 1, i - 1))
      set(key, substr($0, i + 1))
      next
    }
    {
      sub(/#.*/, "")
      if ($1 != "deb") next
      i = 2
      if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if ($(i + 1) != want || !usable($i)) next
      for (j = i + 2; j <= NF; j++) if ($j == "main") found($i)
    }
    END { if (!done && deb822) flush() }
  ' "$@"
}

# The mirror debootstrap uses: $DEBIAN_MIRROR, else the machine's own apt source (3 if none).
find_mirror() {
  local files names f m="" list=()
  if [ -n "${DEBIAN_MIRROR:-}" ]; then
    printf '%s\n' "$DEBIAN_MIRROR"
    return 0
  fi
  files=$(apt_sources)
  if [ -n "$files" ]; then
    while IFS= read -r f; do list+=("$f"); done <<<"$files"
    m=$(debian_mirror "$suite" "${list[@]}")
  fi
  if [ -z "$m" ]; then
    names=${files//$'\n'/ }
    echo "build_base_image: no apt source of this machine serves 'deb URI $suite main'" \
      "(read: ${names:-no file, looked for ${HEARSAY_APT_SOURCES:-$default_sources}})" \
      "(set DEBIAN_MIRROR to a Debian mirror that carries $suite)" >&2
    return 3
  fi
  printf '%s\n' "$m"
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --print-mirror)
    [ "$#" -eq 1 ] || { echo "build_base_image: --print-mirror takes no argument" >&2; exit 2; }
    find_mirror || exit 3
    exit 0 ;;
  -*) echo "build_base_image: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
image=${1:-localhost/hearsay-base:bookworm-py311}
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
mirror=$(find_mirror) || exit 3

root=$(mktemp -d /var/tmp/hearsay-base.XXXXXX)
trap 'rm -rf "$root" "$root.log"' EXIT
echo "build_base_image: debootstrap minbase $suite from $mirror -> $image" >&2
if ! debootstrap --variant=minbase --include=python3,python3-venv \
    "$suite" "$root" "$mirror" >"$root.log" 2>&1; then
  tail -20 "$root.log" >&2
  echo "build_base_image: debootstrap failed (is $mirror reachable? set DEBIAN_MIRROR)" >&2
  exit 1
fi
# keep the image small: package lists and caches are not needed at run time
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
  "$root"/usr/share/man/*
tar -C "$root" -c . | podman import -q --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "build_base_image: $image built" >&2
