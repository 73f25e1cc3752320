#!/usr/bin/env bash
# Usage: scripts/fault_campaign.sh [--scenarios N] [--seed S] [--jobs J] [--keep DIR] [--only I]
# Summary: seeded random fault scenarios against the runner; prints instances left, ledger rows vs creations, secrets seen
#
# Each scenario gets its own fake vast.ai API (tests/fakes/fake_vast.py, real vastai CLI), its own
# local rclone store, sandbox boxes (tests/runner/bin/fake_ssh.sh) and runner state. It draws, from
# its seed: faults at every API step (listing errors, {}, null, empty and non-JSON answers, 429s,
# creates that fail with or without an instance, creates dropped after renting that the CLI resends
# (up to 3 boxes per launch, maybe none answered), destroys failing N times, listing lag after
# destroy), ssh failures, a failing smoke check or trainer, a launcher killed (SIGKILL) at a random
# moment, a relaunch under the same job name, and deadlines that run out. Then the faults stop (a
# service recovers) and runner/reaper.sh --once runs until no job record is left (at most 25 cycles).
# Counted per scenario and in total: instances still live on the fake, ledger rows vs instances the
# fake created, ledger rows left open, secrets (API key, store secret) seen in any output, log or
# process list (sampled every 0.2 s). Goal: 0 left, rows = creations, 0 open, 0 secrets.
#
# Exit codes: 0 goal met; 1 goal missed (the failing scenarios are named); 2 usage.
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
repo=$(cd "$(dirname "$0")/.." && pwd)
n=200 seed=1 jobs=2 keep="" only=""
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) sed -n '2,/^[^#]/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
    --scenarios) n=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "fault_campaign: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
export PATH="$repo/.venv/bin:$PATH"
for c in jq curl vastai rclone python3; do
  command -v "$c" >/dev/null || { echo "fault_campaign: missing $c (make install; scripts/system-deps.sh)" >&2; exit 2; }
done
top=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/fault_campaign.XXXXXX")}
mkdir -p "$top"

# scenario I SEED: one world, one story; prints "I seed=S story | left=L created=C rows=R open=O secrets=X".
scenario() {
  local i=$1 s=$2 W key secret rules story="" job kind r kill_at relaunch sampler lp
  RANDOM=$s
  W="$top/s$i"
  rm -rf "$W"
  mkdir -p "$W/home" "$W/state" "$W/boxes" "$W/bucket"
  key="vastkey-SECRET-$s-$RANDOM$RANDOM"
  secret="r2-SECRET-$s-$RANDOM$RANDOM"
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
  # --- the world ----------------------------------------------------------------------------------
  (
    # shellcheck disable=SC2030  # local to this subshell on purpose
    RANDOM=$((s + 1))   # a subshell reseeds RANDOM (bash >= 5.1): seed it again so stories replay
    export HOME=$W/home XDG_CONFIG_HOME=$W/home/.config XDG_CACHE_HOME=$W/home/.cache VAST_API_KEY=$key
    export VASTAI_NO_UPDATE_CHECK=1 FAKE_BOX_ROOT=$W/boxes RUNNER_STATE=$W/state LEDGER=$W/ledger.csv
    "$repo/tests/fakes/start_fake_vast.sh" "$W/url" "$W/fake.pid" --api-key "$key" --seed "$s" \
      --set created_s=0.2 --set loading_s=0.3 --set lag_listings="$lag" --set stuck_loading="$stuck" \
      --faults "$rules" >/dev/null 2>&1 3>&-
    VAST_URL=$(cat "$W/url")
    export VAST_URL
    export RUNNER_SSH="$repo/tests/runner/bin/fake_ssh.sh" RUNNER_RCLONE_CONF=$W/rclone.conf
    export RUNNER_STORE="store:$W/bucket/hearsay" RUNNER_IMAGE="registry.invalid/hearsay-trainer@sha256:campaign"
    (umask 077; printf '[store]\ntype = local\nsecret_access_key = %s\n' "$secret" >"$RUNNER_RCLONE_CONF")
    export RUNNER_OFFER_QUERY="num_gpus=1" RUNNER_CLI_TIMEOUT_S=20 RUNNER_POLL_S=0.3 RUNNER_CONFIRM_WAIT_S=0.1
    export RUNNER_CONFIRM_CHECKS=2 RUNNER_DESTROY_TRIES=2 RUNNER_BOOT_DEADLINE_S=12 RUNNER_CHAIN_DEADLINE_S=10
    export RUNNER_LABEL_LAG_S=3 RUNNER_SSH_TIMEOUT_S=15 RUNNER_HOLD_TTL_S=20
    export RUNNER_BOX_TRAIN="$repo/tests/runner/bin/fake_train.sh" HEARSAY_PUSH_WAIT_S=0.1 HEARSAY_BOX_WAIT_S=20
    export RUNNER_BUNDLE_META=$W/bundle_meta.json RUNNER_TRAIN_CONFIG=$W/train.json
    echo '{"tree_sha": "tree-campaign"}' >"$RUNNER_BUNDLE_META"
    echo '{"train": {"epochs": 1}}' >"$RUNNER_TRAIN_CONFIG"
    pick FAKE_TRAIN_S 0.2 1 3
    pick FAKE_TRAIN_RC 0 0 0 1
    pick smoke smoke_ok.sh smoke_ok.sh smoke_ok.sh smoke_fail.sh
    HEARSAY_SMOKE_CHECK="$repo/tests/runner/bin/$smoke"
    export FAKE_TRAIN_S FAKE_TRAIN_RC HEARSAY_SMOKE_CHECK
    r=$((RANDOM % 100)); [ $r -lt 20 ] && { echo $((1 + RANDOM % 2)) >"$W/boxes/ssh_fail"; story="$story ssh"; }
    r=$((RANDOM % 100)); if [ $r -lt 20 ]; then export RUNNER_HOURS_PROBE=0.0005 RUNNER_HOURS_FOLD=0.0005 RUNNER_HOURS_PILOT=0.0005; story="$story deadline"; fi
    pick kind probe pilot fold
    job=$kind
    [ "$kind" = fold ] && job="fold $((RANDOM % 5))"
    story="$story $kind"
    # process-list sampler: a secret on any command line is counted, except the fake's own (the harness
    # gives the fake its account key by --api-key; that process is not the runner)
    # shellcheck disable=SC2009  # pgrep cannot print whole command lines portably
    ( exec 3>&- ; while :; do ps -eo args 2>/dev/null | grep -e "$key" -e "$secret" | grep -v -e grep -e fake_vast.py >>"$W/ps_hits" || true; sleep 0.2; done ) &
    sampler=$!
    # shellcheck disable=SC2086  # job is "fold 3"
    "$repo/runner/launch.sh" --yes --no-pilot-gate $job >"$W/launch1.out" 2>"$W/launch1.err" 3>&- &
    lp=$!
    kill_at=""
    r=$((RANDOM % 100)); [ $r -lt 30 ] && { pick kill_at 1 2 4 6 9 12; story="$story kill@$kill_at"; }
    if [ -n "$kill_at" ]; then
      sleep "$kill_at"
      kill -9 "$lp" 2>/dev/null || true
    fi
    wait "$lp" 2>/dev/null || true
    relaunch=0
    r=$((RANDOM % 100)); [ $r -lt 30 ] && { relaunch=1; story="$story relaunch"; }
    if [ "$relaunch" = 1 ]; then
      # shellcheck disable=SC2086
      "$repo/runner/launch.sh" --yes --no-pilot-gate $job >"$W/launch2.out" 2>"$W/launch2.err" 3>&- || true
    fi
    # the service recovers; the reaper ends everything
    curl -fsS -X DELETE "$VAST_URL/_control/faults" >/dev/null
    rm -f "$W/boxes/ssh_fail"
    local c=0
    while live_records "$W/state/jobs" && [ "$c" -lt 25 ]; do
      c=$((c + 1))
      "$repo/runner/reaper.sh" --once >>"$W/reaper.out" 2>&1 3>&- || true
      sleep 0.5
    done
    kill "$sampler" 2>/dev/null || true
    for p in "$W"/boxes/*/run/entry.pid; do
      if [ -f "$p" ]; then kill "$(cat "$p")" 2>/dev/null || true; fi
    done
    sleep 0.3
    st=$(curl -fsS "$VAST_URL/_control/state")
    echo "$st" >"$W/fake_state.json"
    kill "$(cat "$W/fake.pid")" 2>/dev/null || true
    left=$(jq '.live | length' <<<"$st")
    created=$(jq '.created_total' <<<"$st")
    rows=0 open=0
    if [ -f "$LEDGER" ]; then
      rows=$(awk 'END { print NR - 1 }' "$LEDGER")
      open=$(awk -F, 'NR > 1 && $7 == "" { n++ } END { print n + 0 }' "$LEDGER")
    fi
    secrets=$(cat "$W"/*.out "$W"/*.err "$W/state/runner.log" "$W/boxes/ssh.log" "$W"/boxes/*/run/entry.log \
      "$W/ps_hits" 2>/dev/null | grep -c -e "$key" -e "$secret" || true)
    echo "$i seed=$s$story | left=$left created=$created rows=$rows open=$open secrets=$secrets"
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

live_records() {
  local d
  for d in "$1"/[!.]*; do [ -d "$d" ] && return 0; done
  return 1
}

echo "fault campaign: $n scenarios, seed $seed, $jobs at a time, in $top" >&2
start=$(date +%s)
i=0
while [ "$i" -lt "$n" ]; do
  k=0
  while [ "$k" -lt "$jobs" ] && [ "$i" -lt "$n" ]; do
    i=$((i + 1))
    [ -z "$only" ] || [ "$i" = "$only" ] || continue
    k=$((k + 1))
    scenario "$i" $((seed * 100003 + i)) >"$top/r$i.txt" 2>"$top/r$i.err" &
  done
  wait
done
cat "$top"/r*.txt | sort -n >"$top/results.txt"
cat "$top/results.txt"
awk -v want="$n" -v t=$(( $(date +%s) - start )) '
  { n++; for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] += kv[2] }
    if ($0 !~ /left=0 / || $0 !~ /open=0 / || $0 !~ /secrets=0$/) bad = bad " " $1
    split($0, a, "created="); split(a[2], b, " "); split($0, c, "rows="); split(c[2], d, " ")
    if (b[1] != d[1]) bad = bad " " $1 }
  END {
    if (n != want) bad = bad " (only " n " of " want " scenarios reported)"
    printf "scenarios %d | instances left %d | ledger rows %d vs creations %d | rows open %d | secrets seen %d | %ds\n",
      n, v["left"], v["rows"], v["created"], v["open"], v["secrets"], t
    if (bad != "") { print "failing scenarios:" bad; exit 1 }
  }' "$top/results.txt"
