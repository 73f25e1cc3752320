# shellcheck shell=bash
# scripts/lib/gpu_check_steps.sh: the GPU check's steps, sourced by scripts/gpu_check.sh: setup (the
# carried wheels, PYTHONPATH, an ffmpeg, env.json) and one function per step (preflight, ddp,
# parity, score, train), each taking its time limit in seconds and running under run_step.
# shellcheck disable=SC2154  # dry, out, work, site, root, PY: set by scripts/gpu_check.sh

setup() {
  if [ "$dry" = 0 ] && ! "$PY" -c "import soundfile, soxr, pydantic, torchao" 2>/dev/null; then
    if ! compgen -G ".whl/*.whl" >/dev/null; then
      echo "gpu_check: soundfile/soxr/pydantic/torchao missing and no .whl/ here (run" \
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
