# shellcheck shell=bash
# runner/lib/launch_steps.sh — the steps of runner/launch.sh, in the order it runs them. They share
# the launcher's globals: job kind fold gen offer dph credit estimate instance host port launch_lock
# budget_lock.
# shellcheck disable=SC2154  # kind, fold, job, recipe, launch_lock, budget_lock, launch_tmp and user_tmp are set by runner/launch.sh
# shellcheck source=runner/lib/bundles.sh
. "$RUNNER_ROOT/lib/bundles.sh"
# shellcheck source=runner/lib/recipe.sh
. "$RUNNER_ROOT/lib/recipe.sh"

# hours_for KIND: the budget estimate's hours (an ablation's fold job: RUNNER_HOURS_ABLATION).
hours_for() {
  [ -z "${recipe:-}" ] || { echo "$RUNNER_HOURS_ABLATION"; return 0; }
  case $1 in
    pilot) echo "$RUNNER_HOURS_PILOT" ;; fold) echo "$RUNNER_HOURS_FOLD" ;;
    full) echo "$RUNNER_HOURS_FULL" ;; *) echo "$RUNNER_HOURS_PROBE" ;;
  esac
}

# step_fold_in_bundle FOLD: FOLD must be one of the bundle's fold models, 0..n_folds-1 (its fold
# file's n_folds, as hearsay.contracts.bundle reads RUNNER_BUNDLE_META): exit 2, before anything
# else is asked of the account, with the reason hearsay gives.
step_fold_in_bundle() {
  local why rc=0
  [ -r "$RUNNER_BUNDLE_META" ] || die 2 "no bundle meta at $RUNNER_BUNDLE_META" "set RUNNER_BUNDLE_META to the bundle's bundle_meta.json"
  why=$(bundle_info "$RUNNER_BUNDLE_META" --fold "$1" 2>&1) || rc=$?
  case $rc in
    0) ;;
    4) die 2 "${why#hearsay bundle info: }" "runner/launch.sh fold K with K below $(bundle_info "$RUNNER_BUNDLE_META" --n-folds 2>/dev/null || echo n_folds)" ;;
    *) die 2 "cannot tell the bundle's folds from $RUNNER_BUNDLE_META (hearsay bundle info exit $rc: ${why#hearsay bundle info: })" "rebuild the bundle with hearsay bundle, or set RUNNER_BUNDLE_META" ;;
  esac
}

# identity KIND: sets bundle_sha, config_hash (sha256 of the file: the store folder, what the box
# checks) and recipe_hash (the same config without its step budget: what the pilot gate compares).
identity() {
  bundle_sha=none config_hash=none recipe_hash=none
  [ "$1" = probe ] && return 0
  [ -r "$RUNNER_BUNDLE_META" ] || die 2 "no bundle meta at $RUNNER_BUNDLE_META" "set RUNNER_BUNDLE_META to the bundle's bundle_meta.json"
  [ -r "$RUNNER_TRAIN_CONFIG" ] || die 2 "no training config at $RUNNER_TRAIN_CONFIG" "set RUNNER_TRAIN_CONFIG"
  bundle_sha=$(bundle_info "$RUNNER_BUNDLE_META" --tree-sha) \
    || die 2 "$RUNNER_BUNDLE_META gives no tree-sha (hearsay bundle info said why above)" "rebuild the bundle with hearsay bundle"
  config_hash=$(sha256_file "$RUNNER_TRAIN_CONFIG")
  recipe_hash=$(recipe_hash "$RUNNER_TRAIN_CONFIG") || die 2 "$RUNNER_TRAIN_CONFIG is not JSON" "fix the config; check it with: hearsay train --check-config --config $RUNNER_TRAIN_CONFIG"
  step_check_config "$1"               # exit 2: the trainer refuses the config, nothing rented
  step_bundle_in_store "$bundle_sha"   # exit 14: no verified copy in the store, nothing rented
}

# step_check_config KIND: the box's own trainer command (RUNNER_BOX_TRAIN, default `hearsay train`,
# its flags included) loads and resolves RUNNER_TRAIN_CONFIG here with --check-config, the same
# code a box runs first; a refusal exits 2 with the trainer's message, before anything is rented.
step_check_config() {
  local cmd=${RUNNER_BOX_TRAIN:-hearsay train} sel out rc=0
  case $1 in fold) sel="--fold $fold" ;; *) sel="--$1" ;; esac
  command -v "${cmd%% *}" >/dev/null 2>&1 \
    || die 10 "missing dependency: ${cmd%% *} (the trainer, to check $RUNNER_TRAIN_CONFIG)" "install hearsay (make install) or set RUNNER_BOX_TRAIN"
  # shellcheck disable=SC2086  # RUNNER_BOX_TRAIN is a command line by design; sel is two words at most
  out=$($cmd --check-config --config "$RUNNER_TRAIN_CONFIG" $sel </dev/null 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || die 2 "the trainer refuses $RUNNER_TRAIN_CONFIG (exit $rc): $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')" "fix the config; check it with: $cmd --check-config --config $RUNNER_TRAIN_CONFIG $sel"
  log_event "training config checked for $1${fold:+ $fold}: $(printf '%s' "$out" | tail -n 1)"
}

# step_previous JOB: the job's previous instance must be absent from a successful listing; only then is
# an old record cleared (its ledger row completed). Leaves the listing in $prev_list for the budget.
step_previous() {
  local job=$1 id listed own
  own=$(label_prefix) || die 1 "no operator identity, so no label can be ours" "see the message above"
  prev_list=$(_vast_tmp)
  vast_list "$prev_list" || die 5 "cannot list instances, so cannot confirm job $job's previous instance is gone" "retry later; check VAST_URL, the key and runner/teardown_check.sh"
  listed=$(awk -F '\t' -v p="$own:$job:" 'index($3, p) == 1 { print $1 }' "$prev_list" | head -n 1)
  id=$(rec_get "$job" instance)
  if [ -z "$listed" ] && [ -n "$id" ] && list_has "$prev_list" "$id"; then listed=$id; fi
  # the record's create landed but its launcher died before keeping the id (killed mid-create): the
  # id and the creation row are kept now (adoption by its label), so the rental is on the ledger
  # whoever ends it, even if the box then ends itself before any listing sees it again
  if [ -n "$listed" ] && [ -z "$id" ] && [ -n "$(rec_get "$job" asked)" ] && ! launcher_alive "$job"; then
    adopt_by_label "$job" "$prev_list" >/dev/null 2>&1 || true
  fi
  if [ -n "$listed" ]; then
    # what the one judge (runner/lib/judge.sh) makes of the record's box, as the reaper will act on it
    local verdict_said=""
    if [ "$listed" = "$id" ]; then
      judge_job "$job" "$(rec_state "$job")"
      # shellcheck disable=SC2154  # set by judge_job
      verdict_said="; the judge: $verdict ($j_why)"
    fi
    die 4 "job $job's previous instance $listed is still listed$verdict_said" "wait for runner/reaper.sh to end it, or: vastai destroy instance $listed -y"
  fi
  rec_exists "$job" || return 0
  # a well-formed empty listing can be an API hiccup: the record's box must be gone by the one rule
  # (runner/lib/gone.sh: the listing still shows our other boxes, or show instance agrees)
  if [ -n "$id" ] && ! gone_judge "$prev_list" "$id"; then
    die 5 "job $job's previous instance $id is missing from the listing but show instance does not confirm it gone" "retry later; check runner/teardown_check.sh"
  fi
  # its label must be settled too: a duplicate a resent create rented may land late (label_settled)
  if [ -n "$id" ] && [ -e "$(rec_dir "$job")/dup_sweep" ] && ! label_settled "$job" "$prev_list"; then
    die 5 "job $job's previous create may still have a duplicate no listing has shown (its label is not settled)" "runner/reaper.sh settles it; retry after its provision-by $(iso "$(rec_get "$job" provision_by)")"
  fi
  if launcher_alive "$job" && [ "$(rec_get "$job" launcher)" != "$$" ]; then
    die 4 "job $job is being launched by process $(rec_get "$job" launcher)" "wait for it"
  fi
  if [ -z "$id" ] && [ -n "$(rec_get "$job" asked)" ]; then
    local lag_end
    if ! lag_end=$(label_lag_end "$job") || [ "$(now)" -lt "$lag_end" ]; then
      die 5 "job $job's last create is recent and may still appear in the listing" "retry after RUNNER_LABEL_LAG_S=$RUNNER_LABEL_LAG_S s"
    fi
  fi
  rec_lock "$job" || die 4 "record of job $job is locked" "wait for runner/reaper.sh"
  if [ -n "$id" ]; then
    ledger_close "$job" "$id" || die 1 "cannot complete the ledger row of job $job's old instance $id" "free space under $LEDGER, then launch again"
  fi
  if unseen_rental "$job"; then
    ledger_unseen "$job" || die 1 "cannot write the ledger row of job $job's unseen create" "free space under $LEDGER, then launch again"
  fi
  rec_set "$job" result CLEARED
  rec_archive "$job"
  rec_unlock "$job"
  say "old record of job $job cleared (its instance ${id:-none} is confirmed absent)"
}

# step_pilot_gate JOB KIND GATE ANY_EPOCHS: fold/full need a DONE pilot of the same bundle tree-sha +
# recipe hash (the config without its epoch count: a short pilot clears longer finals), and the
# config's train.epochs must be the E recorded for that recipe (runner/epochs.sh) unless ANY_EPOCHS
# is 1 (--any-epochs, logged). GATE 0 (--no-pilot-gate, logged) skips both. An ablation's fold job
# (a recipe of its own, job ablate-*) is not gated: runner/launch.sh ablate caps it in GPU-hours.
step_pilot_gate() {
  identity "$2"
  case $2 in fold | full) ;; *) return 0 ;; esac
  [ -z "${recipe:-}" ] || return 0
  if [ "$3" = 0 ]; then
    say "pilot gate overridden (--no-pilot-gate): DONE pilot and epoch count E not checked for bundle $bundle_sha recipe $recipe_hash"
    log_event "pilot gate OVERRIDDEN for $1 (bundle $bundle_sha recipe $recipe_hash config $config_hash)"
    return 0
  fi
  [ -f "$RUNNER_STATE/pilots/$bundle_sha-$recipe_hash" ] \
    || die 6 "no DONE pilot for bundle $bundle_sha and recipe $recipe_hash ($RUNNER_TRAIN_CONFIG without train.epochs)" "run runner/launch.sh pilot first, or pass --no-pilot-gate"
  step_epochs "$1" "$4"
}

# step_epochs JOB ANY_EPOCHS: the config's train.epochs = the E recorded for bundle + recipe.
step_epochs() {
  local e have
  e=$(recorded_epochs "$bundle_sha" "$recipe_hash")
  have=$(config_epochs "$RUNNER_TRAIN_CONFIG")
  [ -n "$e" ] && [ "$have" = "$e" ] && return 0
  if [ "$2" = 1 ]; then
    say "epoch check overridden (--any-epochs): train.epochs ${have:-unset}, recorded E ${e:-none}"
    log_event "epoch check OVERRIDDEN for $1 (train.epochs ${have:-unset}, recorded E ${e:-none}, recipe $recipe_hash)"
    return 0
  fi
  [ -n "$e" ] || die 6 "no epoch count E recorded for bundle $bundle_sha and recipe $recipe_hash" "record the pilot's: runner/epochs.sh from-pilot (or your own: runner/epochs.sh set E), or pass --any-epochs"
  die 6 "$RUNNER_TRAIN_CONFIG sets train.epochs ${have:-unset}, the recorded E is $e" "set \"epochs\": $e in its train section, or pass --any-epochs"
}

# step_ablation_cap: an ablation's rental must fit RUNNER_ABLATION_GPU_HOURS: the hours of every
# ablation rental in the ledger (closed: spent; open: at their most, ablation_hours_used) plus this
# job's most (RUNNER_HOURS_ABLATION x RUNNER_DEADLINE_FACTOR, where the reaper ends it). Exit 15.
step_ablation_cap() {
  local used mine
  [ -n "${recipe:-}" ] || return 0
  used=$(ablation_hours_used) || die 15 "cannot read the ablation hours from $LEDGER" "fix the ledger (runner/ledger.sh names bad rows)"
  mine=$(calc 'h * f' h="$RUNNER_HOURS_ABLATION" f="$RUNNER_DEADLINE_FACTOR") || die 15 "cannot compute this job's hours" "check RUNNER_HOURS_ABLATION and RUNNER_DEADLINE_FACTOR"
  is_number "$RUNNER_ABLATION_GPU_HOURS" || die 15 "RUNNER_ABLATION_GPU_HOURS=$RUNNER_ABLATION_GPU_HOURS is not a number" "set it in runner/config.sh"
  if ! awk -v u="$used" -v m="$mine" -v c="$RUNNER_ABLATION_GPU_HOURS" 'BEGIN { exit !(u + m <= c + 1e-9) }' </dev/null; then
    die 15 "ablation GPU-hour cap: $used h used or committed by ablation rentals + $mine h for $job > RUNNER_ABLATION_GPU_HOURS=$RUNNER_ABLATION_GPU_HOURS" "fewer recipes or folds, a lower RUNNER_HOURS_ABLATION, or raise RUNNER_ABLATION_GPU_HOURS deliberately"
  fi
  log_event "ablation cap: $used h + $mine h for $job <= $RUNNER_ABLATION_GPU_HOURS h"
}

# commitments_of LISTFILE: print the dollars already committed, from every job record of ours and a
# successful listing. A record counts at its $/h times the hours left to its deadline; one past its
# deadline (or with none) at RUNNER_UNKNOWN_COMMIT_H, never 0; a record with neither id nor create
# asked rented nothing. A listed instance with no record of ours counts at its $/h times the hours
# left to the deadline its label carries (another operator's box: PREFIX.OPERATOR:JOB:GEN:DEADLINE),
# else (no such label, or overdue) at RUNNER_UNKNOWN_COMMIT_H.
# 1 (a reason on stderr) when a needed $/h is missing. All arithmetic in one awk program of fixed
# text; the listing and records come in as files (tab-separated, empty fields kept).
commitments_of() {
  local recs j out
  recs=$(_vast_tmp) || return 1
  for j in $(jobs_list); do
    printf '%s\t%s\t%s\t%s\t%s\n' "$j" "$(rec_get "$j" instance)" "$(rec_get "$j" dph)" \
      "$(rec_get "$j" deadline)" "$(rec_get "$j" asked)"
  done >"$recs" || { rm -f "$recs"; return 1; }
  out=$(awk -F '\t' -v recs="$recs" -v now="$(now)" -v unk="$RUNNER_UNKNOWN_COMMIT_H" -v pre="$RUNNER_LABEL_PREFIX" '
    function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ || x ~ /^\.[0-9]+$/ }
    BEGIN {
      while ((getline line < recs) > 0) {
        n++; split(line, f, "\t"); job[n] = f[1]; id[n] = f[2]; dph[n] = f[3]; dl[n] = f[4]; asked[n] = f[5]
        if (f[2] != "") mine[f[2]] = 1
      }
    }
    { ldph[$1] = $4
      if (!($1 in mine)) {
        if (!num($4)) { print "instance " $1 " has no dph_total"; bad = 1; exit }
        h = unk; nf = split($3, lf, ":")
        if (nf == 4 && index(lf[1], pre ".") == 1 && lf[4] ~ /^[0-9]+$/ && lf[4] > now) h = (lf[4] - now) / 3600
        c += $4 * h } }
    END {
      if (bad) exit 1
      for (r = 1; r <= n; r++) {
        if (id[r] == "" && asked[r] == "") continue
        d = dph[r]
        if (!num(d) && (id[r] in ldph)) d = ldph[id[r]]
        if (!num(d)) { print "job " job[r] " has no $/h"; exit 1 }
        h = num(dl[r]) ? (dl[r] - now) / 3600 : 0
        if (h <= 0) h = unk
        c += d * h
      }
      if (c == 0) print 0; else printf "%.4f\n", c
    }' "$1") || { rm -f "$recs"; echo "$out" >&2; return 1; }
  rm -f "$recs"
  printf '%s\n' "$out"
}

# step_run_folder JOB: the job's run folder (STORE/runs/OPERATOR/JOB) must not show another live
# generation (two operators who set one RUNNER_OPERATOR).
# A STATUS in a live phase (not DONE or FAIL) of a generation this RUNNER_STATE never launched (none
# of its records or archives) is another operator's launch of JOB training there: two boxes would
# train into one folder, and STATUS, HEARTBEAT and the pilot gate would read the wrong one. exit 4.
step_run_folder() {
  local line g ph
  line=$(store_status_line "$1")
  g=${line%% *} ph=${line#* }
  ph=${ph%% *}
  case $ph in '' | DONE | FAIL) return 0 ;; esac
  [ -n "$g" ] && [ "$g" != "$line" ] || return 0
  [ "$g" != "$(rec_get "$1" gen)" ] || return 0
  if compgen -G "$RUNNER_STATE/archive/$1-$g-*" >/dev/null; then return 0; fi   # ours, ended
  die 4 "job $1's run folder $(store_job_path "$1") shows generation $g in phase $ph, which this RUNNER_STATE never launched: another operator's $1 trains there" "give each operator its own RUNNER_OPERATOR (unset: each RUNNER_STATE's own identity); or wait until that generation ends (DONE or FAIL)"
}

# step_budget KIND: credit must cover estimate + commitments + margin; all three must be measurable.
step_budget() {
  local hours line rc=0 why cuda floor=""
  # a listing whose total kept moving while paging may lack boxes that bill: not measurable
  [ ! -e "$prev_list.partial" ] || die 3 "cannot measure commitments: the account's instances kept changing while the listing was paged" "retry in a minute"
  credit=$(vast_credit) || die 3 "cannot measure credit (show user --raw gave no credit number)" "retry later; check the key"
  commitments=$(commitments_of "$prev_list" 2>"$prev_list.why") || {
    why=$(cat "$prev_list.why" 2>/dev/null)
    rm -f "$prev_list.why"
    die 3 "cannot measure commitments: ${why:-unreadable records}" "retry later"
  }
  rm -f "$prev_list.why"
  # Only hosts whose driver runs the lock's CUDA: an older one would pull the image and fail its
  # smoke check while billing (runner/lib/cuda.sh; the box checks again, runner/box/driver_check.sh).
  cuda=$(lock_cuda "$RUNNER_LOCK") \
    || die 8 "$RUNNER_LOCK has no nvidia-cuda-runtime==X.Y.Z pin: the CUDA version offers must support is unknown" "point RUNNER_LOCK at the image's requirements.lock"
  is_number "$RUNNER_OFFER_MAX_DPH" || die 8 "RUNNER_OFFER_MAX_DPH=$RUNNER_OFFER_MAX_DPH is not a price in \$/h" "set it in runner/config.sh, e.g. 1.50"
  line=$(vast_offer "$cuda" "$RUNNER_OFFER_MAX_DPH") || rc=$?
  # the same search without the floor: how many offers the lock's CUDA rules out (runner/lib/cuda.sh)
  [ "$rc" -gt 2 ] || floor=$(cuda_floor_excludes "$cuda" "$RUNNER_OFFER_MAX_DPH" "${line##*|}")
  case $rc in
    0) say "offer search: $floor" ;;
    2) die 8 "no offer matches RUNNER_OFFER_QUERY with cuda_max_good>=$cuda (the CUDA of $RUNNER_LOCK's torch) and dph_total<=$RUNNER_OFFER_MAX_DPH (RUNNER_OFFER_MAX_DPH); $floor" "loosen RUNNER_OFFER_QUERY in runner/config.sh, raise RUNNER_OFFER_MAX_DPH deliberately, or for an image built against another CUDA point RUNNER_LOCK at its lock (docs/RUNBOOK.md 2.1)" ;;
    *) die 8 "cannot search offers (no valid answer)" "retry later" ;;
  esac
  # id, $/h, and what the ledger row records of the offer: GPU, vCPUs, the driver's CUDA
  IFS='|' read -r offer dph offer_gpu offer_cores offer_cuda _matched <<EOF_OFFER
$line
EOF_OFFER
  hours=$(hours_for "$1")
  estimate=$(calc 'dph * hours' dph="$dph" hours="$hours") || die 3 "cannot compute the estimate" "check RUNNER_HOURS_*"
  { is_number "$credit" && is_number "$RUNNER_MARGIN_USD"; } || die 3 "credit $credit or RUNNER_MARGIN_USD is not a number" "check runner/config.sh"
  if ! awk -v c="$credit" -v e="$estimate" -v k="$commitments" -v m="$RUNNER_MARGIN_USD" 'BEGIN { exit !(c >= e + k + m) }' </dev/null >/dev/null 2>&1; then
    die 3 "credit \$$credit < estimate \$$estimate + commitments \$$commitments + margin \$$RUNNER_MARGIN_USD" "add credit, or lower RUNNER_HOURS_* if the estimate is too high"
  fi
}

# step_go_ahead YES: a person says yes (or --yes for scripted use).
step_go_ahead() {
  local answer=""
  say "offer $offer (${offer_gpu:-GPU ?}, ${offer_cores:-?} vCPUs, driver CUDA ${offer_cuda:-?}) at \$$dph/h; job $job estimated \$$estimate ($(hours_for "$kind") h); credit \$$credit; commitments \$$commitments"
  if [ "$1" = 1 ]; then
    log_event "go-ahead for $job by --yes (offer $offer \$$dph/h est \$$estimate credit \$$credit)"
    return 0
  fi
  printf 'runner: rent it? [y/N] ' >&2
  read -r answer || true
  case $answer in
    y | Y | yes | YES) log_event "go-ahead for $job given interactively (offer $offer)" ;;
    *) die 6 "no go-ahead" "answer y, or pass --yes for scripted use" ;;
  esac
}

# step_reaper: no box is rented without a watcher. RUNNER_REAPER_MODE=start (default) starts
# `runner/reaper.sh --background` when no live reaper holds RUNNER_STATE/reaper.lock; refuse exits 13
# naming that command; off leaves it to the caller (test harnesses that run reaper.sh --once
# themselves). The box's own deadline (HEARSAY_DEADLINE) ends it in every mode.
step_reaper() {
  local lock=$RUNNER_STATE/reaper.lock
  [ "$RUNNER_REAPER_MODE" != off ] || return 0
  if [ -d "$lock" ] && ! lock_stale "$lock"; then return 0; fi
  case $RUNNER_REAPER_MODE in
    start)
      TMPDIR=$user_tmp "$RUNNER_ROOT/reaper.sh" --background </dev/null >&2 \
        || die 13 "no reaper is running and starting one failed" "run: runner/reaper.sh --background" ;;
    *) die 13 "no reaper is running (RUNNER_REAPER_MODE=$RUNNER_REAPER_MODE)" "start it first: runner/reaper.sh --background" ;;
  esac
}

# on_launch_exit: every exit path. Releases the HOLD; a box that is not PROVISIONED is destroyed and its
# absence confirmed; one that cannot be confirmed stays recorded (ORPHAN) and the exit status is 7.
on_launch_exit() {
  local rc=$? until
  trap - EXIT
  trap '' INT TERM HUP    # a second signal must not cut the destroy short: ignored until gone or ORPHAN
  set +e
  hold_release "$job" 2>/dev/null
  if rec_exists "$job" && [ "$(rec_state "$job")" != PROVISIONED ]; then
    [ "$rc" -ne 0 ] || rc=1
    rec_lock "$job" 3000
    until=$(($(now) + RUNNER_LABEL_LAG_S + 10))
    while ! finish_job "$job" LAUNCH_FAILED "${instance:-}"; do
      if [ -z "$(rec_get "$job" asked)" ] && [ -z "${instance:-}" ]; then   # no create asked: no box to wait for
        say "job $job's record could not be archived (disk full?); nothing was rented: runner/reaper.sh or the next launch clears it"
        break
      fi
      if [ -n "$(rec_get "$job" instance)" ] || [ "$(now)" -gt "$until" ]; then
        rc=7
        break
      fi
      sleep "$RUNNER_POLL_S"
    done
    rec_unlock "$job"
  fi
  lock_drop "$budget_lock"
  lock_drop "$launch_lock"
  rm -rf "$launch_tmp"
  exit "$rc"
}

# step_create JOB KIND FOLD: the record first, then the create; the id is persisted the moment it exists.
step_create() {
  local hours t0 dl label provision_by onstart campaign
  campaign_refuse_after                 # exit 16: the deadline passed while this launch waited
  gen=$(new_gen)
  label=$(label_prefix) || die 1 "no operator identity for the label" "see the message above"
  rec_new "$1" || die 4 "a record for job $1 appeared meanwhile" "check runner/status.sh"
  trap on_launch_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  hours=$(hours_for "$2")
  # one clock reading for the deadline and created_at: read twice, a second boundary between them
  # made the record's most hours (deadline - created_at, the ablation cap's) a second short
  t0=$(now)
  dl=$((t0 + $(calc 'hours * factor * 3600' hours="$hours" factor="$RUNNER_DEADLINE_FACTOR" | cut -d. -f1)))
  # the campaign's hard stop (runner/lib/campaign.sh) bounds every job's deadline: the record's, the
  # label's and the box's own
  campaign=$(campaign_deadline) || die 2 "RUNNER_CAMPAIGN_DEADLINE is malformed (see above)" "fix it in runner/config.sh or the environment"
  if [ -n "$campaign" ] && [ "$campaign" -lt "$dl" ]; then
    say "job $1's deadline is the campaign deadline $(iso "$campaign") (its own would be $(iso "$dl"))"
    dl=$campaign
  fi
  label=$label:$1:$gen:$dl   # PREFIX.OPERATOR:JOB:GEN:DEADLINE (label_prefix)
  # The box's own guard from its first second (runner/box/onstart.sh, its on-start command): it
  # ends the box if no chain starts by HEARSAY_PROVISION_BY (the boot deadline and three ssh calls
  # from now, and RUNNER_PROVISION_SLACK_S), or past HEARSAY_DEADLINE, with or without this laptop.
  provision_by=$(($(now) + $(calc 'b + 3 * s + m' b="$RUNNER_BOOT_DEADLINE_S" s="$RUNNER_SSH_TIMEOUT_S" m="$RUNNER_PROVISION_SLACK_S" | cut -d. -f1)))
  # the record first, whole: every field the teardown reads, and the reserve its writes use, is
  # written before the create is asked (asked last: from then on a box may carry the label), so a
  # full disk stops here, nothing rented
  if ! { rec_set "$1" launcher "$$" &&
    rec_set "$1" launcher_start "$(proc_start "$$")" &&
    rec_set "$1" gen "$gen" &&
    rec_set "$1" kind "$2" &&
    rec_set "$1" fold "$3" &&
    rec_set "$1" label "$label" &&
    rec_set "$1" offer "$offer" &&
    rec_set "$1" dph "$dph" &&
    rec_set "$1" offer_gpu "${offer_gpu:-}" &&
    rec_set "$1" offer_cores "${offer_cores:-}" &&
    rec_set "$1" offer_cuda "${offer_cuda:-}" &&
    rec_set "$1" bundle_sha "$bundle_sha" &&
    rec_set "$1" config_hash "$config_hash" &&
    rec_set "$1" recipe_hash "$recipe_hash" &&
    rec_set "$1" recipe "${recipe:-}" &&
    rec_set "$1" created_at "$t0" &&
    rec_set "$1" deadline "$dl" &&
    rec_set "$1" campaign_deadline "$campaign" &&
    rec_set "$1" state CREATING &&
    rec_set "$1" dups_seen 0 &&   # until a listing in the label window shows them all (label_settled)
    rec_set "$1" dup_sweep pending &&   # born unsettled: a create the CLI resends may rent twice
    rec_set "$1" provision_by "$provision_by" &&
    contract_write "$1" "$gen" "$dl" "$campaign" &&   # the box contract (runner/lib/contract.sh)
    rec_reserve "$1" &&                 # room for the teardown's writes if the disk fills later
    rec_set "$1" asked 1; }; then
    die 1 "cannot write job $1's record under $RUNNER_STATE before its create: nothing was rented" "free space under RUNNER_STATE, then launch again"
  fi
  # shellcheck disable=SC2016  # expanded on the box by its on-start shell, not here
  onstart='bash ${HEARSAY_ONSTART:-'"$RUNNER_BOX_ONSTART"'} ${HEARSAY_BOX_DIR:-'"$RUNNER_BOX_DIR"'}'
  if ! instance=$(vast_create "$offer" "$label" "$(contract_create_env "$1" "$provision_by")" "$onstart"); then
    die 1 "create of offer $offer gave no clear success" "the launcher looks for instances carrying its label and destroys them; retry later"
  fi
  rec_set "$1" instance "$instance" || die 1 "cannot persist instance $instance of job $1 (see above)" "the box is destroyed now; a full disk under RUNNER_STATE must be freed"
  rec_set "$1" state CREATED
  step_bill_check "$1"                  # sets billed (the instance's own $/h)
  ledger_append "$instance" "$1" "$gen" "$offer" "$billed" "$(rec_get "$1" created_at)" "$(ledger_offer "$1")" \
    || die 1 "no ledger row for instance $instance" "free space under $LEDGER; the box is destroyed now"
  if gt "$billed" "$RUNNER_OFFER_MAX_DPH"; then
    die 17 "instance $instance bills \$$billed/h, above the price ceiling RUNNER_OFFER_MAX_DPH=\$$RUNNER_OFFER_MAX_DPH/h (its offer was searched at \$$dph/h): destroyed, nothing else rented" "launch again (another offer), or raise RUNNER_OFFER_MAX_DPH deliberately"
  fi
  lock_drop "$budget_lock"                # the record now counts this box: the next launch may go on
  say "created instance $instance (offer $offer, \$$dph/h, label $label)"
  step_sweep "$1"
}

# step_bill_check JOB: the price ceiling checked on our side: the $/h the new instance bills, read back
# (vast_show_dph, a few tries), goes into its record, its contract and its ledger row (billed); over
# RUNNER_OFFER_MAX_DPH, or not readable, the launch stops (exit 17) and the box is destroyed, its ledger
# row closed with the reason (PRICE_CEILING, PRICE_UNKNOWN).
step_bill_check() {
  local i=0
  billed=""
  while [ "$i" -lt "$RUNNER_CONFIRM_CHECKS" ]; do
    billed=$(vast_show_dph "$instance") && break
    i=$((i + 1))
    sleep "$RUNNER_CONFIRM_WAIT_S"
  done
  if ! is_number "$billed"; then
    rec_set "$1" end_reason PRICE_UNKNOWN || true
    ledger_append "$instance" "$1" "$gen" "$offer" "$dph" "$(rec_get "$1" created_at)" "$(ledger_offer "$1")" || true
    die 17 "cannot read the \$/h instance $instance bills (show instance gave no dph_total): destroyed, as the price ceiling cannot be checked" "launch again later"
  fi
  rec_set "$1" dph "$billed" || true
  contract_set_dph "$1" "$billed" || true
  gt "$billed" "$RUNNER_OFFER_MAX_DPH" || return 0
  rec_set "$1" end_reason PRICE_CEILING || true
}

# step_sweep JOB: destroy any duplicate a retried create rented (sweep_label). Never blocks the launch:
# the dup_sweep marker stays in the record until a sweep settles the label (label_settled: a listing
# RUNNER_LABEL_LAG_S after the create, as a resent create may still land), and runner/reaper.sh
# sweeps every record with an id each cycle.
step_sweep() {
  local list rc=0
  list=$(_vast_tmp)
  if vast_list "$list"; then sweep_label "$1" "$list" || rc=$?; else rc=1; fi
  list_rm "$list"
  case $rc in
    1) say "cannot confirm job $1 has no duplicate instance (runner/reaper.sh sweeps label $(rec_get "$1" label))" ;;
    2) log_event "job $1: label swept; it settles with a listing ${RUNNER_LABEL_LAG_S}s after the create (the reaper's, or this launcher's exit)" ;;
  esac
}

# step_wait_running JOB: until the instance is listed running with ssh, or the boot deadline; then its
# label settled (sweep_pending).
step_wait_running() {
  local until list st
  until=$(($(now) + RUNNER_BOOT_DEADLINE_S))
  list=$(_vast_tmp)
  while :; do
    if vast_list "$list" && list_has "$list" "$instance"; then
      st=$(list_field "$list" "$instance" 2)
      host=$(list_field "$list" "$instance" 5)
      port=$(list_field "$list" "$instance" 6)
      case $st in
        running) [ -n "$host" ] && [ -n "$port" ] && break ;;
        exited | offline | error | stopped) die 1 "instance $instance went $st before running" "try another offer" ;;
      esac
    fi
    [ "$(now)" -lt "$until" ] || die 1 "instance $instance not running after $RUNNER_BOOT_DEADLINE_S s" "try another offer"
    sleep "$RUNNER_POLL_S"
  done
  list_rm "$list"
  # the label settles while the box is listed to vouch for the listing (label_settled): a box that
  # ran within RUNNER_LABEL_LAG_S of its create waits out the rest here, as a box whose chain fails
  # ends itself, and after that only its provision-by could settle the label
  sweep_pending "$1" || say "cannot confirm job $1 has no duplicate instance yet (runner/reaper.sh sweeps label $(rec_get "$1" label))"
  rec_set "$1" state RUNNING
  rec_set "$1" ssh "$host:$port"
}

# box_why JOB: the REASON the failed box left in the store (store_reason), polled a few times: the box
# writes it before CHAIN says "failed", but a store may lag.
box_why() {
  local i=0 why=""
  while [ "$i" -lt 5 ]; do
    why=$(store_reason "$1")
    [ -z "$why" ] || break
    i=$((i + 1))
    sleep "$RUNNER_POLL_S"
  done
  printf '%s\n' "${why:-its box left no REASON in the store}"
}

# step_provision JOB: HOLD while provisioning; secrets, then the training config, over stdin; start;
# wait for "GEN running".
step_provision() {
  local envf until line
  hold_set "$1"
  box_send_secrets "$host" "$port" || die 1 "ssh to $host:$port failed sending the store credentials" "check RUNNER_SSH and the box"
  envf=$(_vast_tmp)
  if [ "$kind" != probe ]; then   # a snapshot, so the bytes sent are the bytes hashed (or we stop)
    cp "$RUNNER_TRAIN_CONFIG" "$envf" || die 1 "cannot read $RUNNER_TRAIN_CONFIG" "set RUNNER_TRAIN_CONFIG"
    [ "$(sha256_file "$envf")" = "$config_hash" ] || { rm -f "$envf"; die 1 "$RUNNER_TRAIN_CONFIG changed since it was hashed ($config_hash)" "launch again"; }
    box_send_config "$host" "$port" "$envf" || { rm -f "$envf"; die 1 "ssh to $host:$port failed sending the training config" "check RUNNER_SSH and the box"; }
  fi
  {
    printf 'HEARSAY_JOB=%q\nHEARSAY_KIND=%q\nHEARSAY_FOLD=%q\n' "$1" "$kind" "$fold"
    contract_env "$1"   # generation, store, run path, deadlines, grace, heartbeat period: the contract's
    printf 'HEARSAY_BUNDLE_SHA=%q\nHEARSAY_CONFIG_HASH=%q\nHEARSAY_TRAIN=%q\n' "$bundle_sha" "$config_hash" "${RUNNER_BOX_TRAIN:-hearsay train}"
    printf 'HEARSAY_BUDGET_USD=%q\n' "$estimate"   # the trainer records it in run_meta.json
    printf 'HEARSAY_CPU_CORES=%q\n' "${offer_cores:-}"   # the rental's cpu_cores_effective: the codec pass's processes
  } >"$envf"
  box_start "$host" "$port" "$envf" || { rm -f "$envf"; die 1 "ssh to $host:$port failed starting the chain" "check RUNNER_SSH and the box"; }
  rm -f "$envf"
  until=$(($(now) + RUNNER_CHAIN_DEADLINE_S))
  while :; do
    line=$(box_chain "$host" "$port" || true)
    [ "$line" = "$gen running" ] && break
    [ "$line" != "$gen failed" ] || die 1 "the chain on instance $instance failed at start: $(box_why "$1")" "runner/status.sh --why $1 has its log lines once the box is gone"
    [ "$(now)" -lt "$until" ] || die 1 "chain on instance $instance not confirmed running after $RUNNER_CHAIN_DEADLINE_S s ($(store_job_path "$1")/STATUS: $(store_status "$1"))" "raise RUNNER_CHAIN_DEADLINE_S if its smoke check or bundle pull is slow; runner/status.sh --why $1"
    sleep "$RUNNER_POLL_S"
  done
  hold_release "$1"
}
