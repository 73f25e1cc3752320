"""Which rows a bundle keeps: the selection stage of `hearsay bundle --selection FILE`.

    cfg = SelectionConfig.from_file("configs/selection.example.json")
    kept, outcome = select_rows(rows, cfg)   # rows: id, label, generator, source, trimmed_s

It depends only on the manifest and each clip's trimmed duration (seconds after silence
trimming, before the max_s cap: the duration the diagnostics' AUC uses), so it runs in
hearsay.bundle.build once every clip is decoded. Rules, applied in this order:

0. drop_extra_families, before the fold check and before any decoding (`drop_extra_rows`; also
   `hearsay splits make|import --selection FILE`): every train_scope extra row of a named
   generator family leaves the manifest, so an extra corpus that holds a holdout family's
   generator needs no hand-filtered manifest. Core rows are never touched (the holdout keeps its
   rows); an extra row of a holdout family that no rule drops is still refused by the fold check
   (hearsay.contracts.folds). Listed with rule "drop_extra_families" and counted per family in the
   outcome;
1. drop_generators / drop_families: every row of a named generator (family = the name up to the
   first family_sep) is dropped, in every source, and listed with the rule that dropped it;
2. per source (`sources[S]`), on the rows left:
   min_trimmed_s   both classes: rows with trimmed_s < this are dropped;
   match_duration  the `subsample` class is histogram-matched to the other class of the source:
                   bins of bin_s seconds ([k*bin_s, (k+1)*bin_s)); bin k keeps
                   min(n_subsample[k], round(ratio * n_other[k])) subsample rows;
   cap_per_generator  at most this many spoof rows per generator;
   class_ratio     the `subsample` class is cut to at most round(per_other * n_other) rows;
   cap_per_class   {"bonafide"|"spoof": n}: at most n rows of that class;
   cap             at most this many rows in the source.

Every cut keeps the rows with the smallest sha256(seed, rule, source, id): seeded, and the same
whatever the manifest's row order. Every dropped row is listed with its reason in the outcome,
which hearsay.bundle.build records in bundle_meta.json and in the hashed selection.json.
Sources a rule names must exist in the manifest, and so must the generators drop_generators
names (a typo would otherwise select nothing, silently).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hearsay.contracts.manifest import LABELS
from hearsay.util import config


class SelectionError(ValueError):
    """A selection config that cannot be applied; the message names the fix."""


@dataclass(frozen=True)
class MatchRule:
    subsample: str = "spoof"  # the class cut to the other class's duration histogram
    bin_s: float = 0.25  # histogram bin width, seconds of trimmed duration
    ratio: float = 1.0  # kept subsample rows per other-class row, in every bin


@dataclass(frozen=True)
class RatioRule:
    subsample: str = "spoof"  # the class cut
    per_other: float = 1.0  # at most round(per_other * n_other) rows of it are kept


@dataclass(frozen=True)
class SourceRule:
    min_trimmed_s: float = 0.0  # seconds; rows shorter after trimming are dropped (both classes)
    match_duration: MatchRule | None = None
    cap_per_generator: int | None = None  # spoof rows per generator
    class_ratio: RatioRule | None = None
    cap_per_class: dict = field(default_factory=dict)  # {"bonafide"|"spoof": max rows}
    cap: int | None = None  # rows of the source, both classes


@dataclass(frozen=True)
class SelectionConfig:
    seed: int = 0  # every cut's order: sha256(seed, rule, source, id)
    drop_generators: tuple[str, ...] = ()
    drop_families: tuple[str, ...] = ()
    drop_extra_families: tuple[str, ...] = ()  # extra rows of these families, before the fold check
    family_sep: str = "-"  # a generator's family is its name up to the first family_sep
    sources: dict = field(default_factory=dict)  # {source: SourceRule}
    note: str = ""  # free text recorded with the config (what recipe it reproduces)

    @classmethod
    def from_dict(cls, d: dict) -> SelectionConfig:
        d = dict(d)
        sources = {}
        for name, rule in (d.pop("sources", None) or {}).items():
            rule = dict(rule)
            what = f"selection sources[{name!r}]"
            for key, sub in (("match_duration", MatchRule), ("class_ratio", RatioRule)):
                if rule.get(key) is not None:
                    rule[key] = config.from_dict(sub, rule[key], what=f"{what}.{key}",
                                                 error=SelectionError)
            sources[name] = config.from_dict(SourceRule, rule, what=what, error=SelectionError)
        cfg = config.from_dict(cls, d, what="selection config", error=SelectionError)
        cfg = dataclasses.replace(cfg, sources=sources)
        cfg.check()
        return cfg

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> SelectionConfig:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as err:
            raise SelectionError(f"{path}: not a readable selection config ({err})") from None

    def check(self) -> None:
        """Values a rule cannot work with (SelectionError naming the field)."""
        for name, r in self.sources.items():
            where = f"selection sources[{name!r}]"
            for sub in (r.match_duration, r.class_ratio):
                if sub is not None and sub.subsample not in LABELS:
                    raise SelectionError(f"{where}: subsample {sub.subsample!r} is not one of "
                                         f"{list(LABELS)}")
            if r.match_duration is not None and not (r.match_duration.bin_s > 0
                                                     and r.match_duration.ratio > 0):
                raise SelectionError(f"{where}.match_duration: bin_s and ratio must be > 0")
            if r.class_ratio is not None and not r.class_ratio.per_other > 0:
                raise SelectionError(f"{where}.class_ratio: per_other must be > 0")
            bad = sorted(set(r.cap_per_class) - set(LABELS))
            if bad:
                raise SelectionError(f"{where}.cap_per_class: keys {bad} are not {list(LABELS)}")
            caps = [r.cap, r.cap_per_generator, *r.cap_per_class.values()]
            if any(c is not None and (not isinstance(c, int) or c < 0) for c in caps):
                raise SelectionError(f"{where}: caps must be whole numbers >= 0, got {caps}")

    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))


# --------------------------------------------------------------------------- the cuts


def _order(ids: pd.Series, seed: int, rule: str, source: str) -> pd.Series:
    """ids sorted by their seeded key (a cut keeps the head)."""
    keys = [hashlib.sha256(f"{seed}\0{rule}\0{source}\0{i}".encode()).hexdigest() for i in ids]
    return ids.iloc[sorted(range(len(ids)), key=keys.__getitem__)]


def _keep_n(ids: pd.Series, n: int, seed: int, rule: str, source: str) -> tuple[set, set]:
    """(kept, cut) ids: the n smallest seeded keys are kept."""
    order = list(_order(ids, seed, rule, source))
    return set(order[:n]), set(order[n:])


def _bin(seconds: pd.Series, bin_s: float) -> pd.Series:
    """Bin index floor(trimmed_s / bin_s), in tenths of a millisecond so 2.0 / 0.25 is exactly 8."""
    return (seconds * 1e4).round().astype(int) // int(round(bin_s * 1e4))


def select_rows(rows: pd.DataFrame, cfg: SelectionConfig,
                check: bool = True) -> tuple[list[str], dict]:
    """(kept ids in the rows' order, outcome) for rows with columns id, label, generator, source,
    trimmed_s (float seconds). The outcome: counts per source x label x generator before and
    after, every dropped row with its rule and reason, per rule totals, per matched bin counts.
    `check`: refuse source / generator names the rows lack (check_names)."""
    if check:
        check_names(rows, cfg)
    table = rows.set_index("id", drop=False)
    alive = pd.Series(True, index=table.index)  # False once a rule dropped the row
    dropped: list[dict] = []

    def live() -> pd.DataFrame:
        return table.loc[alive]

    def drop(ids, rule: str, reason) -> None:  # reason: str, or id -> str
        for i in sorted(ids):
            dropped.append({"id": i, "source": table.at[i, "source"], "rule": rule,
                            "reason": reason(i) if callable(reason) else reason})
        alive[list(ids)] = False

    spoof = table["label"] == "spoof"
    family = table["generator"].map(lambda g: g.split(cfg.family_sep, 1)[0])
    for g in cfg.drop_generators:
        drop(table.index[alive & spoof & (table["generator"] == g)], "drop_generators",
             f"generator {g} is dropped by the selection config")
    for f in cfg.drop_families:
        drop(table.index[alive & spoof & (family == f)], "drop_families",
             f"generator family {f} is dropped by the selection config")
    matched = {}
    for src, rule in sorted(cfg.sources.items()):
        matched[src] = _source_rules(live, src, rule, cfg.seed, drop)
    kept = [i for i in rows["id"] if alive[i]]
    return kept, {"counts": _counts(rows, live()), "dropped": dropped,
                  "by_rule": _by_rule(dropped),
                  "match_duration": {s: m for s, m in matched.items() if m}}


def _source_rules(live, src: str, rule: SourceRule, seed: int, drop) -> list:
    """Source src's rules in order; live() = the rows no rule has dropped yet."""
    def rows(label: str | None = None) -> pd.DataFrame:
        t = live()
        sel = t["source"] == src
        return t.loc[sel if label is None else sel & (t["label"] == label)]

    if rule.min_trimmed_s > 0:
        short = rows()
        short = short.loc[short["trimmed_s"] < rule.min_trimmed_s, "id"]
        secs = live()["trimmed_s"]
        drop(short, "min_trimmed_s", lambda i: f"trimmed duration {secs[i]:.2f} s < "
                                               f"{rule.min_trimmed_s} s in source {src}")
    bins = []
    if rule.match_duration is not None:
        m = rule.match_duration
        other = "bonafide" if m.subsample == "spoof" else "spoof"
        sub, ref = rows(m.subsample), rows(other)
        sub_bin, ref_n = _bin(sub["trimmed_s"], m.bin_s), _bin(ref["trimmed_s"], m.bin_s)
        ref_n = ref_n.value_counts()
        for k in sorted(set(sub_bin) | set(ref_n.index)):
            ids = sub.loc[sub_bin == k, "id"]
            target = int(round(m.ratio * int(ref_n.get(k, 0))))
            _, cut = _keep_n(ids, target, seed, "match_duration", src)
            lo, hi = k * m.bin_s, (k + 1) * m.bin_s
            drop(cut, "match_duration",
                 f"{m.subsample} over {m.ratio} x {other} in trimmed-duration bin "
                 f"[{lo:.2f}, {hi:.2f}) s of source {src}")
            bins.append({"bin_s": [round(lo, 4), round(hi, 4)], other: int(ref_n.get(k, 0)),
                         m.subsample: len(ids), "target": target,
                         "kept": len(ids) - len(cut)})
    if rule.cap_per_generator is not None:
        sp = rows("spoof")
        for g, grp in sorted(sp.groupby("generator")):
            _, cut = _keep_n(grp["id"], rule.cap_per_generator, seed, f"cap_per_generator:{g}",
                             src)
            drop(cut, "cap_per_generator",
                 f"generator {g} over {rule.cap_per_generator} rows in source {src}")
    if rule.class_ratio is not None:
        r = rule.class_ratio
        other = "bonafide" if r.subsample == "spoof" else "spoof"
        n = int(round(r.per_other * len(rows(other))))
        _, cut = _keep_n(rows(r.subsample)["id"], n, seed, "class_ratio", src)
        drop(cut, "class_ratio", f"{r.subsample} over {r.per_other} x {other} in source {src}")
    for label, n in sorted(rule.cap_per_class.items()):
        _, cut = _keep_n(rows(label)["id"], n, seed, f"cap_per_class:{label}", src)
        drop(cut, "cap_per_class", f"{label} over {n} rows in source {src}")
    if rule.cap is not None:
        _, cut = _keep_n(rows()["id"], rule.cap, seed, "cap", src)
        drop(cut, "cap", f"over {rule.cap} rows in source {src}")
    return bins


def check_names(rows: pd.DataFrame, cfg: SelectionConfig) -> None:
    """SelectionError naming the sources / drop_generators the manifest rows lack (a typo would
    otherwise select nothing, silently); hearsay.bundle.build checks it before decoding."""
    missing = sorted(set(cfg.sources) - set(rows["source"]))
    if missing:
        raise SelectionError(f"selection sources {missing} are not in the manifest (its sources: "
                             f"{sorted(set(rows['source']))}); fix the names in the config")
    gens = set(rows.loc[rows["label"] == "spoof", "generator"])
    missing = sorted(set(cfg.drop_generators) - gens)
    if missing:
        raise SelectionError(f"drop_generators {missing} are not spoof generators of the "
                             "manifest; fix the names in the config")


def _counts(before: pd.DataFrame, after: pd.DataFrame) -> list[dict]:
    keys = ["source", "label", "generator"]
    b = before.groupby(keys).size()
    a = after.groupby(keys).size().reindex(b.index, fill_value=0)
    return [{"source": s, "label": lab, "generator": g, "before": int(b[(s, lab, g)]),
             "after": int(a[(s, lab, g)])} for s, lab, g in b.index]


def _by_rule(dropped: list[dict]) -> dict:
    out: dict = {}
    for d in dropped:
        out[d["rule"]] = out.get(d["rule"], 0) + 1
    return out


def drop_extra_rows(df: pd.DataFrame, cfg: SelectionConfig) -> tuple[pd.DataFrame, list[dict]]:
    """Rule 0, before the fold check: (the manifest less its train_scope extra rows of a
    drop_extra_families family, those rows listed {"id", "source", "rule", "reason", "family"}).
    Core rows are never dropped. SelectionError for a family that no extra row of the manifest
    has (a typo would drop nothing and leave the fold check to refuse)."""
    if not cfg.drop_extra_families:
        return df, []
    extra = df["train_scope"] == "extra"
    family = df["generator"].map(lambda g: g.split(cfg.family_sep, 1)[0])
    missing = sorted(set(cfg.drop_extra_families) - set(family[extra]))
    if missing:
        raise SelectionError(f"drop_extra_families {missing}: no extra row of the manifest has a "
                             f"generator of that family (extra families: "
                             f"{sorted(set(family[extra]))}); fix the names in the config")
    gone = extra & family.isin(cfg.drop_extra_families)
    dropped = [{"id": i, "source": s, "rule": "drop_extra_families", "family": f,
                "reason": f"extra row of generator family {f}, dropped before the fold check"}
               for i, s, f in zip(df.loc[gone, "id"], df.loc[gone, "source"], family[gone],
                                  strict=True)]
    return df.loc[~gone].reset_index(drop=True), dropped


def extra_option():
    """`hearsay splits make|import|verify`'s --selection option (an argparse parent parser)."""
    import argparse

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--selection", type=Path, help="selection config (hearsay.bundle.select): its "
                   "drop_extra_families rule removes those extra rows before the folds are "
                   "assigned or checked; give `hearsay bundle` the same file")
    return p


def drop_extra_cli(df: pd.DataFrame, path: str | os.PathLike | None) -> pd.DataFrame:
    """`hearsay splits make|import --selection FILE`: the manifest less the extra rows of FILE's
    drop_extra_families (its other rules act at bundle time, on decoded clips), a line on stdout
    counting them per family. SelectionError for a bad file or family."""
    if path is None:
        return df
    kept, dropped = drop_extra_rows(df, SelectionConfig.from_file(path))
    if dropped:
        per = pd.Series([d["family"] for d in dropped]).value_counts().sort_index()
        print(f"splits: {len(dropped)} extra row(s) dropped by drop_extra_families ("
              + ", ".join(f"{f}={n}" for f, n in per.items()) + ")")
    return kept


def select_bundle(df: pd.DataFrame, ok: list[str], trimmed_s: dict, cfg: SelectionConfig,
                  path: str | None = None,
                  dropped_extra: list[dict] = ()) -> tuple[list[str], dict]:
    """hearsay.bundle.build's call: (kept ids among `ok`, in order; meta["selection"] = the
    file's path, the resolved config and its outcome) for the decoded rows `ok` of manifest df.
    `dropped_extra`: the rows drop_extra_rows removed before the fold check, listed first in
    the outcome's "dropped" and counted in "by_rule" and, per family, "extra_families"."""
    rows = df.set_index("id").loc[ok].reset_index()
    rows["trimmed_s"] = [float(trimmed_s[i]) for i in ok]
    kept, outcome = select_rows(rows, cfg, check=False)  # names: checked on the whole manifest
    outcome["dropped"] = [*dropped_extra, *outcome["dropped"]]
    outcome["by_rule"] = _by_rule(outcome["dropped"])
    per_family: dict = {}
    for d in dropped_extra:
        per_family[d["family"]] = per_family.get(d["family"], 0) + 1
    outcome["extra_families"] = per_family
    return kept, {"path": path, "config": cfg.to_dict(), "outcome": outcome}
