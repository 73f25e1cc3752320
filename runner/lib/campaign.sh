# shellcheck shell=bash
# runner/lib/campaign.sh — the campaign's hard stop, RUNNER_CAMPAIGN_DEADLINE (runner/config.sh).
#
# The setting is an absolute time: epoch seconds (10 digits) or ISO-8601 UTC ending in Z
# (2026-12-05T20:00:00Z, or 2026-12-05T20:00Z); empty = no campaign deadline. Anything else is
# refused with a message naming both forms (runner/launch.sh and runner/reaper.sh exit 2).
# After it: runner/launch.sh refuses (exit 16, nothing rented); runner/reaper.sh ends every box of
# this RUNNER_STATE (result and ledger reason CAMPAIGN_DEADLINE), a box still TRAINING or PUSHING
# after its contract's grace_s more, so it stops its trainer and pushes its checkpoints first.
# A launch before it clamps the job's deadline to it (the record's deadline, the label's and the
# box's HEARSAY_DEADLINE), so the box ends itself there too, laptop or not; the job's contract keeps
# the campaign deadline it was launched under, and the judge (runner/lib/judge.sh) applies the earlier
# of that and its own setting, so a reaper started before the setting still ends the box — one set
# after the launch was never told to the box, and the reaper says it ends that box without warning.

# campaign_deadline: print RUNNER_CAMPAIGN_DEADLINE in epoch seconds; nothing when it is empty; 1
# (said on stderr) when it is not one of the two forms.
campaign_deadline() {
  local v=${RUNNER_CAMPAIGN_DEADLINE:-} e t
  [ -n "$v" ] || return 0
  if [[ $v =~ ^[0-9]{10}$ ]]; then printf '%s\n' "$v"; return 0; fi
  if [[ $v =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?Z$ ]]; then
    t=$v
    [ ${#t} -eq 20 ] || t="${t%Z}:00Z"
    e=$(epoch_of "$t")
    # a date the calendar lacks (2026-02-30) must not be rolled over into another day
    if is_number "$e" && [ "$(iso "$e")" = "$t" ]; then printf '%s\n' "$e"; return 0; fi
  fi
  echo "runner: RUNNER_CAMPAIGN_DEADLINE='$v' is not a time (give epoch seconds, 10 digits, e.g. 1796500800, or ISO-8601 UTC ending in Z, e.g. 2026-12-05T20:00:00Z; empty for none)" >&2
  return 1
}

# campaign_refuse_after: runner/launch.sh's check (before anything is listed or rented, and again
# just before the create): exit 2 on a malformed setting, 16 once the deadline has passed.
campaign_refuse_after() {
  local cdl
  cdl=$(campaign_deadline) || die 2 "RUNNER_CAMPAIGN_DEADLINE is malformed (see above)" "fix it in runner/config.sh or the environment"
  [ -n "$cdl" ] || return 0
  [ "$(now)" -lt "$cdl" ] \
    || die 16 "the campaign deadline $(iso "$cdl") (RUNNER_CAMPAIGN_DEADLINE) has passed: nothing is rented" "the campaign is over: runner/reaper.sh ends its boxes, runner/teardown_check.sh confirms none is left; set a later RUNNER_CAMPAIGN_DEADLINE deliberately to go on"
}
