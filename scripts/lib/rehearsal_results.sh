# shellcheck shell=bash
# scripts/lib/rehearsal_results.sh: the stages after training, sourced by scripts/rehearsal.sh:
# collect, box scores, export, parity (B), the bar, assemble and its gate checks, deploy, teardown
# and the ledger.

do_collect() {
  # the recipe's budget: 3 epochs x 6 batches on one CPU "GPU", grad_accum 1 (do_world's train.json)
  "$REPO/runner/collect.sh" --name rehearsal --min-steps 18 "$W/models/rehearsal"
  say_detail "$(jq -r '.runs | keys | join(" ")' "$W/models/rehearsal/final_runs.json") pinned"
}
do_assemble() {
  # G5: the report reads this sweep (runner/secrets_sweep.sh's line in the event log)
  "$REPO/runner/secrets_sweep.sh" || { fail "the secrets sweep did not come back clean (exit $?)"; return 1; }
  hearsay assemble --pinned "$W/models/rehearsal/final_runs.json" --bundle "$W/bundle" \
    --ledger "$LEDGER" --outputs "$W/outputs" --reports "$W/reports" ${ABLATION_DECISION:+--ablation "$ABLATION_DECISION"} \
    ${CORPUS_DECISION:+--corpus-decision "$CORPUS_DECISION"} --bar "$W/models/rehearsal/bar1" \
    --runner-log "$RUNNER_STATE/runner.log"
  assemble_used_box_scores
  gate_probe_measured
  gate_noise_and_runtime_read
  say_detail "$(($(wc -l <"$W/outputs/detector_scores/rehearsal.csv") - 1)) rows, F1-F6 passed (F6: parity A and B); rescored_here 0: every file from the boxes; gate $(jq -r .gate.outcome "$W/models/rehearsal/meta.json"), $(jq -r '.gate.bars[0].probe.why' "$W/models/rehearsal/meta.json"); margin against noise: $(jq -r .gate.noise.verdict "$W/models/rehearsal/meta.json"); G2 $(jq -r .runtime.G2.outcome "$W/models/rehearsal/meta.json"), G5 $(jq -r .runtime.G5.outcome "$W/models/rehearsal/meta.json")"
}
# gate_noise_and_runtime_read: the report states the margin against its noise (paired bootstrap, the
# 0.15 holdout band) and the runtime checks read from the ledger and the runner's event log.
gate_noise_and_runtime_read() {
  local meta=$W/models/rehearsal/meta.json report=$W/reports/rehearsal.md
  case $(jq -r .gate.noise.verdict "$meta") in
    "within noise" | "beyond noise") ;;
    *) fail "the gate's margin was not read against its noise: $(jq -c .gate.noise "$meta")"; return 1 ;;
  esac
  grep -q "^\*\*Margin against noise: $(jq -r .gate.noise.verdict "$meta")\*\*" "$report" \
    || { fail "$report has no 'Margin against noise' line"; return 1; }
  grep -q "^- G2 (boxes ended by the reaper): \*\*" "$report" || { fail "$report has no runtime checks"; return 1; }
  [ "$(jq -r .runtime.G2.event_log "$meta")" = read ] || { fail "the runner's event log was not read: $(jq -r .runtime.G2.event_log "$meta")"; return 1; }
  [ "$(jq -r .runtime.G5.outcome "$meta")" = pass ] || { fail "G5 (the secrets sweep) is not a pass: $(jq -c .runtime.G5 "$meta")"; return 1; }
}
do_export() {
  hearsay export onnx "$W/models/rehearsal/runs/full" --out "$EXPORT" --no-int8
  say_detail "parity A max |dlogit| $(jq -r '.parity_a.max_abs_dlogit' "$EXPORT/parity.json")"
}
do_deploy() {
  hearsay-score "$W/corpus/audio" -o "$W/deploy_scores.csv" --model "$EXPORT"
  say_detail "$(($(wc -l <"$W/deploy_scores.csv") - 1)) clips scored"
}
do_teardown() {
  kill "$(cat "$W/reaper.pid")" && rm -f "$W/reaper.pid"
  "$REPO/runner/teardown_check.sh"
  say_detail "0 instances listed"
}
do_ledger() {
  local rows created
  rows=$(awk -F, 'NR > 1 { print $1 }' "$LEDGER" | sort -u | wc -l | tr -d ' ')   # one rental per id (the ledger appends a closing row)
  created=$(curl -fsS "$VAST_URL/_control/state" | jq .created_total)
  "$REPO/runner/ledger.sh" "$LEDGER"
  [ "$rows" = "$created" ] || { fail "ledger rows $rows != instances created $created"; return 1; }
  say_detail "$rows rentals in the ledger = $created creations, all closed"
}

# --- box scoring and parity B: each box scores its run's rows after training, the full box records
# the parity B logits; the laptop compares ONNX with them and assembles without scoring a clip ---
EXPORT=$W/models/rehearsal/export   # where the pin's parity record points (runner/collect.sh)
# do_box_scores: every file of each finished job's rows is in its store folder, scored on its box
# in the trainer's precision (CPU fp32 here), its sidecar naming the run's own weights.
do_box_scores() {
  local j f n=0 want got weights
  for j in $JOBS; do
    weights=$(sha256sum "$(run_dir "$j")/final/model.safetensors" | cut -d' ' -f1)
    want=2   # inner_oof, probe
    [ "$j" != full ] || want=7   # holdout x5 (clean, augmented, codecs, test lengths, whole), test, probe
    got=0
    for f in "$(run_dir "$j")/scores/${j}_"*.csv; do
      [ -f "$f.meta.json" ] || { fail "$f: no sidecar"; return 1; }
      [ "$(jq -r '"\(.config.device) \(.config.precision) \(.weights_sha256)"' "$f.meta.json")" = "cpu fp32 $weights" ] \
        || { fail "$f.meta.json: not scored on its box with the run's weights ($(jq -c .config "$f.meta.json"))"; return 1; }
      got=$((got + 1))
    done
    [ "$got" -eq "$want" ] || { fail "$j: $got score file(s) in the store, expected $want"; return 1; }
    n=$((n + got))
  done
  say_detail "$n file(s) scored on the boxes (cpu fp32, the trainer's): $(find "$(run_dir "${JOBS%% *}")/scores" -maxdepth 1 -name '*.csv' | sed 's|.*/||' | LC_ALL=C sort | tr '\n' ' ')…$(probe_line)"
}
# probe_line: the full box's probe file, when this rehearsal ran the full job (its rows, set sha).
probe_line() {
  local f
  f="$(run_dir full)/scores/full_probe.csv.meta.json"
  [ -f "$f" ] || return 0
  jq -r '"; probe set: \(.n_rows) bona fide probe clips, set sha256 \(.set_sha256[:12])…"' "$f"
}
# do_bar: the stand-in earlier detector's scores and meta.json, then hearsay bar, as an operator
# makes the bar from an earlier detector's score file (RUNBOOK, "The probe set").
PROBE_CSV=$W/models/rehearsal/scores/full_probe.csv   # the full box's, brought back by collect
do_bar() {
  # shellcheck disable=SC2016  # the Python line is single-quoted on purpose
  python -c 'import sys; from hearsay import demo; demo.write_length_detector(*sys.argv[1:])' \
    "$W/bundle" "$PROBE_CSV" "$W/earlier/length"
  hearsay bar --from "$W/earlier" --pick "train=none: clip duration" --bundle "$W/bundle" \
    --probe "$PROBE_CSV" --out "$W/models/rehearsal/bar1"
  [ "$(jq -r .probe.set_sha256 "$W/models/rehearsal/bar1/meta.json")" = "$(jq -r .set_sha256 "$PROBE_CSV.meta.json")" ] \
    || { fail "the bar's probe record is of other clips than the full box's probe set"; return 1; }
  say_detail "bar1 picked by train=none: clip duration; its probe false-alarm rate $(jq -r .probe.false_alarm_rate "$W/models/rehearsal/bar1/meta.json") on the box's probe set"
}
# gate_probe_measured: the gate read the full box's probe file and measured it (pass or fail).
gate_probe_measured() {
  local meta=$W/models/rehearsal/meta.json
  [ "$(jq -r .probe.file "$meta")" = "$PROBE_CSV" ] || { fail "the gate read the probe $(jq -r .probe.file "$meta"), not the full box's $PROBE_CSV"; return 1; }
  case $(jq -r '.gate.bars[0].probe.outcome' "$meta") in
    pass | fail) ;;
    *) fail "the gate's probe check: $(jq -r '.gate.bars[0].probe.why' "$meta")"; return 1 ;;
  esac
}
do_parity() {
  hearsay parity "$EXPORT" --box-logits "$W/models/rehearsal/scores/full_parity_logits.json" --bundle "$W/bundle"
  [ "$(jq -r .parity_b.passed "$EXPORT/parity.json")" = true ] || { fail "parity B did not pass"; return 1; }
  say_detail "$(jq -r '.parity_b | "\(.clips) test clips, ONNX fp32 here vs the box (\(.box_device) \(.box_precision)): spearman \(.box_vs_ort.spearman), max |dlogit| \(.box_vs_ort.max_abs_dlogit)"' "$EXPORT/parity.json")"
}
# assemble_used_box_scores: assemble scored no clip here, and its F6 read the parity record.
assemble_used_box_scores() {
  local meta=$W/models/rehearsal/meta.json
  [ "$(jq -r .rescored_here "$meta")" = 0 ] || { fail "assemble re-scored $(jq -r .rescored_here "$meta") rows here: $(jq -c .scoring.files_scored_here "$meta")"; return 1; }
  [ "$(jq -r '.checks | index("F6") != null' "$meta")" = true ] || { fail "F6 did not run"; return 1; }
}
# --- end box scoring and parity B ---
