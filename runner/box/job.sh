# shellcheck shell=bash
# runner/box/job.sh — the job's own steps on the box, sourced by runner/box/entry.sh after status.sh
# and lib/bundles.sh, whose globals it uses: BOX_DIR RUN_PATH phase HEARSAY_* (from job.env).
#
#   box_env_import   the container's environment, written into BOX_DIR/box.env and exported
#   box_env_check    FAIL naming each required variable the container or job.env lacks
#   box_fail MSG     the FAIL path: MSG to stderr and to RUN_PATH/REASON, then exit 1
#   box_watchdog PID the box's hard deadline in every phase: past it, entry.sh (PID) is stopped
#   box_heartbeat PID RUN_PATH/HEARTBEAT every HEARSAY_HEARTBEAT_S while entry.sh (PID) runs
#   box_pull_bundle  bundles/<HEARSAY_BUNDLE_SHA> into BOX_DIR/bundle, its tree-sha checked
#   box_codec_pass   a recipe bundle's codec copies: pulled from the store, or made here and stored
#   box_train        the trainer, start-or-resume, its exit code and last lines kept on failure
#   box_score        a fold or full run scores its own rows here (+ parity B logits), pushed
# shellcheck disable=SC2154  # phase is entry.sh's

# Every variable the chain needs, in one place, each with the one source it is imported from
# (docs/INTERFACES.md, "Runner <-> image"). A chain started over ssh sees the ssh session's
# environment, not the container's, so nothing here is assumed from the session:
#   BOX_IMAGE_NAMES  the trainer image's Env (nix/trainer-image.nix), read from the container's first
#                    process ($HEARSAY_INIT_ENVIRON); each one missing there is a FAIL naming it
#   BOX_VAST_NAMES   vast.ai's container variables, same source and rule (the box destroys itself
#                    with them)
#   BOX_OPTION_NAMES image settings a real box leaves unset (the smoke check's override, device and
#                    subset; the scorer's command line and parity clip count), imported from the
#                    same source when present there
#   BOX_JOB_NAMES    job.env, written by runner/launch.sh (runner/lib/launch_provision.sh step_provision);
#                    each one missing there is a FAIL naming it (HEARSAY_FOLD is empty but for folds)
BOX_IMAGE_NAMES="PATH LD_LIBRARY_PATH HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HEARSAY_WEIGHTS_DIR
  HEARSAY_WEIGHTS_SHA256 HEARSAY_FFMPEG HEARSAY_VERSION HEARSAY_GIT_SHA SSL_CERT_FILE TMPDIR HOME"
BOX_VAST_NAMES="CONTAINER_ID CONTAINER_API_KEY"
BOX_OPTION_NAMES="HEARSAY_SMOKE_CHECK HEARSAY_SMOKE_DEVICE HEARSAY_SMOKE_ONLY HEARSAY_SCORE_RUN
  HEARSAY_PARITY_CLIPS HEARSAY_CODEC_PASS"
BOX_JOB_NAMES="HEARSAY_JOB HEARSAY_KIND HEARSAY_FOLD HEARSAY_GEN HEARSAY_STORE HEARSAY_RUN_PATH
  HEARSAY_BUNDLE_SHA HEARSAY_CONFIG_HASH HEARSAY_TRAIN HEARSAY_BUDGET_USD HEARSAY_DEADLINE"
# (job.env's HEARSAY_HEARTBEAT_S is optional: 60 s without it; so is HEARSAY_CAMPAIGN_DEADLINE, the
# campaign's hard stop when HEARSAY_DEADLINE is it: the REASON then says so)
BOX_ENV_NAMES=$(echo "$BOX_IMAGE_NAMES $BOX_VAST_NAMES $BOX_OPTION_NAMES" | tr -s '\n ' '  ')
box_env_missing=""   # required container names not found, set by box_env_import

# box_env_import: each name of BOX_ENV_NAMES found in $HEARSAY_INIT_ENVIRON (default /proc/1/environ,
# the container's first process; NUL-separated NAME=VALUE) wins over the session's; a required one
# (image, vast) not found there is kept in box_env_missing for box_env_check. The resulting values
# are written to BOX_DIR/box.env (mode 600: it holds the instance's API key) and exported.
box_env_import() {
  local src=${HEARSAY_INIT_ENVIRON:-/proc/1/environ} kv name found=" " xtrace=0
  case $- in *x*) xtrace=1; set +x ;; esac   # RUNNER_DEBUG's xtrace must never print the instance key
  if [ -r "$src" ]; then
    while IFS= read -r -d '' kv; do
      name=${kv%%=*}
      case " $BOX_ENV_NAMES " in *" $name "*) export "$name=${kv#*=}"; found="$found$name " ;; esac
    done <"$src"
  else
    echo "entry: cannot read the container's environment at $src" >&2
  fi
  for name in $BOX_IMAGE_NAMES $BOX_VAST_NAMES; do
    case $found in *" $name "*) ;; *) box_env_missing="$box_env_missing $name" ;; esac
  done
  : >"$BOX_DIR/box.env"
  chmod 600 "$BOX_DIR/box.env"
  for name in $BOX_ENV_NAMES; do
    [ -n "${!name+set}" ] && printf '%s=%q\n' "$name" "${!name}" >>"$BOX_DIR/box.env"
  done
  echo "entry: container environment in $BOX_DIR/box.env: $(cut -d= -f1 "$BOX_DIR/box.env" | tr '\n' ' ')" >&2
  [ "$xtrace" = 0 ] || set -x
}

# box_env_check: FAIL (REASON) naming every required variable that the container's environment or
# job.env lacks. Runs once job.env is read: the REASON needs its run path.
box_env_check() {
  local name lacks=""
  [ -z "$box_env_missing" ] \
    || box_fail "the container's environment (${HEARSAY_INIT_ENVIRON:-/proc/1/environ}) lacks${box_env_missing}: the trainer image sets them (nix/trainer-image.nix, Env); rebuild the image or fix RUNNER_IMAGE"
  for name in $BOX_JOB_NAMES; do
    [ -n "${!name+set}" ] || lacks="$lacks $name"
  done
  [ -z "$lacks" ] || box_fail "job.env lacks${lacks}: runner/launch.sh writes them; relaunch with this checkout's runner"
}

# box_fail MSG [LOG]: say MSG, write it to RUN_PATH/REASON (box_reason), then exit 1: the EXIT trap
# writes FAIL and destroys the box.
box_fail() {
  echo "entry: $1" >&2
  box_reason "$@"
  exit 1
}

# box_reason MSG [LOG]: "GEN PHASE EPOCH" + MSG (+ LOG's last 20 lines) to RUN_PATH/REASON
# (runner/status.sh --why JOB reads it once the box is gone).
box_reason() {
  {
    printf '%s %s %s\n%s\n' "$HEARSAY_GEN" "$phase" "$(date -u +%s)" "$1"
    if [ -n "${2:-}" ] && [ -s "$2" ]; then echo "--- last lines of $2:"; tail -n 20 "$2"; fi
  } >"$BOX_DIR/REASON"
  box_rclone copyto "$BOX_DIR/REASON" "$RUN_PATH/REASON" </dev/null 2>/dev/null \
    || echo "entry: could not write $RUN_PATH/REASON" >&2
}

# box_watchdog ENTRY_PID: the box's hard deadline (HEARSAY_DEADLINE, epoch s) in every phase once
# job.env is read, not only while training: a smoke check, a bundle pull or a push that hangs would
# otherwise keep the box billing past it with the laptop and its reaper gone. Runs beside entry.sh;
# past the deadline it writes BOX_DIR/DEADLINE_HIT ("DEADLINE PHASE") and stops entry.sh and every
# process under it with TERM (the set of processes taken before entry.sh's EXIT trap starts, so the
# trap's own STATUS write and destroy are never hit): entry.sh exits 1, FAIL is written and the box
# destroys itself. While training (and pushing), box_train stops the trainer at the deadline itself
# and pushes what it has; the watchdog gives that HEARSAY_DEADLINE_GRACE_S (600 s) before it acts.
box_watchdog() {
  local entry=$1 dl=$HEARSAY_DEADLINE at ph under
  while kill -0 "$entry" 2>/dev/null; do
    ph=$(cat "$BOX_DIR/PHASE" 2>/dev/null || true)
    at=$dl
    case $ph in TRAINING | PUSHING) at=$((dl + ${HEARSAY_DEADLINE_GRACE_S:-600})) ;; esac
    if [ "$(date -u +%s)" -ge "$at" ]; then
      echo "entry: deadline $dl passed in phase ${ph:-?}: stopping the job, the box destroys itself" >&2
      echo "$dl ${ph:-?}" >"$BOX_DIR/DEADLINE_HIT" || true
      under=$(box_descendants "$entry" "$BASHPID")
      kill -TERM "$entry" 2>/dev/null || true
      # shellcheck disable=SC2086  # a list of pids
      [ -z "$under" ] || kill -TERM $under 2>/dev/null || true
      return 0
    fi
    sleep 1
  done
}

# box_heartbeat ENTRY_PID: "GEN SEQ EPOCH" to RUN_PATH/HEARTBEAT at once and then every
# HEARSAY_HEARTBEAT_S seconds (60; job.env's) while entry.sh (ENTRY_PID) runs: the liveness that
# runner/reaper.sh reads (runner/lib/heartbeat.sh). A chain killed without its EXIT trap stops
# beating. SEQ counts up, so the reader needs no clock of this box's; a beat the store refuses is
# said and the next one tried. Each beat also copies train.log to the store (box_push_log).
box_heartbeat() {
  local entry=$1 seq=0 nap=""
  trap '[ -z "$nap" ] || kill "$nap" 2>/dev/null; exit 0' TERM
  while kill -0 "$entry" 2>/dev/null; do
    seq=$((seq + 1))
    printf '%s %s %s\n' "$HEARSAY_GEN" "$seq" "$(date -u +%s)" | box_rclone rcat "$RUN_PATH/HEARTBEAT" 2>/dev/null \
      || echo "entry: heartbeat $seq could not be written" >&2
    box_push_log   # runner/logs.sh reads it (runner/box/status.sh)
    sleep "${HEARSAY_HEARTBEAT_S:-60}" &
    nap=$!
    wait "$nap" || true
    nap=""
  done
}

# box_descendants PID SKIP: the pids of every process under PID, except SKIP and what is under it
# (the watchdog itself); read from /proc (the box is Linux, and the image carries no procps).
box_descendants() {
  local skip=$2 f line rest k p queue out=""
  local -a pids=() parents=()
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null <"$f" || continue
    rest=${line##*) }          # "PID (COMM) STATE PPID …": COMM may hold spaces and parentheses
    rest=${rest#* }
    pids+=("${line%% *}")
    parents+=("${rest%% *}")
  done
  queue=" $1 "
  while [ "$queue" != " " ]; do
    p=${queue# }
    p=${p%% *}
    queue=${queue# "$p"}
    for k in "${!pids[@]}"; do
      [ "${parents[$k]}" = "$p" ] && [ "${pids[$k]}" != "$skip" ] || continue
      out="$out ${pids[$k]}"
      queue="$queue${pids[$k]} "
    done
  done
  echo "${out# }"
}

# box_pull_bundle: the bundle the job was launched with, or FAIL saying which of the two went wrong.
box_pull_bundle() {
  local src got
  src=$(store_bundle_path "$HEARSAY_BUNDLE_SHA") || box_fail "bundle path refused: $HEARSAY_BUNDLE_SHA"
  box_rclone copy "$src" "$BOX_DIR/bundle" </dev/null 2>"$BOX_DIR/pull.log" \
    || box_fail "bundle pull from $src failed (rclone: $(tail -n 1 "$BOX_DIR/pull.log")); is it in the store? on the laptop: runner/bundle_put.sh BUNDLE_DIR"
  got=$(local_tree_sha "$BOX_DIR/bundle")
  [ -f "$BOX_DIR/bundle/manifest.csv" ] \
    || box_fail "bundle pull from $src brought no manifest.csv: the store has no bundle $HEARSAY_BUNDLE_SHA (runner/bundle_put.sh BUNDLE_DIR)"
  [ "$got" = "$HEARSAY_BUNDLE_SHA" ] \
    || box_fail "pulled bundle hashes to tree-sha $got, job.env says HEARSAY_BUNDLE_SHA=$HEARSAY_BUNDLE_SHA (the store's copy is incomplete or another bundle: runner/bundle_put.sh BUNDLE_DIR)"
  echo "entry: bundle $got pulled and verified" >&2
}

# box_codec_pass: the codec copies of a bundle that carries only their recipe (codec_recipe.json;
# one built with its copies skips this), before training. `$HEARSAY_CODEC_PASS BUNDLE --key`
# (default `hearsay bundle codecs`) names them for this image's ffmpeg (recipe, version, encoders);
# STORE/codecs/<tree_sha>/<key>/ is pulled when another box stored them; then the pass, with a
# process per core of the rental (box_cores), verifies what was pulled or (none, or not verifying) makes them with the
# image's ffmpeg, listing the encoders it lacks (BOX_DIR/codecs.log; codecs/codec_pass.json). Copies
# made here are pushed there, codec_pass.json last, so a box never finds a record without its files
# (a torn set fails verification and is made again). CHAIN says "GEN running" from the pass on
# (what the launcher waits for). A failed pass is a FAIL with its exit code
# and last lines in REASON; a failed push of the copies is said, not a FAIL (later boxes make them).
# box_cores: the CPU cores this rental may use, for the codec pass's processes. A container's nproc
# counts the host's CPUs, not the rental's: job.env's HEARSAY_CPU_CORES (the offer's
# cpu_cores_effective, whole cores), else the cgroup's CPU quota (HEARSAY_CGROUP_CPU_MAX, default
# /sys/fs/cgroup/cpu.max: "QUOTA PERIOD", rounded up), else nproc; at least 1.
box_cores() {
  local c=${HEARSAY_CPU_CORES:-} q p
  c=${c%%.*}
  if [[ $c =~ ^[0-9]+$ ]] && [ "$c" -ge 1 ]; then echo "$c"; return 0; fi
  if read -r q p <"${HEARSAY_CGROUP_CPU_MAX:-/sys/fs/cgroup/cpu.max}" 2>/dev/null \
    && [[ $q =~ ^[0-9]+$ ]] && [[ $p =~ ^[0-9]+$ ]] && [ "$p" -gt 0 ]; then
    c=$(((q + p - 1) / p))
    [ "$c" -ge 1 ] || c=1
    echo "$c"
    return 0
  fi
  nproc
}

box_codec_pass() {
  local b=$BOX_DIR/bundle pass=${HEARSAY_CODEC_PASS:-hearsay bundle codecs} key dest rc=0
  local log=$BOX_DIR/codecs.log
  [ -f "$b/codec_recipe.json" ] || return 0
  # shellcheck disable=SC2086  # the pass is a command line by design
  key=$($pass "$b" --key </dev/null 2>>"$log") \
    || box_fail "codec pass: no key for this ffmpeg ($pass $b --key failed)" "$log"
  dest=$(store_codecs_path "$HEARSAY_BUNDLE_SHA" "$key") || box_fail "codec copies path refused: $key"
  box_rclone copy "$dest" "$b/codecs" </dev/null 2>/dev/null || true   # none stored yet: made here
  # The launcher waits for "running" (RUNNER_CHAIN_DEADLINE_S, minutes); a first box's pass on a
  # large corpus takes longer, so the chain counts as started here; the heartbeat shows it alive.
  echo "$HEARSAY_GEN running" >"$BOX_DIR/CHAIN"
  # shellcheck disable=SC2086
  $pass "$b" --jobs "$(box_cores)" </dev/null >>"$log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || box_fail "codec pass exit $rc ($pass; hearsay bundle codecs --help lists the codes)" "$log"
  echo "entry: $(grep '^codecs: ' "$log" | tail -n 1)" >&2
  grep "^  encoders missing" "$log" | tail -n 1 | sed "s/^/entry: /" >&2 || true
  grep '^codecs: ' "$log" | tail -n 1 | grep -q ': made ' || return 0
  if box_rclone copy "$b/codecs" "$dest" --exclude codec_pass.json </dev/null 2>>"$log" \
    && box_rclone copyto "$b/codecs/codec_pass.json" "$dest/codec_pass.json" </dev/null 2>>"$log"; then
    echo "entry: codec copies stored at $dest for later boxes" >&2
  else
    echo "entry: codec copies could not be stored at $dest (later boxes make their own)" >&2
  fi
}

# box_train STORE SEL...: `$HEARSAY_TRAIN --bundle … SEL --out BOX_DIR/run --store STORE --resume auto
# --config BOX_DIR/train.json`: the first launch of a job starts fresh, a relaunch (same bundle
# and config, hence the same STORE) continues from its latest complete checkpoint. Output goes
# to BOX_DIR/train.log; CHAIN says "GEN running" once it has started. A non-zero exit is a FAIL
# whose REASON carries the trainer's exit code (hearsay train --help lists them) and last lines.
box_train() {
  local store=$1 rc=0
  shift
  # shellcheck disable=SC2086  # HEARSAY_TRAIN is a command line by design
  $HEARSAY_TRAIN --bundle "$BOX_DIR/bundle" "$@" --out "$BOX_DIR/run" --store "$store" \
    --resume auto --config "$BOX_DIR/train.json" </dev/null >>"$BOX_DIR/train.log" 2>&1 &
  local train=$!
  echo "$train" >"$BOX_DIR/train.pid"
  echo "$HEARSAY_GEN running" >"$BOX_DIR/CHAIN"
  # The box's own hard deadline (HEARSAY_DEADLINE, epoch s, the record's): past it the trainer is
  # stopped (TERM, KILL after 10 s), what it has is pushed, and the run ends FAIL, so the EXIT trap
  # destroys the box even with the laptop and its reaper gone.
  # A store push the trainer has in flight at that moment (a checkpoint folder, then its marker)
  # finishes first, for at most HEARSAY_PUSH_FINISH_S (box_push_settle): a checkpoint cut mid-push
  # lacks its marker, and a resume skips it. When the deadline is the campaign's
  # (HEARSAY_CAMPAIGN_DEADLINE, job.env), the REASON says so.
  local what
  while kill -0 "$train" 2>/dev/null; do
    if [ -n "${HEARSAY_DEADLINE:-}" ] && [ "$(date -u +%s)" -ge "$HEARSAY_DEADLINE" ]; then
      what="deadline $HEARSAY_DEADLINE"
      [ "${HEARSAY_CAMPAIGN_DEADLINE:-}" != "$HEARSAY_DEADLINE" ] || what="campaign deadline $HEARSAY_DEADLINE (the campaign's hard stop)"
      echo "entry: $what passed: stopping the trainer, pushing what it has" >&2
      box_push_settle "$train"
      # (a trainer already gone makes kill fail: never an error here, or the ERR trap would end the
      # chain before the push below)
      kill -TERM "$train" 2>/dev/null || true; sleep "${HEARSAY_STOP_WAIT_S:-10}"; kill -KILL "$train" 2>/dev/null || true
      box_status PUSHING
      box_push "$BOX_DIR/run" "$store" || true
      box_fail "$what passed: trainer stopped, what it had pushed to $store" "$BOX_DIR/train.log"
    fi
    sleep 1
  done
  wait "$train" || rc=$?
  [ "$rc" -eq 0 ] || box_fail "trainer exit $rc ($HEARSAY_TRAIN; see hearsay train --help for the codes)" "$BOX_DIR/train.log"
}

# box_push_running PID: 0 when a store push runs under PID: a process below it whose command (its
# name, or the script a shell runs) is rclone or $HEARSAY_RCLONE's name (how hearsay.store pushes).
box_push_running() {
  local p n name a0 a1 rest
  for p in $(box_descendants "$1" "$BASHPID"); do
    name=$(cat "/proc/$p/comm" 2>/dev/null) || continue
    rest=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | head -n 2 | tr '\n' ' ') || rest=""
    a0=${rest%% *} a1=${rest#* }
    a1=${a1%% *}
    for n in "$name" "${a0##*/}" "${a1##*/}"; do
      case $n in rclone | "$(basename "${HEARSAY_RCLONE:-rclone}")") [ -n "$n" ] && return 0 ;; esac
    done
  done
  return 1
}

# box_push_settle PID: wait while the trainer (PID) has a store push in flight (box_push_running,
# looked at every 0.2 s), until none has been seen for 2 s (a checkpoint's folder and its marker are
# two pushes in a row), for at most HEARSAY_PUSH_FINISH_S (300) seconds in all.
box_push_settle() {
  local train=$1 quiet=0 looks=0 said="" limit=$(( ${HEARSAY_PUSH_FINISH_S:-300} * 5 ))
  while [ "$quiet" -lt 10 ] && [ "$looks" -lt "$limit" ] && kill -0 "$train" 2>/dev/null; do
    if box_push_running "$train"; then
      quiet=0
      [ -n "$said" ] || echo "entry: the trainer is pushing to the store: that push finishes first (at most HEARSAY_PUSH_FINISH_S=${HEARSAY_PUSH_FINISH_S:-300} s)" >&2
      said=1
    else
      quiet=$((quiet + 1))
    fi
    sleep 0.2
    looks=$((looks + 1))
  done
  [ "$looks" -lt "$limit" ] || echo "entry: the trainer's push still runs after HEARSAY_PUSH_FINISH_S=${HEARSAY_PUSH_FINISH_S:-300} s: stopping it" >&2
  [ -z "$said" ] || [ "$looks" -ge "$limit" ] || echo "entry: the trainer's push finished" >&2
}

# box_score STORE: after the run is pushed, a fold or full run scores its own rows where it trained
# (`$HEARSAY_SCORE_RUN --run BOX_DIR/run --bundle BOX_DIR/bundle --out BOX_DIR/run/scores`, default
# `hearsay score-run`: the trainer's device and precision, the files hearsay assemble reuses, and
# every run's (fold, ablation and full) probe set scores: scores/<key>_probe.csv); the
# full job adds --parity-clips $HEARSAY_PARITY_CLIPS (50): the logits of parity B. STORE/scores is
# pulled first, so a relaunched box keeps each file whose sidecar still names these weights; then
# BOX_DIR/run/scores is pushed to STORE/scores. A non-zero exit is a FAIL whose REASON carries the
# scorer's exit code and last lines (never a DONE without scores); three failed pushes too.
box_score() {
  local store=$1 rc=0 scorer=${HEARSAY_SCORE_RUN:-hearsay score-run}
  local -a extra=()
  [ "$HEARSAY_KIND" != full ] || extra=(--parity-clips "${HEARSAY_PARITY_CLIPS:-50}")
  mkdir -p "$BOX_DIR/run/scores"
  box_rclone copy "$store/scores" "$BOX_DIR/run/scores" </dev/null 2>/dev/null || true   # a first launch has none
  # shellcheck disable=SC2086  # the scorer is a command line by design
  $scorer --run "$BOX_DIR/run" --bundle "$BOX_DIR/bundle" --out "$BOX_DIR/run/scores" ${extra[@]+"${extra[@]}"} \
    </dev/null >>"$BOX_DIR/score.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || box_fail "scoring exit $rc ($scorer; hearsay score-run --help lists the codes): the trained run is in the store, its scores are not" "$BOX_DIR/score.log"
  box_push "$BOX_DIR/run/scores" "$store/scores" || box_fail "score push to $store/scores failed 3 times"
  echo "entry: $(tail -n 1 "$BOX_DIR/score.log")" >&2
}
