#!/usr/bin/env bash
# Usage: bash scripts/gpu_check.sh [--dry-run | --quick | --help]
# Summary: an operator's check of any machine with an NVIDIA GPU and torch (a rented box, a
#   workstation): can it train and score hearsay, and how fast; ONE command, each step under
#   its own timeout
#   inside one total budget; a failed or timed-out step is recorded and the next runs, and
#   summary.json is rewritten after every step (a figure is kept as soon as it exists).
#     setup   carried wheels (.whl/) -> /tmp/site when soundfile/soxr/pydantic/torchao are missing; PYTHONPATH
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
#             trainer, the same shapes: pack, flex, mask-free, graphs, fp8 (graphs and fp8
#             compiled on both sides at one 4 s crop; fp8 skipped, saying why, on a GPU below
#             compute capability 8.9 or without torchao)
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
# The steps are scripts/lib/gpu_check_steps.sh; the budget (each step's cap, the time arithmetic
# behind it, run_step) is scripts/lib/gpu_check_budget.sh.
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

# shellcheck source=scripts/lib/gpu_check_budget.sh
. "$root/scripts/lib/gpu_check_budget.sh"
# shellcheck source=scripts/lib/gpu_check_steps.sh
. "$root/scripts/lib/gpu_check_steps.sh"

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
