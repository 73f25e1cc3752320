# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # the scenario's variables, shared by bash's dynamic scope with scenario.sh
# scripts/fault_campaign/judge.sh — the counts of one scenario of scripts/fault_campaign.sh, read from
# what its world left (the fake API's state, the ledger, the store, the sandbox boxes, every file for
# secrets), printed as its result line.
# shellcheck disable=SC2031  # runs in the scenario's subshell, on its variables

# judge_world: in the scenario's world once its reaper is done; prints "I seed=S story | left=L ...".
judge_world() {
  st=$(curl -fsS "$VAST_URL/_control/state")
  echo "$st" >"$W/fake_state.json"
  kill "$(cat "$W/fake.pid")" 2>/dev/null || true
  # ours: every box but the ones another operator rented on the account (the churn fault's
  # "someone-else"): those are no rental of ours, and the runner must never end one
  left=$(jq "$OURS_LIVE" <<<"$st")
  created=$(jq '[.instances[] | select(.label != "someone-else")] | length' <<<"$st")
  others_ended=$(jq '[.instances[] | select(.label == "someone-else" and .destroyed_at != null)] | length' <<<"$st")
  rows=0 open=0 unseen=0 missing=$created
  # the ledger: the first laptop's, and the second operator's rows after it (twoops)
  local lg=$LEDGER
  if [ -f "$W/ledger2.csv" ]; then
    lg=$W/ledger.all.csv
    { cat "$LEDGER" 2>/dev/null || head -n 1 "$W/ledger2.csv"; tail -n +2 "$W/ledger2.csv"; } >"$lg"
  fi
  if [ -f "$lg" ]; then   # append-only: rentals = distinct ids, open = ids whose last row is not a closing row (a re-opened one is open)
    # rows by instance id; an unseen create's row (id unseen:LABEL: runner/lib/ledger.sh) has no id
    # and stands for the box its label may have rented
    rows=$(awk -F, 'NR > 1 && index($1, "unseen:") != 1 && !($1 in s) { s[$1] = 1; n++ } END { print n + 0 }' "$lg")
    unseen=$(awk -F, 'NR > 1 && index($1, "unseen:") == 1 && !($1 in s) { s[$1] = 1; n++ } END { print n + 0 }' "$lg")
    # missing: a box of ours with neither a row by its id nor an unseen row for its label
    missing=$(jq -r '.instances[] | select(.label != "someone-else") | "\(.id)\t\(.label)"' <<<"$st" \
      | awk -F'\t' 'FILENAME != "-" { split($0, f, ","); if (FNR > 1) have[f[1]] = 1; next }
          !(($1 in have) || (("unseen:" $2) in have)) { m++ } END { print m + 0 }' "$lg" -)
    open=$(awk -F, 'NR > 1 { if (!($1 in s)) { s[$1] = 1; o[++n] = $1 } c[$1] = ($7 != "") }
      END { for (i = 1; i <= n; i++) if (!c[o[i]]) k++; print k + 0 }' "$lg")
    [ -z "$mnt" ] || cp "$LEDGER" "$W/ledger.final.csv" 2>/dev/null || true
  fi
  [ -z "$mnt" ] || { cp -a "$RUNNER_STATE" "$W/state.final" 2>/dev/null; umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null; } || true
  # every file of the scenario but the store's own credentials (rclone.conf and its box copies)
  secrets=$( { grep -r -l -e "$key" -e "$secret" "$W" --exclude=rclone.conf --exclude='rclone.conf.*' --exclude=fake_state.json 2>/dev/null || true; } | wc -l)
  if [ "$secrets" -gt 0 ]; then   # where: each line that holds one, the secret masked (to rI.err)
    grep -r -n -e "$key" -e "$secret" "$W" --exclude=rclone.conf --exclude='rclone.conf.*' --exclude=fake_state.json 2>/dev/null \
      | sed -e "s/$key/<API key>/g" -e "s/$secret/<store secret>/g" | cut -c 1-400 >"$W/secret_lines" || true
    sed "s/^/secret seen: /" "$W/secret_lines" >&2
  fi
  local healthy=0 norun=0
  # a healthy box destroyed: ended for a dead chain (the reaper's HEARTBEAT, the guard's "without
  # its exit trap") in a scenario that killed no chain
  if [ -z "$killchain" ]; then
    healthy=$(( $(cat "$RUNNER_STATE"/archive/*/result "$W"/state.final/archive/*/result "$W"/state2/archive/*/result 2>/dev/null | grep -c '^HEARTBEAT' || true) \
      + $(cat "$W"/boxes/box-*/run/onstart.log 2>/dev/null | grep -c 'without its exit trap' || true) ))
  fi
  # a DONE in the store whose run folder holds no complete run (run_meta.json), probes aside
  # (found at any depth: a store path may carry an operator's or campaign's folder)
  while IFS= read -r f; do
    case $(basename "$(dirname "$f")") in probe) continue ;; esac
    if grep -q ' DONE ' "$f" && ! ls "$(dirname "$f")"/*/*/run_meta.json >/dev/null 2>&1; then norun=$((norun + 1)); fi
  done < <(find "$W/bucket/hearsay/runs" -name STATUS 2>/dev/null)
  # the laptop gone before provisioning: its boxes must have ended themselves before any reaper ran
  # (a box stuck loading never boots, so never runs its on-start guard: the reaper's, not counted)
  local unended=0
  [ "$selfend" != FAIL ] || [ "$stuck" = true ] || unended=1
  judge_contract
  echo "$i seed=$s$story | left=$left created=$created rows=$rows unseen=$unseen missing=$missing open=$open healthy_killed=$((healthy + others_ended)) done_without_run=$norun not_self_ended=$unended push_cut=$cut late_waited=$late_waited shared_run=$shared false_confirm=$confirm over_ceiling=$over secrets=$secrets"
}

# judge_contract: the columns of the kinds aimed at the box contract and its judge, into the caller's
#   cut           final pushes cut: boxes destroyed in PUSHING before their deadline + grace_s
#                 (the fake's destroy_cmd, scripts/fault_campaign/destroyed.sh, saw the phase)
#   late_waited   latedeadline: the reaper said a box "stops its trainer and pushes its checkpoints
#                 first" although the only deadline passed was the late campaign one, never told the box
#                 (not counted where the job's own deadline, a vanish or a clock step passed one too)
#   shared        run folders in which two generations ran at once (any two boxes: the same
#                 HEARSAY_RUN_PATH in their job.env, lives from job.env written to DONE/FAIL or destroy)
#   confirm       teardown2: rows open in the second laptop's ledger copy whose box still billed after
#                 its teardown_check said "confirmed" (exit 0)
#   over          pricelie: boxes billing over RUNNER_OFFER_MAX_DPH that were provisioned (a chain ran
#                 on them), or whose ledger $/h is not the one the instance bills
judge_contract() {
  local dl="$W/boxes/destroyed.log"
  cut=0 late_waited=0 shared=0 confirm=0 over=0
  [ ! -f "$dl" ] || cut=$(awk '$2 == "PUSHING" && !($4 ~ /^[0-9]+$/ && $5 ~ /^[0-9]+$/ && $3 >= $4 + $5) { n++ } END { print n + 0 }' "$dl")
  if [ "$latedeadline" = 1 ]; then
    case " $story " in *" deadline "* | *" vanish "* | *" clockstep "*) ;; *)
      late_waited=$(grep -c 'pushes its checkpoints first' "$W/reaper.out" 2>/dev/null || true) ;;
    esac
  fi
  shared=$(shared_runs)
  [ ! -s "$W/teardown2" ] || confirm=$(cut -d' ' -f2 "$W/teardown2")
  [ "$pricelie" = 0 ] || over=$(over_ceiling)
  late_waited=${late_waited:-0} confirm=${confirm:-0}
}

# shared_runs: how many pairs of boxes ran one run folder at once (a box's life: from its job.env to
# its DONE or FAIL, or to its destroy, whichever came first).
shared_runs() {
  local b env port end ph t
  for b in "$W"/boxes/box-*; do
    env=$b/run/job.env
    [ -f "$env" ] || continue
    port=${b##*-}
    end=$(awk -v p="$port" '$6 == p { print $3; exit }' "$W/boxes/destroyed.log" 2>/dev/null || true)
    ph=$(cat "$b/run/PHASE" 2>/dev/null) || ph=""
    case $ph in DONE | FAIL) t=$(stat -c %Y "$b/run/PHASE"); { [ -n "$end" ] && [ "$end" -le "$t" ]; } || end=$t ;; esac
    printf '%s %s %s %s\n' "$(grep -m 1 '^HEARSAY_RUN_PATH=' "$env")" "$(grep -m 1 '^HEARSAY_GEN=' "$env")" "$(stat -c %Y "$env")" "${end:-9999999999}"
  done | awk '{ p[NR] = $1; g[NR] = $2; s[NR] = $3; e[NR] = $4 }
    END { for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++)
            if (p[i] == p[j] && g[i] != g[j] && s[i] < e[j] && s[j] < e[i]) n++
          print n + 0 }'
}

# over_ceiling: boxes of ours billing over RUNNER_OFFER_MAX_DPH that a chain ran on, plus those whose
# id rows in the ledger carry another $/h than the instance's own (but a rental closed PRICE_UNKNOWN:
# no $/h could be read, so its rows keep the search's).
over_ceiling() {
  local n=0 id port dph
  while read -r id port dph; do
    awk -v d="$dph" -v m="$RUNNER_OFFER_MAX_DPH" 'BEGIN { exit !(d > m) }' || continue
    [ ! -f "$W/boxes/box-$port/run/job.env" ] || n=$((n + 1))
    # (its rows, open and closing, carry the same $/h: a PRICE_UNKNOWN closing row exempts them all)
    if [ -f "$lg" ] && awk -F, -v id="$id" -v d="$dph" '$1 == id { x = $5 - d; if (x > 0.001 || x < -0.001) bad = 1
        if ($13 ~ /^PRICE_UNKNOWN/) unknown = 1 } END { exit !(bad && !unknown) }' "$lg"; then
      n=$((n + 1))
    fi
  done < <(jq -r '.instances[] | select(.label != "someone-else") | "\(.id) \(.ssh_port) \(.dph_total)"' <<<"$st")
  echo "$n"
}
