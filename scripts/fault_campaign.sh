#!/usr/bin/env bash
# Usage: scripts/fault_campaign.sh [--scenarios N] [--seed S] [--jobs J] [--keep DIR] [--only I[,I...]] [--from I] [--campaign-every K]
# Summary: seeded random fault scenarios against the runner; prints instances left, ledger rows vs creations, secrets seen, healthy boxes destroyed, final pushes cut
#
# Each scenario gets its own fake vast.ai API (tests/fakes/fake_vast.py, real vastai CLI), its own
# local rclone store, sandbox boxes (tests/runner/bin/fake_ssh.sh) and runner state. It draws, from
# its seed: faults at every API step (listing errors, {}, null, empty and non-JSON answers, 429s,
# creates that fail with or without an instance, creates dropped after renting that the CLI resends
# (up to 3 boxes per launch, maybe none answered), destroys failing N times, listing lag after
# destroy), ssh failures, a failing smoke check or trainer, a launcher killed (SIGKILL) at a random
# moment, a relaunch under the same job name, and deadlines that run out. Then the faults stop (a
# service recovers) and runner/reaper.sh --once runs until no job record is left, nothing is listed
# or still landing, and no ledger row waits in the spool (at most 30 cycles).
# Counted per scenario and in total: our instances still live on the fake, ledger rows vs instances
# the fake created for us (the boxes another operator rents on the account, the churn fault's
# "someone-else", are not ours: one the runner ended counts as a healthy box destroyed), unseen
# creates (rows id unseen:LABEL: a create whose answer never came, judged after its box's
# provision-by, its box if any gone unseen), creations without a row (neither by id nor by an unseen
# row for its label), ledger rows left open, secrets (API key, store secret) seen in any output, log,
# temp file or process list (sampled every 0.2 s). Goal: 0 left, 0 creations without a row, no more
# rows than creations, 0 open, 0 secrets, 0 healthy boxes destroyed, 0 DONE without the run, every
# box of a gone laptop ended by itself.
#
# Every K-th scenario (--campaign-every, default 5; 0 = none) is a whole campaign instead of one
# launch: a pilot, then a job per fold of the stand-in bundle (its meta's n_folds: five) and full
# launched at the same time, a looping reaper
# started by the first launch (RUNNER_REAPER_MODE=start). Any scenario may also draw: the state
# folder or the ledger's folder on a small tmpfs that fills up mid-run and is freed later (root
# only; otherwise not drawn), empty locks left behind (ledger, launch, reaper), two TERMs to a
# launcher, a create that lands late (answered with an error, rented 8 s after that answer: inside
# the label window, RUNNER_LABEL_LAG_S=20 here, the runner's bound on how long after it is asked a
# create can land; the CLI's own seconds under load count too),
# the looping reaper SIGKILLed and restarted, a launcher's pid reused by another process, and a
# vanished laptop (every launcher and the reaper SIGKILLed; the boxes end at their own deadline);
# others renting between two pages of a listing, a failed destroy answered by empty pages, a lying
# `show instance`, and launchers and reapers in different time zones and locales (gone_faults, tz).
# Box-side kinds (drawn after all of the above): the chain killed without its exit trap mid-run
# (entry.sh alone: the box's on-start guard ends it; or every process of the box, guard included:
# the reaper ends it on its stale heartbeat), a store that acknowledges pushes and keeps nothing or
# loses one file, the laptop gone after the create and before provisioning (no reaper runs until
# its boxes have ended themselves: each runs its create's on-start guard from boot, through
# tests/runner/bin/fake_boot.sh), and a ledger whose folder does not exist yet. Also counted: healthy
# boxes destroyed (ended for a dead chain in a scenario that killed none), DONE in the store without
# the run's run_meta.json, and boxes of a gone laptop that did not end themselves.
# The kinds aimed at the box contract and its one judge (drawn after all of the above; each 8%:
# scripts/fault_campaign/draws.sh draw_operator_faults): an image that does not beat launched with
# --no-heartbeat (nobeat), the reapers after the launch on another RUNNER_STORE (otherstore), the
# laptop's wall clock stepped +1000 s between two of their looks (clockstep), a campaign deadline set
# after the launch (latedeadline), a second operator's launch of the same job, its own RUNNER_STATE
# and ledger, the same store (twoops), a search that shows a lower $/h than the instance bills, over
# RUNNER_OFFER_MAX_DPH (pricelie), runner/teardown_check.sh from a second laptop with an empty state
# and the ledger copied while the boxes bill (teardown2). Their columns (goal 0 each): final pushes
# cut (a box destroyed in PUSHING before its deadline + grace, seen by the fake's destroy_cmd), late
# deadlines waited on (the reaper waiting for a final push the box was never told to make), run
# folders shared (two generations in one run folder at once), teardown confirmed while billing (exit
# 0 while a row of its ledger was open and its box billed), over the price ceiling (a box over it
# provisioned, or a ledger $/h that is not the instance's own). A healthy box destroyed covers the
# beat-less image, the other store and the clock step.
# Rows count rentals (distinct ids; the ledger is append-only), open = ids whose last row is not a
# closing row (a box re-adopted after it was judged gone has a re-open row until it ends);
# secrets are searched in every file of the scenario's folder but the store's own rclone.conf copies.
#
# The harness is split: scripts/fault_campaign/draws.sh (the draws), scenario.sh (one world and its
# story), faults.sh (what the faults do), judge.sh (the result line).
#
# Scenario I is drawn from the seed and I alone (and --campaign-every), so --from I (run I..N)
# continues a stopped run and --only I,J,... replays just those scenarios. J scenarios run at a
# time; a finished one makes room for the next. Each scenario's result line goes to DIR/rI.txt.
#
# A long run, stopped and continued: `--scenarios 400 --keep DIR` (stopped at any point: ^C, a
# reboot), then `--scenarios 400 --keep DIR --from I` with the same --seed and --campaign-every
# (DIR/campaign.args holds them; a continuation with others is refused, exit 2). I is the first
# scenario without a result (the summary of the stopped run, or of `--from N+1`, which runs
# nothing, names them). With --keep the summary counts the result of every scenario 1..N found in
# DIR (rI.txt: earlier runs' results count), and names each one missing (no rI.txt, or one without
# its result line: a scenario cut off by the stop), which misses the goal; the seconds are this
# run's. Without --keep it counts the scenarios of this run (--from I: I..N). --only narrows both.
#
# The last line also says how many scenarios rented a box at all: on an overloaded machine the CLI
# calls time out before any create, and such a scenario proves nothing.
# Exit codes: 0 goal met; 1 goal missed (the failing and the missing scenarios are named); 2 usage,
#   or --keep DIR holds a campaign of another --seed or --campaign-every.

# shellcheck disable=SC2030,SC2031  # each scenario's world is a subshell on purpose, its helpers run in it
set -euo pipefail
[ -n "${RUNNER_DEBUG:-}" ] && set -x
repo=$(cd "$(dirname "$0")/.." && pwd)
n=200 seed=1 jobs=2 keep="" only="" from=1 every=5
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) sed -n '2,/^[^#]*$/{/^#/!d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
    --scenarios) n=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    --campaign-every) every=$2; shift 2 ;;
    *) echo "fault_campaign: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
export PATH="$repo/.venv/bin:$PATH"
for c in jq curl vastai rclone python3; do
  command -v "$c" >/dev/null || { echo "fault_campaign: missing $c (make install; scripts/system-deps.sh)" >&2; exit 2; }
done
for v in "$n" "$seed" "$jobs" "$from" "$every"; do
  case $v in '' | *[!0-9]*) echo "fault_campaign: $v is not a whole number (see --help)" >&2; exit 2 ;; esac
done
# our boxes still live in the fake's state: another operator's (the churn fault's "someone-else")
# are no rentals of ours
OURS_LIVE='[.instances[] | select(.label != "someone-else" and .destroyed_at == null)] | length'
top=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/fault_campaign.XXXXXX")}
mkdir -p "$top"
# what draws the scenarios: a continuation in the same folder must draw the same ones
args="seed=$seed campaign-every=$every"
if [ -s "$top/campaign.args" ] && [ "$(cat "$top/campaign.args")" != "$args" ]; then
  echo "fault_campaign: $top holds a campaign of $(cat "$top/campaign.args"), not $args: continue it with those, or use another --keep folder" >&2
  exit 2
fi
echo "$args" >"$top/campaign.args"
# shellcheck source=scripts/fault_campaign/draws.sh
. "$repo/scripts/fault_campaign/draws.sh"
# shellcheck source=scripts/fault_campaign/faults.sh
. "$repo/scripts/fault_campaign/faults.sh"
# shellcheck source=scripts/fault_campaign/scenario.sh
. "$repo/scripts/fault_campaign/scenario.sh"
# shellcheck source=scripts/fault_campaign/judge.sh
. "$repo/scripts/fault_campaign/judge.sh"

echo "fault campaign: scenarios $from-$n, seed $seed, $jobs at a time, in $top" >&2
start=$(date +%s)
i=$((from - 1))
while [ "$i" -lt "$n" ]; do
  i=$((i + 1))
  case ",${only:-$i}," in *",$i,"*) ;; *) continue ;; esac
  # a pool, not batches: a whole campaign takes minutes, a single launch seconds
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  scenario "$i" $((seed * 100003 + i)) >"$top/r$i.txt" 2>"$top/r$i.err" &
done
wait
# the summary: scenario I's result line from DIR/rI.txt, for each selected I of 1..N with --keep (a
# continuation: earlier runs' results count) or of from..N without; one without it is missing
first=$from
[ -z "$keep" ] || first=1
want=0 missing=""
i=$((first - 1))
while [ "$i" -lt "$n" ]; do
  i=$((i + 1))
  case ",${only:-$i}," in *",$i,"*) ;; *) continue ;; esac
  want=$((want + 1))
  grep -m 1 "^$i seed=" "$top/r$i.txt" 2>/dev/null || missing="$missing $i"
done >"$top/results.txt"
cat "$top/results.txt"
awk -v want="$want" -v missing="$missing" -v top="$top" -v t=$(( $(date +%s) - start )) '
  { n++; for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] += kv[2] }
    if ($0 !~ /left=0 / || $0 !~ /open=0 / || $0 !~ /secrets=0$/ || $0 !~ /healthy_killed=0 / || $0 !~ /done_without_run=0 / || $0 !~ /not_self_ended=0 /) bad = bad " " $1
    split($0, a, "created="); split(a[2], b, " "); split($0, c, "rows="); split(c[2], d, " ")
    if ($0 ~ / missing=/) {   # every creation has its row (by id, or its label unseen), and no row is for nothing
      if ($0 !~ / missing=0 / || d[1] + 0 > b[1] + 0) bad = bad " " $1
    } else if (b[1] != d[1]) bad = bad " " $1   # a result kept from before unseen rows: rows = creations
    # the contract columns (a result kept from before them has none: nothing to miss)
    if ($0 ~ / (push_cut|late_waited|shared_run|false_confirm|over_ceiling)=[1-9]/) bad = bad " " $1
    if (b[1] + 0 > 0) rented++ }
  END {
    printf "scenarios %d | instances left %d | ledger rows %d vs creations %d | unseen creates %d | creations without a row %d | rows open %d | secrets seen %d | healthy boxes destroyed %d | DONE without the run %d | boxes of a gone laptop not self-ended %d | final pushes cut %d | late deadlines waited on %d | run folders shared %d | teardown confirmed while billing %d | over the price ceiling %d | %ds | %d rented a box\n",
      n, v["left"], v["rows"], v["created"], v["unseen"], v["missing"], v["open"], v["secrets"], v["healthy_killed"], v["done_without_run"], v["not_self_ended"],
      v["push_cut"], v["late_waited"], v["shared_run"], v["false_confirm"], v["over_ceiling"], t, rented
    if (missing != "") printf "missing scenarios (%d of %d, no result: continue with --from the first, same --seed and --keep):%s\n", want - n, want, missing
    if (bad != "") print "failing scenarios:" bad
    if (bad != "" && top != "") { split(bad, ids, " "); for (k in ids) {   # where each secret was seen
      f = top "/r" ids[k] ".err"; while ((getline l < f) > 0) if (l ~ /^secret seen: /) print "scenario " ids[k] ": " l; close(f) } }
    if (bad != "" || missing != "") exit 1
  }' "$top/results.txt"
