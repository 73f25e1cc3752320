"""Which training rows a recipe keeps: the `selection` section of a `hearsay train` config.

    {"selection": {"rules": [{"action": "keep", "train_scope": ["core"]}]}}        # core only
    {"selection": {"rules": [{"action": "drop", "train_scope": ["extra"],
                              "source": ["mlaad"]}]}}       # no extra MLAAD rows, its core stays

    train, outcome = select_training_rows(train, bundle, resolved["selection"])

So one bundle serves every recipe of an ablation ("core only" vs "core + extra"): the rows a
recipe trains on are chosen here, from the rows the fold protocol already allows
(hearsay.train.data.plan_job: inner folds, extra rows, family exclusion), and nothing else.
A fold's validation rows and every scored row are the bundle's and never pass through here.

A rule matches a row when every criterion it names matches (train_scope, source, corpus,
family: each a list of values; a criterion left out matches every row). "keep" drops the rows
the rule does not match, "drop" drops the rows it matches. Rules apply in order, each to the
rows the earlier ones left. `corpus` is the bundle manifest's `corpus` column where it has one,
else the row's `source` (the importers write one corpus per source); `family` is the generator's
name up to the fold file's family_sep (bona fide rows: family "bonafide").

Refused (ConfigError, exit 2), naming the fix: a value no bundle row has (a typo would select
nothing, silently), a rule with no criterion, and a selection that leaves a label without rows.
The outcome (run_meta.json "selection"): rows before and after, per rule the rows it saw,
kept and dropped, and "corpus_decision": the sha256 of the extra corpus's decision file the
recipe cites (`"corpus_decision": "<sha256>"` in the section; hearsay.evaluate.corpus_decision),
or null. An empty selection ({"rules": []}, the default) keeps every row. `stream_groups`
(run_meta "stream_groups") breaks the kept rows down with each group's planned share of the
draws, which a cited cap share or drop is checked against.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import pandas as pd

from hearsay.contracts.manifest import LABELS, SCOPES
from hearsay.train.errors import ConfigError
from hearsay.util import config

ACTIONS = ("keep", "drop")
SHA256 = re.compile("[0-9a-f]{64}")
CRITERIA = ("train_scope", "source", "corpus", "family")  # what a rule can match on


@dataclass(frozen=True)
class Rule:
    """One rule: `action` the rows matching every named criterion (empty = any value)."""

    action: str = ""  # "keep" (drop the rest) or "drop" (drop the matches)
    train_scope: tuple[str, ...] = ()  # "core" and/or "extra"
    source: tuple[str, ...] = ()  # manifest source names
    corpus: tuple[str, ...] = ()  # the manifest's corpus column, else the source
    family: tuple[str, ...] = ()  # generator families (name up to the fold file's family_sep)


@dataclass(frozen=True)
class SelectionConfig:
    """The `selection` section: training-row rules applied in order (none = every row trains)."""

    rules: tuple = ()  # of Rule; each given as {"action": ..., CRITERION: [VALUE, ...]}
    # sha256 of the extra corpus's decision file this recipe follows (hearsay corpus-probe
    # --decision; hearsay assemble --corpus-decision checks it); "" = the recipe cites none
    corpus_decision: str = ""

    @classmethod
    def from_dict(cls, d: dict) -> SelectionConfig:
        """ValueError naming the rule and key for an unknown key, a wrong type, an action
        other than keep/drop, an unknown train scope or a rule without a criterion."""
        rules = []
        for i, r in enumerate(d.get("rules") or ()):
            what = f"selection.rules[{i}]"
            rule = r if isinstance(r, Rule) else config.from_dict(Rule, r, what=what)
            if rule.action not in ACTIONS:
                raise ValueError(f"{what}.action = {rule.action!r}: use one of {list(ACTIONS)}")
            if not any(getattr(rule, c) for c in CRITERIA):
                raise ValueError(f"{what}: name at least one of {list(CRITERIA)}, e.g. "
                                 '{"action": "keep", "train_scope": ["core"]}')
            bad = sorted(set(rule.train_scope) - set(SCOPES))
            if bad:
                raise ValueError(f"{what}.train_scope {bad}: use {list(SCOPES)}")
            rules.append(rule)
        cited = d.get("corpus_decision") or ""
        if not isinstance(cited, str) or (cited and not SHA256.fullmatch(cited)):
            raise ValueError(f"selection.corpus_decision = {cited!r}: the sha256 (64 lowercase "
                             "hex digits) of the decision file, e.g. sha256sum decision.json")
        return cls(rules=tuple(rules), corpus_decision=cited)


def corpus_of(rows: pd.DataFrame) -> pd.Series:
    """The rows' corpus: the manifest's `corpus` column where it has one, else the source."""
    return rows["corpus"] if "corpus" in rows.columns else rows["source"]


def row_values(rows: pd.DataFrame, family_sep: str) -> dict[str, pd.Series]:
    """{criterion: the rows' value} (aligned with rows)."""
    return {"train_scope": rows["train_scope"], "source": rows["source"],
            "corpus": corpus_of(rows),
            "family": rows["generator"].map(lambda g: g.split(family_sep, 1)[0])}


def select_training_rows(train: pd.DataFrame, bundle, section: dict | None
                         ) -> tuple[pd.DataFrame, dict]:
    """(the training rows the recipe keeps, in their order; the outcome for run_meta).

    `train`: the job's training rows (plan_job); `bundle`: the hearsay.bundle.Bundle they come
    from (its manifest names the known values, its fold file the family_sep); `section`: the
    resolved config's "selection" (None: every row kept). `train` and the bundle are not
    modified."""
    from hearsay.contracts.folds import SplitsConfig

    try:
        cfg = SelectionConfig.from_dict(section or {})
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config: {err}") from None
    outcome: dict = {"rules": [], "rows_before": len(train), "rows_after": len(train),
                     "corpus_decision": cfg.corpus_decision or None}
    if not cfg.rules:
        return train, outcome
    sep = SplitsConfig.from_dict((bundle.meta.get("folds") or {}).get("config") or {}).family_sep
    known = row_values(bundle.manifest, sep)
    for i, rule in enumerate(cfg.rules):
        for c in CRITERIA:
            missing = sorted(set(getattr(rule, c)) - set(known[c]))
            if missing:
                raise ConfigError(f"selection.rules[{i}].{c} {missing}: no row of the bundle has "
                                  f"that {c} (it has {sorted(set(known[c]))}); fix the name")
    values = row_values(train, sep)
    alive = pd.Series(True, index=train.index)
    for rule in cfg.rules:
        match = pd.Series(True, index=train.index)
        for c in CRITERIA:
            if getattr(rule, c):
                match &= values[c].isin(getattr(rule, c))
        drop = alive & (~match if rule.action == "keep" else match)
        seen = int(alive.sum())
        alive &= ~drop
        as_json = {k: list(v) if isinstance(v, tuple) else v
                   for k, v in dataclasses.asdict(rule).items()}
        outcome["rules"].append({**as_json, "rows_seen": seen,
                                 "kept": seen - int(drop.sum()), "dropped": int(drop.sum())})
    kept = train.loc[alive].reset_index(drop=True)
    empty = [lab for lab in LABELS if not (kept["label"] == lab).any()]
    if empty:
        raise ConfigError(f"the selection leaves no {' or '.join(empty)} training rows "
                          f"({outcome['rules']}): a keep rule on family or source drops every "
                          "row it does not name, bona fide too; name those rows as well (family "
                          '"bonafide") or use a drop rule')
    outcome["rows_after"] = len(kept)
    return kept, outcome


GROUP_KEYS = ("label", "source", "train_scope", "corpus")  # what stream_groups breaks rows down by


def stream_groups(train: pd.DataFrame, quotas: dict) -> list[dict]:
    """The training rows by (label, source, train_scope, corpus), each group with its planned
    share of its class's draws (run_meta.json "stream_groups"; hearsay.evaluate.corpus_decision
    checks a decision's cap and drop against it): its source's slots per batch over its class's
    (`quotas`: {(label, source): slots}, hearsay.train.data.Sampler), times its part of that
    source's rows, as a source's pool is drawn uniformly. A group whose source has no slot
    (run_meta "sources_without_quota") has share 0."""
    df = pd.DataFrame({"label": train["label"].astype(str), "source": train["source"].astype(str),
                       "train_scope": train["train_scope"].astype(str),
                       "corpus": corpus_of(train).astype(str)})
    slots = {lab: sum(q for (lab2, _), q in quotas.items() if lab2 == lab) for lab in LABELS}
    per_source = df.groupby(["label", "source"]).size()
    out = []
    for key, n in df.groupby(list(GROUP_KEYS)).size().items():
        group = dict(zip(GROUP_KEYS, key, strict=True))
        lab, src = group["label"], group["source"]
        q = quotas.get((lab, src), 0)
        share = q / slots[lab] * n / per_source[(lab, src)] if slots.get(lab) else 0.0
        out.append({**group, "rows": int(n), "share": round(float(share), 6)})
    return out
