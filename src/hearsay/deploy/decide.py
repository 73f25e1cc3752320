"""hearsay-score's `decision` and `llr` columns, from the model folder's thresholds.json.

    decider = decide.load(model_folder, "min_dcf", llr=True)   # ModelError: hearsay-score exits 3
    rows = decider.apply(rows)                                  # fills decision (+ llr)

decision = "spoof" when the row's logit >= the threshold, else "bonafide" (the key's labels;
hearsay.metrics' rule: a tie is called synthetic); empty for a file that failed. The threshold is
a name in thresholds.json ("min_dcf", the default: the out-of-fold minDCF threshold at pi 0.3;
"eer"; "fa_rate") or a logit given as a number. A folder without thresholds.json (exported
without --meta) leaves `decision` empty unless a number is given, and says so on stderr.
llr = a * logit + b, the calibration thresholds.json holds (natural log; with --llr only).

Stdlib only; the thresholds file is read through hearsay.contracts.model_dir, which owns its name
and
checks that SHA256SUMS lists it (a decision comes from the folder's identity).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from hearsay.contracts import model_dir
from hearsay.contracts.model_dir import ModelError

DEFAULT = "min_dcf"


@dataclass(frozen=True)
class Decider:
    name: str | None  # "min_dcf", "eer", "fa_rate", "value"; None: no threshold to decide at
    threshold: float | None  # logit
    calibration: dict | None  # {"a", "b"} when --llr

    def apply(self, rows: list[dict]) -> list[dict]:
        """`rows` with decision (and llr) set from each row's logit; the same list."""
        for row in rows:
            logit = row.get("logit") or ""
            if not logit or row.get("error"):
                row["decision"], row["llr"] = "", ""
                continue
            x = float(logit)
            row["decision"] = "" if self.threshold is None else \
                ("spoof" if x >= self.threshold else "bonafide")
            row["llr"] = "" if self.calibration is None else \
                f"{self.calibration['a'] * x + self.calibration['b']:.6f}"
        return rows


def load(folder: Path, spec: str | None, llr: bool = False, quiet: bool = False) -> Decider:
    """The decider of `folder` for --threshold `spec` (None: the default, min_dcf)."""
    thresholds = model_dir.read_thresholds(folder)
    if llr and not (thresholds or {}).get("calibration"):
        raise ModelError(f"{folder}: --llr needs the calibration in {model_dir.THRESHOLDS}, "
                         "which this folder does not ship (export it with `hearsay export onnx "
                         "--meta models/<stamp>/meta.json`)")
    cal = thresholds["calibration"] if llr else None
    if spec is None and thresholds is None:
        if not quiet:
            print(f"hearsay-score: {folder} has no {model_dir.THRESHOLDS}: the decision column "
                  "stays empty (pass --threshold LOGIT, or export with --meta)", file=sys.stderr)
        return Decider(None, None, cal)
    name, value = model_dir.threshold(thresholds, spec or DEFAULT)
    if not quiet:
        print(f"hearsay-score: decision = spoof at logit >= {value:g} ({name} threshold)",
              file=sys.stderr)
    return Decider(name, value, cal)


def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--threshold", default=None, metavar="NAME|LOGIT",
                    help=f"the `decision` column's threshold: a name in the model folder's "
                    f"{model_dir.THRESHOLDS} (min_dcf, the default: out-of-fold minDCF at pi "
                    "0.3; eer; fa_rate) or a logit")
    ap.add_argument("--llr", action="store_true",
                    help=f"fill the `llr` column: the calibrated log-likelihood ratio "
                    f"(a * logit + b from {model_dir.THRESHOLDS})")
