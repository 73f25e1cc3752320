#!/usr/bin/env bash
# Usage: box_environ.sh SANDBOX OUT [NAME=VALUE ...]
# Summary: a sandbox box's container environment, as its first process would hold it (NUL-separated)
#
# Writes OUT (mode 600): the trainer image's Env exactly as nix/trainer-image.nix lists it, each
# value that names a path of the image adjusted for this machine, then NAME=VALUE... (vast.ai's
# container variables: CONTAINER_ID, CONTAINER_API_KEY and the create's -e variables). runner/box/
# entry.sh reads OUT as HEARSAY_INIT_ENVIRON. The adjustments (this machine's stand-ins):
#   PATH                 the checkout's .venv/bin (python3, hearsay, rclone, vastai), /usr/bin, /bin
#   LD_LIBRARY_PATH      the image's driverDirs that hold a libcuda.so.1 here (none without a GPU
#                        driver): the others would put this machine's own libpython ahead of the
#                        checkout's python (a pyenv build then fails importing _ssl)
#   HEARSAY_WEIGHTS_DIR  SANDBOX/weights: a 16 KiB stand-in pytorch_model.bin (the CPU runs never
#                        load it); HEARSAY_WEIGHTS_SHA256 is its sha256
#   HEARSAY_FFMPEG       the imageio-ffmpeg wheel's ffmpeg
#   HEARSAY_VERSION      the installed hearsay's version; HEARSAY_GIT_SHA the checkout's HEAD
#   SSL_CERT_FILE        this machine's CA bundle
#   TMPDIR, HOME         SANDBOX/tmp, SANDBOX/home
# An Env entry whose value is a Nix interpolation this list does not know is an error (exit 1): a
# variable the image gains must be given its local value here, never silently left out.
# A test image's extras: each name in FAKE_IMAGE_EXTRA is added with the caller's value (e.g.
# HEARSAY_SMOKE_CHECK, HEARSAY_SMOKE_DEVICE); each name in FAKE_IMAGE_DROP is left out (an image
# that lacks it).
set -euo pipefail
box=${1:?usage: box_environ.sh SANDBOX OUT [NAME=VALUE ...]}
out=${2:?usage: box_environ.sh SANDBOX OUT [NAME=VALUE ...]}
shift 2
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
nix=$repo/nix/trainer-image.nix
mkdir -p "$box/weights" "$box/tmp" "$box/home"
[ -s "$box/weights/pytorch_model.bin" ] || head -c 16384 /dev/zero | tr '\0' 'w' >"$box/weights/pytorch_model.bin"

# Env = [ "NAME=VALUE" ... ]; and driverDirs = [ "DIR" ... ]; of the image's config.
nix_list() { sed -n "/^ *$1 = \[/,/\];/p" "$nix" | sed -n 's/^ *"\(.*\)"$/\1/p'; }
env_lines=$(nix_list Env)
[ -n "$env_lines" ] || { echo "box_environ: no Env list in $nix" >&2; exit 1; }
machine=$("$repo/.venv/bin/python" -c 'import hearsay, imageio_ffmpeg
print(imageio_ffmpeg.get_ffmpeg_exe()); print(hearsay.__version__)')
ffmpeg=${machine%%$'\n'*}
version=${machine#*$'\n'}

local_value() {   # NAME IMAGE_VALUE: the value on this machine
  case $1 in
    PATH) echo "$repo/.venv/bin:/usr/bin:/bin" ;;
    LD_LIBRARY_PATH)
      nix_list driverDirs | while IFS= read -r d; do [ ! -e "$d/libcuda.so.1" ] || echo "$d"; done | paste -sd: - ;;
    HEARSAY_WEIGHTS_DIR) echo "$box/weights" ;;
    HEARSAY_WEIGHTS_SHA256) sha256sum "$box/weights/pytorch_model.bin" | cut -d' ' -f1 ;;
    HEARSAY_FFMPEG) echo "$ffmpeg" ;;
    HEARSAY_VERSION) echo "$version" ;;
    HEARSAY_GIT_SHA) git -C "$repo" rev-parse HEAD ;;
    SSL_CERT_FILE) echo /etc/ssl/certs/ca-certificates.crt ;;
    TMPDIR) echo "$box/tmp" ;;
    HOME) echo "$box/home" ;;
    *)
      # shellcheck disable=SC2016  # a literal Nix "${", not a shell expansion
      case $2 in
        *'${'*) echo "box_environ: $nix's Env sets $1=$2: give it a local value in $0" >&2; return 1 ;;
        *) printf '%s\n' "$2" ;;
      esac ;;
  esac
}

tmp=$out.tmp.$$
(umask 077; : >"$tmp")
while IFS= read -r kv; do
  name=${kv%%=*}
  case " ${FAKE_IMAGE_DROP:-} " in *" $name "*) continue ;; esac
  value=$(local_value "$name" "${kv#*=}")
  printf '%s=%s\0' "$name" "$value" >>"$tmp"
done <<<"$env_lines"
for name in ${FAKE_IMAGE_EXTRA:-}; do
  [ -n "${!name+set}" ] && printf '%s=%s\0' "$name" "${!name}" >>"$tmp"
done
for kv in "$@"; do printf '%s\0' "$kv" >>"$tmp"; done
mv -f "$tmp" "$out"
