"""The manifest schema: one row per clip, validated with errors that name the row and column.

    from hearsay.contracts.manifest import read_manifest, scorable, assert_no_extra
    df = read_manifest("corpus/manifest.csv")           # every column a str; raises ManifestError

Columns (docs/INTERFACES.md): id, path, label, generator, source, group, fold, train_scope, and the
bundle-filled duration, codec_ids (+ flac in a bundle's manifest). `fold` may be empty in an input
manifest; it is then filled from a pinned fold file (hearsay.contracts.folds).

Scores: fold 0-4 -> split `inner_oof`, `holdout` -> `holdout`, `test` -> `test`; `extra` rows (and
every `train_scope == extra` row) are train-only and never scored. `scorable(df)` drops them and
`assert_no_extra(scores, manifest)` raises if any of them reaches a score table.

Fold `probe` holds the probe set (bona fide clips from outside the training domain, e.g.
In-the-Wild's: `hearsay manifest-import in-the-wild --probe`): never trained on, scored by every
run into its own probe file (hearsay.evaluate.probe_set) and never in the exported score file
(`scorable` drops it too), so the test split stays exactly the sponsor's test set in its order.
A clip (path) in both fold probe and fold test is refused, naming the rows.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

INPUT_COLUMNS = ("id", "path", "label", "generator", "source", "group", "fold", "train_scope")
BUNDLE_COLUMNS = ("duration", "codec_ids")  # filled by hearsay bundle (+ "flac" in the bundle)
LABELS = ("bonafide", "spoof")
INNER_FOLDS = ("0", "1", "2", "3", "4")
FOLDS = INNER_FOLDS + ("holdout", "test", "probe", "extra")
SCOPES = ("core", "extra")
SPLIT_OF_FOLD = {**{f: "inner_oof" for f in INNER_FOLDS}, "holdout": "holdout", "test": "test"}
ID_RE = re.compile(r"^[A-Za-z0-9._-]+$")


class ManifestError(ValueError):
    """A manifest that cannot be used. Names the file, the row (1-based data row) and column."""

    def __init__(self, reason: str, *, path: str | os.PathLike | None = None,
                 row: int | None = None, column: str | None = None):
        self.path, self.row, self.column, self.reason = path, row, column, reason
        where = []
        if path is not None:
            where.append(str(path))
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(f"{', '.join(where)}: {reason}" if where else reason)


def read_manifest(path: str | os.PathLike, *, require_fold: bool = False) -> pd.DataFrame:
    """Read and validate a manifest CSV. Every cell is a str (empty cells are "")."""
    path = Path(path)
    if not path.is_file():
        raise ManifestError("file not found (write one, or `hearsay demo-data DIR` for a demo)",
                            path=path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as err:  # noqa: BLE001 - pandas raises several parser errors
        raise ManifestError(f"not a readable CSV ({err})", path=path) from None
    validate(df, path=path, require_fold=require_fold)
    return df


def validate(df: pd.DataFrame, *, path: str | os.PathLike | None = None,
             require_fold: bool = False) -> None:
    """Raise ManifestError on the first problem: missing column, bad value, duplicate id."""
    missing = [c for c in INPUT_COLUMNS if c not in df.columns]
    if missing:
        raise ManifestError(f"missing column(s) {missing}; a manifest needs {list(INPUT_COLUMNS)}",
                            path=path)
    seen: dict[str, int] = {}
    for i, row in enumerate(df[list(INPUT_COLUMNS)].itertuples(index=False), start=1):
        rid, rpath, label, gen, source, group, fold, scope = (str(v).strip() for v in row)

        def bad(column: str, reason: str, row: int = i) -> ManifestError:
            return ManifestError(reason, path=path, row=row, column=column)

        if not ID_RE.match(rid):
            raise bad("id", f"{rid!r} is not a valid id (use letters, digits, '.', '_', '-')")
        if rid in seen:
            raise bad("id", f"duplicate id {rid!r} (first at row {seen[rid]})")
        seen[rid] = i
        if not rpath:
            raise bad("path", "empty path")
        if label not in LABELS:
            raise bad("label", f"{label!r} is not one of {list(LABELS)}")
        if not gen:
            raise bad("generator", "empty generator (bona fide rows use 'bonafide')")
        if label == "bonafide" and gen != "bonafide":
            raise bad("generator", f"bona fide row has generator {gen!r}; use 'bonafide'")
        if label == "spoof" and gen == "bonafide":
            raise bad("generator", "spoof row needs its generator's name, not 'bonafide'")
        if not source:
            raise bad("source", "empty source")
        if not group:
            raise bad("group", "empty group (folds are group-disjoint: every row needs one)")
        if scope not in SCOPES:
            raise bad("train_scope", f"{scope!r} is not one of {list(SCOPES)}")
        if fold == "" and require_fold:
            raise bad("fold", "empty fold (fill it from a fold file: hearsay bundle --folds FILE)")
        if fold and fold not in FOLDS:
            raise bad("fold", f"{fold!r} is not one of {list(FOLDS)}")
        if scope == "core" and fold == "extra":
            raise bad("fold", "a core row cannot be in fold 'extra' (set train_scope to extra)")
        if fold == "probe" and scope != "core":
            raise bad("train_scope", "a probe row is never trained on: train_scope core")
    refuse_probe_in_test(df, path=path)


def refuse_probe_in_test(df: pd.DataFrame, *, path: str | os.PathLike | None = None) -> None:
    """ManifestError naming the rows when one clip (its `path`) is in both fold probe and fold
    test: the probe must not move the test split, nor the test split the probe."""
    fold, clip = df["fold"].astype(str).str.strip(), df["path"].astype(str).str.strip()
    shared = set(clip[fold == "probe"]) & set(clip[fold == "test"])
    if shared:
        at = (clip.isin(shared) & fold.isin(["probe", "test"])).to_numpy().nonzero()[0]
        rows = [f"row {i + 1} ({df['id'].iloc[i]}, fold {fold.iloc[i]})" for i in at]
        raise ManifestError(f"{len(shared)} clip(s) in both fold probe and fold test: "
                            f"{', '.join(rows[:10])}; the probe set is its own corpus: drop "
                            "these rows from one of the two (e.g. import In-the-Wild with "
                            "--probe only, never also with --test)", path=path)


def resolve_path(rel: str, manifest_dir: str | os.PathLike) -> Path:
    """A manifest's `path` cell as a file path: absolute as is, else relative to the manifest."""
    p = Path(rel)
    return p if p.is_absolute() else Path(manifest_dir) / p


def parse_selector(sel: str) -> tuple[str, str]:
    """(column, value) of a selector of manifest rows: COLUMN=VALUE, or a bare source name
    (`hearsay corpus-probe --corpus/--against`, a corpus decision's "corpus")."""
    col, sep, value = sel.partition("=")
    return (col, value) if sep else ("source", sel)


def split_of(fold: str) -> str | None:
    """The score split a fold belongs to; None for `extra` (never scored)."""
    return SPLIT_OF_FOLD.get(str(fold))


def is_extra(df: pd.DataFrame) -> pd.Series:
    """Boolean mask of rows that must never be scored: train_scope extra or fold extra."""
    return (df["train_scope"].astype(str) == "extra") | (df["fold"].astype(str) == "extra")


def scorable(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that may receive an exported score (every extra and probe row dropped), plus a `split`
    column."""
    out = df.loc[~is_extra(df) & (df["fold"].astype(str) != "probe")].copy()
    out["split"] = [split_of(f) for f in out["fold"].astype(str)]
    if out["split"].isna().any():
        bad = out.loc[out["split"].isna(), "id"].tolist()[:5]
        raise ManifestError(f"rows without a fold {bad} (fill folds before scoring)")
    return out


class ExtraRowScored(RuntimeError):
    """An extra (train-only) row appeared in a score table: that table must not be written."""


def assert_no_extra(scores: pd.DataFrame, manifest: pd.DataFrame, key: str = "path") -> None:
    """Raise ExtraRowScored if any row of `scores` is an extra row of `manifest` (joined on `key`,
    the manifest's `path` by default; `id` also works) or carries fold/split `extra`."""
    extra_keys = set(manifest.loc[is_extra(manifest), key].astype(str))
    leaked = sorted(set(scores[key].astype(str)) & extra_keys) if key in scores else []
    for col in ("fold", "split"):
        if col in scores:
            leaked += sorted(set(scores.loc[scores[col].astype(str) == "extra", key].astype(str)))
    if leaked:
        raise ExtraRowScored(f"{len(leaked)} extra (train-only) row(s) in a score table, e.g. "
                             f"{leaked[:3]}; filter with hearsay.contracts.manifest.scorable() "
                             "first")
