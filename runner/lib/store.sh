# shellcheck shell=bash
# runner/lib/store.sh — the store (an rclone remote) as the runner sees it: where a job's files live
# and the STATUS line its box writes there ("GEN PHASE EPOCH"). Every path passes guard_path.
# shellcheck source=runner/lib/state.sh
. "$RUNNER_ROOT/lib/state.sh"
# shellcheck source=runner/lib/contract.sh
. "$RUNNER_ROOT/lib/contract.sh"

# store_operator: the path segment that keeps operators apart in the store: RUNNER_OPERATOR (e.g. a
# campaign's name, to collect its runs from another machine), or this RUNNER_STATE's operator identity
# (operator_id, the OPERATOR of its labels). One segment: letters, digits, '.', '_', '-'. 1 (said) else.
store_operator() {
  local o=${RUNNER_OPERATOR:-}
  [ -n "$o" ] || o=$(operator_id) || return 1
  case $o in
    .* | *[!A-Za-z0-9._-]*)
      echo "runner: RUNNER_OPERATOR='$o' is not one path segment (use letters, digits, '.', '_' and '-', not starting with '.')" >&2
      return 1 ;;
  esac
  printf '%s\n' "$o"
}

# store_new_job_path JOB: STORE/runs/OPERATOR/JOB, guarded: the run folder a launch of JOB from here
# gets. The one spelling of that layout: runner/lib/contract.sh writes it into the job's contract
# (run_path), and every reader asks store_job_path.
store_new_job_path() {
  local o
  o=$(store_operator) || return 1
  guard_path "${RUNNER_STORE%/}/runs/$o/$1"
}

# store_job_path JOB: JOB's run folder, guarded: the contract's run_path (where its box writes STATUS,
# HEARTBEAT, REASON and its runs), checked against the contract's store, not this shell's
# RUNNER_STORE, so a reaper started from another campaign's shell still reads each box where it
# writes. A record from an older runner (no run_path): its store's runs/JOB. No record (a launch
# before its create, collect after the record was archived): store_new_job_path.
store_job_path() {
  local s p
  p=$(contract_get "$1" run_path)
  if [ -z "$p" ]; then
    rec_exists "$1" || { store_new_job_path "$1"; return; }
    s=$(contract_get "$1" store)
    p=${s:-${RUNNER_STORE%/}}/runs/$1
  fi
  s=$(contract_get "$1" store)
  RUNNER_STORE=${s:-${RUNNER_STORE%/}} guard_path "$p"
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
store_status_of() { status_phase_in "$(store_status_line "$1")" "$2"; }

# status_phase_in LINE GEN: the PHASE of a STATUS line ("GEN PHASE EPOCH [beats=yes|no]") written by
# generation GEN; nothing when it is another generation's or has no phase.
status_phase_in() {
  local line=$1 gen=$2 sgen phase
  case $line in *" "*) ;; *) return 0 ;; esac   # "GEN PHASE EPOCH": a line without a phase is none
  sgen=${line%% *}
  phase=${line#* }
  phase=${phase%% *}
  if [ -z "$gen" ] || [ "$sgen" != "$gen" ]; then
    return 0
  fi
  printf '%s\n' "$phase"
}

# status_beats_in LINE GEN: "yes" or "no" when generation GEN's STATUS line declares whether its box
# writes HEARTBEAT (a field beats=yes|no after the epoch: runner/box/status.sh); nothing when it is
# another generation's line or says nothing (an image older than the field). Split on each single
# space, as hearsay.contracts.status.beats_of does.
status_beats_in() {
  local rest=$1 f i=0
  [ -n "$2" ] && [ "${rest%% *}" = "$2" ] || return 0
  while :; do
    f=${rest%% *}
    if [ "$i" -ge 3 ]; then
      case $f in beats=yes) echo yes; return 0 ;; beats=no) echo no; return 0 ;; esac
    fi
    [ "$rest" != "$f" ] || return 0
    rest=${rest#* } i=$((i + 1))
  done
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
