"""The fold files (docs/INTERFACES.md, "Fold files"): their format, how folds are assigned and
checked, and the leak rules, once; pinned by sha256 in the SHA256SUMS beside them. The command
that makes them is `hearsay splits` (hearsay.bundle.splits).

A fold file `<name>.folds.json` holds the resolved SplitsConfig and the fold of every row id:
{"config": {...}, "folds": {"<id>": "0".."4" | "holdout" | "test" | "probe" | "extra"}}. `make`
writes it and (re)writes its line in `<out>/SHA256SUMS` (sha256sum format); everything that reads a
fold file (`load_folds`, `hearsay bundle --folds`) first checks that digest and refuses on a
mismatch.

How `make` assigns folds (deterministic for a given manifest + config):
1. rows whose input fold is `test` or `probe` (the probe set: hearsay.contracts.manifest) stay
   there (any other pre-filled fold is refused);
2. a generator's family is the part of its name before `family_sep` (`voc-a` -> `voc`); every core
   group that holds a spoof row of a `holdout_families` family goes to `holdout`, whole;
3. the other core groups are spread over folds 0..n_folds-1, group-disjoint and label-stratified
   (greedy, largest groups first, seeded ties);
4. extra rows (train_scope extra) inherit their group's fold, else get fold `extra` (train-only for
   every model). An extra row from a holdout family is refused: it would leak the holdout
   (`--selection FILE` with {"drop_extra_families": [FAMILY]} removes such rows first).

`import` takes folds assigned elsewhere instead: a CSV with header `id,fold`, or a fold file in
the JSON above (its config is used unless --config is given), covering exactly the manifest's ids.
It writes `<name>.folds.json` (with "imported": {"from", "sha256"} of the source file) and pins
it like `make`, after the rules `make` follows, with the same messages where `make` has one:
groups are fold-disjoint (test groups whole), holdout-family core groups are `holdout` and
nothing else is, no extra row of a holdout family, a manifest's pre-filled fold must agree, and
an extra row takes its group's fold. An extra row of a group with no core rows may keep an inner
fold k (speaker-grouped elsewhere): the fold-k model never trains on it (`train_ids`) and, extra,
it is never scored.

`family_exclusion` ({"0": ["smear"], …, "full": [...]}) names the extra generator families the model
for fold k (or the full model) must never see; `train_ids` applies it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hearsay.contracts.manifest import INNER_FOLDS, LABELS
from hearsay.util import config
from hearsay.util.hashing import SUMS, SumsError, format_sums, read_sums, sha256_file

KEPT = ("test", "probe")  # folds a manifest pre-fills and `make` keeps, each group whole


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


def refuse_holdout_extras(df: pd.DataFrame, cfg: SplitsConfig, who: str = "splits") -> None:
    """The one refusal of extra spoof rows from a holdout family (`splits make|import`, the
    bundle build): the selection's drop_extra_families (hearsay.bundle.select) runs first."""
    fam = df["generator"].map(cfg.family)
    leak = df.loc[(df["train_scope"] == "extra") & fam.isin(cfg.holdout_families)
                  & (df["label"] == "spoof")]
    if len(leak):
        raise FoldError(f"extra row(s) {leak['id'].tolist()[:5]} come from holdout families "
                        f"{list(cfg.holdout_families)}: training on them leaks the holdout, so "
                        f"{who} refuses. Drop them (--selection FILE with the rule "
                        '{"drop_extra_families": [FAMILY]}: extra rows only, core rows stay) or '
                        "remove the family from holdout_families and re-make the folds.")


def refuse_split_test_groups(core: pd.DataFrame, folds: pd.Series) -> None:
    """`make`'s and `import`'s refusal of a core group with rows in fold test (or probe) and
    outside it (`folds`: the core rows' folds, aligned with `core`)."""
    for kept in KEPT:
        inside = folds == kept
        clash = sorted(set(core.loc[~inside, "group"]) & set(core.loc[inside, "group"]))
        if clash:
            raise FoldError(f"group(s) {clash[:5]} have rows both in fold '{kept}' and outside "
                            f"it; folds are group-disjoint: put the whole group in '{kept}' or "
                            "none of it")


def holdout_groups(core: pd.DataFrame, cfg: SplitsConfig) -> set:
    """Core groups holding a row of a holdout-family generator: they go to `holdout`, whole."""
    fam = core["generator"].map(cfg.family)
    return set(core.loc[fam.isin(cfg.holdout_families), "group"])


def assign_folds(df: pd.DataFrame, cfg: SplitsConfig) -> dict[str, str]:
    """{id: fold} for every row of a validated manifest (see the module docstring)."""
    extra = df["train_scope"] == "extra"
    refuse_holdout_extras(df, cfg)
    preset = df.loc[~df["fold"].isin(["", *KEPT]) & ~(extra & (df["fold"] == "extra")), "id"]
    if len(preset):
        raise FoldError(f"rows {preset.tolist()[:5]} come with fold values; `splits make` assigns "
                        "inner and holdout folds itself (only 'test' and 'probe' are kept): "
                        "empty those cells")
    folds: dict[str, str] = {}
    core = df.loc[~extra]
    kept_groups = {g: f for f in KEPT for g in core.loc[core["fold"] == f, "group"]}
    for rid, f in zip(core["id"], core["fold"], strict=True):
        if f in KEPT:
            folds[rid] = f
    rest = core.loc[~core["fold"].isin(KEPT)]
    refuse_split_test_groups(core, core["fold"])
    hold_groups = holdout_groups(rest, cfg)
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
    group_fold.update({g: "holdout" for g in hold_groups} | kept_groups)
    for rid, g in zip(df.loc[extra, "id"], df.loc[extra, "group"], strict=True):
        folds[rid] = group_fold.get(g, "extra")
    return folds


def trains_on(job: str, n_folds: int) -> tuple[str, ...]:
    """The manifest folds a model trains on (n_folds: the fold file's config.n_folds): "foldK"
    -> the inner folds but K, "full" -> every inner fold, "pilot" -> all but the last (it
    validates there); each + "extra". Holdout and test never train."""
    inner = [str(k) for k in range(n_folds)]
    if job == "pilot":
        return (*inner[:-1], "extra")
    model = str(job).removeprefix("fold")
    if model not in inner + ["full"]:
        raise FoldError(f"model {job!r} is not one of fold0..fold{n_folds - 1}, full or pilot")
    return (*[k for k in inner if k != model], "extra")


def train_ids(df: pd.DataFrame, cfg: SplitsConfig, model: str) -> list[str]:
    """Row ids the model `model` ("0".."4" or "full") trains on: its folds (trains_on) less
    extra rows whose generator family is in family_exclusion[model]."""
    model = str(model)
    keep = df["fold"].astype(str).isin(trains_on("full" if model == "full" else f"fold{model}",
                                                 cfg.n_folds))
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
    folds = assign_folds(df, cfg)
    return _write_pinned({"config": asdict(cfg), "folds": dict(sorted(folds.items()))}, out, name)


def read_fold_source(path: Path) -> tuple[dict[str, str], dict | None]:
    """({id: fold}, config or None) of a fold file made elsewhere: CSV `id,fold` or the JSON
    {"config": {...}, "folds": {...}} that `make` writes."""
    if not path.is_file():
        raise FoldError(f"{path}: not found (a CSV with header id,fold, or a .folds.json)")
    if path.suffix == ".json":
        try:
            doc = json.loads(path.read_text())
            return {str(k): str(v) for k, v in doc["folds"].items()}, doc.get("config")
        except (json.JSONDecodeError, KeyError, AttributeError, TypeError) as err:
            raise FoldError(f"{path}: not a fold file ({err!r}); the JSON is "
                            '{"config": {...}, "folds": {"<id>": "<fold>"}}') from None
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as err:  # noqa: BLE001 - pandas raises several parser errors
        raise FoldError(f"{path}: not a readable CSV ({err})") from None
    if list(table.columns) != ["id", "fold"]:
        raise FoldError(f"{path}: columns {list(table.columns)}; an imported fold CSV has "
                        "exactly the header id,fold")
    dup = table.loc[table["id"].duplicated(), "id"].tolist()
    if dup:
        raise FoldError(f"{path}: id(s) {dup[:5]} listed more than once; one fold per id")
    return dict(zip(table["id"], table["fold"].str.strip(), strict=True)), None


def check_imported(df: pd.DataFrame, folds: dict[str, str], cfg: SplitsConfig,
                   what: str) -> None:
    """Refuse imported folds that `make` could not have produced (module docstring, `import`);
    `what` names the source file in the messages."""
    ids = set(df["id"])
    missing, unknown = sorted(ids - set(folds)), sorted(set(folds) - ids)
    if missing or unknown:
        raise FoldError(f"{what} does not cover the manifest: {len(missing)} manifest id(s) "
                        f"missing {missing[:5]}, {len(unknown)} unknown id(s) {unknown[:5]} "
                        "(import the fold file made for this manifest)")
    fold = df["id"].map(folds)
    allowed = {str(k) for k in range(cfg.n_folds)} | {"holdout", *KEPT, "extra"}
    bad = ~fold.isin(allowed)
    if bad.any():
        raise FoldError(f"{what}: id(s) {df.loc[bad, 'id'].tolist()[:5]} have folds "
                        f"{sorted(set(fold[bad]))} outside {sorted(allowed)} (n_folds "
                        f"{cfg.n_folds}: fix the fold file or n_folds in the config)")
    given = df["fold"].astype(str)
    clash = df.loc[(given != "") & (given != fold), "id"].tolist()
    if clash:
        raise FoldError(f"{what}: id(s) {clash[:5]} disagree with the manifest's fold column "
                        "(empty the manifest's fold column or fix the fold file)")
    refuse_holdout_extras(df, cfg)
    extra = df["train_scope"] == "extra"
    core, core_fold = df.loc[~extra], fold[~extra]
    if (core_fold == "extra").any():
        raise FoldError(f"{what}: core id(s) {core.loc[core_fold == 'extra', 'id'].tolist()[:5]}"
                        " in fold 'extra' (only train_scope extra rows may be)")
    refuse_split_test_groups(core, core_fold)
    rest = ~core_fold.isin(KEPT)  # test/probe groups stay so, whatever generators they hold
    hold = holdout_groups(core.loc[rest], cfg)
    wrong = core.loc[rest & (core["group"].isin(hold) != (core_fold == "holdout")), "id"].tolist()
    if wrong:
        raise FoldError(f"{what}: id(s) {wrong[:5]}: a core group goes to 'holdout', whole, "
                        "exactly when it holds a generator of holdout_families "
                        f"{list(cfg.holdout_families)} (fix the fold file or holdout_families)")
    group_fold = fold.groupby(df["group"]).agg(lambda f: sorted(set(f)))
    split = group_fold[group_fold.map(len) > 1]
    if len(split):
        raise FoldError(f"{what}: group(s) {split.index.tolist()[:5]} span folds "
                        f"{split.tolist()[:5]}; folds are group-disjoint: one fold per group "
                        "(an extra row takes its group's fold)")
    orphan = df.loc[extra & ~df["group"].isin(core["group"])
                    & fold.isin(["holdout", *KEPT])]
    if len(orphan):
        raise FoldError(f"{what}: extra id(s) {orphan['id'].tolist()[:5]} of groups with no core"
                        " rows in 'holdout'/'test': such a row keeps an inner fold or 'extra'")


def import_folds(df: pd.DataFrame, source: Path, cfg: SplitsConfig | None, out: Path,
                 name: str) -> Path:
    """Check folds made elsewhere against the manifest, write out/<name>.folds.json and pin
    it in out/SHA256SUMS (as `write_folds`). `cfg` None: the source JSON's config, else the
    defaults."""
    folds, own = read_fold_source(source)
    cfg = cfg or SplitsConfig.from_dict(own or {})
    check_imported(df, folds, cfg, str(source))
    doc = {"config": asdict(cfg), "folds": dict(sorted(folds.items())),
           "imported": {"from": source.name, "sha256": sha256_file(source)}}
    return _write_pinned(doc, out, name)


def _write_pinned(doc: dict, out: Path, name: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.folds.json"
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
                            "this manifest: hearsay splits make, with the bundle's --selection)")
        if fold and fold != pinned:
            raise FoldError(f"row {i} id {rid!r}: manifest fold {fold!r} != {pinned!r} in "
                            f"{folds.path} (empty the manifest's fold column or re-make folds)")
        df.iat[i - 1, df.columns.get_loc("fold")] = pinned
    check_no_holdout_leak(df, folds.config)
    return df


def check_no_holdout_leak(df: pd.DataFrame, cfg: SplitsConfig) -> None:
    """The bundle build's refusal of extra rows from a holdout family (refuse_holdout_extras)."""
    refuse_holdout_extras(df, cfg, "the build")
