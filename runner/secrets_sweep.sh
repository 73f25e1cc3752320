#!/usr/bin/env bash
# Usage: runner/secrets_sweep.sh
# Summary: search everything the runner keeps or the boxes pushed for the runner's secrets; record the result
#
# The secrets: the vast.ai API key (VAST_API_KEY, and the CLI's key file
# ${XDG_CONFIG_HOME:-~/.config}/vastai/vast_api_key, whichever exist: where the vastai CLI finds it)
# and every secret value of the store's rclone config RUNNER_RCLONE_CONF (an option whose name holds
# secret, token, pass, credentials or sas_url, or is key, ..._key or ..._key_id). They are read from
# those files into grep's pattern pipe and never printed, logged or put on a command line.
# Swept: every file under RUNNER_STATE (the event log runner.log, the job records, their archive),
# the ledger LEDGER, and every file of the store's run folders RUNNER_STORE/runs/ (what the boxes
# pushed: STATUS, REASON, train.log, step logs, scores, reports), copied through rclone into a
# private temp folder; files over RUNNER_SWEEP_MAX_MB MiB (checkpoints) are counted, not read. The
# rclone config and the key file themselves are not swept.
# Prints "secrets sweep: clean: ..." or names each file holding a secret (never the secret), and
# appends one line to the event log, read by the report's G5 (hearsay.contracts.event_log):
#   secrets sweep: files=N secrets=S hits=H store=read|unreadable over_cap=K where=P1, P2
# (where=-: no hit). runner/teardown_check.sh runs it once teardown is confirmed.
# Exit codes: 0 clean (no secret in any file, the store's run folders read); 1 a secret found (each
#   file named on stderr: delete it, rotate the secret); 2 could not sweep (the store cannot be
#   listed or copied, a file cannot be read, no secret to look for): never "clean"; 10 missing
#   dependency or no store credentials; 11 no API key; 64 usage.
set -euo pipefail
export RUNNER_SCRIPT=secrets_sweep
# shellcheck source=runner/lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=runner/lib/guard.sh
. "$RUNNER_ROOT/lib/guard.sh"

case ${1:-} in
  -h | --help) usage_from "$0"; exit 0 ;;
  '') ;;
  *) die 64 "unknown argument: $1 (it takes none)" "run runner/secrets_sweep.sh without arguments; see --help" ;;
esac
need grep find awk mktemp
need "${RUNNER_RCLONE%% *}"
key_guard || exit 11
store_conf_guard || exit 10
is_number "$RUNNER_SWEEP_MAX_MB" || die 64 "RUNNER_SWEEP_MAX_MB=$RUNNER_SWEEP_MAX_MB is not a number of MiB" "unset it for 64"
keyfile="${XDG_CONFIG_HOME:-$HOME/.config}/vastai/vast_api_key"

# secrets: one secret a line on stdout, for grep -f (a pipe, never argv; no variable ever holds one,
# so RUNNER_DEBUG's set -x cannot print it). Values are trimmed as the CLI and rclone trim them;
# empty ones are dropped (an empty pattern would match every file).
secrets() {
  { if [ -n "${VAST_API_KEY:+set}" ]; then printenv VAST_API_KEY; echo; fi
    if [ -r "$keyfile" ]; then cat "$keyfile"; echo; fi
    awk -F= 'NF > 1 && !/^[ \t]*[#;]/ { n = $1; gsub(/[ \t]/, "", n); n = tolower(n)
      if (n ~ /secret|token|pass|credentials|sas_url/ || n ~ /(^|_)key(_id)?$/) { sub(/^[^=]*=/, ""); print } }' \
      "$RUNNER_RCLONE_CONF"
  } | awk '{ gsub(/^[ \t\r]+|[ \t\r]+$/, "") } length($0) > 0'
}

umask 077
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hearsay-sweep.XXXXXX") || die 2 "cannot make a temp folder under ${TMPDIR:-/tmp}" "free space there or set TMPDIR"
trap 'rm -rf "$tmp"' EXIT
n_secrets=$(secrets | awk 'END { print NR }')
[ "$n_secrets" -gt 0 ] || die 2 "no secret to look for (the API key and $RUNNER_RCLONE_CONF hold none)" "check VAST_API_KEY and RUNNER_RCLONE_CONF"

# 1. The store's run folders, copied here (files up to the cap). A store that cannot be listed is
# "unreadable", never "nothing pushed"; a listable store without runs/ had nothing pushed.
store=${RUNNER_STORE%/}
runs=$(guard_path "$store/runs") || exit 2
rcl() {
  # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
  RCLONE_CONFIG="$RUNNER_RCLONE_CONF" with_timeout "$RUNNER_SWEEP_TIMEOUT_S" $RUNNER_RCLONE "$@" \
    --retries 2 --low-level-retries 2 </dev/null 2>>"$tmp/rclone.err"
}
store_state=read over_cap=0
mkdir "$tmp/store"
if ! rcl lsf --dirs-only --max-depth 1 "$store" >"$tmp/top"; then
  store_state=unreadable
elif grep -qx 'runs/' "$tmp/top"; then
  if rcl lsf -R --files-only --format sp "$runs" >"$tmp/listing"; then
    # "SIZE;PATH" a line: PATH may hold ';', SIZE cannot
    awk -v cap="$RUNNER_SWEEP_MAX_MB" -v want="$tmp/want" '{ s = $0; sub(/;.*/, "", s); p = substr($0, length(s) + 2)
      if (s + 0 <= cap * 1048576) print p > want; else over++ } END { print over + 0 }' "$tmp/listing" >"$tmp/over"
    over_cap=$(cat "$tmp/over")
    if [ -s "$tmp/want" ] && ! rcl copy "$runs" "$tmp/store" --files-from-raw "$tmp/want" --no-traverse; then
      store_state=unreadable
    fi
  else
    store_state=unreadable
  fi
fi
[ "$store_state" = read ] || say "the store $store cannot be read, so its run folders are not swept (check RUNNER_STORE and RUNNER_RCLONE_CONF; rclone said: $(tail -n 1 "$tmp/rclone.err" 2>/dev/null))"

# 2. One grep over every file: the state folder, the ledger, the store's copy.
set -- "$tmp/store"
[ ! -e "$RUNNER_STATE" ] || set -- "$@" "$RUNNER_STATE"
[ ! -e "$LEDGER" ] || set -- "$@" "$LEDGER"
files=$(find "$@" -type f ! -path "$RUNNER_RCLONE_CONF" ! -path "$keyfile" | awk 'END { print NR }')
rc=0
grep -r -l -F -f <(secrets) -- "$@" >"$tmp/hits" 2>"$tmp/grep.err" || rc=$?
# each hit, the store's copy named by its remote path; the rclone config and the key file are exempt
awk -v t="$tmp/store/" -v r="$runs/" -v c="$RUNNER_RCLONE_CONF" -v k="$keyfile" '$0 != c && $0 != k {
  if (index($0, t) == 1) $0 = r substr($0, length(t) + 1); print }' "$tmp/hits" >"$tmp/where"
hits=$(awk 'END { print NR }' "$tmp/where")
where=$(awk 'BEGIN { ORS = "" } { print (NR > 1 ? ", " : "") $0 } END { if (NR == 0) print "-" }' "$tmp/where")
log_event "secrets sweep: files=$files secrets=$n_secrets hits=$hits store=$store_state over_cap=$over_cap where=$where"

if [ "$hits" -gt 0 ]; then
  while IFS= read -r p; do say "a secret is in $p (delete it there, then rotate that secret: the vast.ai key or the store's token)"; done <"$tmp/where"
  exit 1
fi
if [ "$rc" -gt 1 ]; then
  say "cannot read every file (grep said: $(head -n 1 "$tmp/grep.err")): not proven clean (fix the file's permissions and sweep again)"
  exit 2
fi
[ "$store_state" = read ] || exit 2
echo "secrets sweep: clean: $files files (RUNNER_STATE, the ledger, $runs; $over_cap over ${RUNNER_SWEEP_MAX_MB} MiB not read) hold none of $n_secrets secrets"
