#!/usr/bin/env bats
# runner/logs.sh: a job's box log read from the store, as the box's own box_status and
# box_push_log (runner/box/status.sh) leave it there, under the job's STATUS; -f follows it to
# DONE. Real rclone on a local remote; no box, no API.

setup() {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  W=$BATS_TEST_TMPDIR
  export PATH="$REPO/.venv/bin:$PATH"
  export RUNNER_STATE=$W/state RUNNER_RCLONE=rclone RUNNER_RCLONE_CONF=$W/rclone.conf
  export RUNNER_STORE="store:$W/bucket/hearsay" RUNNER_LOGS_POLL_S=0.2 RUNNER_OPERATOR=op-a
  RUNS=$W/bucket/hearsay/runs/op-a   # this operator's run folders
  mkdir -p "$W/bucket/hearsay/runs" "$W/box"
  (umask 077; printf '[store]\ntype = local\n' >"$RUNNER_RCLONE_CONF")
}

# box PHASE [LINE...]: the box of generation g-7 appends LINEs to its train.log, then writes STATUS
# PHASE with its own box_status (which copies the log first).
box() {
  local phase=$1
  shift
  [ "$#" -eq 0 ] || printf '%s\n' "$@" >>"$W/box/train.log"
  BOX_DIR=$W/box HEARSAY_GEN=${GEN:-g-7} RUN_PATH="$RUNNER_STORE/runs/$RUNNER_OPERATOR/fold3" \
    RCLONE_CONFIG=$RUNNER_RCLONE_CONF HEARSAY_PUSH_WAIT_S=0 \
    bash -c '. "$1/runner/box/status.sh"; box_status "$2"' _ "$REPO" "$phase" 2>/dev/null
}

@test "logs JOB: the STATUS line, then the box's train.log as the box copied it" {
  box TRAINING "hearsay train: fold3 step 1/8 epoch 1/2 loss 0.6931" \
    "hearsay train: fold3 readout step 4/8 epoch 1/2 auc 0.8100 eer 0.2000 min_dcf 0.4100 n 40"
  run "$REPO/runner/logs.sh" fold3
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == "STATUS g-7 TRAINING "* ]]
  [ "${lines[1]}" = "hearsay train: fold3 step 1/8 epoch 1/2 loss 0.6931" ]
  [ "${lines[2]}" = "hearsay train: fold3 readout step 4/8 epoch 1/2 auc 0.8100 eer 0.2000 min_dcf 0.4100 n 40" ]
  [ "${#lines[@]}" -eq 3 ]
}

@test "logs JOB -f prints each new line once, and the new STATUS, until DONE" {
  box TRAINING "line 1"
  "$REPO/runner/logs.sh" fold3 -f >"$W/out" 2>"$W/err" &
  pid=$!
  for _ in $(seq 50); do grep -q "line 1" "$W/out" && break; sleep 0.1; done
  box TRAINING "line 2" "line 3"
  for _ in $(seq 50); do grep -q "line 3" "$W/out" && break; sleep 0.1; done
  box DONE "line 4"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$pid" 2>/dev/null || { kill "$pid"; false; }   # it ended by itself at DONE
  wait "$pid"
  run grep -v '^STATUS' "$W/out"
  [ "$output" = "$(printf 'line 1\nline 2\nline 3\nline 4')" ]
  run grep -c '^STATUS g-7 TRAINING ' "$W/out"
  [ "$output" -ge 1 ]   # TRAINING (again when its second write fell in a new second: a new line)
  run grep -c '^STATUS g-7 DONE ' "$W/out"
  [ "$output" -eq 1 ]   # then DONE, printed before it ends
  [ ! -s "$W/err" ]
}

@test "a log of another generation than the STATUS is said; a box that has no log yet too" {
  put() { printf '%s\n' "$2" >"$RUNS/fold3/$1"; }
  mkdir -p "$RUNS/fold3"
  put STATUS "g-8 STARTED 1796000000"
  run "$REPO/runner/logs.sh" fold3
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "(no train.log in the store yet: the box copies it at each heartbeat)" ]
  printf '# g-7 train.log\nold line\n' >"$RUNS/fold3/train.log"
  run "$REPO/runner/logs.sh" fold3
  [ "${lines[1]}" = "(log of generation g-7; the STATUS above is of g-8)" ]
  [ "${lines[2]}" = "old line" ]
}

@test "no STATUS is exit 3 naming the path; usage errors are exit 2; --help prints the usage" {
  run "$REPO/runner/logs.sh" fold3
  [ "$status" -eq 3 ]
  [ "$output" = "runner: no STATUS for job fold3 at $RUNNER_STORE/runs/$RUNNER_OPERATOR/fold3/STATUS (or the store cannot be read) (check RUNNER_STORE and RUNNER_RCLONE_CONF)" ]
  run "$REPO/runner/logs.sh"
  [ "$status" -eq 2 ]
  run "$REPO/runner/logs.sh" fold3 full
  [ "$status" -eq 2 ]
  run "$REPO/runner/logs.sh" fold3 --tail
  [ "$status" -eq 2 ]
  run "$REPO/runner/logs.sh" --help
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "Usage: runner/logs.sh JOB [-f]" ]
}
