# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # the scenario's variables, shared by bash's dynamic scope with scenario.sh
# scripts/fault_campaign/draws.sh — the seeded draws of scripts/fault_campaign.sh: which faults a
# scenario gets. Each reads bash's RANDOM, seeded per scenario from --seed and the scenario's number;
# a new kind is drawn after every older draw, so an older seed's stories replay unchanged.
# pick VAR CHOICES...: a seeded draw into VAR (no $(...): a subshell would not advance RANDOM here).
pick() {
  local var=$1
  shift
  # shellcheck disable=SC2031  # each scenario subshell seeds RANDOM itself
  shift $((RANDOM % $#))
  printf -v "$var" '%s' "$1"
}

# gone_faults: the faults aimed at the rule for "gone" and at paging, each its own draw (drawn after
# every older fault, so older stories replay): others renting between two pages of a listing
# (churn), a destroy that fails while listings come back as empty pages (baddestroy+emptypage), and
# a `show instance` that answers "no such instance" for boxes that run (lyingshow). Uses scenario's add.
gone_faults() {
  local r
  r=$((RANDOM % 100)); [ $r -lt 10 ] && add '{"op":"list","kind":"churn","prob":0.3,"times":8}' churn
  r=$((RANDOM % 100)); [ $r -lt 8 ] && { add '{"op":"destroy","kind":"error","times":3}' baddestroy
    add '{"op":"list","kind":"error","status":200,"body":{"instances":[],"total_instances":0},"prob":0.5,"times":6}' emptypage; }
  r=$((RANDOM % 100)); [ $r -lt 8 ] && add '{"op":"show","kind":"error","status":200,"body":{"instances":null},"times":4}' lyingshow
  return 0
}

# draw_box_faults: the box-side fault kinds, into the caller's killchain storedrop gone noledgerdir:
#   chain   the chain killed without its trap mid-run: entry.sh alone (the box's guard ends it) or
#           the whole box's processes, guard included (the reaper ends it on its stale heartbeat)
#   drop    a store that acknowledges pushes and keeps nothing, or loses one file (the box: FAIL)
#   gone    the laptop gone after the create, before provisioning (the box ends itself, no reaper)
#   noledgerdir  the ledger's folder does not exist yet
draw_box_faults() {
  local r
  r=$((RANDOM % 100)); [ $r -lt 12 ] && { pick killchain entry box; story="$story killchain-$killchain"; }
  r=$((RANDOM % 100)); [ $r -lt 10 ] && { pick storedrop all model.safetensors; story="$story storedrop-$storedrop"; }
  r=$((RANDOM % 100)); [ $r -lt 8 ] && { gone=1; story="$story gone"; }
  r=$((RANDOM % 100)); [ $r -lt 8 ] && { noledgerdir=1; story="$story noledgerdir"; }
  return 0
}

# draw_operator_faults: the kinds aimed at the box contract and its one judge, into the caller's
# nobeat otherstore clockstep latedeadline twoops pricelie teardown2 (each 0 or 1, 8% each; drawn
# after every older kind, so older stories replay):
#   nobeat        an image that does not beat (its store keeps no HEARTBEAT), launched --no-heartbeat
#   otherstore    the reapers after the launch run with another RUNNER_STORE (another campaign's shell)
#   clockstep     this laptop's wall clock steps +1000 s after the first of those reapers' looks
#   latedeadline  a campaign deadline set after the launch: RUNNER_CAMPAIGN_DEADLINE, 4 s after the
#                 launchers end, in those reapers' environment only (the box was never told)
#   twoops        a second operator (its own RUNNER_STATE and ledger, the same store) launches the
#                 same job while the first one's box trains
#   pricelie      the search shows a lower $/h than the instance bills (the fake's bill_markup, $2/h
#                 more: every box over RUNNER_OFFER_MAX_DPH)
#   teardown2     runner/teardown_check.sh from a second laptop (an empty RUNNER_STATE, the ledger
#                 copied) while the boxes run, its first listing page answered empty
draw_operator_faults() {
  local r k
  for k in nobeat otherstore clockstep latedeadline twoops pricelie teardown2; do
    r=$((RANDOM % 100))
    if [ $r -lt 8 ]; then printf -v "$k" 1; story="$story $k"; else printf -v "$k" 0; fi
  done
}
