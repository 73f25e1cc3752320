# shellcheck shell=bash
# runner/lib/box.sh — talking to a rented box over ssh ($RUNNER_SSH, called exactly like ssh).
# Secrets only ever travel on stdin; the remote commands below carry none.

# box_ssh HOST PORT REMOTE_CMD: run REMOTE_CMD on the box, stdin passed through, with a deadline.
box_ssh() {
  # shellcheck disable=SC2086  # RUNNER_SSH is a command line by design
  with_timeout "$RUNNER_SSH_TIMEOUT_S" $RUNNER_SSH -p "$2" "root@$1" "$3"
}

# The box directory, chosen on the box (a sandbox may set HEARSAY_BOX_DIR; a real box uses the default).
# shellcheck disable=SC2016  # expanded on the box, not here
_box_dir_expr() { printf 'd=${HEARSAY_BOX_DIR:-%s}' "$RUNNER_BOX_DIR"; }

# box_send_secrets HOST PORT: the store's rclone config, through stdin into a mode-600 file on the box.
box_send_secrets() {
  box_ssh "$1" "$2" "umask 077; $(_box_dir_expr); mkdir -p \"\$d\" && cat > \"\$d/rclone.conf.tmp\" && chmod 600 \"\$d/rclone.conf.tmp\" && mv -f \"\$d/rclone.conf.tmp\" \"\$d/rclone.conf\"" \
    <"$RUNNER_RCLONE_CONF"
}

# box_send_config HOST PORT FILE: the training config's exact bytes into BOX_DIR/train.json (before
# job.env, so the chain never starts without it; entry.sh checks its sha256 against job.env's).
box_send_config() {
  box_ssh "$1" "$2" "umask 077; $(_box_dir_expr); mkdir -p \"\$d\" && cat > \"\$d/train.json.tmp\" && mv -f \"\$d/train.json.tmp\" \"\$d/train.json\"" \
    <"$3"
}

# box_start HOST PORT JOBENV_FILE: write job.env (no secrets) and start the chain, detached.
box_start() {
  box_ssh "$1" "$2" "umask 077; $(_box_dir_expr); e=\${HEARSAY_ENTRY:-$RUNNER_BOX_ENTRY}; cat > \"\$d/job.env\" && (nohup bash \"\$e\" \"\$d\" </dev/null >>\"\$d/entry.log\" 2>&1 &)" \
    <"$3"
}

# box_chain HOST PORT: print the box's CHAIN line ("GEN running" once the chain runs), or nothing.
box_chain() {
  box_ssh "$1" "$2" "$(_box_dir_expr); cat \"\$d/CHAIN\" 2>/dev/null || true" </dev/null
}
