"""`hearsay splits make|verify`: fold files, pinned by sha256 in the SHA256SUMS beside them.

    hearsay splits make corpus/manifest.csv --out splits --name demo [--config splits.json]
    hearsay splits verify splits/demo.folds.json [--manifest corpus/manifest.csv]

A fold file `<name>.folds.json` holds the resolved SplitsConfig and the fold of every row id:
{"config": {...}, "folds": {"<id>": "0".."4" | "holdout" | "test" | "extra"}}. `make` writes it and
(re)writes its line in `<out>/SHA256SUMS` (sha256sum format); everything that reads a fold file
(`load_folds`, `hearsay bundle --folds`) first checks that digest and refuses on a mismatch.

How `make` assigns folds (deterministic for a given manifest + config):
1. rows whose input fold is `test` stay `test` (any other pre-filled fold is refused);
2. a generator's family is the part of its name before `family_sep` (`voc-a` -> `voc`); every core
   group that holds a spoof row of a `holdout_families` family goes to `holdout`, whole;
3. the other core groups are spread over folds 0..n_folds-1, group-disjoint and label-stratified
   (greedy, largest groups first, seeded ties);
4. extra rows (train_scope extra) inherit their group's fold, else get fold `extra` (train-only for
   every model). An extra row from a holdout family is refused: it would leak the holdout.

`family_exclusion` ({"0": ["smear"], …, "full": [...]}) names the extra generator families the model
for fold k (or the full model) must never see; `train_ids` applies it.

Exit codes: 0 ok, 2 usage, 3 manifest or fold file rejected (sha mismatch, holdout leak, bad
config).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hearsay import config
from hearsay.hashing import SumsError, format_sums, read_sums, sha256_file
from hearsay.manifest import INNER_FOLDS, LABELS, ManifestError, read_manifest

EXIT_OK, EXIT_USAGE, EXIT_REJECTED = 0, 2, 3  # `hearsay splits` (module docstring)

SUMS = "SHA256SUMS"


class FoldError(ValueError):
    """A fold file or split that must not be used; the message names the fix."""


@dataclass(frozen=True)
class SplitsConfig:
    n_folds: int = 5  # inner folds 0..n_folds-1 (the manifest schema allows at most 5)
    holdout_families: tuple[str, ...] = ()  # generator families kept out of every inner fold
    family_sep: str = "-"  # a generator's family is its name up to the first family_sep
    family_exclusion: dict = field(default_factory=dict)  # {"0".."4"|"full": [families]} per model
    seed: int = 0  # tie-breaking RNG for the greedy group assignment

    @classmethod
    def from_dict(cls, d: dict) -> SplitsConfig:
        cfg = config.from_dict(cls, d, what="splits config", error=FoldError)
        if not 2 <= cfg.n_folds <= len(INNER_FOLDS):
            raise FoldError(f"n_folds {cfg.n_folds} must be 2..{len(INNER_FOLDS)}")
        models = {str(k) for k in range(cfg.n_folds)} | {"full"}
        bad = sorted(set(map(str, cfg.family_exclusion)) - models)
        if bad:
            raise FoldError(f"family_exclusion keys {bad} are not models; use {sorted(models)}")
        for k, fams in cfg.family_exclusion.items():
            if not (isinstance(fams, list) and all(isinstance(f, str) for f in fams)):
                raise FoldError(f"family_exclusion[{k!r}] must be a list of family names, "
                                f"e.g. [\"smear\"]; got {fams!r}")
        return cfg

    def family(self, generator: str) -> str:
        return generator.split(self.family_sep, 1)[0]


# --------------------------------------------------------------------------- assignment


def assign_folds(df: pd.DataFrame, cfg: SplitsConfig) -> dict[str, str]:
    """{id: fold} for every row of a validated manifest (see the module docstring)."""
    fam = df["generator"].map(cfg.family)
    extra = df["train_scope"] == "extra"
    leak = df.loc[extra & fam.isin(cfg.holdout_families) & (df["label"] == "spoof")]
    if len(leak):
        raise FoldError(f"extra row(s) {leak['id'].tolist()[:5]} come from holdout famil"
                        f"{'y' if len(cfg.holdout_families) == 1 else 'ies'} "
                        f"{list(cfg.holdout_families)}: training on them leaks the holdout. "
                        "Drop those rows or remove the family from holdout_families.")
    preset = df.loc[~df["fold"].isin(["", "test"]) & ~(extra & (df["fold"] == "extra")), "id"]
    if len(preset):
        raise FoldError(f"rows {preset.tolist()[:5]} come with fold values; `splits make` assigns "
                        "inner and holdout folds itself (only 'test' is kept): empty those cells")
    folds: dict[str, str] = {}
    core = df.loc[~extra]
    test_groups = set(core.loc[core["fold"] == "test", "group"])
    for rid in core.loc[core["fold"] == "test", "id"]:
        folds[rid] = "test"
    rest = core.loc[core["fold"] != "test"]
    clash = sorted(set(rest["group"]) & test_groups)
    if clash:
        raise FoldError(f"group(s) {clash[:5]} have rows both in fold 'test' and outside it; "
                        "folds are group-disjoint: put the whole group in 'test' or none of it")
    hold_groups = set(rest.loc[fam[rest.index].isin(cfg.holdout_families), "group"])
    for rid in rest.loc[rest["group"].isin(hold_groups), "id"]:
        folds[rid] = "holdout"
    inner = rest.loc[~rest["group"].isin(hold_groups)]
    # label-stratified greedy: each group joins the fold whose label counts stay most even
    counts = inner.groupby(["group", "label"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=list(LABELS), fill_value=0)
    rng = np.random.default_rng(cfg.seed)
    order = sorted(counts.index, key=lambda g: (-counts.loc[g].sum(), rng.random()))
    load = np.zeros((cfg.n_folds, len(LABELS)))
    target = np.maximum(counts.sum().to_numpy() / cfg.n_folds, 1)
    group_fold: dict[str, str] = {}
    for g in order:
        c = counts.loc[g].to_numpy()
        cost = [np.max((load[k] + c) / target) + 1e-3 * load[k].sum() for k in range(cfg.n_folds)]
        k = int(np.argmin(cost))
        load[k] += c
        group_fold[g] = str(k)
    for rid, g in zip(inner["id"], inner["group"], strict=True):
        folds[rid] = group_fold[g]
    group_fold.update({g: "holdout" for g in hold_groups} | {g: "test" for g in test_groups})
    for rid, g in zip(df.loc[extra, "id"], df.loc[extra, "group"], strict=True):
        folds[rid] = group_fold.get(g, "extra")
    return folds


def train_ids(df: pd.DataFrame, cfg: SplitsConfig, model: str) -> list[str]:
    """Row ids the model for fold `model` ("0".."4") or "full" may train on.

    fold k: core + extra rows in inner folds other than k, plus fold-`extra` rows; full: every
    inner fold + `extra`. Extra rows whose generator family is in family_exclusion[model] are
    dropped. Holdout and test rows never train.
    """
    model = str(model)
    inner = [str(k) for k in range(cfg.n_folds)]
    if model not in inner + ["full"]:
        raise FoldError(f"model {model!r} is not one of {inner + ['full']}")
    allowed = set(inner + ["extra"]) - {model}
    keep = df["fold"].astype(str).isin(allowed)
    excluded = set(cfg.family_exclusion.get(model, []))
    fam = df["generator"].map(cfg.family)
    keep &= ~((df["train_scope"] == "extra") & fam.isin(excluded))
    return df.loc[keep, "id"].tolist()


# --------------------------------------------------------------------------- files + pinning


def pinned_sums(path: Path) -> dict[str, str]:
    """{file name: sha256} from a sha256sum-format file (missing: {}); FoldError if malformed."""
    try:
        return read_sums(path, missing_ok=True)
    except SumsError as e:
        raise FoldError(f"{e}; fix or delete that line, then re-pin with `hearsay splits make`") \
            from None


def write_folds(df: pd.DataFrame, cfg: SplitsConfig, out: Path, name: str) -> Path:
    """Write out/<name>.folds.json and pin it in out/SHA256SUMS (other lines kept)."""
    out.mkdir(parents=True, exist_ok=True)
    folds = assign_folds(df, cfg)
    path = out / f"{name}.folds.json"
    doc = {"config": asdict(cfg), "folds": dict(sorted(folds.items()))}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    sums = pinned_sums(out / SUMS)
    sums[path.name] = sha256_file(path)
    (out / SUMS).write_text(format_sums(sums))
    return path


@dataclass(frozen=True)
class Folds:
    path: Path
    sha256: str
    config: SplitsConfig
    folds: dict  # {id: fold}


def verify_sha(path: str | os.PathLike) -> str:
    """The file's sha256 if it matches its line in SHA256SUMS beside it; else FoldError."""
    path = Path(path)
    if not path.is_file():
        raise FoldError(f"{path}: fold file not found (make one: hearsay splits make MANIFEST "
                        f"--out {path.parent} --name NAME)")
    pinned = pinned_sums(path.parent / SUMS).get(path.name)
    actual = sha256_file(path)
    if pinned is None:
        raise FoldError(f"{path}: not pinned in {path.parent / SUMS} (fold files are written and "
                        "pinned by `hearsay splits make`; add its `sha256sum` line if intended)")
    if pinned != actual:
        raise FoldError(f"{path}: sha256 {actual[:12]}… does not match the pinned "
                        f"{pinned[:12]}… in {path.parent / SUMS}; the fold file changed. Restore "
                        f"it (git checkout -- {path}) or, if the new folds are intended, re-make "
                        "them with `hearsay splits make`, which re-pins them")
    return actual


def load_folds(path: str | os.PathLike) -> Folds:
    """Read a fold file after checking its pinned sha256."""
    digest = verify_sha(path)
    doc = json.loads(Path(path).read_text())
    return Folds(Path(path), digest, SplitsConfig.from_dict(doc["config"]), doc["folds"])


def apply_folds(df: pd.DataFrame, folds: Folds) -> pd.DataFrame:
    """Fill the manifest's fold column from `folds`; a disagreeing or missing row is an error."""
    df = df.copy()
    for i, (rid, fold) in enumerate(zip(df["id"], df["fold"], strict=True), start=1):
        pinned = folds.folds.get(rid)
        if pinned is None:
            raise FoldError(f"row {i} id {rid!r} is not in {folds.path} (re-make the folds for "
                            "this manifest: hearsay splits make)")
        if fold and fold != pinned:
            raise FoldError(f"row {i} id {rid!r}: manifest fold {fold!r} != {pinned!r} in "
                            f"{folds.path} (empty the manifest's fold column or re-make folds)")
        df.iat[i - 1, df.columns.get_loc("fold")] = pinned
    check_no_holdout_leak(df, folds.config)
    return df


def check_no_holdout_leak(df: pd.DataFrame, cfg: SplitsConfig) -> None:
    """Refuse when any extra row's generator belongs to a holdout family."""
    fam = df["generator"].map(cfg.family)
    bad = df.loc[(df["train_scope"] == "extra") & fam.isin(cfg.holdout_families)
                 & (df["label"] == "spoof"), "id"].tolist()
    if bad:
        raise FoldError(f"extra generator(s) from holdout families {list(cfg.holdout_families)} "
                        f"in rows {bad[:5]}: the build refuses (drop those rows or change "
                        "holdout_families and re-make the folds)")


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay splits", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make", help="assign folds and pin the fold file")
    mk.add_argument("manifest", type=Path)
    mk.add_argument("--out", type=Path, default=Path("splits"), help="folder (default splits/)")
    mk.add_argument("--name", default="folds", help="fold file is OUT/NAME.folds.json")
    mk.add_argument("--config", type=Path,
                    help="SplitsConfig JSON: n_folds, holdout_families, family_sep, "
                         "family_exclusion, seed (unknown keys are errors)")
    vf = sub.add_parser("verify", help="check a fold file's pinned sha (and its manifest)")
    vf.add_argument("folds", type=Path)
    vf.add_argument("--manifest", type=Path, help="also check it covers this manifest")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "make":
            cfg = SplitsConfig.from_dict(json.loads(args.config.read_text()) if args.config
                                         else {})
            path = write_folds(read_manifest(args.manifest), cfg, args.out, args.name)
            counts = pd.Series(json.loads(path.read_text())["folds"]).value_counts().sort_index()
            print(f"splits: wrote {path} (pinned in {args.out / SUMS}); rows per fold: "
                  + ", ".join(f"{k}={v}" for k, v in counts.items()))
        else:
            folds = load_folds(args.folds)
            if args.manifest:
                apply_folds(read_manifest(args.manifest), folds)
            print(f"splits: {args.folds} ok (sha256 {folds.sha256})")
    except (FoldError, ManifestError) as err:
        print(f"hearsay splits: {err}", file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK
