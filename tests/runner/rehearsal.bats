#!/usr/bin/env bats
# The short rehearsal (scripts/rehearsal.sh --short): the real launcher, reaper and box entry with
# the real `hearsay train --cpu-smoke` on a small demo bundle in a local rclone store. One job's
# first launch must start fresh (a box that asks the trainer for a refusing resume fails here),
# its box is killed after the first checkpoint and the relaunch must resume from the store; the
# relaunched box scores the run's own rows (hearsay score-run) into the store.

@test "short rehearsal: bundle in the store, one job killed mid-training and resumed, teardown and ledger hold" {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  run "$REPO/scripts/rehearsal.sh" --short "$BATS_TEST_TMPDIR/r" 3>&-
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"rehearsal: kill_resume  ok"*"killed with "*" complete checkpoint(s) in the store; fold2 relaunched"* ]]
  [[ "$output" == *"fold2 resumed from epoch "* ]]
  [[ "$output" == *"rehearsal: world        ok"*"recipe configs/m5.json (p_aug 0.65, band-limit weight 6 (chosen), RawBoost 7 of 28)"* ]]
  [[ "$output" == *"rehearsal: box_scores   ok"*"2 file(s) scored on the boxes (cpu fp32, the trainer's): fold2_inner_oof.csv fold2_probe.csv"* ]]
  [[ "$output" == *"rehearsal: bundle_put   ok"*", no codec copies"* ]]           # the boxes make them
  [[ "$output" == *"codec copies made on 1 box, pulled by 1;"* ]]                  # the relaunch pulled
  [[ "$output" == *"rehearsal: codecs_here  ok"*": verified 170 copies of 34 clips"* ]]
  [[ "$output" == *"rehearsal: every stage passed"* ]]
}
