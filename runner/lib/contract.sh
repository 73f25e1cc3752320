# shellcheck shell=bash
# runner/lib/contract.sh — the box contract: one file per job, jobs/JOB/contract, written once by
# runner/launch.sh just before its create (contract_write) from the launch's one reading of the
# settings, and the only source of the numbers both sides judge a box by: the box gets them in its
# environment (contract_create_env at the create, contract_env in job.env), runner/lib/judge.sh reads
# them from here, never from this machine's settings of the day.
#
# One "NAME=VALUE" line per field (values are single words):
#   store              RUNNER_STORE the job was launched with: its STATUS, HEARTBEAT and REASON are
#                      read there, whatever store the reader's shell has (epoch s below)
#   run_path           the job's run folder, STORE/runs/OPERATOR/JOB (runner/lib/store.sh
#                      store_new_job_path): the box writes STATUS, HEARTBEAT, REASON and its runs
#                      there; every reader asks store_job_path, which reads it here
#   gen                the launch's generation (STATUS and HEARTBEAT lines carry it)
#   deadline           the job's hard stop, epoch s (already clamped to the campaign deadline)
#   campaign_deadline  the campaign deadline it was launched under, epoch s; empty: none
#   grace_s            the final push's grace, s: at a deadline the box stops its trainer and pushes;
#                      its watchdog, its on-start guard and the reaper all wait this long (RUNNER_FINAL_PUSH_GRACE_S)
#   heartbeat_s        how often the box's chain writes HEARTBEAT, s (RUNNER_HEARTBEAT_S)
#   heartbeat_stale_s  a beating box whose HEARTBEAT shows no progress this long is dead, s; 0 = never
#   beats              yes | no: whether the image writes HEARTBEAT (RUNNER_IMAGE_BEATS, declared for
#                      RUNNER_IMAGE); "yes" is trusted only once the box confirms it: its
#                      generation's STATUS line carries beats=yes (runner/box/status.sh, from the
#                      first STATUS on); without that word the box is judged by STATUS and deadline
#   dph                the $/h the instance bills, read back after the create (`show instance`);
#                      "pending" until then — the one field set after the create (contract_billed)
# A record without a contract (launched by an older runner) reads as: this machine's RUNNER_STORE,
# the record's gen and deadline, and beats "yes" (judged only once a beat is seen); without run_path,
# its store's runs/JOB (store_job_path).

contract_file() { printf '%s/contract\n' "$(rec_dir "$1")"; }

# whole_s SECONDS: rounded up to whole seconds (a stale limit of 0.5 is 1 s, not 0, which is "off").
whole_s() { awk -v x="$1" 'BEGIN { y = int(x); if (y < x) y++; print y }'; }

# contract_write JOB GEN DEADLINE CAMPAIGN_DEADLINE: write the contract whole (atomically), from the
# settings now. 1 (said) when it cannot be written or a setting is malformed.
contract_write() {
  local f tmp v run_path
  for v in "$RUNNER_FINAL_PUSH_GRACE_S" "$RUNNER_HEARTBEAT_S" "$RUNNER_HEARTBEAT_STALE_S"; do
    is_number "$v" || { echo "runner: RUNNER_FINAL_PUSH_GRACE_S, RUNNER_HEARTBEAT_S and RUNNER_HEARTBEAT_STALE_S must be numbers of seconds (got '$v'; fix runner/config.sh)" >&2; return 1; }
  done
  case $RUNNER_IMAGE_BEATS in yes | no) ;; *)
    echo "runner: RUNNER_IMAGE_BEATS=$RUNNER_IMAGE_BEATS is neither yes nor no (say whether RUNNER_IMAGE writes HEARTBEAT, runner/config.sh)" >&2
    return 1 ;;
  esac
  run_path=$(store_new_job_path "$1") || return 1
  f=$(contract_file "$1")
  tmp=$f.tmp.$$
  {
    printf 'store=%s\nrun_path=%s\n' "${RUNNER_STORE%/}" "$run_path"
    printf 'gen=%s\ndeadline=%s\ncampaign_deadline=%s\n' "$2" "$3" "$4"
    printf 'grace_s=%s\nheartbeat_s=%s\nheartbeat_stale_s=%s\n' "$(whole_s "$RUNNER_FINAL_PUSH_GRACE_S")" "$RUNNER_HEARTBEAT_S" "$(whole_s "$RUNNER_HEARTBEAT_STALE_S")"
    printf 'beats=%s\ndph=pending\n' "$RUNNER_IMAGE_BEATS"
  } >"$tmp" 2>/dev/null && mv -f "$tmp" "$f" 2>/dev/null && return 0
  rm -f "$tmp" 2>/dev/null
  echo "runner: cannot write job $1's contract $f (disk full?)" >&2
  return 1
}

# contract_billed JOB DPH: the $/h the instance bills, once read back after the create (by the
# launcher, or by whoever ends a box whose launcher died first), into the job's record and its
# contract. Fails when the contract cannot be written (the record's dph is set regardless).
contract_billed() {
  local f
  rec_set "$1" dph "$2" || true
  f=$(contract_file "$1")
  [ -f "$f" ] || return 1
  awk -v d="$2" '/^dph=/ { print "dph=" d; next } { print }' "$f" >"$f.tmp.$$" 2>/dev/null \
    && mv -f "$f.tmp.$$" "$f" 2>/dev/null && return 0
  rm -f "$f.tmp.$$" 2>/dev/null
  return 1
}

# contract_get JOB FIELD: the field's value (empty when the contract leaves it empty); a field the
# contract lacks (a record without a contract file, or one an older runner wrote) reads as the older
# runner's (above).
contract_get() {
  local f
  f=$(contract_file "$1")
  [ -f "$f" ] && awk -v k="$2" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); f = 1; exit }
    END { exit !f }' "$f" && return 0
  case $2 in
    store) printf '%s\n' "${RUNNER_STORE%/}" ;;
    gen | deadline | campaign_deadline | dph) rec_get "$1" "$2" ;;
    grace_s) whole_s "$RUNNER_FINAL_PUSH_GRACE_S" ;;
    heartbeat_s) printf '%s\n' "$RUNNER_HEARTBEAT_S" ;;
    heartbeat_stale_s) whole_s "$RUNNER_HEARTBEAT_STALE_S" ;;
    beats) echo yes ;;
  esac
}

# contract_create_env JOB PROVISION_BY: the --env words of the create (the box's on-start guard reads
# them from its first second: runner/box/onstart.sh).
contract_create_env() {
  local cdl
  cdl=$(contract_get "$1" campaign_deadline)
  printf -- '-e HEARSAY_JOB=%s -e HEARSAY_GEN=%s -e HEARSAY_DEADLINE=%s -e HEARSAY_DEADLINE_GRACE_S=%s -e HEARSAY_PROVISION_BY=%s%s\n' \
    "$1" "$(contract_get "$1" gen)" "$(contract_get "$1" deadline)" "$(contract_get "$1" grace_s)" "$2" \
    "${cdl:+ -e HEARSAY_CAMPAIGN_DEADLINE=$cdl}"
}

# contract_env JOB: the contract's lines of the box's job.env (runner/box/job.sh reads them).
contract_env() {
  printf 'HEARSAY_GEN=%q\nHEARSAY_STORE=%q\n' "$(contract_get "$1" gen)" "$(contract_get "$1" store)"
  printf 'HEARSAY_RUN_PATH=%q\n' "$(store_job_path "$1")"                         # its run folder
  printf 'HEARSAY_DEADLINE=%q\n' "$(contract_get "$1" deadline)"                   # the box stops itself there
  printf 'HEARSAY_CAMPAIGN_DEADLINE=%q\n' "$(contract_get "$1" campaign_deadline)" # when that is the campaign's (its REASON says so)
  printf 'HEARSAY_DEADLINE_GRACE_S=%q\n' "$(contract_get "$1" grace_s)"            # its final push's time
  printf 'HEARSAY_HEARTBEAT_S=%q\n' "$(contract_get "$1" heartbeat_s)"             # how often the chain beats
}
