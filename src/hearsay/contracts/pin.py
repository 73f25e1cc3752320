"""The pin file: which trained runs a campaign (or an ablation recipe) stands on
(docs/INTERFACES.md, "Pin file"). Written by `hearsay pin write` (runner/collect.sh,
runner/collect_ablation.sh) and by the demo, read strictly by `hearsay assemble` and laxly by
`hearsay compare`; nothing else spells its keys.

    models/<stamp>/final_runs.json      the campaign's pin (FINAL)
    {"name": "<stamp>",                 -> outputs/detector_scores/<name>.csv
     "bundle_tree_sha": "<sha>",        every run and the bundle must carry this
     "min_steps": 2000,                 the training budget each run is held to
     "parity": null | {"waived": "<why>"} | {"file": "export/parity.json", "require": [...], ...},
     "runs": {"fold0": RUN, ..., "fold<n-1>": RUN, "full": RUN}}     n = the fold file's n_folds
    models/abl-<recipe>/ablation_runs.json   one ablation recipe's pin (ABLATION)
    {"name": "<recipe>", "recipe": "<recipe>", "bundle_tree_sha": "<sha>",
     "runs": {"fold<k>": RUN, ...}}     the inner folds it was launched on
    RUN = {"dir": "runs/fold0", "config_hash": "<run_meta.json's>", "weights_sha256": "<sha256
           of dir/final/model.safetensors>"}                 dir relative to the pin's folder

    from hearsay.contracts import pin
    pin.write(path, name=..., bundle_tree_sha=..., runs={"fold0": RUN_DIR, ...}, min_steps=2000)
    p = pin.read(path)                 # strict: a campaign pin, exact keys; dirs resolved
    p = pin.read(path, strict=False)   # any pin (the ablation's too): "runs" checked, rest kept

`hearsay pin` (main below) writes and checks them for the runner, never jq:
    hearsay pin write PIN --name N --bundle SHA --run KEY=RUN_DIR ... (--min-steps N
                      (--parity-box-logits REL | --parity-waived WHY) | --recipe R)
    hearsay pin check PIN [--lax]         hearsay pin keys BUNDLE_META   (fold0..fold<n-1> full)

The rules, once: a pin is written whole (atomic) from the runs as they are (each run's
config_hash from its run_meta.json, its weights hashed here), never by hand; a strict read
refuses unknown or missing keys and a run set other than fold0..fold<n-1> + full (2 <= n <= 5).

Exit codes: 0 written (its path printed) / accepted / keys printed; 2 usage (a --run that is not
KEY=DIR, no --min-steps or --recipe); 3 a run is not complete or missing (named), or the file is
absent; 4 the pin is refused (keys, run set, fields; named), or the bundle meta is not JSON or
records no fold count (keys).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hearsay.contracts import bundle, model_dir, run_dir
from hearsay.contracts.protocol import N_FOLDS, run_keys
from hearsay.util.files import write_json

FINAL = "final_runs.json"
ABLATION = "ablation_runs.json"
KEYS = ("name", "bundle_tree_sha", "min_steps", "parity", "runs")  # a campaign pin, exactly
ABLATION_KEYS = ("name", "recipe", "bundle_tree_sha", "runs")
RUN_FIELDS = ("dir", "config_hash", "weights_sha256")
MIN_FOLDS = 2  # the fold file's smallest n_folds (hearsay.contracts.folds.SplitsConfig)
PARITY_FILE = f"export/{model_dir.PARITY}"  # relative to the pin: `hearsay export onnx --out`
PARITY_REQUIRE = ("parity_a", "parity_b")  # what a collected pin's parity record requires
EXIT_OK, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_REFUSED = 0, 2, 3, 4  # `hearsay pin` (its help)


def parity_record(box_logits: str) -> dict:
    """A campaign pin's parity record: parity A and B required, B against the box's logits."""
    return {"file": PARITY_FILE, "require": list(PARITY_REQUIRE), "box_logits": box_logits}


def parity_waived(why: str) -> dict:
    """A pin made without parity B: the operator's reason, recorded (assemble skips F6)."""
    return {"waived": why}


class PinError(ValueError):
    """A pin that cannot be written or is refused on reading; the message names the fix."""


class PinIncomplete(PinError):
    """A run named for the pin is not complete (run_dir.incomplete says why)."""


def run_entry(pin_dir: Path, run: Path) -> dict:
    """One RUN of the pin: the run's folder relative to the pin's, the config hash its
    run_meta.json records, the sha256 of its final weights. PinError when the run is not
    complete (run_dir.incomplete says why)."""
    from hearsay.util.hashing import sha256_file

    why = run_dir.incomplete(run)
    if why is not None:
        raise PinIncomplete(f"{run}: not complete ({why}); pin only runs that reached DONE")
    meta = run_dir.read_meta(run)
    return {"dir": os.path.relpath(Path(run).resolve(), Path(pin_dir).resolve()),
            "config_hash": meta.get("config_hash"),
            "weights_sha256": sha256_file(run_dir.weights(run))}


def write(path: Path, *, name: str, bundle_tree_sha: str, runs: dict[str, Path],
          min_steps: int | None = None, parity: dict | None = None,
          recipe: str | None = None) -> dict:
    """Write the pin at `path` (atomic) and return it. Without `recipe` a campaign pin
    (min_steps required, runs = fold0..fold<n-1> + full); with it an ablation pin."""
    path = Path(path)
    if recipe is None:
        if min_steps is None or int(min_steps) < 1:
            raise PinError("a campaign pin needs min_steps >= 1 (the recipe's optimiser steps)")
        _check_run_set(path, sorted(runs))
    elif not runs or any(k == "full" for k in runs):
        raise PinError(f"an ablation pin holds fold runs only, got {sorted(runs)}")
    entries = {key: run_entry(path.parent, Path(d)) for key, d in sorted(runs.items())}
    if recipe is None:
        doc = {"name": name, "bundle_tree_sha": bundle_tree_sha, "min_steps": int(min_steps),
               "parity": parity, "runs": entries}
    else:
        doc = {"name": name, "recipe": recipe, "bundle_tree_sha": bundle_tree_sha,
               "runs": entries}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, doc)
    return doc


def fold_count(keys) -> int:
    """n of a campaign pin's run set fold0..fold<n-1> + full (PinError when it is not one)."""
    keys = sorted(keys)
    for n in range(MIN_FOLDS, N_FOLDS + 1):
        if keys == sorted(run_keys(n)):
            return n
    raise PinError(f"runs must be exactly fold0..fold<n-1> and full, n in {MIN_FOLDS}..{N_FOLDS} "
                   f"(the fold file's n_folds), got {keys}")


def _check_run_set(path: Path, keys) -> None:
    try:
        fold_count(keys)
    except PinError as err:
        raise PinError(f"{path}: {err}") from None


def read(path: Path, strict: bool = True) -> dict:
    """The pin at `path`, each run's "dir" resolved against the pin's folder (and a parity
    record's "file"); "stamp_dir" = that folder. strict: exactly KEYS, runs exactly
    fold0..fold<n-1> + full, each with exactly RUN_FIELDS. Lax: a JSON object whose "runs"
    maps run keys to objects (an ablation pin, or a campaign pin read for its fold runs).
    FileNotFoundError when there is no file; PinError names what is refused."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pin file {path} not found (write it: runner/collect.sh, or "
                                "hearsay pin write)")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise PinError(f"{path}: not JSON ({err}); write it again with hearsay pin write") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), dict):
        raise PinError(f"{path}: no \"runs\" object (is it a pin file?)")
    if strict:
        unknown, missing = set(doc) - set(KEYS), set(KEYS) - set(doc)
        if unknown or missing:
            raise PinError(f"{path}: unknown keys {sorted(unknown)}, missing keys "
                           f"{sorted(missing)} (a pin file has exactly {sorted(KEYS)})")
        _check_run_set(path, doc["runs"])
    for key, run in doc["runs"].items():
        if not isinstance(run, dict) or (strict and set(run) != set(RUN_FIELDS)):
            raise PinError(f"{path}: runs.{key} needs exactly {sorted(RUN_FIELDS)}, got "
                           f"{sorted(run) if isinstance(run, dict) else run!r}")
        if "dir" in run:
            run["dir"] = (path.parent / run["dir"]).resolve()
    parity = doc.get("parity")
    if isinstance(parity, dict) and not parity.get("waived") and "file" in parity:
        parity["file"] = (path.parent / parity["file"]).resolve()
    doc["stamp_dir"] = path.parent
    return doc


def _keys_of_bundle(meta_path: Path) -> tuple[str, ...]:
    try:  # the bundle's own reader: the fold count is its fold file's
        return run_keys(bundle.meta_n_folds(bundle.read_meta(meta_path), meta_path))
    except bundle.BundleError as err:
        raise PinError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="hearsay pin", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    w = sub.add_parser("write", help="write a pin from the runs as they are")
    w.add_argument("pin", type=Path)
    w.add_argument("--name", required=True)
    w.add_argument("--bundle", required=True, help="the bundle tree-sha every run trained on")
    w.add_argument("--run", action="append", default=[], metavar="KEY=RUN_DIR", required=True)
    w.add_argument("--min-steps", type=int, help="a campaign pin: the steps each run is held to")
    w.add_argument("--recipe", help="an ablation pin: the recipe's name")
    par = w.add_mutually_exclusive_group()
    par.add_argument("--parity-box-logits", metavar="REL",
                     help="require parity A and B, B on these box logits (relative to the pin)")
    par.add_argument("--parity-waived", metavar="WHY", help="pin without parity B, recorded")
    c = sub.add_parser("check", help="read a pin as hearsay assemble (or with --lax, compare)")
    c.add_argument("pin", type=Path)
    c.add_argument("--lax", action="store_true", help="any pin with a runs object")
    k = sub.add_parser("keys", help="the runs a campaign pin on this bundle holds, one a line")
    k.add_argument("bundle_meta", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.verb == "keys":
            print("\n".join(_keys_of_bundle(args.bundle_meta)))
        elif args.verb == "check":
            read(args.pin, strict=not args.lax)
        else:
            runs = dict(r.split("=", 1) for r in args.run if "=" in r)
            if len(runs) != len(args.run) or (args.min_steps is None) == (args.recipe is None):
                ap.error("--run KEY=RUN_DIR each, and exactly one of --min-steps / --recipe")
            parity = (parity_record(args.parity_box_logits) if args.parity_box_logits
                      else parity_waived(args.parity_waived) if args.parity_waived else None)
            write(args.pin, name=args.name, bundle_tree_sha=args.bundle, runs=runs,
                  min_steps=args.min_steps, parity=parity, recipe=args.recipe)
            print(args.pin)
    except (FileNotFoundError, PinIncomplete) as err:
        print(f"hearsay pin {args.verb}: {err}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except PinError as err:
        print(f"hearsay pin {args.verb}: {err}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK
