#!/usr/bin/env bats
# Boundaries of the runner's guards: process identity across time zones and locales, paging while
# the account changes, a listing whose rows and total disagree, the label lag after a create that
# gave no id (to the second), the ablation cap (inclusive, spool counted), the hours a full job is
# budgeted at, and a clean end of each test's world.

load helpers

setup() { world; }
teardown() { world_end; }

# start_of PID [VAR=VALUE...]: proc_start of PID in an environment of its own (a zone, a locale).
start_of() { local p=$1; shift; env "$@" bash -c '. "$1/runner/lib/common.sh" && proc_start "$2"' _ "$REPO" "$p"; }

@test "process identity is the same in every time zone and locale, through /proc and through ps" {
  sleep 30 3>&- &
  p=$!
  a=$(start_of "$p" TZ=UTC0 LC_ALL=C)
  [ -n "$a" ]
  [ "$(start_of "$p" TZ=Asia/Tokyo LC_ALL=C.UTF-8)" = "$a" ]
  [ "$(start_of "$p" TZ=XST+11)" = "$a" ]
  a=$(start_of "$p" RUNNER_PROC_ROOT="$W/no-proc" TZ=UTC0 LC_ALL=C)   # a machine without /proc: ps
  [ -n "$a" ]
  [ "$(start_of "$p" RUNNER_PROC_ROOT="$W/no-proc" TZ=Asia/Tokyo LC_ALL=C.UTF-8)" = "$a" ]
  [ "$(start_of "$p" RUNNER_PROC_ROOT="$W/no-proc" TZ=XST+11)" = "$a" ]
  [ -z "$(start_of 999999999)" ]
  kill "$p"
}

@test "a HOLD and a lock written in one time zone belong to their live process in another; not once it has exited" {
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 DONE 1"
  sleep 60 3>&- &
  p=$!
  echo "$(date -u +%s) $p $(start_of "$p" TZ=Asia/Tokyo)" >"$RUNNER_STATE/jobs/pilot/HOLD"
  mkdir "$W/lock" && echo "$p $(start_of "$p" TZ=Asia/Tokyo)" >"$W/lock/owner"
  TZ=XST+11 run bash -c '. "$1/runner/lib/common.sh" && lock_stale "$2"' _ "$REPO" "$W/lock"
  [ "$status" -eq 1 ]                                # its owner runs: not stale
  TZ=XST+11 run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id" ]                          # the fresh HOLD defers STATUS DONE
  kill "$p"; wait "$p" || true
  TZ=XST+11 run bash -c '. "$1/runner/lib/common.sh" && lock_stale "$2"' _ "$REPO" "$W/lock"
  [ "$status" -eq 0 ]
  TZ=XST+11 run reaper_once
  [ "$(live_count)" -eq 0 ]
}

@test "the same through ps (no /proc): a HOLD set in Tokyo is fresh to a reaper eleven hours west" {
  export RUNNER_PROC_ROOT=$W/no-proc
  id=$(rent pilot PROVISIONED g-1)
  put_status pilot "g-1 DONE 1"
  sleep 60 3>&- &
  p=$!
  echo "$(date -u +%s) $p $(start_of "$p" RUNNER_PROC_ROOT="$W/no-proc" TZ=Asia/Tokyo LC_ALL=C.UTF-8)" >"$RUNNER_STATE/jobs/pilot/HOLD"
  TZ=XST+11 run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  [ "$(live_ids)" = "$id" ]
  kill "$p"
}

# page_of ROWS TOTAL: one listing page of ROWS made-up instances claiming TOTAL in the account.
page_of() {
  local rows="" i
  for i in $(seq 1 "$1"); do rows="$rows${rows:+,}{\"id\": $((70000 + i)), \"actual_status\": \"running\", \"label\": \"someone\", \"dph_total\": 0.1}"; done
  fault "[{\"op\": \"list\", \"kind\": \"error\", \"status\": 200, \"body\": {\"instances\": [$rows], \"total_instances\": $2}}]"
}

@test "a listing whose rows do not match the API's total is 'cannot confirm'; a matching one is not" {
  page_of 1 1
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 1 ]
  page_of 1 0
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
  page_of 1 2
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
  page_of 0 1
  run "$REPO/runner/teardown_check.sh"
  [ "$status" -eq 2 ]
}

@test "paging under churn: a total that moves once is listed again and judged whole" {
  ctl POST settings '{"page_size": 2}' >/dev/null
  a=$(rent fold0 PROVISIONED g-1); b=$(rent fold1 PROVISIONED g-1); c=$(rent fold2 PROVISIONED g-1)
  put_status fold0 "g-1 DONE 1"
  fault '[{"op": "list", "kind": "churn", "skip": 1, "times": 1}]'   # someone rents between pages 1 and 2
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]
  grep -q "listing: the account's total changed while paging: listing again" "$RUNNER_STATE/runner.log"
  [ ! -d "$RUNNER_STATE/jobs/fold0" ]
  [ ! -e "$RUNNER_STATE/jobs/fold1/gone_since" ]
}

@test "a listing whose total keeps moving is used for what it shows: the reaper still ends a DONE job" {
  ctl POST settings '{"page_size": 2}' >/dev/null
  export RUNNER_LIST_TRIES=1                         # the first pass is the last: it stays partial
  a=$(rent fold0 PROVISIONED g-1); b=$(rent fold1 PROVISIONED g-1); c=$(rent fold2 PROVISIONED g-1)
  put_status fold2 "g-1 DONE 1"
  fault '[{"op": "list", "kind": "churn", "skip": 1, "times": 1}]'
  run reaper_once
  echo "$output"; [ "$status" -eq 0 ]                # usable, not "listing failed" (5)
  grep -q "rows kept, absences unknown" "$RUNNER_STATE/runner.log"
  [ ! -d "$RUNNER_STATE/jobs/fold2" ]
  [ -d "$RUNNER_STATE/jobs/fold0" ]
  [ -d "$RUNNER_STATE/jobs/fold1" ]
}

@test "an absence in a listing whose total kept moving is unknown, though it shows our other boxes" {
  ctl POST settings '{"page_size": 2}' >/dev/null
  export RUNNER_LIST_TRIES=1
  a=$(rent fold0 PROVISIONED g-1); rent fold1 PROVISIONED g-1 >/dev/null
  rent fold2 PROVISIONED g-1 >/dev/null; rent fold3 PROVISIONED g-1 >/dev/null
  vastai destroy instance "$a" -y >/dev/null        # 3 rows left: 2 pages
  fault "[{\"op\": \"show\", \"kind\": \"error\", \"instance\": $a, \"times\": null}]"
  judge() {
    bash -c 'for f in common state vast gone; do . "$1/runner/lib/$f.sh"; done
      l=$(_vast_tmp) && vast_list "$l" || exit 9
      [ ! -e "$l.partial" ] || echo partial
      rc=0; gone_judge "$l" "$2" || rc=$?; list_rm "$l"; echo "judged $rc"' _ "$REPO" "$a"
  }
  fault '[{"op": "list", "kind": "churn", "skip": 1, "times": 1}]'
  run judge
  echo "$output"
  [ "$output" = "$(printf 'partial\njudged 2')" ]     # unknown
  run judge                                          # the same account, paged without churn
  echo "$output"
  [ "$output" = "judged 0" ]                         # gone: the listing vouches
}

# at T CMD...: CMD with the runner's libraries sourced, RUNNER_LABEL_LAG_S 100 s and their clock
# stopped at second T.
at() {
  RUNNER_LABEL_LAG_S=100 bash -c 'for f in common guard state ledger vast cuda store box teardown campaign launch_steps; do
      . "$1/runner/lib/$f.sh"; done
    frozen_s=$2; shift 2; now() { echo "$frozen_s"; }; "$@"' _ "$REPO" "$@"
}

@test "a create that gave no id holds its record for the label lag to the second (relaunch exit 5, adoption unknown), then clears" {
  d=$RUNNER_STATE/jobs/fold1
  mkdir -p "$d"
  t=$(date -u +%s)
  echo g-9 >"$d/gen"; echo CREATING >"$d/state"; echo 1 >"$d/asked"; echo 999999 >"$d/launcher"
  echo 0.5 >"$d/dph"; echo 4242 >"$d/offer"; echo "$(own_label fold1 g-9)" >"$d/label"
  echo $((t - 99)) >"$d/created_at"; echo $((t - 1)) >"$d/provision_by"   # the lag ends at t + 1
  printf '' >"$W/listing"; echo "$t" >"$W/listing.at"        # a listing taken at t: no box at all
  run at "$t" adopt_by_label fold1 "$W/listing"
  [ "$status" -eq 1 ]                                # a second short of the lag: a create may land
  run at $((t + 1)) adopt_by_label fold1 "$W/listing"
  [ "$status" -eq 2 ]                                # the lag reached: confirmed none
  run at "$t" step_previous fold1
  echo "$output"; [ "$status" -eq 5 ]
  [ "$output" = "runner: job fold1's last create is recent and may still appear in the listing (retry after RUNNER_LABEL_LAG_S=100 s)" ]
  [ -d "$d" ]
  rm "$d/created_at"                                 # no creation time kept: both readers go by
  touch -d "@$((t - 99))" "$d"                       # the record folder's age, to the same second
  run at "$t" step_previous fold1
  [ "$status" -eq 5 ]
  run at "$t" adopt_by_label fold1 "$W/listing"
  [ "$status" -eq 1 ]
  run at $((t + 1)) adopt_by_label fold1 "$W/listing"
  [ "$status" -eq 2 ]
  run at $((t + 1)) step_previous fold1
  echo "$output"; [ "$status" -eq 0 ]
  [ ! -d "$d" ]                                      # cleared, its unseen create on the ledger
  [ "$(grep -c "^unseen:.*,fold1,g-9," "$LEDGER")" -eq 1 ]
  c=$(date -u -d "@$((t - 99))" +%Y-%m-%dT%H:%M:%SZ) pb=$(date -u -d "@$((t - 1))" +%Y-%m-%dT%H:%M:%SZ)
  grep "^unseen:.*,fold1,g-9," "$LEDGER" | grep -q ",$c,$pb,"   # its hours from the folder's age on
}

@test "a full job is budgeted at RUNNER_HOURS_FULL, not the fold hours; a fold at the fold hours" {
  export RUNNER_HOURS_FULL=7 RUNNER_HOURS_FOLD=1
  run launch --no-pilot-gate full </dev/null
  echo "$output"; [ "$status" -eq 6 ]
  line=$(grep '^runner: offer [0-9]' <<<"$output")
  dph=$(sed 's/.* at \$\([0-9.]*\)\/h.*/\1/' <<<"$line")
  est=$(sed 's/.*estimated \$\([0-9.]*\) (\([0-9.]*\) h).*/\1 \2/' <<<"$line")
  [ "${est#* }" = 7 ]
  awk -v e="${est% *}" -v d="$dph" 'BEGIN { exit !(e > 6.999 * d && e < 7.001 * d) }'
  run launch --no-pilot-gate fold 2 </dev/null
  [ "$status" -eq 6 ]
  [[ "$output" == *"job fold2 estimated "*" (1 h)"* ]]
  [ "$(created_count)" -eq 0 ]
}

# ablation world: recipes, a cap, and a closed 0.5 h ablation rental in the ledger.
ablation_world() {
  export RUNNER_RECIPES=$W/recipes RUNNER_HOURS_ABLATION=0.5 RUNNER_DEADLINE_FACTOR=1.5 RUNNER_MARGIN_USD=1000
  mkdir -p "$RUNNER_RECIPES"
  echo '{"train": {"epochs": 1}}' >"$RUNNER_RECIPES/core_only.json"
  echo 'id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost' >"$LEDGER"
  echo "901,ablate-core_only-fold0,g-0,1,0.5,2026-11-30T00:00:00Z,,," >>"$LEDGER"
  echo "901,ablate-core_only-fold0,g-0,1,0.5,2026-11-30T00:00:00Z,2026-11-30T00:30:00Z,0.5,0.25" >>"$LEDGER"
}

@test "the ablation cap is inclusive: used + this job's most exactly at the cap passes, a hair over is refused" {
  ablation_world                                     # used 0.5 h + this job's most 0.75 h = 1.25 h
  RUNNER_ABLATION_GPU_HOURS=1.25 run launch --yes ablate core_only fold 1
  echo "$output"; [ "$status" -eq 3 ]                # passed the cap, stopped at the budget (margin)
  RUNNER_ABLATION_GPU_HOURS=1.2499 run launch --yes ablate core_only fold 1
  [ "$status" -eq 15 ]
  RUNNER_ABLATION_GPU_HOURS=1.2501 run launch --yes ablate core_only fold 1
  [ "$status" -eq 3 ]
  [ "$(created_count)" -eq 0 ]
}

@test "rentals still in the ledger spool count toward the ablation GPU-hour cap" {
  ablation_world
  export RUNNER_ABLATION_GPU_HOURS=1.9
  run launch --yes ablate core_only fold 1           # 0.5 + 0.75 <= 1.9
  [ "$status" -eq 3 ]
  mkdir -p "$RUNNER_STATE"                           # an open ablation rental whose row waits in the spool
  echo "902,ablate-core_only-fold3,g-0,1,0.5,2026-11-30T00:00:00Z,,," >>"$RUNNER_STATE/ledger.spool"
  run launch --yes ablate core_only fold 1           # 0.5 + 0.75 (spooled, at its most) + 0.75 > 1.9
  echo "$output"; [ "$status" -eq 15 ]
  [[ "$output" == "runner: ablation GPU-hour cap: 1.2500 h used or committed"* ]]
}

@test "a test's world ends with no process left writing into its folder (boxes, reaper, fake API)" {
  [ -d /proc/self/fd ] || skip "needs /proc"
  FAKE_TRAIN_S=60 run launch --yes probe
  echo "$output"; [ "$status" -eq 0 ]
  "$REPO/runner/reaper.sh" --background 3>&-
  [ -n "$(procs_under "$W")" ]
  world_end
  for p in $(procs_under "$W"); do echo "left: $p $(tr '\0' ' ' </proc/$p/cmdline)"; ls -l /proc/$p/cwd /proc/$p/fd | grep "$W"; done
  [ -z "$(procs_under "$W")" ]
  rm -rf "$W"                                        # what bats does next: no "Directory not empty"
  [ ! -e "$W" ]
}
