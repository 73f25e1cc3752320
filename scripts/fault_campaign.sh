#!/usr/bin/env bash
# Usage: scripts/fault_campaign.sh [--scenarios N] [--seed S] [--jobs J] [--keep DIR] [--only I[,I...]] [--from I] [--campaign-every K]
# Summary: seeded random fault scenarios against the runner; prints instances left, ledger rows vs creations, secrets seen, healthy boxes destroyed
#
# Each scenario gets its own fake vast.ai API (tests/fakes/fake_vast.py, real vastai CLI), its own
# local rclone store, sandbox boxes (tests/runner/bin/fake_ssh.sh) and runner state. It draws, from
# its seed: faults at every API step (listing errors, {}, null, empty and non-JSON answers, 429s,
# creates that fail with or without an instance, creates dropped after renting that the CLI resends
# (up to 3 boxes per launch, maybe none answered), destroys failing N times, listing lag after
# destroy), ssh failures, a failing smoke check or trainer, a launcher killed (SIGKILL) at a random
# moment, a relaunch under the same job name, and deadlines that run out. Then the faults stop (a
# service recovers) and runner/reaper.sh --once runs until no job record is left, nothing is listed
# or still landing, and no ledger row waits in the spool (at most 30 cycles).
# Counted per scenario and in total: our instances still live on the fake, ledger rows vs instances
# the fake created for us (the boxes another operator rents on the account, the churn fault's
# "someone-else", are not ours: one the runner ended counts as a healthy box destroyed), unseen
# creates (rows id unseen:LABEL: a create whose answer never came, judged after its box's
# provision-by, its box if any gone unseen), creations without a row (neither by id nor by an unseen
# row for its label), ledger rows left open, secrets (API key, store secret) seen in any output, log,
# temp file or process list (sampled every 0.2 s). Goal: 0 left, 0 creations without a row, no more
# rows than creations, 0 open, 0 secrets, 0 healthy boxes destroyed, 0 DONE without the run, every
# box of a gone laptop ended by itself.
#
# Every K-th scenario (--campaign-every, default 5; 0 = none) is a whole campaign instead of one
# launch: a pilot, then a job per fold of the stand-in bundle (its meta's n_folds: five) and full
# launched at the same time, a looping reaper
# started by the first launch (RUNNER_REAPER_MODE=start). Any scenario may also draw: the state
# folder or the ledger's folder on a small tmpfs that fills up mid-run and is freed later (root
# only; otherwise not drawn), empty locks left behind (ledger, launch, reaper), two TERMs to a
# launcher, a create that lands late (answered with an error, rented 8 s after that answer: inside
# the label window, RUNNER_LABEL_LAG_S=20 here, the runner's bound on how long after it is asked a
# create can land; the CLI's own seconds under load count too),
# the looping reaper SIGKILLed and restarted, a launcher's pid reused by another process, and a
# vanished laptop (every launcher and the reaper SIGKILLed; the boxes end at their own deadline);
# others renting between two pages of a listing, a failed destroy answered by empty pages, a lying
# `show instance`, and launchers and reapers in different time zones and locales (gone_faults, tz).
# Box-side kinds (drawn after all of the above): the chain killed without its exit trap mid-run
# (entry.sh alone: the box's on-start guard ends it; or every process of the box, guard included:
# the reaper ends it on its stale heartbeat), a store that acknowledges pushes and keeps nothing or
# loses one file, the laptop gone after the create and before provisioning (no reaper runs until
# its boxes have ended themselves: each runs its create's on-start guard from boot, through
# tests/runner/bin/fake_boot.sh), and a ledger whose folder does not exist yet. Also counted: healthy
# boxes destroyed (ended for a dead chain in a scenario that killed none), DONE in the store without
# the run's run_meta.json, and boxes of a gone laptop that did not end themselves.
# Rows count rentals (distinct ids; the ledger is append-only), open = ids whose last row is not a
# closing row (a box re-adopted after it was judged gone has a re-open row until it ends);
# secrets are searched in every file of the scenario's folder but the store's own rclone.conf copies.
#
# Scenario I is drawn from the seed and I alone (and --campaign-every), so --from I (run I..N)
# continues a stopped run and --only I,J,... replays just those scenarios. J scenarios run at a
# time; a finished one makes room for the next. Each scenario's result line goes to DIR/rI.txt.
#
# A long run, stopped and continued: `--scenarios 400 --keep DIR` (stopped at any point: ^C, a
# reboot), then `--scenarios 400 --keep DIR --from I` with the same --seed and --campaign-every
# (DIR/campaign.args holds them; a continuation with others is refused, exit 2). I is the first
# scenario without a result (the summary of the stopped run, or of `--from N+1`, which runs
# nothing, names them). With --keep the summary counts the result of every scenario 1..N found in
# DIR (rI.txt: earlier runs' results count), and names each one missing (no rI.txt, or one without
# its result line: a scenario cut off by the stop), which misses the goal; the seconds are this
# run's. Without --keep it counts the scenarios of this run (--from I: I..N). --only narrows both.
#
# The last line also says how many scenarios rented a box at all: on an overloaded machine the CLI
# calls time out before any create, and such a scenario proves nothing.
# Exit codes: 0 goal met; 1 goal missed (the failing and the missing scenarios are named); 2 usage,
#   or --keep DIR holds a campaign of another --seed or --campaign-every.

# shellcheck disable=SC2030,SC2031  # each scenario's world is a subshell on purpose, its helpers run in it
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
repo=$(cd "$(dirname "$0")/.." && pwd)
n=200 seed=1 jobs=2 keep="" only="" from=1 every=5
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) sed -n '2,/^[^#]*$/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
    --scenarios) n=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    --campaign-every) every=$2; shift 2 ;;
    *) echo "fault_campaign: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
export PATH="$repo/.venv/bin:$PATH"
for c in jq curl vastai rclone python3; do
  command -v "$c" >/dev/null || { echo "fault_campaign: missing $c (make install; scripts/system-deps.sh)" >&2; exit 2; }
done
for v in "$n" "$seed" "$jobs" "$from" "$every"; do
  case $v in '' | *[!0-9]*) echo "fault_campaign: $v is not a whole number (see --help)" >&2; exit 2 ;; esac
done
# our boxes still live in the fake's state: another operator's (the churn fault's "someone-else")
# are no rentals of ours
OURS_LIVE='[.instances[] | select(.label != "someone-else" and .destroyed_at == null)] | length'
top=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/fault_campaign.XXXXXX")}
mkdir -p "$top"
# what draws the scenarios: a continuation in the same folder must draw the same ones
args="seed=$seed campaign-every=$every"
if [ -s "$top/campaign.args" ] && [ "$(cat "$top/campaign.args")" != "$args" ]; then
  echo "fault_campaign: $top holds a campaign of $(cat "$top/campaign.args"), not $args: continue it with those, or use another --keep folder" >&2
  exit 2
fi
echo "$args" >"$top/campaign.args"

# gone_faults: the faults aimed at the rule for "gone" and at paging, each its own draw (drawn after
# every older fault, so older stories replay): others renting between two pages of a listing
# (churn), a destroy that fails while listings come back as empty pages (baddestroy+emptypage), and
# a `show instance` that answers "no such instance" for boxes that run (lyingshow). Uses scenario's add.
gone_faults() {
  local r
  r=$((RANDOM % 100)); [ $r -lt 10 ] && add '{"op":"list","kind":"churn","prob":0.3,"times":8}' churn
  r=$((RANDOM % 100)); [ $r -lt 8 ] && { add '{"op":"destroy","kind":"error","times":3}' baddestroy
    add '{"op":"list","kind":"error","status":200,"body":{"instances":[],"total_instances":0},"prob":0.5,"times":6}' emptypage; }
  r=$((RANDOM % 100)); [ $r -lt 8 ] && add '{"op":"show","kind":"error","status":200,"body":{"instances":null},"times":4}' lyingshow
  return 0
}

# kill_named SIGNAL PIDFILE WORD: signal the pid a pid or lock-owner file names (its first word),
# only while that process's command line still holds WORD. A box or reaper that ended long ago left
# its pid behind, and pids wrap (pid_max): by now it can name another scenario's fake API.
kill_named() {
  local pid cmd
  pid=$(cut -d' ' -f1 "$2" 2>/dev/null) || return 0
  case $pid in '' | *[!0-9]*) return 0 ;; esac
  cmd=$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || return 0   # gone: nothing to signal
  case $cmd in *"$3"*) kill "-$1" "$pid" 2>/dev/null || true ;; esac
}

# scenario I SEED: one world, one story; prints "I seed=S story | left=L created=C rows=R unseen=U
# missing=M open=O ... secrets=X".
scenario() {
  local i=$1 s=$2 W key secret rules story="" job kind r kill_at relaunch sampler lp
  RANDOM=$s
  W="$top/s$i"
  rm -rf "$W"
  mkdir -p "$W/home" "$W/state" "$W/boxes" "$W/bucket" "$W/tmp"
  # the secrets: drawn from the seed as ever (so the stories after them replay), and each made this
  # run's own by a nonce, so two runs of one seed at once (CI runs tests side by side) never hold
  # the same key: one's sampler would count the other's fake API's command line
  local nonce
  nonce=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  key="vastkey-SECRET-$s-$RANDOM$RANDOM-$nonce"
  secret="r2-SECRET-$s-$RANDOM$RANDOM-$nonce"
  # --- faults, drawn per step ---------------------------------------------------------------------
  rules="[]"
  add() { rules=$(jq -c --argjson r "$1" '. + [$r]' <<<"$rules"); story="$story $2"; }
  local p1 p2 p3 p4 p5 smoke="" kind="" kill_at=""
  pick p1 error empty_object null empty non_json rate_limit truncated
  pick p2 error success_false empty non_json
  pick p3 true false
  pick p4 error rate_limit empty_object success_false
  pick p5 error null empty_object
  r=$((RANDOM % 100)); [ $r -lt 30 ] && add "{\"op\":\"list\",\"kind\":\"$p1\",\"times\":$((1 + RANDOM % 4)),\"skip\":$((RANDOM % 6))}" list
  r=$((RANDOM % 100)); [ $r -lt 15 ] && add '{"op":"list","kind":"error","prob":0.3,"times":null}' list~
  r=$((RANDOM % 100)); [ $r -lt 15 ] && add "{\"op\":\"create\",\"kind\":\"$p2\",\"create\":$p3}" create
  r=$((RANDOM % 100)); [ $r -lt 30 ] && add "{\"op\":\"destroy\",\"kind\":\"$p4\",\"times\":$((1 + RANDOM % 6))}" destroy
  r=$((RANDOM % 100)); [ $r -lt 8 ] && add "{\"op\":\"user\",\"kind\":\"$p5\"}" user
  r=$((RANDOM % 100)); [ $r -lt 5 ] && add '{"op":"offers","kind":"error"}' offers
  local lag=0; r=$((RANDOM % 100)); [ $r -lt 30 ] && { lag=$((1 + RANDOM % 4)); story="$story lag$lag"; }
  local stuck=false; r=$((RANDOM % 100)); [ $r -lt 7 ] && { stuck=true; story="$story stuck"; }
  # creates whose connection drops after renting: the CLI resends them (1-2: the last attempt answers,
  # 3: every attempt fails and 3 boxes carry the label); drawn last so the draws above replay unchanged
  local drops; r=$((RANDOM % 100)); [ $r -lt 12 ] && { drops=$((1 + RANDOM % 3)); add "{\"op\":\"create\",\"kind\":\"drop\",\"apply\":true,\"times\":$drops}" "drop$drops"; }
  # the faults the single-launch draws above never reached (drawn after them: old stories replay)
  local campaign=0
  [ "$every" -gt 0 ] && [ $((i % every)) -eq 0 ] && { campaign=1; story=" CAMPAIGN$story"; }
  r=$((RANDOM % 100)); [ $r -lt 10 ] && { add '{"op":"create","kind":"late","delay_s":8}' slowcreate; }
  gone_faults
  # the box-side faults (drawn after all of the above, so older stories replay unchanged)
  local killchain="" storedrop="" gone=0 noledgerdir=0
  draw_box_faults
  # --- the world ----------------------------------------------------------------------------------
  (
    # shellcheck disable=SC2030  # local to this subshell on purpose
    RANDOM=$((s + 1))   # a subshell reseeds RANDOM (bash >= 5.1): seed it again so stories replay
    export HOME=$W/home XDG_CONFIG_HOME=$W/home/.config XDG_CACHE_HOME=$W/home/.cache VAST_API_KEY=$key
    export VASTAI_NO_UPDATE_CHECK=1 FAKE_BOX_ROOT=$W/boxes RUNNER_STATE=$W/state LEDGER=$W/ledger.csv
    export TMPDIR=$W/tmp   # the runner's temp files (listings, answers) are searched for secrets too
    # every box runs its create's on-start guard (runner/box/onstart.sh) from boot (bin/fake_boot.sh)
    export HEARSAY_GUARD_POLL_S=0.3 HEARSAY_PUSH_WAIT_S=0.1 FAKE_BOOT_PASS="HEARSAY_GUARD_POLL_S HEARSAY_PUSH_WAIT_S"
    "$repo/tests/fakes/start_fake_vast.sh" "$W/url" "$W/fake.pid" --api-key "$key" --seed "$s" \
      --set created_s=0.2 --set loading_s=0.3 --set lag_listings="$lag" --set stuck_loading="$stuck" \
      --set boot_cmd="$repo/tests/runner/bin/fake_boot.sh" --faults "$rules" >/dev/null 2>&1 3>&-
    VAST_URL=$(cat "$W/url")
    export VAST_URL
    export RUNNER_SSH="$repo/tests/runner/bin/fake_ssh.sh" RUNNER_RCLONE_CONF=$W/rclone.conf
    export RUNNER_STORE="store:$W/bucket/hearsay" RUNNER_IMAGE="registry.invalid/hearsay-trainer@sha256:campaign"
    (umask 077; printf '[store]\ntype = local\nsecret_access_key = %s\n' "$secret" >"$RUNNER_RCLONE_CONF")
    export RUNNER_OFFER_QUERY="num_gpus=1" RUNNER_CLI_TIMEOUT_S=60 RUNNER_POLL_S=0.3 RUNNER_CONFIRM_WAIT_S=0.1
    export RUNNER_CONFIRM_CHECKS=2 RUNNER_DESTROY_TRIES=2 RUNNER_BOOT_DEADLINE_S=12 RUNNER_CHAIN_DEADLINE_S=10
    export RUNNER_LABEL_LAG_S=20 RUNNER_SSH_TIMEOUT_S=15 RUNNER_HOLD_TTL_S=20
    export RUNNER_LOCK_STALE_S=5 RUNNER_ORPHAN_GRACE_S=2 RUNNER_REAPER_MODE=off RUNNER_LEDGER_TRIES=3
    export RUNNER_HEARTBEAT_S=0.5 RUNNER_HEARTBEAT_STALE_S=8 RUNNER_PROVISION_SLACK_S=0
    export RUNNER_BOX_TRAIN="$repo/tests/runner/bin/fake_train.sh" HEARSAY_PUSH_WAIT_S=0.1 HEARSAY_BOX_WAIT_S=20
    # what reaches a box (fake_ssh.sh starts it from an empty environment): the test image's smoke
    # check in its container environment, the fakes' knobs and timings in the ssh session
    export HEARSAY_SCORE_RUN="$repo/tests/runner/bin/fake_score.sh"   # the fake run has no model to score
    export FAKE_IMAGE_EXTRA="HEARSAY_SMOKE_CHECK HEARSAY_SCORE_RUN"
    export FAKE_SSH_PASS="VAST_URL FAKE_TRAIN_S FAKE_TRAIN_RC HEARSAY_PUSH_WAIT_S HEARSAY_BOX_WAIT_S HEARSAY_STOP_WAIT_S HEARSAY_RCLONE FAKE_STORE_DROP"
    export RUNNER_BUNDLE_META=$W/bundle/bundle_meta.json RUNNER_TRAIN_CONFIG=$W/train.json
    # a stand-in bundle with its real tree-sha, in the store and VERIFIED (as runner/bundle_put.sh
    # leaves it): the launcher refuses without it and the box checks what it pulls
    mkdir -p "$W/bundle/audio" && echo "id,path,label" >"$W/bundle/manifest.csv" && echo x >"$W/bundle/audio/a.flac"
    tsha=$(bash -c '. "$1/runner/lib/bundles.sh" && local_tree_sha "$2"' _ "$repo" "$W/bundle")
    nf=5   # its fold file's n_folds, recorded in its meta: the campaign launches fold 0..nf-1 and full
    printf '{"tree_sha": "%s", "folds": {"config": {"n_folds": %d}}}\n' "$tsha" "$nf" >"$RUNNER_BUNDLE_META"
    mkdir -p "$W/bucket/hearsay/bundles" && cp -R "$W/bundle" "$W/bucket/hearsay/bundles/$tsha"
    echo "$tsha" >"$W/bucket/hearsay/bundles/$tsha/VERIFIED"
    echo '{"train": {"epochs": 1}}' >"$RUNNER_TRAIN_CONFIG"
    pick FAKE_TRAIN_S 0.2 1 3
    pick FAKE_TRAIN_RC 0 0 0 1
    pick smoke smoke_ok.sh smoke_ok.sh smoke_ok.sh smoke_fail.sh
    HEARSAY_SMOKE_CHECK="$repo/tests/runner/bin/$smoke"
    export FAKE_TRAIN_S FAKE_TRAIN_RC HEARSAY_SMOKE_CHECK
    r=$((RANDOM % 100)); [ $r -lt 20 ] && { echo $((1 + RANDOM % 2)) >"$W/boxes/ssh_fail"; story="$story ssh"; }
    r=$((RANDOM % 100)); if [ $r -lt 20 ]; then export RUNNER_HOURS_PROBE=0.0005 RUNNER_HOURS_FOLD=0.0005 RUNNER_HOURS_PILOT=0.0005; story="$story deadline"; fi
    # --- extra faults, drawn inside the world ------------------------------------------------------
    local full="" locks=0 sig2=0 pidreuse=0 rkill=0 vanish=0 mnt=""
    r=$((RANDOM % 100)); [ $r -lt 12 ] && [ "$(id -u)" = 0 ] && pick full state ledger
    r=$((RANDOM % 100)); [ $r -lt 15 ] && locks=1
    r=$((RANDOM % 100)); [ $r -lt 15 ] && sig2=1
    r=$((RANDOM % 100)); [ $r -lt 10 ] && pidreuse=1
    r=$((RANDOM % 100)); [ $r -lt 15 ] && rkill=1
    r=$((RANDOM % 100)); [ $r -lt 8 ] && vanish=1
    if [ -n "$full" ]; then
      mnt=$W/mnt
      mkdir -p "$mnt"
      if mount -t tmpfs -o size=512k tmpfs "$mnt" 2>/dev/null; then
        story="$story full-$full"
        if [ "$full" = state ]; then export RUNNER_STATE=$mnt/state; else export LEDGER=$mnt/ledger.csv; fi
        mkdir -p "$RUNNER_STATE"
      else
        mnt=""
      fi
    fi
    if [ "$locks" = 1 ]; then
      story="$story emptylocks"
      mkdir -p "$RUNNER_STATE" "$(dirname "$LEDGER")"
      mkdir -p "$LEDGER.lock" "$RUNNER_STATE/launch.lock" "$RUNNER_STATE/reaper.lock"
      touch -d "@$(($(date +%s) - 60))" "$LEDGER.lock" "$RUNNER_STATE/launch.lock" "$RUNNER_STATE/reaper.lock"
    fi
    if [ "$vanish" = 1 ]; then   # short deadlines and long training: only the box's own deadline ends it
      story="$story vanish"
      export RUNNER_HOURS_PROBE=0.002 RUNNER_HOURS_FOLD=0.002 RUNNER_HOURS_PILOT=0.002 RUNNER_HOURS_FULL=0.002
      export FAKE_TRAIN_S=40 HEARSAY_STOP_WAIT_S=1
    fi
    # launchers in one zone and locale, the reapers in another, on the ps path (as a machine
    # without /proc): process identity must not depend on either (drawn last: old stories replay)
    local reaper_tz=""
    r=$((RANDOM % 100)); if [ $r -lt 12 ]; then
      export TZ=Asia/Tokyo LC_ALL=C.UTF-8 RUNNER_PROC_ROOT=$W/no-proc
      reaper_tz=XST+11
      story="$story tz"
    fi
    [ "$sig2" = 0 ] || story="$story sig2"
    [ "$pidreuse" = 0 ] || story="$story pidreuse"
    [ "$rkill" = 0 ] || story="$story reaperkill"
    # process-list sampler: a secret on any command line is counted, except the fake's own (the harness
    # gives the fake its account key by --api-key, through start_fake_vast.sh: not the runner)
    # shellcheck disable=SC2009  # pgrep cannot print whole command lines portably
    ( exec 3>&- ; while :; do ps -eo args 2>/dev/null | grep -e "$key" -e "$secret" | grep -v -e grep -e fake_vast.py -e start_fake_vast.sh >>"$W/ps_hits" || true; sleep 0.2; done ) &
    sampler=$!
    # a harness command that fails ends the scenario without its result line (the summary names it
    # missing): its line goes to rI.err, and the sampler goes with it
    trap 'echo "scenario $i: a harness command failed at line $LINENO (exit $?): no result" >&2' ERR
    trap 'kill "$sampler" 2>/dev/null || true' EXIT
    if [ -n "$mnt" ]; then       # the disk fills up mid-run, and is freed a little later
      ( exec 3>&-; sleep "$((1 + RANDOM % 6))"; head -c 2000000 /dev/zero >"$mnt/fill" 2>/dev/null
        sleep "$((3 + RANDOM % 8))"; rm -f "$mnt/fill" ) &
    fi
    apply_box_faults
    local lps=""
    if [ "$campaign" = 1 ]; then
      export RUNNER_REAPER_MODE=start
      "$repo/runner/launch.sh" --yes pilot >"$W/launch-pilot.out" 2>"$W/launch-pilot.err" 3>&- || true
      local fjobs=() k
      for ((k = 0; k < nf; k++)); do fjobs+=("fold $k"); done
      for job in "${fjobs[@]}" full; do
        # shellcheck disable=SC2086  # job is "fold 3"
        "$repo/runner/launch.sh" --yes --no-pilot-gate $job >"$W/launch-${job// /}.out" 2>"$W/launch-${job// /}.err" 3>&- &
        lps="$lps $!"
      done
    else
      [ "$rkill" = 0 ] || export RUNNER_REAPER_MODE=start
      pick kind probe pilot fold
      job=$kind
      [ "$kind" = fold ] && job="fold $((RANDOM % nf))"
      story="$story $kind"
      # shellcheck disable=SC2086  # job is "fold 3"
      "$repo/runner/launch.sh" --yes --no-pilot-gate $job >"$W/launch1.out" 2>"$W/launch1.err" 3>&- &
      lps=$!
    fi
    kill_at=""
    r=$((RANDOM % 100)); [ $r -lt 30 ] && { pick kill_at 1 2 4 6 9 12; story="$story kill@$kill_at"; }
    local t_sig1 t_sig2 t_rk lp rk=""
    t_sig1=$((1 + RANDOM % 8)) t_sig2=$((1 + RANDOM % 4)) t_rk=$((2 + RANDOM % 8))
    if [ "$sig2" = 1 ]; then     # TERM, then TERM again while the first one's cleanup runs
      ( exec 3>&-; sleep "$t_sig1"; for lp in $lps; do kill -TERM "$lp" 2>/dev/null; done
        sleep "$t_sig2"; for lp in $lps; do kill -TERM "$lp" 2>/dev/null; done ) &
    fi
    if [ "$rkill" = 1 ]; then    # the looping reaper SIGKILLed mid-run, and started again later
      ( exec 3>&-; sleep "$t_rk"; kill_named 9 "$RUNNER_STATE/reaper.lock/owner" reaper.sh; sleep 3
        "$repo/runner/reaper.sh" --background >>"$W/reaper-restart.out" 2>&1 ) &
      rk=$!
    fi
    local killer=""
    [ -z "$killchain" ] || { kill_chains "$killchain" & killer=$!; }
    if [ "$gone" = 1 ]; then   # the laptop vanishes once the box is created, before it is provisioned
      for _ in $(seq 1 200); do grep -qsx -e CREATED -e RUNNING "$RUNNER_STATE"/jobs/*/state && break; sleep 0.1; done
      for lp in $lps; do kill -9 "$lp" 2>/dev/null || true; done
      # no reaper: the box must end itself (its guard, at HEARSAY_PROVISION_BY)
      for _ in $(seq 1 600); do [ "$(curl -fsS "$VAST_URL/_control/state" | jq "$OURS_LIVE")" = 0 ] && break; sleep 0.1; done
      [ "$(curl -fsS "$VAST_URL/_control/state" | jq "$OURS_LIVE")" = 0 ] && selfend=ok || selfend=FAIL
    fi
    if [ -n "$kill_at" ]; then
      sleep "$kill_at"
      for lp in $lps; do kill -9 "$lp" 2>/dev/null || true; done
    fi
    if [ "$vanish" = 1 ]; then   # the laptop is gone: every launcher and the reaper, at once
      sleep 6
      for lp in $lps; do kill -9 "$lp" 2>/dev/null || true; done
      kill_named 9 "$RUNNER_STATE/reaper.lock/owner" reaper.sh
    fi
    for lp in $lps; do wait "$lp" 2>/dev/null || true; done
    if [ "$pidreuse" = 1 ]; then  # a launcher died and its pid now names an unrelated process
      sleep 120 3>&- &
      local reuse=$!
      for d in "$RUNNER_STATE"/jobs/[!.]*; do [ -d "$d" ] && echo "$reuse" >"$d/launcher" 2>/dev/null; done
    fi
    if [ "$vanish" = 1 ]; then sleep 20; fi   # past every deadline: the boxes stop themselves
    relaunch=0
    r=$((RANDOM % 100)); [ $r -lt 30 ] && [ "$campaign" = 0 ] && { relaunch=1; story="$story relaunch"; }
    if [ "$relaunch" = 1 ]; then
      # shellcheck disable=SC2086
      "$repo/runner/launch.sh" --yes --no-pilot-gate $job >"$W/launch2.out" 2>"$W/launch2.err" 3>&- || true
    fi
    wait_fill=0
    while [ -n "$mnt" ] && [ -e "$mnt/fill" ] && [ "$wait_fill" -lt 30 ]; do sleep 1; wait_fill=$((wait_fill + 1)); done
    rm -f "${mnt:-/nonexistent}/fill"
    [ "$rkill" = 0 ] || wait "$rk" 2>/dev/null || true
    [ -z "$killer" ] || wait "$killer" 2>/dev/null || true
    # a looping reaper still running is stopped (TERM): the --once cycles below count alone
    if [ -e "$RUNNER_STATE/reaper.lock/owner" ]; then kill_named TERM "$RUNNER_STATE/reaper.lock/owner" reaper.sh; sleep 1; fi
    # the service recovers; the reaper ends everything
    curl -fsS -X DELETE "$VAST_URL/_control/faults" >/dev/null
    rm -f "$W/boxes/ssh_fail"
    local c=0
    # until no record is left and the account is empty, creates still in flight included (a
    # late create lands after its launcher gave up: only the reaper's sweep can end that box),
    # and no ledger row waits in the spool (a full ledger disk: each cycle appends spooled rows)
    while { live_records "$RUNNER_STATE/jobs" || [ -s "$RUNNER_STATE/ledger.spool" ] \
      || [ "$(curl -fsS "$VAST_URL/_control/state" | jq "($OURS_LIVE) + .late_pending")" != 0 ]; } \
      && [ "$c" -lt 30 ]; do
      c=$((c + 1))
      TZ=${reaper_tz:-${TZ:-UTC0}} "$repo/runner/reaper.sh" --once >>"$W/reaper.out" 2>&1 3>&- || true
      sleep 0.5
    done
    [ "$pidreuse" = 0 ] || kill "$reuse" 2>/dev/null || true
    kill "$sampler" 2>/dev/null || true
    for p in "$W"/boxes/*/run/entry.pid; do kill_named TERM "$p" entry.sh; done
    sleep 0.3
    st=$(curl -fsS "$VAST_URL/_control/state")
    echo "$st" >"$W/fake_state.json"
    kill "$(cat "$W/fake.pid")" 2>/dev/null || true
    # ours: every box but the ones another operator rented on the account (the churn fault's
    # "someone-else"): those are no rental of ours, and the runner must never end one
    left=$(jq "$OURS_LIVE" <<<"$st")
    created=$(jq '[.instances[] | select(.label != "someone-else")] | length' <<<"$st")
    others_ended=$(jq '[.instances[] | select(.label == "someone-else" and .destroyed_at != null)] | length' <<<"$st")
    rows=0 open=0 unseen=0 missing=$created
    if [ -f "$LEDGER" ]; then   # append-only: rentals = distinct ids, open = ids whose last row is not a closing row (a re-opened one is open)
      # rows by instance id; an unseen create's row (id unseen:LABEL: runner/lib/ledger.sh) has no id
      # and stands for the box its label may have rented
      rows=$(awk -F, 'NR > 1 && index($1, "unseen:") != 1 && !($1 in s) { s[$1] = 1; n++ } END { print n + 0 }' "$LEDGER")
      unseen=$(awk -F, 'NR > 1 && index($1, "unseen:") == 1 && !($1 in s) { s[$1] = 1; n++ } END { print n + 0 }' "$LEDGER")
      # missing: a box of ours with neither a row by its id nor an unseen row for its label
      missing=$(jq -r '.instances[] | select(.label != "someone-else") | "\(.id)\t\(.label)"' <<<"$st" \
        | awk -F'\t' 'FILENAME != "-" { split($0, f, ","); if (FNR > 1) have[f[1]] = 1; next }
            !(($1 in have) || (("unseen:" $2) in have)) { m++ } END { print m + 0 }' "$LEDGER" -)
      open=$(awk -F, 'NR > 1 { if (!($1 in s)) { s[$1] = 1; o[++n] = $1 } c[$1] = ($7 != "") }
        END { for (i = 1; i <= n; i++) if (!c[o[i]]) k++; print k + 0 }' "$LEDGER")
      [ -z "$mnt" ] || cp "$LEDGER" "$W/ledger.final.csv" 2>/dev/null || true
    fi
    [ -z "$mnt" ] || { cp -a "$RUNNER_STATE" "$W/state.final" 2>/dev/null; umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null; } || true
    # every file of the scenario but the store's own credentials (rclone.conf and its box copies)
    secrets=$( { grep -r -l -e "$key" -e "$secret" "$W" --exclude=rclone.conf --exclude='rclone.conf.*' --exclude=fake_state.json 2>/dev/null || true; } | wc -l)
    if [ "$secrets" -gt 0 ]; then   # where: each line that holds one, the secret masked (to rI.err)
      grep -r -n -e "$key" -e "$secret" "$W" --exclude=rclone.conf --exclude='rclone.conf.*' --exclude=fake_state.json 2>/dev/null \
        | sed -e "s/$key/<API key>/g" -e "s/$secret/<store secret>/g" | cut -c 1-400 >"$W/secret_lines" || true
      sed "s/^/secret seen: /" "$W/secret_lines" >&2
    fi
    local healthy=0 norun=0
    # a healthy box destroyed: ended for a dead chain (the reaper's HEARTBEAT, the guard's "without
    # its exit trap") in a scenario that killed no chain
    if [ -z "$killchain" ]; then
      healthy=$(( $(cat "$RUNNER_STATE"/archive/*/result "${W}"/state.final/archive/*/result 2>/dev/null | grep -c '^HEARTBEAT' || true) \
        + $(cat "$W"/boxes/box-*/run/onstart.log 2>/dev/null | grep -c 'without its exit trap' || true) ))
    fi
    # a DONE in the store whose run folder holds no complete run (run_meta.json), probes aside
    for f in "$W"/bucket/hearsay/runs/*/STATUS; do
      [ -f "$f" ] || continue
      case $(basename "$(dirname "$f")") in probe) continue ;; esac
      if grep -q ' DONE ' "$f" && ! ls "$(dirname "$f")"/*/*/run_meta.json >/dev/null 2>&1; then norun=$((norun + 1)); fi
    done
    # the laptop gone before provisioning: its boxes must have ended themselves before any reaper ran
    # (a box stuck loading never boots, so never runs its on-start guard: the reaper's, not counted)
    local unended=0
    [ "$selfend" != FAIL ] || [ "$stuck" = true ] || unended=1
    echo "$i seed=$s$story | left=$left created=$created rows=$rows unseen=$unseen missing=$missing open=$open healthy_killed=$((healthy + others_ended)) done_without_run=$norun not_self_ended=$unended secrets=$secrets"
  )
}

# pick VAR CHOICES...: a seeded draw into VAR (no $(...): a subshell would not advance RANDOM here).
pick() {
  local var=$1
  shift
  # shellcheck disable=SC2031  # each scenario subshell seeds RANDOM itself
  shift $((RANDOM % $#))
  printf -v "$var" '%s' "$1"
}

# draw_box_faults: the box-side fault kinds, into the caller's killchain storedrop gone noledgerdir:
#   chain   the chain killed without its trap mid-run: entry.sh alone (the box's guard ends it) or
#           the whole box's processes, guard included (the reaper ends it on its stale heartbeat)
#   drop    a store that acknowledges pushes and keeps nothing, or loses one file (the box: FAIL)
#   gone    the laptop gone after the create, before provisioning (the box ends itself, no reaper)
#   noledgerdir  the ledger's folder does not exist yet
draw_box_faults() {
  local r
  r=$((RANDOM % 100)); [ $r -lt 12 ] && { pick killchain entry box; story="$story killchain-$killchain"; }
  r=$((RANDOM % 100)); [ $r -lt 10 ] && { pick storedrop all model.safetensors; story="$story storedrop-$storedrop"; }
  r=$((RANDOM % 100)); [ $r -lt 8 ] && { gone=1; story="$story gone"; }
  r=$((RANDOM % 100)); [ $r -lt 8 ] && { noledgerdir=1; story="$story noledgerdir"; }
  return 0
}

# apply_box_faults: in the scenario's world (its subshell), before its launch.
apply_box_faults() {
  selfend=""
  if [ -n "$storedrop" ]; then
    export HEARSAY_RCLONE="$repo/tests/runner/bin/rclone_drop.sh" FAKE_STORE_DROP=$storedrop
  fi
  [ "$noledgerdir" = 0 ] || export LEDGER=$W/ledger-not-yet/made/ledger.csv
  if [ -n "$killchain" ]; then export FAKE_TRAIN_S=20; fi   # long enough to be killed mid-run
  if [ "$gone" = 1 ]; then   # the laptop never reaches the box: its ssh hangs
    printf '#!/bin/sh\nexec sleep 30\n' >"$W/ssh_hang.sh"
    chmod +x "$W/ssh_hang.sh"
    export RUNNER_SSH=$W/ssh_hang.sh RUNNER_BOOT_DEADLINE_S=8 RUNNER_SSH_TIMEOUT_S=3
  fi
  return 0
}

# kill_chains entry|box: once a chain trains, SIGKILL its entry.sh (entry), or every process of the
# box, its on-start guard included (box); no EXIT trap runs.
kill_chains() {
  local p n=0 d f
  exec 3>&-
  while [ "$n" -lt 200 ]; do
    n=$((n + 1))
    for d in "$W"/boxes/box-*/run; do
      [ -s "$d/train.pid" ] || continue
      sleep 1
      if [ "$1" = box ]; then
        kill_named 9 "$d/guard.lock/pid" onstart.sh
        kill_named 9 "$d/entry.pid" entry.sh
        kill -9 "$(cat "$d/train.pid" 2>/dev/null)" 2>/dev/null || true   # live: its box trains now
        for p in $(ps -eo pid=,args= | awk -v d="$d" 'index($0, d) { print $1 }'); do kill -9 "$p" 2>/dev/null || true; done
      else
        kill_named 9 "$d/entry.pid" entry.sh
      fi
      return 0
    done
    sleep 0.2
  done
}

live_records() {
  local d
  for d in "$1"/[!.]*; do [ -d "$d" ] && return 0; done
  return 1
}

echo "fault campaign: scenarios $from-$n, seed $seed, $jobs at a time, in $top" >&2
start=$(date +%s)
i=$((from - 1))
while [ "$i" -lt "$n" ]; do
  i=$((i + 1))
  case ",${only:-$i}," in *",$i,"*) ;; *) continue ;; esac
  # a pool, not batches: a whole campaign takes minutes, a single launch seconds
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  scenario "$i" $((seed * 100003 + i)) >"$top/r$i.txt" 2>"$top/r$i.err" &
done
wait
# the summary: scenario I's result line from DIR/rI.txt, for each selected I of 1..N with --keep (a
# continuation: earlier runs' results count) or of from..N without; one without it is missing
first=$from
[ -z "$keep" ] || first=1
want=0 missing=""
i=$((first - 1))
while [ "$i" -lt "$n" ]; do
  i=$((i + 1))
  case ",${only:-$i}," in *",$i,"*) ;; *) continue ;; esac
  want=$((want + 1))
  grep -m 1 "^$i seed=" "$top/r$i.txt" 2>/dev/null || missing="$missing $i"
done >"$top/results.txt"
cat "$top/results.txt"
awk -v want="$want" -v missing="$missing" -v top="$top" -v t=$(( $(date +%s) - start )) '
  { n++; for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] += kv[2] }
    if ($0 !~ /left=0 / || $0 !~ /open=0 / || $0 !~ /secrets=0$/ || $0 !~ /healthy_killed=0 / || $0 !~ /done_without_run=0 / || $0 !~ /not_self_ended=0 /) bad = bad " " $1
    split($0, a, "created="); split(a[2], b, " "); split($0, c, "rows="); split(c[2], d, " ")
    if ($0 ~ / missing=/) {   # every creation has its row (by id, or its label unseen), and no row is for nothing
      if ($0 !~ / missing=0 / || d[1] + 0 > b[1] + 0) bad = bad " " $1
    } else if (b[1] != d[1]) bad = bad " " $1   # a result kept from before unseen rows: rows = creations
    if (b[1] + 0 > 0) rented++ }
  END {
    printf "scenarios %d | instances left %d | ledger rows %d vs creations %d | unseen creates %d | creations without a row %d | rows open %d | secrets seen %d | healthy boxes destroyed %d | DONE without the run %d | boxes of a gone laptop not self-ended %d | %ds | %d rented a box\n",
      n, v["left"], v["rows"], v["created"], v["unseen"], v["missing"], v["open"], v["secrets"], v["healthy_killed"], v["done_without_run"], v["not_self_ended"], t, rented
    if (missing != "") printf "missing scenarios (%d of %d, no result: continue with --from the first, same --seed and --keep):%s\n", want - n, want, missing
    if (bad != "") print "failing scenarios:" bad
    if (bad != "" && top != "") { split(bad, ids, " "); for (k in ids) {   # where each secret was seen
      f = top "/r" ids[k] ".err"; while ((getline l < f) > 0) if (l ~ /^secret seen: /) print "scenario " ids[k] ": " l; close(f) } }
    if (bad != "" || missing != "") exit 1
  }' "$top/results.txt"
