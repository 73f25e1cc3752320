# shellcheck shell=bash
# runner/lib/cuda.sh — the CUDA version the image's torch needs, read from requirements.lock.
# Sourced by runner/launch.sh (the offer filter: cuda_max_good) and runner/box/driver_check.sh
# (the box's driver), so the number is written in one place only: the lock's
# `nvidia-cuda-runtime==MAJOR.MINOR.PATCH` pin (the CUDA runtime torch's wheel is built against).
# An image built against another CUDA has its own lock: point RUNNER_LOCK at it (docs/RUNBOOK.md
# section 2.1) and the floor follows. Bash 3.2 safe.

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

# cuda_floor_excludes CUDA MAX_DPH WITH: one sentence saying how many offers the floor
# cuda_max_good>=CUDA excludes: WITH offers matched the launch's own search with the floor
# (runner/lib/vast.sh vast_offer's count), and the same search without it is made here
# (vast_offer_count; needs vast.sh sourced): "the CUDA floor cuda_max_good>=13.0 excludes N of the
# M offers matching RUNNER_OFFER_QUERY and dph_total<=1.50". A count that failed reads "an unknown
# number", never 0; a count at the search's row limit reads "at least".
cuda_floor_excludes() {
  local with=$3 without n
  without=$(vast_offer_count "" "$2") || without=""
  case $with in '' | *[!0-9]*) without="" ;; esac
  if [ -z "$without" ]; then
    printf 'the CUDA floor cuda_max_good>=%s excludes an unknown number of offers (the count search failed)\n' "$1"
    return 0
  fi
  n=$((without - with))
  [ "$n" -ge 0 ] || n=0   # the listing moved between the two searches
  [ "$without" -lt "$VAST_OFFER_COUNT_LIMIT" ] || without="at least $without"
  printf 'the CUDA floor cuda_max_good>=%s excludes %s of the %s offers matching RUNNER_OFFER_QUERY and dph_total<=%s\n' \
    "$1" "$n" "$without" "$2"
}
