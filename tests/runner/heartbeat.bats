#!/usr/bin/env bats
# Liveness: the box's chain writes RUN_PATH/HEARTBEAT ("GEN SEQ EPOCH") every HEARSAY_HEARTBEAT_S;
# runner/reaper.sh ends a PROVISIONED box whose heartbeat of its generation shows no progress for its
# contract's heartbeat_stale_s on the laptop's monotonic clock, over two looks, with a REASON line
# (runner/lib/judge.sh), once the box said it beats (beats=yes in its STATUS line). No heartbeat at
# all is unknown, never dead.

load helpers

setup() { world; }
teardown() { world_end; }

beat() { mkdir -p "$RUNS/$1"; echo "$2" >"$RUNS/$1/HEARTBEAT"; }
mono() { cut -d. -f1 /proc/uptime; }   # the judge's monotonic clock (runner/lib/judge.sh mono_now)
heartbeat_of() { cat "$RUNS/$1/HEARTBEAT" 2>/dev/null || true; }
seq_of() { heartbeat_of "$1" | cut -d' ' -f2; }
seq_past() { [ "$(seq_of "$1")" -gt "$2" ] 2>/dev/null; }

# kill_tree PID: SIGKILL PID and everything under it (a chain killed without its EXIT trap). Each
# process is stopped before its children are listed, so none can fork one the listing misses (on a
# loaded machine such a child outlived the kill and carried the chain's steps on).
kill_tree() {
  local c
  kill -STOP "$1" 2>/dev/null || true
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
  kill -KILL "$1" 2>/dev/null || true
}

@test "the chain beats from its first phase on, SEQ counting up, and stops once it is killed without its trap" {
  box_world
  echo "HEARSAY_HEARTBEAT_S=0.2" >>"$box/job.env"
  FAKE_TRAIN_S=30 "$REPO/runner/box/entry.sh" "$box" >"$W/entry.out" 2>&1 3>&- &
  wait_for 20 seq_past pilot 3
  [[ "$(heartbeat_of pilot)" =~ ^g-7\ [0-9]+\ [0-9]{10}$ ]]
  wait_for 20 grep -q "g-7 TRAINING" "$W/entry.out"
  kill -KILL "$(cat "$box/entry.pid")"                            # entry.sh alone: its EXIT trap never runs
  sleep 0.5
  was=$(seq_of pilot)
  sleep 1
  kill_tree "$(cat "$box/train.pid")"
  [ "$(seq_of pilot)" = "$was" ]                                  # no beat after the chain died
  [ "$(cut -d' ' -f2 <<<"$(status_of pilot)")" = TRAINING ]        # and STATUS stays where it was
}

@test "a heartbeat unchanged for RUNNER_HEARTBEAT_STALE_S: the box is destroyed with a REASON line, its row completed" {
  export RUNNER_HEARTBEAT_STALE_S=60
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 TRAINING 1764460000 beats=yes"
  beat pilot "g-1 41 1764460000"
  run reaper_once                                                  # first look: noted, kept
  [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id" ]
  [ "$(cut -d' ' -f4- "$RUNNER_STATE/jobs/pilot/beat")" = "g-1 41 1764460000" ]
  run reaper_once                                                  # unchanged, but under 60 s: kept
  [ "$(live_ids)" = "$id" ]
  echo "$(($(date -u +%s) - 45)) $(($(mono) - 45)) 3 g-1 41 1764460000" >"$RUNNER_STATE/jobs/pilot/beat"   # 45 s ago: kept
  run reaper_once
  [ "$(live_ids)" = "$id" ]
  echo "$(($(date -u +%s) - 70)) $(($(mono) - 70)) 3 g-1 41 1764460000" >"$RUNNER_STATE/jobs/pilot/beat"   # first seen 70 s ago
  run reaper_once
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"runner: job pilot: REASON heartbeat unchanged for 7"?" s (last: 41 1764460000), limit heartbeat_stale_s=60 s: its chain stopped without its exit trap (killed, out of memory, or the container restarted); destroying instance $id"* ]]
  [ "$(live_count)" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/pilot-g-1-*/result)" = HEARTBEAT ]
  grep -q "heartbeat unchanged" "$RUNNER_STATE"/archive/pilot-g-1-*/why
  [ "$(open_rows)" -eq 0 ]
}

@test "a box that keeps beating is never ended, however long it runs past the limit" {
  export RUNNER_HEARTBEAT_STALE_S=1
  id=$(rent fold2 PROVISIONED g-2)
  put_status fold2 "g-2 TRAINING 1764460000 beats=yes"
  for n in 1 2 3 4 5 6; do
    beat fold2 "g-2 $n 17644600$n"
    run reaper_once
    [ "$status" -eq 0 ]
    sleep 0.6
  done
  [ "$(live_ids)" = "$id" ]
  [ -d "$RUNNER_STATE/jobs/fold2" ]
}

@test "no heartbeat of the record's generation (none, or another generation's) is unknown, never dead: judged by STATUS and deadline" {
  export RUNNER_HEARTBEAT_STALE_S=1
  id=$(rent fold1 PROVISIONED g-new)
  beat fold1 "g-old 900 1764460000"                               # an image that never beats, another's line
  put_status fold1 "g-new TRAINING 1764460000 beats=yes"
  for _ in 1 2 3 4; do
    run reaper_once
    [ "$status" -eq 0 ]
    sleep 0.6
  done
  [ "$(live_ids)" = "$id" ]
  [[ "$output" != *REASON* ]]
  put_status fold1 "g-new DONE 1764460000"                        # its STATUS still ends it
  run reaper_once
  [ "$(live_count)" -eq 0 ]
  [ "$(cat "$RUNNER_STATE"/archive/fold1-g-new-*/result)" = DONE ]
}

@test "an image that does not say it beats (a STATUS line without beats=yes) is judged by STATUS and deadline: a stale heartbeat never ends it" {
  export RUNNER_HEARTBEAT_STALE_S=1
  id=$(rent pilot PROVISIONED g-6)
  put_status pilot "g-6 TRAINING 1764460000"                       # an image older than the word
  beat pilot "g-6 1 1764460000"
  for _ in 1 2 3; do run reaper_once; [ "$status" -eq 0 ]; sleep 0.6; done
  [ "$(live_ids)" = "$id" ]
  [[ "$output" != *REASON* ]]
  put_status pilot "g-6 TRAINING 1764460000 beats=yes"             # the box's word: now it is judged by its beats
  run reaper_once
  run reaper_once
  sleep 1.2
  run reaper_once
  echo "$output"
  [[ "$output" == *"REASON heartbeat unchanged for "* ]]
  [ "$(live_count)" -eq 0 ]
}

@test "a +1000 s step of the laptop's wall clock between two looks destroys nothing: staleness runs on a monotonic clock" {
  export RUNNER_HEARTBEAT_STALE_S=900
  id=$(rent pilot PROVISIONED g-4)
  put_status pilot "g-4 TRAINING 1764460000 beats=yes"
  beat pilot "g-4 7 1764459972"                                   # it beat 28 s ago
  run reaper_once
  [ "$(live_ids)" = "$id" ]
  mkdir -p "$W/stepped"
  printf '#!/bin/sh\nif [ "$*" = "-u +%%s" ]; then echo $(( $(%s -u +%%s) + 1000 )); else exec %s "$@"; fi\n' \
    "$(command -v date)" "$(command -v date)" >"$W/stepped/date"
  chmod +x "$W/stepped/date"
  [ $(( $(PATH="$W/stepped:$PATH" date -u +%s) - $(date -u +%s) )) -ge 999 ]   # the step is real for the runner
  for _ in 1 2 3; do
    PATH="$W/stepped:$PATH" run reaper_once
    echo "$output"
    [ "$status" -eq 0 ]
  done
  [ "$(live_ids)" = "$id" ]
  [[ "$output" != *REASON* ]]
}

@test "each record is read at its own store: a reaper started with another RUNNER_STORE still sees its STATUS and heartbeat" {
  export RUNNER_HEARTBEAT_STALE_S=1
  id=$(rent fold3 PROVISIONED g-5)
  printf 'store=%s\nrun_path=%s\ngen=g-5\ndeadline=%s\ncampaign_deadline=\ngrace_s=720\nheartbeat_s=60\nheartbeat_stale_s=1\nbeats=yes\ndph=0.5\n' \
    "$RUNNER_STORE" "$RUNNER_STORE/runs/$RUNNER_OPERATOR/fold3" $(($(date -u +%s) + 3600)) >"$RUNNER_STATE/jobs/fold3/contract"
  mkdir -p "$W/bucket/other"
  put_status fold3 "g-5 TRAINING 1764460000 beats=yes"
  for n in 1 2 3 4; do                                             # it beats: another store's reaper keeps it
    beat fold3 "g-5 $n 176446000$n"
    RUNNER_STORE="store:$W/bucket/other" run reaper_once
    [ "$status" -eq 0 ]
    sleep 0.6
  done
  [ "$(live_ids)" = "$id" ]
  put_status fold3 "g-5 DONE 1764460000"
  RUNNER_STORE="store:$W/bucket/other" run reaper_once
  echo "$output"
  [[ "$output" == *"job fold3: STATUS DONE (generation g-5)"* ]]
  [ "$(live_count)" -eq 0 ]
}

@test "a store that cannot be read is unknown, never a stale heartbeat; RUNNER_HEARTBEAT_STALE_S=0 turns the check off" {
  export RUNNER_HEARTBEAT_STALE_S=1
  id=$(rent pilot PROVISIONED g-3)
  put_status pilot "g-3 TRAINING 1764460000 beats=yes"
  beat pilot "g-3 1 1764460000"
  run reaper_once
  sleep 1.2
  RUNNER_RCLONE=false run reaper_once                            # every store read fails
  [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id" ]
  RUNNER_HEARTBEAT_STALE_S=0 run reaper_once
  [ "$(live_ids)" = "$id" ]
  run reaper_once                                                  # a second look at the unchanged line
  run reaper_once
  [ "$(live_count)" -eq 0 ]
}

@test "a launched box whose chain is killed without its trap is ended by the reaper long before its deadline" {
  export FAKE_TRAIN_S=60 RUNNER_HEARTBEAT_S=0.3 RUNNER_HEARTBEAT_STALE_S=3
  run launch --yes pilot
  echo "$output"; [ "$status" -eq 0 ]
  id=${lines[-1]}
  port=$(cut -d: -f2 "$RUNNER_STATE/jobs/pilot/ssh")
  wait_for 10 seq_past pilot 1
  kill_tree "$(cat "$W/boxes/box-$port/run/entry.pid")"
  t0=$(date +%s)
  for _ in $(seq 1 30); do
    "$REPO/runner/reaper.sh" --once >>"$W/reaper.out" 2>&1 3>&- || true
    [ -d "$RUNNER_STATE/jobs/pilot" ] || break
    sleep 0.5
  done
  cat "$W/reaper.out"
  [ ! -d "$RUNNER_STATE/jobs/pilot" ]
  [ $(($(date +%s) - t0)) -lt 30 ]                                 # the deadline is hours away
  grep -q "job pilot: REASON heartbeat unchanged for" "$W/reaper.out"
  [ "$(live_count)" -eq 0 ]
  [ "$(open_rows)" -eq 0 ]
}
