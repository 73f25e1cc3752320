# The tracked ledger (docs/ledger.csv) must come out of the suite byte for byte as it went in.
setup_suite() {
  REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  cksum <"$REPO/docs/ledger.csv" >"$BATS_SUITE_TMPDIR/ledger.cksum"
}

teardown_suite() {
  if [ "$(cksum <"$REPO/docs/ledger.csv")" != "$(cat "$BATS_SUITE_TMPDIR/ledger.cksum")" ]; then
    echo "docs/ledger.csv changed during the runner tests: a test wrote to the tracked ledger" >&2
    return 1
  fi
}
