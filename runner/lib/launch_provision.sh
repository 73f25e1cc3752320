# shellcheck shell=bash
# runner/lib/launch_provision.sh — runner/launch.sh's last steps: the box running (step_wait_running),
# its secrets and job.env sent and its chain confirmed running (step_provision), and why a box that
# failed at start failed (box_why). They share the launcher's globals (runner/lib/launch_steps.sh).
# shellcheck disable=SC2154  # kind, fold, job, recipe, launch_lock, budget_lock, launch_tmp and user_tmp are set by runner/launch.sh

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
