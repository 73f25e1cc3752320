# shellcheck shell=bash
# runner/lib/launch_create.sh — runner/launch.sh's create: its exit path (on_launch_exit), the record,
# the box contract and the create itself (step_create), the instance's own $/h against the ceiling
# (step_bill_check), and the label's sweep. They share the launcher's globals
# (runner/lib/launch_steps.sh).
# shellcheck disable=SC2154  # kind, fold, job, recipe, launch_lock, budget_lock, launch_tmp and user_tmp are set by runner/launch.sh

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
  contract_billed "$1" "$billed" || true
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
