"""`hearsay metrics SCORES.csv --key KEY.csv [--pi 0.3] [--fa-rate X] [--json]`.

The command line of hearsay.metrics (whose docstring, the conventions, is its --help). It reads
hearsay-score's own CSV as well as the campaign's score files: rows whose `error` column is set
(files the scorer could not read) are skipped and counted, never read as scores; --fa-rate X adds
the threshold at false-alarm rate X with its confusion counts (hearsay.metrics.calibration).

Exit codes: 0 metrics written, 2 usage, 3 bad input (as hearsay.metrics, whose docstring is --help).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hearsay import metrics
from hearsay.metrics import EXIT_BAD_INPUT, EXIT_OK, PI_OF_RECORD, MetricsError, calibration
from hearsay.util.files import jsonable


def drop_failed(scores):
    """(rows without an error, how many had one): a scorer CSV lists failed files with their
    reason in `error` and no score; they are not clips to judge."""
    if "error" not in scores.columns:
        return scores, 0
    failed = scores["error"].notna() & (scores["error"].astype(str).str.strip() != "")
    return scores[~failed].reset_index(drop=True), int(failed.sum())


def at_fa_rate(scores, key, fa_rate: float) -> dict:
    """The --fa-rate reading: threshold, rates and confusion counts (both classes needed)."""
    df = metrics.join(scores, key)
    try:
        return calibration.threshold_at_fa_rate(df["rank"].to_numpy(float),
                                                df["is_spoof"].to_numpy(bool), fa_rate)
    except ValueError as err:
        raise MetricsError(f"--fa-rate: {err}") from None


def fa_lines(r: dict) -> list[str]:
    return [f"at false-alarm rate <= {r['target_fa_rate']:g}: synthetic when logit >= "
            f"{r['value']:.6f} (false-alarm rate {r['p_fa']:.4f}, miss rate {r['p_miss']:.4f})",
            f"  synthetic caught {r['synthetic_caught']}  synthetic missed "
            f"{r['synthetic_missed']}  bona fide false alarms {r['bonafide_false_alarm']}  "
            f"bona fide passed {r['bonafide_passed']}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay metrics", description=metrics.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scores", type=Path, help="score CSV (path + logit and/or score; rows with "
                    "an `error` are skipped and counted)")
    ap.add_argument("--key", type=Path, required=True,
                    help="key CSV: path,label (bonafide/spoof) + optional breakdown columns")
    ap.add_argument("--pi", type=float, default=PI_OF_RECORD,
                    help="prior of the synthetic class (default 0.3, the metric of record)")
    ap.add_argument("--fa-rate", type=float, default=None, metavar="X",
                    help="also print the lowest threshold whose false-alarm rate is <= X (e.g. "
                    "0.01) and its confusion counts")
    ap.add_argument("--json", action="store_true", help="print the metrics as JSON")
    args = ap.parse_args(argv)
    if not 0 < args.pi < 1:
        ap.error("--pi must lie strictly between 0 and 1")
    if args.fa_rate is not None and not 0 <= args.fa_rate <= 1:
        ap.error("--fa-rate must lie in [0, 1]")
    import pandas as pd

    try:
        scores = pd.read_csv(args.scores, keep_default_na=False, na_values=[""])
        key = pd.read_csv(args.key, keep_default_na=False, na_values=[""])
        scores, failed = drop_failed(scores)
        m = metrics.evaluate(scores, key, args.pi)
        m["failed_rows_skipped"] = failed
        if args.fa_rate is not None:
            m["at_fa_rate"] = at_fa_rate(scores, key, args.fa_rate)
    except (MetricsError, OSError, pd.errors.ParserError) as err:
        print(f"hearsay metrics: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(jsonable(m), indent=2, allow_nan=False))
    else:
        lines = metrics.summary_lines(m)
        if failed:
            lines.insert(1, f"skipped {failed} row(s) with an error (files the scorer could "
                         "not score)")
        print("\n".join(lines + (fa_lines(m["at_fa_rate"]) if args.fa_rate is not None
                                 else [])))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
