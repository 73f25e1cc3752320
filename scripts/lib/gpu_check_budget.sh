# shellcheck shell=bash
# scripts/lib/gpu_check_budget.sh: the GPU check's time budget, sourced by scripts/gpu_check.sh:
# each step's cap, the least a later step needs, the timeout a step gets, and run_step, which
# runs one step under it and records its rc and seconds in $tsv.
# shellcheck disable=SC2154  # dry, total, tsv: set by scripts/gpu_check.sh before it sources this
#
# Time arithmetic (sized so the whole check, machine start and copies included, fits a
# 15-minute GPU rental with room to rerun one step):
#   machine start 1-2 min, then the check's budget of 470 s (< 8 min), then ~20 s of transfers:
#   ~10.5 min, leaving ~4.5 min, enough to rerun one step at once on the still-warm machine (e.g.
#   GPU_CHECK_STEPS=score GPU_CHECK_TOTAL_S=150) but not for a fresh machine, so release the
#   machine right after. A remote runner's own limit should sit above the budget (e.g. 540 s)
#   so the script's deadline ends a slow step first and the summary is still written.
#   setup  <= 45 s: pip install of 8 small wheels ~5 s; torch import, CUDA init and ten
#     8192^3 bf16 products (11 TFLOP, ~15 ms at ~790 TFLOP/s) ~15 s.
#   preflight <= 60 s, ddp <= 60 s (estimates, not yet measured on a GPU): a torch import and
#     CUDA start (~10 s), the synthetic bundle (~2 s: 32 clips, one codec copy), 2-4 optimiser
#     steps of the tiny model at B=8 with 2 loader workers, 2-4 readouts; ddp adds torchrun's
#     rendezvous and NCCL's init.
#   parity <= 150 s, expected 60-90 s: TorchScript export of the 12-layer shape on the CPU
#     ~30 s; parity A (8 clips <= 3 s) ~5 s; ORT fp32 over 50 clips of 3-8 s = 275 audio-s x
#     ~22 GFLOP per audio-s (BENCHMARKS: 174.7 GFLOP per 8 s clip) = 6 TFLOP at ~0.3-0.5 TFLOP/s
#     on 16 cores = 12-20 s; 2 x 50 single-clip GPU forwards ~5 s.
#   score  <= 90 s, expected 30-45 s: 512 FLACs written ~10 s; three passes (warm-up, end to
#     end, model only) over 512 clips of 3-8 s = 2,800 audio-s x 22 GFLOP = 61 TFLOP per pass,
#     GPU fp32 at ~30 TFLOP/s ~2 s, decode + front end on one core ~5 s per pass.
#   --quick (420 s, no parity): setup 45 + preflight 60 + ddp 60 + score 90 = 255 s at most,
#     ~150 s typical, leaving the train step 165-270 s: bundle of 256 clips ~10 s; eager
#     fine-tune raw ~10 s + trainer ~25 s; fine-tune + compile: raw eager ~8 s, raw compiled
#     (two static graphs: SpecAugment's draw breaks the graph) ~60-100 s (the unknown), the
#     compiled trainer ~20 s (inductor's cache holds the graphs); frozen raw + trainer ~25 s;
#     the two levers ~15 s; frozen + compile last: what the budget cuts first.
#   the trainer's lever rows (pack, flex, mask-free, graphs: 2 raw figures and 2 trainer runs
#     each, graphs compiling twice) come last in the train step and are not yet timed on a
#     GPU: expect the budget to cut them; rerun them on the warm machine with
#     GPU_CHECK_STEPS=train GPU_CHECK_TRAIN_VARIANTS=fine-tune+pack,fine-tune+flex,...
#   train  the rest (>= 165 s, typically ~250 s), last because it is the longest and least
#     certain: it inherits every second the others leave. Bundle of 512 clips x 6 FLACs ~20 s
#     (--clips 512, not 1024: the trainer re-permutes its pools, the rate does not depend on it);
#     eager: 2 raw figures of 8 + 40 steps of 64 clips (~0.08 s a step = ~4 s each) and 2
#     trainer runs (~15-25 s each with worker start-up); --compile: 4 compilations of ~30-90 s
#     each (first on this image: the unknown). bench_train_gpu prints each variant's line as it
#     finishes (flushed into the log) and rewrites bench_train.json after each, so a timeout
#     keeps the variants already done; GPU_CHECK_TRAIN_VARIANTS reruns only the rest.

# Per-step cap (s) and the least a later step needs (s) before it is worth starting.
step_max() {
  case "$1" in
    # a dry run's caps are loose: the CPU it proves the script on may be a busy shared one
    setup) echo "${GPU_CHECK_MAX_S_SETUP:-$([ "$dry" = 1 ] && echo 180 || echo 45)}" ;;
    preflight) echo "${GPU_CHECK_MAX_S_PREFLIGHT:-$([ "$dry" = 1 ] && echo 240 || echo 60)}" ;;
    ddp) echo "${GPU_CHECK_MAX_S_DDP:-$([ "$dry" = 1 ] && echo 300 || echo 60)}" ;;
    parity) echo "${GPU_CHECK_MAX_S_PARITY:-150}" ;;
    score) echo "${GPU_CHECK_MAX_S_SCORE:-90}" ;;
    train) echo "${GPU_CHECK_MAX_S_TRAIN:-$total}" ;;
  esac
}
step_min() {
  case "$1" in
    preflight | ddp) echo 30 ;; parity) echo 60 ;; score) echo 30 ;; train) echo 120 ;;
    *) echo 0 ;;
  esac
}

# limit NAME LATER...: this step's timeout: its cap, cut so that the later steps keep their
# minimum inside the total budget.
limit() {
  local name="$1" reserve=0 s
  shift
  for s in "$@"; do reserve=$((reserve + $(step_min "$s"))); done
  local left=$((total - SECONDS - reserve)) cap
  cap="$(step_max "$name")"
  if [ "$left" -lt "$cap" ]; then echo "$left"; else echo "$cap"; fi
}

# run_step NAME LIMIT CAPTURE CMD...: CMD under timeout (the whole process group is killed,
# data-loader workers too); CAPTURE ("" = none) gets a copy of its output. Records rc/seconds.
run_step() {
  local name="$1" lim="$2" capture="$3" rc=0 t0=$SECONDS
  shift 3
  echo "=== gpu_check: $name (limit ${lim} s) $(date -u +%H:%M:%S) UTC: $*"
  if [ "$lim" -lt 1 ]; then  # `timeout 0` would mean no limit at all
    echo "gpu_check: $name skipped: only ${lim} s of the ${total} s budget left"
    printf '%s\t-1\t0\t%s\n' "$name" "$lim" >>"$tsv"
    return 0
  fi
  set +e
  if [ -n "$capture" ]; then
    timeout -k 15 "$lim" "$@" 2>&1 | tee "$capture"
    rc="${PIPESTATUS[0]}"
  else
    timeout -k 15 "$lim" "$@" 2>&1
    rc=$?
  fi
  set -e
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "gpu_check: $name TIMED OUT after ${lim} s"
  fi
  echo "=== gpu_check: $name rc=$rc in $((SECONDS - t0)) s"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" "$lim" >>"$tsv"
}
