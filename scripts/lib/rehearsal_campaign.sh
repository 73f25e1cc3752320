# shellcheck shell=bash
# scripts/lib/rehearsal_campaign.sh: the campaign's stages, sourced by scripts/rehearsal.sh: pilot, its
# gate and E, the ablation and the extra corpus's decision, the fan-out, a box killed and resumed,
# every job done, the codec copies pulled here.

# --- pilot -> E, ablation (begin) ------------------------------------------------------------------
# The pilot trains the campaign's recipe for 1 epoch (its own config: train.json's recipe, another
# epoch count); the E rule turns its fold-4 readout into the finals' epoch count.
recipe_of() { bash -c '. "$1/runner/lib/common.sh" && . "$1/runner/lib/bundles.sh" && . "$1/runner/lib/recipe.sh" && recipe_hash "$2"' _ "$REPO" "$1"; }
do_pilot() {
  local rc=0 pdir readout
  launch fold 0 || rc=$?
  [ "$rc" -eq 6 ] || { fail "fold 0 before the pilot: exit $rc, expected 6 (no DONE pilot)"; return 1; }
  jq -c '.train.epochs = 1' "$RUNNER_TRAIN_CONFIG" >"$W/pilot.json"
  RUNNER_TRAIN_CONFIG=$W/pilot.json launch pilot
  wait_until 900 "pilot ended and destroyed" gone pilot
  done_by_reaper pilot || { fail "pilot ended $(archived_result pilot): $(RUNNER_TRAIN_CONFIG=$W/pilot.json why pilot)"; return 1; }
  pdir=$W/bucket/hearsay/runs/rehearsal/pilot/$BUNDLE/$(sha256sum "$W/pilot.json" | cut -d' ' -f1)
  readout=$(RUNNER_TRAIN_CONFIG=$W/pilot.json "$REPO/runner/status.sh" --why pilot | grep '^READOUT') \
    || { fail "runner/status.sh --why pilot shows no READOUT of the pilot"; return 1; }
  say_detail "fold 0 refused before it (exit 6); pilot $(jq -r '.steps' "$pdir/run_meta.json") steps, DONE; $readout"
}
do_pilot_gate() {
  [ -f "$RUNNER_STATE/pilots/$BUNDLE-$(recipe_of "$RUNNER_TRAIN_CONFIG")" ] || { fail "no pilot marker for bundle $BUNDLE recipe $(recipe_of "$RUNNER_TRAIN_CONFIG")"; return 1; }
  say_detail "pilots/$BUNDLE-$(recipe_of "$RUNNER_TRAIN_CONFIG" | cut -c1-12)… (the recipe: train.json without train.epochs)"
}
do_pilot_e() {
  local e rc=0
  e=$("$REPO/runner/epochs.sh" from-pilot --pilot-config "$W/pilot.json" --factor 3 | tail -n 1)
  [ "$e" = 3 ] || { fail "E from the 1-epoch pilot x 3 is $e, expected 3"; return 1; }
  RUNNER_TRAIN_CONFIG=$W/pilot.json launch fold 0 || rc=$?   # 1 epoch, not E
  [ "$rc" -eq 6 ] || { fail "a fold launch at 1 epoch with E = 3 recorded: exit $rc, expected 6"; return 1; }
  jq -c --argjson e "$e" '.train.epochs = $e' "$RUNNER_TRAIN_CONFIG" >"$W/train.e.json" && mv "$W/train.e.json" "$RUNNER_TRAIN_CONFIG"
  say_detail "E = $e ($(sed -n 2p "$RUNNER_STATE/epochs/$BUNDLE-$(recipe_of "$RUNNER_TRAIN_CONFIG")" | cut -c1-60)…); fold 0 at 1 epoch refused (exit 6)"
}
# Two tiny recipes on inner fold 0 from the one bundle: core only (the recipe's selection keeps the
# train_scope core rows) vs core + extra (every row the fold protocol allows), each one rental under
# RUNNER_ABLATION_GPU_HOURS (2 x 0.5 h x the deadline factor 1.5 = 1.5 h of 2 h), pinned, scored
# here, ranked by hearsay compare.
do_ablation() {
  local r dir=$W/models/ablation
  export RUNNER_RECIPES=$W/recipes
  mkdir -p "$RUNNER_RECIPES" "$dir"
  echo '{"train": {"epochs": 1, "batches_per_epoch": 6}, "selection": {"rules": [{"action": "keep", "train_scope": ["core"]}]}}' >"$RUNNER_RECIPES/core_only.json"
  echo '{"train": {"epochs": 1, "batches_per_epoch": 6}}' >"$RUNNER_RECIPES/core_extra.json"
  for r in core_only core_extra; do launch ablate "$r" fold 0 >"$LOGS/launch.ablate-$r.out" 2>"$LOGS/launch.ablate-$r.err"; done
  for r in core_only core_extra; do
    wait_until 900 "ablate-$r-fold0 ended and destroyed" gone "ablate-$r-fold0"
    done_by_reaper "ablate-$r-fold0" || { fail "ablate-$r-fold0 ended $(archived_result "ablate-$r-fold0")"; return 1; }
    "$REPO/runner/collect_ablation.sh" --score "$W/bundle" "$r" 0 "$dir/$r" >/dev/null
  done
  # the two runs trained on different rows of the same bundle: core_only without the extra rows
  local q='"\(.selection.rows_before) \(.selection.rows_after) \(.bundle_tree_sha)"' cb ca csha eb ea esha
  read -r cb ca csha <<<"$(jq -r "$q" "$dir/core_only/runs/fold0/run_meta.json")"
  read -r eb ea esha <<<"$(jq -r "$q" "$dir/core_extra/runs/fold0/run_meta.json")"
  [ "$csha" = "$BUNDLE" ] && [ "$esha" = "$BUNDLE" ] || { fail "the ablation runs trained on bundles $csha and $esha, not $BUNDLE"; return 1; }
  [ "$cb" = "$eb" ] && [ "$ea" = "$eb" ] && [ "$ca" -lt "$cb" ] || { fail "run_meta selection rows (before after): core_only $cb $ca, core_extra $eb $ea; expected core_only to drop the extra rows and core_extra none"; return 1; }
  hearsay compare --recipe "core_only=$dir/core_only/ablation_runs.json" --recipe "core_extra=$dir/core_extra/ablation_runs.json" \
    --bundle "$W/bundle" --json "$dir/decision.json" --markdown "$dir/decision.md"
  say_detail "2 recipes on fold 0 from bundle ${BUNDLE:0:12}… (core_only trained $ca of $cb rows, core_extra $ea), $(jq -r .n_clips "$dir/decision.json") clips; chosen $(jq -r .chosen "$dir/decision.json"), flips: $(jq -r '.flips | length' "$dir/decision.json"); $(grep -o 'ablation cap: [^<]*' "$RUNNER_STATE/runner.log" | tail -n 1)"
}
# The extra corpus's decision from the ablation's two recipes (core_only: without the extra rows,
# core_extra: with them), made before the campaign's recipe is piloted: that recipe cites it.
do_extra() {
  local dir=$W/models/ablation r sha
  echo '{"min_per_side": 8}' >"$W/corpus_probe.json"   # the demo corpus has 8 extra synthetic clips
  hearsay corpus-probe "$W/corpus/manifest.csv" --corpus train_scope=extra --against train_scope=core --label spoof \
    --recipe "$RUNNER_TRAIN_CONFIG" --config "$W/corpus_probe.json" --json "$dir/corpus_probe.json"
  # each recipe's probe scores are its fold box's (scores/fold0_probe.csv, brought back by
  # collect_ablation): nothing is scored here
  for r in core_only core_extra; do
    [ "$(jq -r '.config.device' "$dir/$r/scores/fold0_probe.csv.meta.json")" = cpu ] \
      || { fail "$r: no probe file scored on its box (scores/fold0_probe.csv)"; return 1; }
  done
  hearsay corpus-probe --drop-rule --bundle "$W/bundle" --config "$W/corpus_probe.json" \
    --without "$dir/core_only/ablation_runs.json" --with "$dir/core_extra/ablation_runs.json" \
    --probe-result "$dir/corpus_probe.json" --decision "$dir/corpus_decision.json"
  sha=$(sha256sum "$dir/corpus_decision.json" | cut -d' ' -f1)
  jq -c --arg sha "$sha" '.selection.corpus_decision = $sha' "$RUNNER_TRAIN_CONFIG" >"$W/train.d.json" && mv "$W/train.d.json" "$RUNNER_TRAIN_CONFIG"
  say_detail "$(jq -r '"\(.decision): \(.why); probe false alarms \(.drop_rule.fa_without) without, \(.drop_rule.fa_with) with"' "$dir/corpus_decision.json" | cut -c1-240); train.json cites ${sha:0:12}…"
}
# --- pilot -> E, ablation (end) --------------------------------------------------------------------
# JOBS (set once the bundle is built, below): the campaign's runs, fold0..fold<n-1> and full, n the
# bundle's fold file's n_folds as `hearsay pin keys` reads it.
do_fan_out() {
  local j pids="" rc=0 p
  start_killer fold2
  for j in $JOBS; do
    case $j in fold*) launch fold "${j#fold}" >"$LOGS/launch.$j.out" 2>"$LOGS/launch.$j.err" & ;;
      *) launch full >"$LOGS/launch.$j.out" 2>"$LOGS/launch.$j.err" & ;; esac
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || rc=$?; done
  for j in $JOBS; do cat "$LOGS/launch.$j.err"; done
  [ "$rc" -eq 0 ] || { fail "a launch of the fan-out failed (exit $rc; see $LOGS/launch.*.err)"; return 1; }
  say_detail "$(echo "$JOBS" | wc -w) launched at once, $(find "$W/boxes" -maxdepth 1 -name 'box-*' | wc -l) boxes so far"
}
# killer JOB: started before JOB is launched, in the background. Once JOB's first checkpoint is
# whole in the store, its box is killed as a vanished host would be: trainer and entry SIGKILLed
# (no trap, no STATUS), the instance destroyed. Writes $W/killed.JOB: "killed ID EPOCHS" or "late".
killer() {
  local job=$1 ck id port box
  ck="$(run_dir "$job")/checkpoints"
  while [ ! -e "$ck/epoch_0001.complete" ]; do
    if gone "$job"; then echo ended >"$W/killed.$job"; return 0; fi
    sleep 0.1
  done
  id=$(cat "$RUNNER_STATE/jobs/$job/instance")
  port=$(cut -d: -f2 "$RUNNER_STATE/jobs/$job/ssh")
  box=$W/boxes/box-$port/run
  if [ -e "$(run_dir "$job")/final" ]; then echo late >"$W/killed.$job"; return 0; fi
  kill -KILL "$(cat "$box/train.pid")" "$(cat "$box/entry.pid")"
  vastai destroy instance "$id" -y --raw >/dev/null
  echo "killed $id $(find "$ck" -maxdepth 1 -name '*.complete' | wc -l)" >"$W/killed.$job"
  echo "$(date -u +%T) killed $job's box (instance $id) with $(find "$ck" -mindepth 1 -maxdepth 1 | sed 's|.*/||' | LC_ALL=C sort | tr '\n' ' ')in the store"
}
start_killer() { killer "$1" >>"$LOGS/killer.log" 2>&1 </dev/null 3>&- & }
do_kill_resume() {
  local job=fold2 what
  wait_until 600 "fold2's box killed after its first checkpoint" test -s "$W/killed.$job"
  read -r what id n <"$W/killed.$job"
  case $what in
    killed) ;;
    ended) fail "fold2 ended $(archived_result fold2) before its first checkpoint: $(why fold2)"; return 1 ;;
    *) fail "fold2 finished before its box could be killed (raise batches_per_epoch)"; return 1 ;;
  esac
  wait_until 300 "the reaper records fold2's instance gone" gone "$job"
  launch ${GATE_OPT:+"$GATE_OPT"} fold 2
  say_detail "instance $id killed with $n complete checkpoint(s) in the store; fold2 relaunched"
}
do_all_done() {
  local j
  for j in $JOBS; do
    wait_until 900 "$j ended and destroyed" gone "$j"
    done_by_reaper "$j" || { fail "$j ended $(archived_result "$j"): $(why "$j")"; return 1; }
  done
  local from made pulled
  made=$(grep -l '^codecs: .*: made ' "$W"/boxes/box-*/run/codecs.log 2>/dev/null | wc -l)
  pulled=$(grep -l '^codecs: .*: verified ' "$W"/boxes/box-*/run/codecs.log 2>/dev/null | wc -l)
  [ "$made" -eq 1 ] || { fail "$made boxes made the codec copies, expected 1 (the others pull them)"; return 1; }
  [ -n "$(find "$W/bucket/hearsay/codecs/$BUNDLE" -name codec_pass.json 2>/dev/null)" ] || { fail "no codec copies stored at codecs/$BUNDLE/"; return 1; }
  from=$(jq -r .resumed_from_epoch "$(run_dir fold2)/run_meta.json")
  case $from in [1-9]*) ;; *) fail "fold2 did not resume (resumed_from_epoch $from)"; return 1 ;; esac
  say_detail "$(echo "$JOBS" | wc -w) DONE, each box destroyed by the reaper; codec copies made on 1 box, pulled by $pulled; fold2 resumed from epoch $from and completed $(jq -r .steps "$(run_dir fold2)/run_meta.json") of $(jq -r .total_steps "$(run_dir fold2)/run_meta.json") steps"
}
# The stored copies into this machine's bundle (what a rescore here would read), verified by the
# pass: their record, their files re-hashed; nothing encoded.
do_codecs_here() {
  local key
  key=$(hearsay bundle codecs "$W/bundle" --key)   # this machine's ffmpeg is the boxes' here
  rclone copy "$RUNNER_STORE/codecs/$BUNDLE/$key" "$W/bundle/codecs" --config "$RUNNER_RCLONE_CONF"
  hearsay bundle codecs "$W/bundle" --no-progress | tee "$W/.codecs_here"
  grep -q ': verified ' "$W/.codecs_here" || { fail "the stored copies did not verify here"; return 1; }
  say_detail "$(head -n 1 "$W/.codecs_here" | cut -c1-140)"
}
