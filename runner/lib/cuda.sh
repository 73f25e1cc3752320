# shellcheck shell=bash
# runner/lib/cuda.sh — the CUDA version the image's torch needs, read from requirements.lock.
# Sourced by runner/launch.sh (the offer filter: cuda_max_good) and runner/box/driver_check.sh
# (the box's driver), so the number is written in one place only: the lock's
# `nvidia-cuda-runtime==MAJOR.MINOR.PATCH` pin (the CUDA runtime torch's wheel is built against).
# Bash 3.2 safe.

# lock_cuda LOCK: print MAJOR.MINOR of LOCK's nvidia-cuda-runtime pin; 1 when LOCK has none.
lock_cuda() {
  local v
  v=$(sed -n 's/^nvidia-cuda-runtime==\([0-9][0-9]*\)\.\([0-9][0-9]*\)[.0-9]*[[:space:]].*/\1.\2/p' "$1" 2>/dev/null \
    | head -n 1)
  [ -n "$v" ] || return 1
  printf '%s\n' "$v"
}

# cuda_at_least HAVE NEED: 0 when version HAVE (MAJOR.MINOR, e.g. 12.4) >= NEED, numerically per
# part (12.10 > 12.9); 1 otherwise or when either is not MAJOR.MINOR.
cuda_at_least() {
  awk -v h="$1" -v n="$2" 'BEGIN {
    if (h !~ /^[0-9]+\.[0-9]+$/ || n !~ /^[0-9]+\.[0-9]+$/) exit 1
    split(h, a, "."); split(n, b, ".")
    exit !((a[1] + 0 > b[1] + 0) || (a[1] + 0 == b[1] + 0 && a[2] + 0 >= b[2] + 0))
  }' </dev/null
}
