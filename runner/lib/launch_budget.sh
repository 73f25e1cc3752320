# shellcheck shell=bash
# runner/lib/launch_budget.sh — runner/launch.sh's steps between its refusals and its create: what
# this account already commits (commitments_of), the budget guard and the offer (step_budget), the
# go-ahead, and a live reaper. They share the launcher's globals (runner/lib/launch_steps.sh).
# shellcheck disable=SC2154  # kind, fold, job, recipe, launch_lock, budget_lock, launch_tmp and user_tmp are set by runner/launch.sh

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
