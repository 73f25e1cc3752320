#!/usr/bin/env bash
# Usage: bash scripts/gpu_check.sh [--dry-run | --quick | --help]
# Summary: an operator's check of any machine with an NVIDIA GPU and torch (a rented box, a
#   workstation): can it train and score hearsay, and how fast; ONE command, each step under
#   its own timeout
#   inside one total budget; a failed or timed-out step is recorded and the next runs, and
#   summary.json is rewritten after every step (a figure is kept as soon as it exists).
#     setup   carried wheels (.whl/) -> /tmp/site when soundfile/soxr/pydantic are missing; PYTHONPATH
#             src/ (hearsay, hearsay.export included; no wheel); an ffmpeg (below); env.json:
#             versions (and which differ from requirements.lock), GPU, bf16 matmul rate, the
#             ffmpeg and whether it has the five encoders (libmp3lame libopus aac
#             libopencore_amrnb pcm_mulaw: the bundle's codec copies)
#     preflight  the box's own preflight train check (container/trainer/smoke_check.sh,
#             HEARSAY_SMOKE_ONLY=train, a local store): `hearsay train` on a synthetic bundle
#             with the shipped config's code paths (bf16, fused AdamW, loader workers, pinned
#             memory, GPU augmentation, a readout per step), its checkpoint back; the XLS-R
#             step says "not run" (no weights here)                       -> preflight.txt
#     ddp     torchrun --standalone, one rank per GPU (at most 2), NCCL: hearsay train, 2
#             epochs at the preflight's sizes, DDP(device_ids), a readout per step (logits
#             all-reduced), checkpoints with every rank's RNG and logs (all_gather_object)
#             (scripts/gpu_check.py ddp)                                    -> ddp.json
#     parity  hearsay parity, XLS-R-300M shape (12 layers, random init): GPU bf16 and fp32 vs
#             onnxruntime fp32 CPU over 50 clips of 3-8 s                    -> parity.json
#     score   scripts/bench_score.py --shape xlsr --device cuda --clips 512: end to end, fed
#             scoring with the box-scoring lever off and on (copies overlapped with compute,
#             one read-back per 8 batches: hearsay.evaluate.overlap), model only
#                                                                         -> bench_score.txt
#     train   scripts/bench_train_gpu.py --compile --levers: raw step vs real trainer at the
#             recipe's crop lengths, B 64, 12 layers, bf16, fine-tune and frozen; the trainer's
#             valid audio share (what the padding cut leaves on zeros) and batch shapes; raw
#             eager vs torch.compile (static shapes) at one 4 s crop and the compiled trainer;
#             the raw-only levers cudnn.benchmark and the frozen recipe at B 128; then the
#             trainer's speed levers (hearsay.train.levers), each off and on, raw step and
#             trainer, the same shapes: pack, flex, mask-free, graphs; fp8's refusal
#                                                                        -> bench_train.json
#   Everything lands in $OUT (a new temp folder when unset): gpu_check.log (all output),
#   env.json, preflight.txt, ddp.json, parity.json, bench_score.txt, bench_train.json,
#   summary.json: eight files, flat, so a remote run copies back one folder.
#   On the GPU machine, from a checkout of this revision (docs/RUNBOOK.md section 5):
#     scripts/fetch_gpu_wheels.sh     # on a machine with the registry: fills .whl/ and
#                                     # .whl/ffmpeg.xz (the wheel's ffmpeg, xz-compressed)
#     OUT=gpu-out bash scripts/gpu_check.sh
# ffmpeg (the preflight's codec copies need one with the five encoders), first found of:
#   $HEARSAY_FFMPEG; $GPU_CHECK_FFMPEG_XZ (default .whl/ffmpeg.xz when present),
#   decompressed into the work folder; `ffmpeg` on PATH (an image that has one); the
#   imageio-ffmpeg wheel's binary. None: setup says so and the preflight and ddp steps fail.
# --quick: the steps that a change to the trainer or the scorer needs, in ~7 minutes:
#   GPU_CHECK_STEPS "preflight ddp score train", GPU_CHECK_TOTAL_S 420, a 256-clip bundle
#   (any of these set in the environment wins).
# Dry run (--dry-run or GPU_CHECK_DRY=1): the same steps on the CPU with tiny shapes
#   (preflight with HEARSAY_SMOKE_DEVICE=cpu, ddp as 2 gloo ranks of the --cpu-smoke preset,
#   parity --random-init tiny --device cpu, bench_score --shape tiny, bench_train --dry-run),
#   no wheel install, no GPU check: proves the script end to end before GPU minutes are spent.
#   Its figures check the plumbing only; they are not measurements.
# Environment:
#   OUT                     output folder (default: a new temp folder)
#   PY                      python (default python3; dry run: .venv/bin/python when present)
#   GPU_CHECK_STEPS      steps in order (default "preflight ddp parity score train"), e.g.
#                           "train" to rerun one
#   GPU_CHECK_TOTAL_S    total budget in seconds, setup included (default 470; dry run 900)
#   GPU_CHECK_MAX_S_<STEP>  one step's cap, e.g. GPU_CHECK_MAX_S_PARITY=150
#   GPU_CHECK_SITE       where the carried wheels are installed (default /tmp/site)
#   GPU_CHECK_FFMPEG_XZ  an xz-compressed ffmpeg to use (default .whl/ffmpeg.xz)
#   HEARSAY_FFMPEG       an ffmpeg binary to use (wins over everything above)
#   GPU_CHECK_TRAIN_VARIANTS  train step: only these bench_train_gpu variants, e.g.
#                           "fine-tune+compile,frozen+compile" to rerun what a timeout cut off
#                           (fine-tune, frozen, +compile, fine-tune+cudnn, frozen+b128,
#                           fine-tune+pack, +flex, +mask-free, +graphs, +fp8)
#   GPU_CHECK_TRAIN_CLIPS  the train step's synthetic bundle size (default 512; --quick 256)
#   GPU_CHECK_TRAIN_ARGS   more bench_train_gpu arguments, word-split, e.g. "--trainer-only
#                           --compile-crop-s 0 --warmup 40" (the compiled trainer at the
#                           recipe's lengths, each bucket's graph compiled once)
#   GPU_CHECK_SCORE_CLIPS  the score step's clips (default 512)
# Exit codes: 0 every step exited 0; 1 a step failed, timed out or was skipped (summary.json
#   says which; parity exits 1 when its gate fails); 2 usage; 3 setup failed (wheel install,
#   an import, or no CUDA device outside the dry run): no step ran.
#
# Time arithmetic (sized so the whole check, machine start and copies included, fits a
# 15-minute GPU rental with room to rerun one step):
#   machine start 1-2 min, then this script's budget of 470 s (< 8 min), then ~20 s of transfers:
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
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x

usage() { sed -n '2,/^# Exit codes/p' "$0" | sed 's/^# \{0,1\}//'; }

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
dry="${GPU_CHECK_DRY:-0}"
quick=0
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  --dry-run) dry=1 ;;
  --quick) quick=1 ;;
  "") ;;
  *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
[ "$dry" = 1 ] || dry=0
default_steps="preflight ddp parity score train"
if [ "$quick" = 1 ]; then
  default_steps="preflight ddp score train"
  GPU_CHECK_TOTAL_S="${GPU_CHECK_TOTAL_S:-420}"
  GPU_CHECK_TRAIN_CLIPS="${GPU_CHECK_TRAIN_CLIPS:-256}"
fi
steps="${GPU_CHECK_STEPS:-$default_steps}"
for s in $steps; do
  case "$s" in preflight | ddp | parity | score | train) ;;
    *) echo "gpu_check: unknown step '$s' in GPU_CHECK_STEPS" \
         "(preflight, ddp, parity, score, train)" >&2
       exit 2 ;;
  esac
done
total="${GPU_CHECK_TOTAL_S:-$([ "$dry" = 1 ] && echo 900 || echo 470)}"
if ! [[ "$total" =~ ^[0-9]+$ ]]; then
  echo "gpu_check: GPU_CHECK_TOTAL_S=$total is not a whole number of seconds" >&2
  exit 2
fi
if [ -z "${PY:-}" ]; then
  PY=python3
  [ "$dry" = 1 ] && [ -x .venv/bin/python ] && PY="$root/.venv/bin/python"
fi
out="${OUT:-}"
if [ -z "$out" ]; then out="$(mktemp -d /tmp/gpu-check-out.XXXXXX)"; fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# a step that dies must not leave an older run's file to be quoted as its figure
rm -f "$out"/{gpu_check.log,env.json,preflight.txt,ddp.json,parity.json,bench_score.txt} \
  "$out"/{bench_train.json,summary.json}
work="$(mktemp -d /tmp/gpu-check-work.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# temp folders of the steps (bundles, the 640 MB parity model, inductor's cache) live in $work,
# so a step killed at its limit leaves nothing behind
export TMPDIR="$work" PYTHONUNBUFFERED=1
# the device reaches no network: no step may wait on the Hub (random init reads no weights)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
tsv="$work/steps.tsv"
site="${GPU_CHECK_SITE:-/tmp/site}"  # where the carried wheels are installed
: >"$tsv"

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

setup() {
  if [ "$dry" = 0 ] && ! "$PY" -c "import soundfile, soxr, pydantic" 2>/dev/null; then
    if ! compgen -G ".whl/*.whl" >/dev/null; then
      echo "gpu_check: soundfile/soxr/pydantic missing and no .whl/ here (run" \
        "scripts/fetch_gpu_wheels.sh on the dev machine, then carry [\".whl\"])"
      return 3
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" .whl/*.whl || return 3
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"  # hearsay (and hearsay.export), no wheel
  find_ffmpeg
  local flag=""
  [ "$dry" = 1 ] && flag=--dry-run
  # shellcheck disable=SC2086 # flag is empty or one word
  timeout -k 10 "$(step_max setup)" "$PY" scripts/gpu_check.py env "$out" $flag
}

# find_ffmpeg: export HEARSAY_FFMPEG (every step's ffmpeg, the smoke check's too), first found
# of: the variable as given, a carried xz-compressed binary, PATH's, the imageio-ffmpeg wheel's.
find_ffmpeg() {
  local xz="${GPU_CHECK_FFMPEG_XZ:-.whl/ffmpeg.xz}" found="" ff=""
  if [ -n "${HEARSAY_FFMPEG:-}" ]; then
    found="$HEARSAY_FFMPEG (HEARSAY_FFMPEG)"
  elif [ -f "$xz" ]; then
    # python's lzma: no xz binary needed on the machine
    "$PY" -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$xz" "$work/ffmpeg" && chmod +x "$work/ffmpeg" &&
      export HEARSAY_FFMPEG="$work/ffmpeg" && found="$work/ffmpeg (from $xz)"
  elif command -v ffmpeg >/dev/null; then
    export HEARSAY_FFMPEG
    HEARSAY_FFMPEG="$(command -v ffmpeg)" && found="$HEARSAY_FFMPEG (PATH)"
  elif ff="$("$PY" -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())' \
      2>/dev/null)"; then
    export HEARSAY_FFMPEG="$ff" && found="$ff (the imageio-ffmpeg wheel)"
  fi
  if [ -n "$found" ]; then
    echo "gpu_check: ffmpeg: $found"
  else
    echo "gpu_check: no ffmpeg (set HEARSAY_FFMPEG, carry .whl/ffmpeg.xz made by" \
      "scripts/fetch_gpu_wheels.sh, or install one): the preflight and ddp steps will fail"
  fi
}

preflight() {
  local device=cuda
  [ "$dry" = 1 ] && device=cpu
  run_step preflight "$1" "$out/preflight.txt" env HEARSAY_SMOKE_ONLY=train \
    HEARSAY_SMOKE_DEVICE="$device" HEARSAY_RUN_PATH="$work/preflight-store" PYTHON="$PY" \
    HEARSAY_SMOKE_TIMEOUT_S="$1" bash container/trainer/smoke_check.sh
}

ddp() {
  local flag=""
  [ "$dry" = 1 ] && flag=--dry-run
  # shellcheck disable=SC2086 # flag is empty or one word
  run_step ddp "$1" "" "$PY" scripts/gpu_check.py ddp "$out" "$work/ddp" $flag
}

parity() {
  local lim="$1" model="$work/parity_model"
  if [ "$dry" = 1 ]; then
    run_step parity "$lim" "" "$PY" -m hearsay.cli parity "$model" --random-init tiny \
      --device cpu --clips 3
  else
    run_step parity "$lim" "" "$PY" -m hearsay.cli parity "$model" --random-init xlsr300m-12 \
      --clips 50
  fi
  # parity.json only (parity A, the int8 gate, parity B); model.onnx stays behind
  if [ -f "$model/parity.json" ]; then cp "$model/parity.json" "$out/parity.json"; fi
}

score() {
  if [ "$dry" = 1 ]; then
    run_step score "$1" "$out/bench_score.txt" "$PY" scripts/bench_score.py --shape tiny \
      --device cpu --clips 4
  else
    run_step score "$1" "$out/bench_score.txt" "$PY" scripts/bench_score.py --shape xlsr \
      --device cuda --clips "${GPU_CHECK_SCORE_CLIPS:-512}"
  fi
}

train() {
  local only=() more=()
  [ -n "${GPU_CHECK_TRAIN_VARIANTS:-}" ] && only=(--variants "$GPU_CHECK_TRAIN_VARIANTS")
  # shellcheck disable=SC2206 # word splitting of the extra arguments is the point
  [ -n "${GPU_CHECK_TRAIN_ARGS:-}" ] && more=($GPU_CHECK_TRAIN_ARGS)
  if [ "$dry" = 1 ]; then
    run_step train "$1" "" "$PY" scripts/bench_train_gpu.py --dry-run --levers \
      ${only[@]+"${only[@]}"} ${more[@]+"${more[@]}"} --json "$out/bench_train.json"
  else
    run_step train "$1" "" "$PY" scripts/bench_train_gpu.py --compile --levers \
      --clips "${GPU_CHECK_TRAIN_CLIPS:-512}" \
      ${only[@]+"${only[@]}"} ${more[@]+"${more[@]}"} --json "$out/bench_train.json"
  fi
}

main() {
  echo "gpu_check: $([ "$dry" = 1 ] && echo "DRY RUN (CPU, tiny shapes)" || echo "GPU run")" \
    "$(date -u '+%Y-%m-%d %H:%M:%S') UTC, steps: $steps, budget ${total} s, out $out," \
    "git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  local rc=0 t0=$SECONDS
  setup || rc=$?
  printf 'setup\t%s\t%s\t%s\n' "$rc" "$((SECONDS - t0))" "$(step_max setup)" >>"$tsv"
  if [ "$rc" != 0 ]; then
    echo "gpu_check: setup failed (rc $rc; env.json says what is missing): no step run"
    "$PY" scripts/gpu_check.py summary "$out" "$tsv" || true
    return 3
  fi
  # shellcheck disable=SC2206 # word splitting of the step list is the point
  local todo=($steps) i lim
  for i in "${!todo[@]}"; do
    lim="$(limit "${todo[$i]}" "${todo[@]:i+1}")"
    case "${todo[$i]}" in
      preflight) preflight "$lim" ;;
      ddp) ddp "$lim" ;;
      parity) parity "$lim" ;;
      score) score "$lim" ;;
      train) train "$lim" ;;
    esac
    # the figures so far, kept even if a later step or the remote command dies
    "$PY" scripts/gpu_check.py summary "$out" "$tsv" >/dev/null 2>&1 || true
  done
  "$PY" scripts/gpu_check.py summary "$out" "$tsv"
}

main 2>&1 | tee "$out/gpu_check.log"
exit "${PIPESTATUS[0]}"
