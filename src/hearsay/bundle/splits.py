"""`hearsay splits make|import|verify`: fold files (hearsay.contracts.folds, which spells and
judges them), pinned by sha256 in the SHA256SUMS beside them.

    hearsay splits make corpus/manifest.csv --out splits --name demo [--config splits.json]
    hearsay splits import folds.csv --manifest corpus/manifest.csv --out splits --name ext
    hearsay splits verify splits/demo.folds.json [--manifest corpus/manifest.csv]

`make` assigns folds (deterministic for a manifest + config: test rows stay test, holdout-family
core groups go to holdout whole, the other core groups spread group-disjoint and
label-stratified over folds 0..n_folds-1, extra rows take their group's fold or `extra`);
`import` checks and pins folds assigned elsewhere (a CSV `id,fold` or a fold file) by the same
rules; `verify` checks a fold file's pinned sha (and that it covers a manifest). `--selection
FILE` applies that selection's drop_extra_families rule first (the rows the bundle build drops
too). The rules in full: hearsay.contracts.folds.

Exit codes: 0 ok, 2 usage, 3 manifest or fold file rejected (sha mismatch, holdout leak, bad
config, an imported fold that breaks the rules), 4 --out cannot be made (the system's error named).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from hearsay.bundle.select import SelectionError, drop_extra_cli, extra_option
from hearsay.contracts.folds import (
    FoldError,
    SplitsConfig,
    apply_folds,
    import_folds,
    load_folds,
    write_folds,
)
from hearsay.contracts.manifest import ManifestError, read_manifest
from hearsay.util.hashing import SUMS

EXIT_OK, EXIT_USAGE, EXIT_REJECTED, EXIT_UNWRITABLE = 0, 2, 3, 4  # module docstring


def _read_config(path: Path) -> dict:
    """--config FILE as a dict; a FoldError (exit 3) naming the file when unreadable or not JSON."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise FoldError(f"--config {path}: {err} (a SplitsConfig JSON object)") from err


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay splits", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sel = [extra_option()]  # --selection FILE: its drop_extra_families rule, before the folds
    mk = sub.add_parser("make", parents=sel, help="assign folds and pin the fold file")
    mk.add_argument("manifest", type=Path)
    mk.add_argument("--out", type=Path, default=Path("splits"), help="folder (default splits/)")
    mk.add_argument("--name", default="folds", help="fold file is OUT/NAME.folds.json")
    mk.add_argument("--config", type=Path,
                    help="SplitsConfig JSON: n_folds, holdout_families, family_sep, "
                         "family_exclusion, seed (unknown keys are errors)")
    im = sub.add_parser("import", parents=sel, help="check and pin a fold file made elsewhere")
    im.add_argument("source", type=Path, help="CSV with header id,fold, or a .folds.json")
    im.add_argument("--manifest", type=Path, required=True, help="the manifest it assigns")
    im.add_argument("--out", type=Path, default=Path("splits"), help="folder (default splits/)")
    im.add_argument("--name", default="folds", help="fold file is OUT/NAME.folds.json")
    im.add_argument("--config", type=Path,
                    help="SplitsConfig JSON (default: the source JSON's config, else defaults)")
    vf = sub.add_parser("verify", parents=sel,
                        help="check a fold file's pinned sha (and its manifest)")
    vf.add_argument("folds", type=Path)
    vf.add_argument("--manifest", type=Path, help="also check it covers this manifest")
    args = ap.parse_args(argv)
    try:
        if args.cmd in ("make", "import"):
            cfg = SplitsConfig.from_dict(_read_config(args.config) if args.config else {})
            df = drop_extra_cli(read_manifest(args.manifest), args.selection)
            try:
                args.out.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                print(f"hearsay splits: cannot make --out {args.out}: {err}", file=sys.stderr)
                return EXIT_UNWRITABLE
            path = (write_folds(df, cfg, args.out, args.name) if args.cmd == "make" else
                    import_folds(df, args.source, cfg if args.config else None, args.out,
                                 args.name))
            counts = pd.Series(json.loads(path.read_text())["folds"]).value_counts().sort_index()
            print(f"splits: wrote {path} (pinned in {args.out / SUMS}); rows per fold: "
                  + ", ".join(f"{k}={v}" for k, v in counts.items()))
        else:
            folds = load_folds(args.folds)
            if args.manifest:
                apply_folds(drop_extra_cli(read_manifest(args.manifest), args.selection), folds)
            print(f"splits: {args.folds} ok (sha256 {folds.sha256})")
    except (FoldError, ManifestError, SelectionError) as err:
        print(f"hearsay splits: {err}", file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK
