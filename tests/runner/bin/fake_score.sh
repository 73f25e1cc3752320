#!/usr/bin/env bash
# Usage: fake_score.sh --run RUN_DIR --bundle DIR --out SCORES_DIR [--parity-clips N]
# Summary: stands in for `hearsay score-run` on the sandbox box: writes SCORES_DIR/fake_scores.csv
# (+ its .meta.json) unless it is already there, then exits $FAKE_SCORE_RC (default 0), printing a
# last line as the real one does. Its argv goes to SCORES_DIR/../../score.args and the files it
# found in SCORES_DIR before writing to SCORES_DIR/../../score.found, so tests can check what the
# box asked for and what a relaunched box pulled back.
set -euo pipefail
out="" args="$*"
while [ $# -gt 0 ]; do
  case $1 in --out) out=$2; shift 2 ;; *) shift ;; esac
done
mkdir -p "$out"
echo "$args" >"$out/../../score.args"
(cd "$out" && find . -type f | LC_ALL=C sort) >"$out/../../score.found"
if [ "${FAKE_SCORE_RC:-0}" -ne 0 ]; then
  echo "hearsay score-run: stand-in failure (exit ${FAKE_SCORE_RC})" >&2
  exit "$FAKE_SCORE_RC"
fi
[ -f "$out/fake_scores.csv" ] || { echo "path,score" >"$out/fake_scores.csv"; echo '{}' >"$out/fake_scores.csv.meta.json"; }
echo "hearsay score-run: stand-in: 1 file(s) -> $out"
