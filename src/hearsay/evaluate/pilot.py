"""`hearsay pilot-epochs`: the pilot's fold-4 readouts -> the finals' epoch count E.

    hearsay pilot-epochs runs/pilot                       # prints E
    hearsay pilot-epochs runs/pilot --tol 0.02 --factor 1.25 --json pilot_epochs.json

RUN_DIR is a complete pilot run (`hearsay train --pilot`: folds 0-3, validated on fold 4); its
run_meta.json history holds one readout per epoch end {"epoch", "epoch_end", "auc", "eer",
"min_dcf", "pi"} (minDCF normalised, at pi 0.3, cost direction as stated).

The rule (stated once, here): of the epoch-end readouts, take the lowest fold-4 minDCF (pi 0.3);
E0 = the FIRST epoch whose minDCF is within --tol (absolute, default 0.01) of that lowest one
(a later epoch must earn its cost); E = ceil(E0 x --factor) (default 1.0: the finals train on
four fifths of the inner rows plus extra, about as many steps per epoch as the pilot). The
epoch of E0 must read AUC above 0.5, else the pilot says the model ranks spoof below bona fide
and no E is given. `runner/epochs.sh` records the E of a recipe for the launcher (or the
operator's own E: `runner/epochs.sh set E`).

Output: E on stdout; `--json FILE` also writes {"rule", "tol", "factor", "pilot_epochs",
"per_epoch": [{"epoch", "min_dcf", "eer", "auc"}], "best_epoch", "chosen_epoch", "epochs",
"config_hash", "bundle_tree_sha"}; `--how FILE` writes how E was chosen as one line.

Exit codes: 0 E printed; 2 usage; 3 bad input (no run_meta.json, the run is not complete, no
epoch-end readout with a minDCF); 4 refused (not a pilot run, or the chosen epoch's AUC <= 0.5).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from hearsay.contracts import run_dir

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 2, 3, 4  # module docstring
RULE = ("first epoch whose fold-4 minDCF (pi 0.3) is within tol of the lowest epoch-end "
        "minDCF, times factor, rounded up")


class PilotError(Exception):
    """Bad input (exit 3)."""


class PilotRefused(PilotError):
    """The pilot cannot fix E (exit 4)."""


def epoch_readouts(meta: dict) -> list[dict]:
    """[{"epoch", "min_dcf", "eer", "auc"}] of the epoch-end readouts, by epoch (the last
    readout of an epoch when a resumed run repeated one)."""
    per: dict[int, dict] = {}
    for v in (meta.get("history") or {}).get("val") or []:
        if v.get("epoch_end") and v.get("min_dcf") is not None:
            per[int(v["epoch"])] = {"epoch": int(v["epoch"]), "min_dcf": float(v["min_dcf"]),
                                    "eer": v.get("eer"), "auc": v.get("auc")}
    return [per[e] for e in sorted(per)]


def choose_epochs(meta: dict, *, tol: float = 0.01, factor: float = 1.0) -> dict:
    """The rule of the module docstring applied to a pilot's run_meta; returns the --json
    record. PilotError / PilotRefused name the fix."""
    if not tol >= 0 or not factor >= 1:
        raise ValueError(f"tol={tol} must be >= 0 and factor={factor} >= 1")
    if meta.get("job") != "pilot":
        raise PilotRefused(f"run_meta.json is a {meta.get('job')!r} run: E comes from the pilot "
                           "(hearsay train --pilot; runner/launch.sh pilot)")
    if not run_dir.meta_says_complete(meta):
        raise PilotError("the pilot run is not complete: wait for DONE (runner/status.sh --why "
                         "pilot), then bring run_meta.json back")
    rows = epoch_readouts(meta)
    if not rows:
        raise PilotError("no epoch-end readout with a minDCF in run_meta.json history.val: "
                         "train the pilot with this hearsay (its readouts carry min_dcf)")
    best = min(r["min_dcf"] for r in rows)
    best_epoch = next(r["epoch"] for r in rows if r["min_dcf"] == best)
    chosen = next(r for r in rows if r["min_dcf"] <= best + tol)
    if chosen["auc"] is None or not chosen["auc"] > 0.5:
        raise PilotRefused(f"epoch {chosen['epoch']} reads fold-4 AUC {chosen['auc']}: the model "
                           "ranks spoof at or below bona fide; fix the pipeline before the finals")
    return {"rule": RULE, "tol": tol, "factor": factor, "pilot_epochs": meta.get("epochs"),
            "per_epoch": rows, "best_epoch": best_epoch, "chosen_epoch": chosen["epoch"],
            "epochs": math.ceil(chosen["epoch"] * factor - 1e-9),
            "config_hash": meta.get("config_hash"),
            "bundle_tree_sha": meta.get("bundle_tree_sha")}


def how(choice: dict) -> str:
    """The choice in one line: "epoch 2 of 3 (best 2), tol 0.01, factor 1.0: <the rule>"."""
    return (f"epoch {choice['chosen_epoch']} of {choice['pilot_epochs']} (best "
            f"{choice['best_epoch']}), tol {choice['tol']}, factor {choice['factor']}: "
            f"{choice['rule']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay pilot-epochs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path, help="the pilot's run dir (its run_meta.json)")
    ap.add_argument("--tol", type=float, default=0.01,
                    help="minDCF within this of the lowest counts as the lowest (default 0.01)")
    ap.add_argument("--factor", type=float, default=1.0,
                    help="safety factor on the chosen epoch, >= 1 (default 1.0)")
    ap.add_argument("--json", type=Path, default=None, help="write the choice as JSON here")
    ap.add_argument("--how", type=Path, default=None,
                    help="write how E was chosen as one line here (runner/epochs.sh records it)")
    args = ap.parse_args(argv)
    if not args.tol >= 0 or not args.factor >= 1:
        ap.error(f"--tol {args.tol} must be >= 0 and --factor {args.factor} >= 1")
    path = run_dir.meta_path(args.run_dir)
    try:
        if not path.is_file():
            raise PilotError(f"{path}: not found (bring the pilot's run_meta.json back from "
                             "the store)")
        choice = choose_epochs(json.loads(path.read_text()), tol=args.tol, factor=args.factor)
    except PilotRefused as err:
        print(f"hearsay pilot-epochs: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except (PilotError, json.JSONDecodeError) as err:
        print(f"hearsay pilot-epochs: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        args.json.write_text(json.dumps(choice, indent=2) + "\n")
    if args.how:
        args.how.write_text(how(choice) + "\n")
    print(choice["epochs"])
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
