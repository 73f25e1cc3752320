# tests/runner/helpers.bash — one temp world per test: the fake vast.ai API on loopback (driven by the
# real vastai CLI), a local rclone remote as the store, and "boxes" run locally by bin/fake_ssh.sh.
# Short deadlines and polls keep each test to a few seconds.

REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
API_KEY="vastkey-SECRET-a1b2c3d4e5f6"        # the test account's key: must never be printed
STORE_SECRET="r2-SECRET-9f8e7d6c5b4a"         # the store's secret: must never leave rclone.conf

world() {
  W=$BATS_TEST_TMPDIR/w
  mkdir -p "$W/home" "$W/state" "$W/boxes" "$W/bucket"
  export FAKE_BOX_ROOT=$W/boxes   # before the fake starts: its boot_cmd (bin/fake_boot.sh) reads it
  export HOME=$W/home XDG_CONFIG_HOME=$W/home/.config XDG_STATE_HOME=$W/home/.state XDG_CACHE_HOME=$W/home/.cache
  export PATH="$REPO/.venv/bin:$PATH"
  export VAST_API_KEY=$API_KEY VASTAI_NO_UPDATE_CHECK=1
  "$REPO/tests/fakes/start_fake_vast.sh" "$W/url" "$W/fake.pid" --api-key "$API_KEY" \
    --seed "${FAKE_SEED:-7}" --set created_s=0.2 --set loading_s=0.3 --log "$W/fake.log" "$@" 3>&-
  VAST_URL=$(cat "$W/url")
  export VAST_URL
  export RUNNER_STATE=$W/state LEDGER=$W/ledger.csv FAKE_BOX_ROOT=$W/boxes
  export RUNNER_SSH="$REPO/tests/runner/bin/fake_ssh.sh" RUNNER_RCLONE=rclone
  export RUNNER_RCLONE_CONF=$W/rclone.conf RUNNER_STORE="store:$W/bucket/hearsay"
  export RUNNER_OPERATOR=op-a RUNS=$W/bucket/hearsay/runs/op-a   # this operator's run folders in the store
  (umask 077; printf '[store]\ntype = local\nsecret_access_key = %s\n' "$STORE_SECRET" >"$RUNNER_RCLONE_CONF")
  export RUNNER_IMAGE="registry.invalid/hearsay-trainer@sha256:tests-only"
  export RUNNER_OFFER_QUERY="num_gpus=1" RUNNER_CLI_TIMEOUT_S=30
  export RUNNER_POLL_S=0.2 RUNNER_CONFIRM_WAIT_S=0.1 RUNNER_CONFIRM_CHECKS=3 RUNNER_DESTROY_TRIES=2
  export RUNNER_BOOT_DEADLINE_S=20 RUNNER_CHAIN_DEADLINE_S=15 RUNNER_LABEL_LAG_S=2 RUNNER_SSH_TIMEOUT_S=20
  export RUNNER_REAPER_POLL_S=0.3 RUNNER_REAPER_MAX_BACKOFF_S=1
  export RUNNER_REAPER_MODE=off              # tests run runner/reaper.sh --once themselves
  export RUNNER_BOX_TRAIN="$REPO/tests/runner/bin/fake_train.sh" HEARSAY_SMOKE_CHECK="$REPO/tests/runner/bin/smoke_ok.sh"
  export HEARSAY_SCORE_RUN="$REPO/tests/runner/bin/fake_score.sh"   # the fake trainer's run has no model to score
  export HEARSAY_PUSH_WAIT_S=0.1 HEARSAY_BOX_WAIT_S=30 FAKE_TRAIN_S=0.3
  # What reaches a box (bin/fake_ssh.sh starts it from an empty environment): the test image's
  # smoke check (in its container environment) and, in the ssh session, the fakes' knobs and timings.
  export FAKE_IMAGE_EXTRA="HEARSAY_SMOKE_CHECK HEARSAY_SCORE_RUN"
  export FAKE_SSH_PASS="VAST_URL FAKE_TRAIN_S FAKE_TRAIN_RC FAKE_SCORE_RC HEARSAY_PUSH_WAIT_S HEARSAY_BOX_WAIT_S HEARSAY_DESTROY_TRIES HEARSAY_STOP_WAIT_S RUNNER_DEBUG"
  export RUNNER_BUNDLE_META=$W/bundle/bundle_meta.json RUNNER_TRAIN_CONFIG=$W/train.json
  small_bundle "$W/bundle"
  mkdir -p "$W/bucket/hearsay/bundles"                      # in the store, as runner/bundle_put.sh leaves it
  cp -R "$W/bundle" "$W/bucket/hearsay/bundles/$BUNDLE_SHA"
  echo "$BUNDLE_SHA" >"$W/bucket/hearsay/bundles/$BUNDLE_SHA/VERIFIED"
  echo '{"train": {"epochs": 3}}' >"$RUNNER_TRAIN_CONFIG"
  unset RUNNER_DEBUG RUNNER_CONFIG
}

# small_bundle DIR [N_FOLDS]: a stand-in bundle (manifest.csv + one audio file) whose bundle_meta.json
# carries its real tree-sha, exported as BUNDLE_SHA (the box checks what it pulls), and its fold
# file's n_folds (default 5), hashed in selection.json as hearsay bundle records it.
small_bundle() {
  mkdir -p "$1/audio"
  echo "id,path,label" >"$1/manifest.csv"
  echo "not really flac" >"$1/audio/a.flac"
  printf '{"folds": {"config": {"n_folds": %d}}, "selection": null}\n' "${2:-5}" >"$1/selection.json"
  BUNDLE_SHA=$(bash -c '. "$1/runner/lib/bundles.sh" && local_tree_sha "$2"' _ "$REPO" "$1")
  export BUNDLE_SHA
  printf '{"tree_sha": "%s", "folds": {"config": {"n_folds": %d}}}\n' "$BUNDLE_SHA" "${2:-5}" >"$1/bundle_meta.json"
}

# box_world: a rented pilot box's folder as the launcher leaves it (rclone.conf, train.json,
# job.env), the instance's own CONTAINER_ID / CONTAINER_API_KEY, and the store paths of its run.
box_world() {
  id=$(rent pilot PROVISIONED g-7)
  export CONTAINER_ID=$id
  CONTAINER_API_KEY=$(curl -fsS "$VAST_URL/_control/state" | jq -r ".instances[] | select(.id == $id) | .instance_api_key")
  export CONTAINER_API_KEY
  box=$W/box
  mkdir -p "$box"
  cp "$RUNNER_RCLONE_CONF" "$box/rclone.conf"
  run_path="$RUNNER_STORE/runs/$RUNNER_OPERATOR/pilot"
  cp "$RUNNER_TRAIN_CONFIG" "$box/train.json"                  # what the launcher sends before job.env
  cfg_sha=$(sha256sum "$RUNNER_TRAIN_CONFIG" | cut -d' ' -f1)
  run_store="$run_path/$BUNDLE_SHA/$cfg_sha"                    # one folder per (job, bundle, config)
  runs=$RUNS/pilot/$BUNDLE_SHA/$cfg_sha
  printf 'HEARSAY_JOB=pilot\nHEARSAY_KIND=pilot\nHEARSAY_FOLD=\nHEARSAY_GEN=g-7\nHEARSAY_STORE=%s\nHEARSAY_RUN_PATH=%s\nHEARSAY_BUNDLE_SHA=%s\nHEARSAY_CONFIG_HASH=%s\nHEARSAY_TRAIN=%s\nHEARSAY_BUDGET_USD=1.5\nHEARSAY_DEADLINE=%s\n' \
    "$RUNNER_STORE" "$run_path" "$BUNDLE_SHA" "$cfg_sha" "$RUNNER_BOX_TRAIN" $(($(date -u +%s) + 3600)) >"$box/job.env"
  # The container's environment: the image's Env and the instance's own variables (bin/box_environ.sh).
  # Its optional names (HEARSAY_SMOKE_CHECK) are left to the test's own environment here.
  FAKE_IMAGE_EXTRA="" "$REPO/tests/runner/bin/box_environ.sh" "$W/box-sandbox" "$W/init.environ" \
    "CONTAINER_ID=$CONTAINER_ID" "CONTAINER_API_KEY=$CONTAINER_API_KEY"
  export HEARSAY_INIT_ENVIRON=$W/init.environ
}

world_end() {
  local p i=0
  for p in "$W"/boxes/*/run/entry.pid "$W"/boxes/*/run/guard.lock/pid "$W/reaper.pid"; do
    [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true
  done
  p=$(cut -d' ' -f1 "$RUNNER_STATE/reaper.lock/owner" 2>/dev/null || true)   # a --background reaper
  [ -z "$p" ] || kill "$p" 2>/dev/null || true
  [ -f "$W/fake.pid" ] && kill "$(cat "$W/fake.pid")" 2>/dev/null || true
  # bats removes the test's folder next: no process may still write there (a box's chain, the
  # fake's log). Each gets 1 s to exit after the kills above, then TERM, then KILL (Linux: /proc).
  [ -d /proc/self/fd ] || return 0
  while [ "$i" -lt 60 ]; do
    p=$(procs_under "$W")
    [ -n "$p" ] || break
    # shellcheck disable=SC2086  # a list of pids
    if [ "$i" -ge 30 ]; then kill -KILL $p 2>/dev/null || true; elif [ "$i" = 10 ]; then kill $p 2>/dev/null || true; fi
    sleep 0.1
    i=$((i + 1))
  done
  return 0
}

# procs_under DIR: ids of the processes (this shell aside) whose working folder or an open file lies
# under DIR (Linux /proc).
procs_under() {
  local p
  for p in $(find /proc/[0-9]*/cwd /proc/[0-9]*/fd -maxdepth 1 -lname "$1/*" 2>/dev/null | cut -d/ -f3 | sort -u); do
    [ "$p" != "$$" ] && [ "$p" != "$BASHPID" ] || continue
    case $(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) in Z* | X* | '') continue ;; esac   # exited (a zombie writes nothing)
    echo "$p"
  done
}

# ctl METHOD PATH [JSON]: the fake's control API.
ctl() { curl -fsS -X "$1" -H 'Content-Type: application/json' -d "${3:-{\}}" "$VAST_URL/_control/$2"; }
fault() { ctl POST faults "{\"rules\": $1}" >/dev/null; }
live_ids() { curl -fsS "$VAST_URL/_control/state" | jq -r '.live[]'; }
live_count() { curl -fsS "$VAST_URL/_control/state" | jq '.live | length'; }
created_count() { curl -fsS "$VAST_URL/_control/state" | jq '.created_total'; }
# The ledger is append-only (a creation row, later a closing row per rental; a re-open row and a
# closing row anew for a box seen running after it was judged gone): rentals = distinct ids, open =
# ids whose last row is not a closing row (hearsay.contracts.ledger's rule).
ledger_rows() { awk -F, 'NR > 1 && !($1 in s) { s[$1] = 1; n++ } END { print n + 0 }' "$LEDGER"; }
open_rows() {
  awk -F, 'NR > 1 { if (!($1 in s)) { s[$1] = 1; o[++n] = $1 } c[$1] = ($7 != "") }
    END { for (i = 1; i <= n; i++) if (!c[o[i]]) k++; print k + 0 }' "$LEDGER"
}

# wait_for SECONDS CMD...: poll until CMD succeeds (CMD's arguments are expanded once, at the call:
# poll a count through a function such as none_live, never with test "$(live_count)").
wait_for() {
  local t=$1 i=0
  shift
  while ! "$@"; do
    i=$((i + 1))
    [ "$i" -lt $((t * 10)) ] || return 1
    sleep 0.1
  done
}

none_live() { [ "$(live_count)" -eq 0 ]; }
process_gone() { ! kill -0 "$1" 2>/dev/null; }
created_is() { [ "$(created_count)" -eq "$1" ]; }

# A box writes STATUS at RUNNER_STORE/runs/OPERATOR/JOB/STATUS.
status_of() { cat "$RUNS/$1/STATUS" 2>/dev/null || true; }
put_status() { mkdir -p "$RUNS/$1"; echo "$2" >"$RUNS/$1/STATUS"; }

# no_secrets FILE...: neither secret appears in any of them.
# (the fake API itself is given the account key on its command line by this harness, through
# start_fake_vast.sh, here or in another checkout's tests on the same machine: not the runner)
no_secrets() { ! grep -h -e "$API_KEY" -e "$STORE_SECRET" "$@" 2>/dev/null | grep -v -e fake_vast.py -e start_fake_vast.sh; }

launch() { "$REPO/runner/launch.sh" "$@"; }
# recipe_of CONFIG: the recipe hash the pilot gate keys on (runner/lib/recipe.sh).
recipe_of() { bash -c '. "$1/runner/lib/common.sh" && . "$1/runner/lib/bundles.sh" && . "$1/runner/lib/recipe.sh" && recipe_hash "$2"' _ "$REPO" "$1"; }
# bin_without NAME: a folder of links to every command of /usr/local/bin, /usr/bin and /bin but
# NAME (a machine without it, e.g. macOS without sha256sum); prints its path.
bin_without() {
  local dir=$W/bin-without-$1 d f n
  mkdir -p "$dir"
  for d in /usr/local/bin /usr/bin /bin; do
    for f in "$d"/*; do
      n=${f##*/}
      if [ "$n" != "$1" ] && [ ! -e "$dir/$n" ]; then ln -s "$f" "$dir/$n"; fi
    done
  done
  echo "$dir"
}
reaper_once() { "$REPO/runner/reaper.sh" --once; }

# own_label JOB GEN [DEADLINE]: a label as this RUNNER_STATE's launcher makes it
# (PREFIX.OPERATOR:JOB:GEN:DEADLINE; the operator identity is made on first use, as the runner does).
own_label() {
  printf '%s:%s:%s%s\n' "$(bash -c '. "$1/runner/lib/common.sh" && . "$1/runner/lib/state.sh" && label_prefix' _ "$REPO")" \
    "$1" "$2" "${3:+:$3}"
}

# rent JOB STATE [GEN]: an instance created through the real CLI plus the record and ledger row a
# launcher would have left (for reaper tests that need no launch). Prints the id.
rent() {
  local job=$1 st=$2 gen=${3:-g-test-1} offer id d dl label
  dl=$(($(date -u +%s) + 3600))
  label=$(own_label "$job" "$gen" "$dl")
  offer=$(vastai search offers 'num_gpus=1' --order dph_total --limit 1 --raw | jq '.[0].id')
  id=$(vastai create instance "$offer" --image "$RUNNER_IMAGE" --label "$label" --raw | jq '.new_contract')
  d=$RUNNER_STATE/jobs/$job
  mkdir -p "$d"
  echo "$gen" >"$d/gen"; echo "$st" >"$d/state"; echo "$id" >"$d/instance"; echo pilot >"$d/kind"
  echo "$label" >"$d/label"; echo "$offer" >"$d/offer"; echo 0.5 >"$d/dph"
  echo "run_path=$RUNNER_STORE/runs/$RUNNER_OPERATOR/$job" >"$d/contract"   # the rest: the older runner's defaults
  echo tree-aaaa >"$d/bundle_sha"; echo cfg >"$d/config_hash"; echo rcp >"$d/recipe_hash"
  date -u +%s >"$d/created_at"; echo "$dl" >"$d/deadline"
  [ -s "$LEDGER" ] || echo 'id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost' >"$LEDGER"
  echo "$id,$job,$gen,$offer,0.5,2026-11-30T00:00:00Z,,," >>"$LEDGER"
  echo "$id"
}
