# shellcheck shell=bash
# runner/lib/gone.sh — the one rule for "this instance is gone", used by every caller: the destroy
# confirmation, the duplicate sweep, label adoption, the reaper, a relaunch and runner/teardown_check.sh.
#
# A successful listing that lacks an instance proves its absence only when the listing can be told
# from an API hiccup (a well-formed empty page):
#   - it is complete (no LISTFILE.partial: the account's total did not move while paging), and it
#     still shows the account's other known boxes (every instance id of our other live records, at
#     least one); or
#   - `show instance ID` agrees (exactly {"instances": null}).
# Anything else is UNKNOWN, and unknown never closes a ledger row or archives a record.
# Needs runner/lib/state.sh (records) and runner/lib/vast.sh (listings, show).

# known_others [ID]: the instance ids of our live records (jobs/), ID left out; one per line.
known_others() {
  local j i
  for j in $(jobs_list); do
    i=$(rec_get "$j" instance)
    [ -z "$i" ] || [ "$i" = "${1:-}" ] || printf '%s\n' "$i"
  done | sort -u
}

# listing_vouches LISTFILE [ID]: 0 when the listing is complete and shows every other known box (at
# least one); 1 when it is partial or lacks one of them; 2 when no other box of ours is known (the
# listing alone then cannot tell an empty account from a hiccup).
listing_vouches() {
  local k n=0
  [ ! -e "$1.partial" ] || return 1
  for k in $(known_others "${2:-}"); do
    list_has "$1" "$k" || return 1
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || return 2
}

# gone_judge LISTFILE ID: 0 = gone (absent, and the listing vouches or show instance agrees);
# 1 = listed; 2 = unknown.
gone_judge() {
  local v=0
  list_has "$1" "$2" && return 1
  listing_vouches "$1" "$2" || v=$?
  [ "$v" != 0 ] || return 0
  vast_show_gone "$2" && return 0
  log_event "instance $2 missing from a listing that cannot vouch for it ($( [ "$v" = 1 ] && echo 'partial, or lacks a known box' || echo 'no other known box'); show instance does not agree): unknown"
  return 2
}

# destroy_confirmed ID: destroy, then wait until gone_judge says gone on a fresh listing. Bounded:
# RUNNER_DESTROY_TRIES destroy calls, RUNNER_CONFIRM_CHECKS listings after each. 0 = confirmed gone,
# 1 = not confirmed (still listed, or unknown).
destroy_confirmed() {
  local id=$1 try=0 check list
  case $id in '' | *[!0-9]*) log_event "destroy_confirmed: no instance id ('$id'): nothing confirmed"; return 1 ;; esac
  list=$(_vast_tmp) || return 1
  while [ "$try" -lt "$RUNNER_DESTROY_TRIES" ]; do
    try=$((try + 1))
    vast_destroy "$id"
    check=0
    while [ "$check" -lt "$RUNNER_CONFIRM_CHECKS" ]; do
      check=$((check + 1))
      sleep "$RUNNER_CONFIRM_WAIT_S"
      if vast_list "$list" && gone_judge "$list" "$id"; then
        list_rm "$list"
        log_event "instance $id confirmed gone"
        return 0
      fi
    done
  done
  list_rm "$list"
  log_event "instance $id NOT confirmed gone after $try destroy calls"
  return 1
}
