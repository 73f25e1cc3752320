"""The manifest rows a bundle is built from: read and validated, the extra rows of the
selection's drop_extra_families removed, and every row's fold filled from the pinned fold file
(or, without one, checked as the manifest gives it).

    df, folds_meta, dropped = prepare_manifest(Path("manifest.csv"), Path("f.folds.json"), scfg)
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd

from hearsay.bundle.select import SelectionConfig, drop_extra_rows
from hearsay.contracts.folds import SplitsConfig, apply_folds, check_no_holdout_leak, load_folds
from hearsay.contracts.manifest import INNER_FOLDS, read_manifest, validate


def prepare_manifest(manifest: Path, folds_path: Path | None, scfg: SelectionConfig
                      ) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Validated manifest with every fold filled, plus the fold file's identity and config (without
    a fold file: no identity, and the holdout families the manifest's own folds imply), and the
    extra rows the selection's drop_extra_families removed before the fold check."""
    df, dropped = drop_extra_rows(read_manifest(manifest), scfg)
    df, meta = fill_folds(df, manifest, folds_path)
    return df, meta, dropped


def fill_folds(df: pd.DataFrame, manifest: Path, folds_path: Path | None
                ) -> tuple[pd.DataFrame, dict]:
    """The manifest's fold column filled from the pinned fold file, or checked as it is."""
    if folds_path is not None:
        folds = load_folds(folds_path)
        return apply_folds(df, folds), {"path": str(folds_path), "sha256": folds.sha256,
                                        "config": asdict(folds.config)}
    validate(df, path=manifest, require_fold=True)
    # no config: a holdout family is one seen in holdout spoof rows and in no inner spoof row
    spoof = df.loc[(df["label"] == "spoof") & (df["train_scope"] == "core")]
    fam = spoof["generator"].map(SplitsConfig().family)
    hold = set(fam[spoof["fold"] == "holdout"]) - set(fam[spoof["fold"].isin(INNER_FOLDS)])
    derived = SplitsConfig(holdout_families=tuple(sorted(hold)))
    check_no_holdout_leak(df, derived)
    return df, {"path": None, "sha256": None, "config": asdict(derived)}
