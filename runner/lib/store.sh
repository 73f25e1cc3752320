# shellcheck shell=bash
# runner/lib/store.sh — the store (an rclone remote) as the runner sees it: where a job's files live
# and the STATUS line its box writes there ("GEN PHASE EPOCH"). Every path passes guard_path.
# shellcheck source=runner/lib/contract.sh
. "$RUNNER_ROOT/lib/contract.sh"

# store_job_path JOB: STORE/runs/JOB, guarded, where STORE is the one in JOB's contract (the store it
# was launched with, runner/lib/contract.sh), not this shell's RUNNER_STORE: a reaper started from
# another campaign's shell still reads each box where that box writes. Without a record: RUNNER_STORE.
store_job_path() {
  local s
  s=$(contract_get "$1" store)
  s=${s:-${RUNNER_STORE%/}}
  RUNNER_STORE=$s guard_path "$s/runs/$1"
}

# store_status JOB: print "PHASE" of the STATUS written by generation GEN of the record; nothing when
# there is no STATUS, it cannot be read, or it belongs to another generation (that is "no status").
# The rule is hearsay.contracts.status.phase_of's (tests/test_bash_spellings.py holds the two alike);
# it stays in bash because the reaper polls it and must not wait on a Python start.
store_status() { store_status_of "$1" "$(rec_get "$1" gen)"; }

# store_cat JOB NAME: JOB's run-folder file NAME (STATUS, train.log, ...) on stdout, read at the
# job's own store (store_job_path); non-zero when it is absent or cannot be read.
store_cat() {
  local path
  path=$(store_job_path "$1") || return 1
  # shellcheck disable=SC2086  # RUNNER_RCLONE is a command line by design
  RCLONE_CONFIG="$RUNNER_RCLONE_CONF" with_timeout "$RUNNER_CLI_TIMEOUT_S" \
    $RUNNER_RCLONE cat "$path/$2" --retries 1 --low-level-retries 1 2>/dev/null </dev/null
}

# store_status_line JOB: the first line of JOB's STATUS, whatever its generation; nothing when there
# is none or it cannot be read.
store_status_line() { store_cat "$1" STATUS | head -n 1 || true; }

# store_status_of JOB GEN: the same for generation GEN of JOB, with or without a record.
store_status_of() {
  local job=$1 gen=$2 line sgen phase
  line=$(store_status_line "$job")
  case $line in *" "*) ;; *) return 0 ;; esac   # "GEN PHASE EPOCH": a line without a phase is none
  sgen=${line%% *}
  phase=${line#* }
  phase=${phase%% *}
  if [ -z "$gen" ] || [ "$sgen" != "$gen" ]; then
    return 0
  fi
  printf '%s\n' "$phase"
}

# store_reason JOB: print "PHASE: WHY" from the REASON the box of the record's generation left
# (its first line "GEN PHASE EPOCH", then the failure); nothing when there is none, it cannot be
# read or it belongs to another generation. The log lines after it: runner/status.sh --why JOB.
store_reason() {
  local gen text head
  gen=$(rec_get "$1" gen)
  text=$(store_cat "$1" REASON | head -n 2) || true
  head=${text%%$'\n'*}
  [ -n "$gen" ] && [ "${head%% *}" = "$gen" ] && [ "$text" != "$head" ] || return 0
  head=${head#* }
  printf '%s: %s\n' "${head%% *}" "${text#*$'\n'}"
}
