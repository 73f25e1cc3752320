# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # the scenario's variables, shared by bash's dynamic scope with scenario.sh
# scripts/fault_campaign/scenario.sh — one scenario of scripts/fault_campaign.sh: its draws, its world
# (a fake vast.ai API, a store, sandbox boxes, runner state), its story, then the reaper until the
# world is quiet, and its result line (scripts/fault_campaign/judge.sh).
# shellcheck disable=SC2030,SC2031  # each scenario's world is a subshell on purpose, its helpers run in it
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
  # the kinds aimed at the box contract and its judge (drawn after all of the above)
  local nobeat otherstore clockstep latedeadline twoops pricelie teardown2
  draw_operator_faults
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
      --set boot_cmd="$repo/tests/runner/bin/fake_boot.sh" --set destroy_cmd="$repo/scripts/fault_campaign/destroyed.sh" \
      --set bill_markup=$((pricelie * 2)) --faults "$rules" >/dev/null 2>&1 3>&-
    VAST_URL=$(cat "$W/url")
    export VAST_URL
    export RUNNER_SSH="$repo/tests/runner/bin/fake_ssh.sh" RUNNER_RCLONE_CONF=$W/rclone.conf
    export RUNNER_STORE="store:$W/bucket/hearsay" RUNNER_IMAGE="registry.invalid/hearsay-trainer@sha256:campaign"
    (umask 077; printf '[store]\ntype = local\nsecret_access_key = %s\n' "$secret" >"$RUNNER_RCLONE_CONF")
    export RUNNER_OFFER_MAX_DPH=1.50 RUNNER_OFFER_QUERY="num_gpus=1" RUNNER_CLI_TIMEOUT_S=60 RUNNER_POLL_S=0.3 RUNNER_CONFIRM_WAIT_S=0.1
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
    local beatflag=""
    apply_operator_faults   # sets beatflag
    local lps=""
    if [ "$campaign" = 1 ]; then
      export RUNNER_REAPER_MODE=start
      # shellcheck disable=SC2086  # beatflag: --no-heartbeat or nothing
      "$repo/runner/launch.sh" --yes $beatflag pilot >"$W/launch-pilot.out" 2>"$W/launch-pilot.err" 3>&- || true
      local fjobs=() k
      for ((k = 0; k < nf; k++)); do fjobs+=("fold $k"); done
      for job in "${fjobs[@]}" full; do
        # shellcheck disable=SC2086  # job is "fold 3"
        "$repo/runner/launch.sh" --yes --no-pilot-gate $beatflag $job >"$W/launch-${job// /}.out" 2>"$W/launch-${job// /}.err" 3>&- &
        lps="$lps $!"
      done
    else
      [ "$rkill" = 0 ] || export RUNNER_REAPER_MODE=start
      pick kind probe pilot fold
      job=$kind
      [ "$kind" = fold ] && job="fold $((RANDOM % nf))"
      story="$story $kind"
      # shellcheck disable=SC2086  # job is "fold 3"
      "$repo/runner/launch.sh" --yes --no-pilot-gate $beatflag $job >"$W/launch1.out" 2>"$W/launch1.err" 3>&- &
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
    [ "$twoops" = 0 ] || second_operator "$job"
    [ "$teardown2" = 0 ] || teardown_from_laptop2
    relaunch=0
    r=$((RANDOM % 100)); [ $r -lt 30 ] && [ "$campaign" = 0 ] && { relaunch=1; story="$story relaunch"; }
    if [ "$relaunch" = 1 ]; then
      # shellcheck disable=SC2086
      "$repo/runner/launch.sh" --yes --no-pilot-gate $beatflag $job >"$W/launch2.out" 2>"$W/launch2.err" 3>&- || true
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
    local late=""   # a campaign deadline set now, after the launch: only the reapers below know it
    [ "$latedeadline" = 0 ] || late=$(($(date +%s) + 4))
    while { live_records "$RUNNER_STATE/jobs" || live_records "$W/state2/jobs" || [ -s "$RUNNER_STATE/ledger.spool" ] \
      || [ "$(curl -fsS "$VAST_URL/_control/state" | jq "($OURS_LIVE) + .late_pending")" != 0 ]; } \
      && [ "$c" -lt 30 ]; do
      c=$((c + 1))
      reap_once "$RUNNER_STATE" "$LEDGER"
      [ "$twoops" = 0 ] || reap_once "$W/state2" "$W/ledger2.csv"
      [ "$clockstep" = 0 ] || echo 1000 >"$W/clock_step"   # the laptop's clock steps after the first look
      sleep 0.5
    done
    [ "$pidreuse" = 0 ] || kill "$reuse" 2>/dev/null || true
    kill "$sampler" 2>/dev/null || true
    for p in "$W"/boxes/*/run/entry.pid; do kill_named TERM "$p" entry.sh; done
    sleep 0.3
    judge_world
  )
}
