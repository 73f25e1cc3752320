# shellcheck shell=bash
# runner/lib/state.sh — job records under $RUNNER_STATE/jobs/JOB/, one small file per field.
#
# Fields: gen kind fold state instance label offer dph created_at deadline launcher launcher_start
#   bundle_sha config_hash asked result HOLD dup_sweep retry gone_since beat why
#   offer_gpu offer_cores offer_cuda (the chosen offer: gpu_name, cpu_cores_effective, cuda_max_good)
#   campaign_deadline (the RUNNER_CAMPAIGN_DEADLINE it was launched under, epoch s; empty: none)
#   campaign_wait (when the reaper first left it its final push past a deadline) end_reason (why it ended)
#   contract (the box contract: runner/lib/contract.sh) beat ("EPOCH MONO LOOKS LINE": runner/lib/judge.sh)
#   provision_by (epoch s: its box's on-start guard ends a box no chain reached by then) dups_seen
#   (0 from the create, 1 once a listing showed its own box, so any duplicate of its label too:
#   runner/lib/teardown.sh unseen_rental); .reserve (ballast: rec_reserve)
# States: CREATING (create asked, id not yet known) → CREATED (id persisted) → RUNNING (box up) →
#         PROVISIONED (chain confirmed running) ; DESTROYING ; ORPHAN (destroy not confirmed).
# A record leaves jobs/ (moved to archive/; removed when it cannot be: rec_archive) only after its
# instance is confirmed gone.

rec_dir() { printf '%s/jobs/%s\n' "$RUNNER_STATE" "$1"; }

rec_exists() { [ -d "$(rec_dir "$1")" ]; }

# rec_get JOB FIELD: the value, or empty.
rec_get() { cat "$(rec_dir "$1")/$2" 2>/dev/null || true; }

# rec_set JOB FIELD VALUE: atomic (write + rename), so a killed writer never leaves half a value.
# Both the write and the rename are checked: 1 (said on stderr) when the value did not persist, e.g.
# on a full disk; the old value, if any, stays whole.
rec_set() {
  local d
  d=$(rec_dir "$1")
  [ -d "$d" ] || { echo "runner: record of job $1 is gone (another runner archived it)" >&2; return 1; }
  if { printf '%s\n' "$3" >"$d/.$2.$$"; } 2>/dev/null && mv -f "$d/.$2.$$" "$d/$2" 2>/dev/null; then
    return 0
  fi
  rm -f "$d/.$2.$$" 2>/dev/null
  echo "runner: cannot write $2 of job $1 under $d (disk full? free space under RUNNER_STATE)" >&2
  log_event "cannot write $2 of job $1"
  return 1
}

# rec_new JOB: create the record directory (fails if one exists: never overwrite a live record).
rec_new() { mkdir -p "$RUNNER_STATE/jobs" && mkdir "$(rec_dir "$1")"; }

# rec_created JOB: the epoch second the record's create counts from, its created_at; a record without
# one (lost, or an older runner's unchecked write) counts from its folder's mtime instead, never an
# earlier second, as every field is written after created_at's clock reading (a label window then
# ends later, an unseen row's hours are a few seconds short). 1 when neither can be read.
rec_created() {
  local c
  c=$(rec_get "$1" created_at)
  is_number "$c" || c=$(mtime_of "$(rec_dir "$1")")
  is_number "$c" || return 1
  printf '%s\n' "${c%%.*}"
}

# rec_lock JOB [TRIES] / rec_unlock JOB: serialise changes to one record (launcher vs reaper). On a
# full disk (the lock's owner cannot be written) the record's reserve (rec_reserve) is given back
# and the lock taken again: whoever locks a record then may have to end it, and needs the room.
rec_lock() {
  local rc=0
  lock_take "$RUNNER_STATE/jobs/.$1.lock" "${2:-600}" || rc=$?
  if [ "$rc" = 2 ] && [ -e "$(rec_dir "$1")/.reserve" ]; then
    rec_reserve_free "$1"
    log_event "job $1: its record's reserve given back (the state disk is full)"
    rc=0; lock_take "$RUNNER_STATE/jobs/.$1.lock" "${2:-600}" || rc=$?
  fi
  return "$rc"
}
rec_unlock() { lock_drop "$RUNNER_STATE/jobs/.$1.lock"; }

rec_state() { rec_get "$1" state; }

# rec_reserve JOB: RUNNER_RECORD_RESERVE_KB KiB of ballast in the record (.reserve), written with
# its fields before the create is asked; rec_reserve_free JOB gives it back as the record's ending
# starts (rec_lock on a full disk, finish_job, and rec_archive for the endings that do not go
# through it). A state disk that fills while the box is rented then still has room for the
# ending's own writes (the lock's owner, the id, state, reason and dups_seen, a page each, and the
# archive's), so a full disk cannot keep a label from settling and turn a destroyed box into an
# ORPHAN. 1 (said on stderr) when it cannot be written.
rec_reserve() {
  local f kb
  f=$(rec_dir "$1")/.reserve
  kb=$(reserve_kb) || return 1
  if { head -c "$((kb * 1024))" /dev/zero >"$f"; } 2>/dev/null; then return 0; fi
  rm -f "$f" 2>/dev/null
  echo "runner: cannot write the $kb KiB reserve of job $1 under $RUNNER_STATE (disk full? free space under RUNNER_STATE)" >&2
  return 1
}

# reserve_kb: RUNNER_RECORD_RESERVE_KB once checked (a whole number: bash arithmetic on anything
# else is an error that ends a `set -e` script such as the reaper); 1, said on stderr, otherwise.
reserve_kb() {
  case $RUNNER_RECORD_RESERVE_KB in
    '' | *[!0-9]*) echo "runner: RUNNER_RECORD_RESERVE_KB must be a whole number of KiB, not '$RUNNER_RECORD_RESERVE_KB'" >&2; return 1 ;;
  esac
  printf '%s\n' "$RUNNER_RECORD_RESERVE_KB"
}
rec_reserve_free() { rm -f "$(rec_dir "$1")/.reserve" 2>/dev/null || true; }

# rec_reserve_renew JOB: a live record whose reserve was given back while its box runs on (its lock
# taken on a full disk) gets it again once its disk has 16 times the reserve free (runner/reaper.sh,
# each cycle): never written into a disk's last free pages, where it would make the next writer's
# disk full. A record that is ending (CREATING, DESTROYING, ORPHAN) is left as it is.
rec_reserve_renew() {
  local d free_kb kb
  d=$(rec_dir "$1")
  [ -d "$d" ] && [ ! -e "$d/.reserve" ] && [ -n "$(rec_get "$1" asked)" ] || return 0
  case $(rec_state "$1") in CREATED | RUNNING | PROVISIONED) ;; *) return 0 ;; esac
  kb=$(reserve_kb 2>/dev/null) || return 0   # malformed: said by the launch that wrote none
  free_kb=$(df -Pk "$d" 2>/dev/null | awk 'NR == 2 { print $4 }')
  is_number "$free_kb" && [ "$free_kb" -ge $((kb * 16)) ] || return 0
  if rec_reserve "$1" 2>/dev/null; then log_event "job $1: its record's reserve written again"; fi
}

# rec_archive JOB: move the record out of jobs/ (only once its ending is complete: its instance
# confirmed gone, its ledger rows written, its label settled). A record that cannot be archived
# (a full disk) has nothing left to guard: it is removed instead, said on stderr (its rental is in
# the ledger; only its history under archive/ is lost). 1 when even that failed (the record stays
# in jobs/ and is seen again).
rec_archive() {
  local d a
  d=$(rec_dir "$1")
  rec_reserve_free "$1"
  a="$RUNNER_STATE/archive/$1-$(rec_get "$1" gen)-$(now)-$$"
  if mkdir -p "$RUNNER_STATE/archive" 2>/dev/null && rec_set "$1" state DESTROYED 2>/dev/null \
    && mv "$d" "$a" 2>/dev/null; then
    log_event "job $1 archived to $a"
    return 0
  fi
  rm -rf "$d" 2>/dev/null && [ ! -e "$d" ] || return 1
  echo "runner: job $1's record could not be archived under $RUNNER_STATE (disk full?): removed, its ending complete (the ledger holds whatever it rented)" >&2
  log_event "job $1: record removed, not archived"
}

# jobs_list: the job names with a live record.
jobs_list() {
  local d
  for d in "$RUNNER_STATE"/jobs/[!.]*; do
    [ -d "$d" ] && basename "$d"
  done
  return 0
}

# HOLD: "EPOCH PID START" in jobs/JOB/HOLD (START: proc_start of PID). Fresh = younger than
# RUNNER_HOLD_TTL_S and its setter still the same running process.
hold_set() { rec_set "$1" HOLD "$(now) $$ $(proc_start "$$")"; }

hold_release() { rm -f "$(rec_dir "$1")/HOLD"; }

hold_fresh() {
  local v t p rest
  v=$(rec_get "$1" HOLD)
  [ -n "$v" ] || return 1
  t=${v%% *}
  rest=${v#"$t"}
  rest=${rest# }
  p=${rest%% *}
  rest=${rest#"$p"}
  is_number "$t" || return 1
  [ $(($(now) - t)) -lt "$RUNNER_HOLD_TTL_S" ] || return 1
  [ -z "$p" ] || proc_is "$p" "${rest# }"
}

# launcher_alive JOB: the launch.sh that owns the record is still running: its pid runs and started
# when the record says (launcher_start), so a pid reused by another program is not the launcher.
launcher_alive() {
  local p
  p=$(rec_get "$1" launcher)
  [ -n "$p" ] && proc_is "$p" "$(rec_get "$1" launcher_start)"
}

# new_gen: a generation id, unique per launch.
new_gen() { printf 'g%s-%s-%s\n' "$(date -u +%Y%m%dT%H%M%SZ)" "$$" "$RANDOM$RANDOM"; }

# operator_id: this RUNNER_STATE's operator identity, RUNNER_STATE/operator (8 hex digits, made once
# on first use with a hard link, so two runners starting together agree). Every label this state
# creates carries it, and only instances carrying it are ever adopted: two operators on one account
# (two RUNNER_STATE folders) never take each other's boxes. 1 (said on stderr) when it is unreadable.
# Copying a RUNNER_STATE folder copies its identity: give a second operator a fresh folder.
operator_id() {
  local f=$RUNNER_STATE/operator v
  v=$(cat "$f" 2>/dev/null || true)
  if [ -z "$v" ]; then
    mkdir -p "$RUNNER_STATE" 2>/dev/null || true
    { od -An -N4 -tx1 /dev/urandom | tr -d ' \n'; echo; } >"$f.$$" 2>/dev/null && ln "$f.$$" "$f" 2>/dev/null
    rm -f "$f.$$"
    v=$(cat "$f" 2>/dev/null || true)
  fi
  case $v in
    '' | *[!0-9a-z]*)
      echo "runner: no readable operator identity in $f (free space under RUNNER_STATE, or restore the file; never edit it while a box of this state runs)" >&2
      return 1 ;;
  esac
  printf '%s\n' "$v"
}

# label_prefix: RUNNER_LABEL_PREFIX.OPERATOR, the start of every label this state creates
# (PREFIX.OPERATOR:JOB:GEN:DEADLINE, DEADLINE in epoch seconds: another operator's budget guard
# counts the box at its hours left).
label_prefix() {
  local o
  o=$(operator_id) || return 1
  printf '%s.%s\n' "$RUNNER_LABEL_PREFIX" "$o"
}
