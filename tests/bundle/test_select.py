"""hearsay.bundle.select on manifest DataFrames with trimmed durations (no audio): duration
matching, caps, class ratios, drop rules, seeding, config refusals, the example config."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hearsay import metrics
from hearsay.bundle import select
from hearsay.bundle.diagnostics import source_duration_auc
from hearsay.bundle.select import MatchRule, RatioRule, SelectionConfig, SourceRule, select_rows

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "selection.example.json"


def rows(source, label, n, generator=None, median=2.0, sd=0.4, seed=0):
    """n manifest rows of one source/class/generator, trimmed_s ~ N(median, sd) >= 0.6 s."""
    rng = np.random.default_rng(seed)
    gen = generator or ("bonafide" if label == "bonafide" else "voc-a")
    dur = np.round(np.maximum(rng.normal(median, sd, n), 0.6), 4)
    return pd.DataFrame({"id": [f"{source}.{gen}.{label}.{i}" for i in range(n)],
                         "label": label, "generator": gen, "source": source,
                         "trimmed_s": dur})


def cfg(**sources):
    return SelectionConfig(seed=7, sources=sources)


def duration_auc(df):
    return metrics.auc(df["trimmed_s"].to_numpy(), (df["label"] == "spoof").to_numpy())


def shortcut_corpus():
    """Bona fide shorter than spoof after trimming: medians 1.9 s vs 2.1 s."""
    return pd.concat([rows("c", "bonafide", 800, median=1.9, seed=1),
                      rows("c", "spoof", 1600, median=2.1, seed=2)], ignore_index=True)


def test_duration_matching_removes_the_shortcut_and_keeps_the_implied_counts():
    df = shortcut_corpus()
    assert duration_auc(df) > 0.62  # the shortcut is there
    kept, out = select_rows(df, cfg(c=SourceRule(match_duration=MatchRule(bin_s=0.25))))
    sel = df[df["id"].isin(kept)]
    assert duration_auc(sel) <= 0.55
    # the counts the config implies: every bona fide row; per 0.25 s bin min(spoof, bona fide)
    k = np.floor(df["trimmed_s"] / 0.25).astype(int)
    want = {b: min(((k == b) & (df["label"] == "spoof")).sum(),
                   ((k == b) & (df["label"] == "bonafide")).sum()) for b in set(k)}
    got = np.floor(sel["trimmed_s"] / 0.25).astype(int)[sel["label"] == "spoof"].value_counts()
    assert {b: int(got.get(b, 0)) for b in want} == want
    assert (sel["label"] == "bonafide").sum() == 800
    assert out["by_rule"] == {"match_duration": len(df) - len(kept)}
    bins = out["match_duration"]["c"]
    assert sum(b["kept"] for b in bins) == (sel["label"] == "spoof").sum()
    # the bundle's diagnostics report the same before/after per source
    res = {r: {"trimmed_s": d} for r, d in zip(df["id"], df["trimmed_s"], strict=True)}
    a = source_duration_auc(df, sel, res)["c"]
    assert a["before"] > 0.62 and a["after"] <= 0.55 and a["n_after"] == len(kept)


def test_minimum_trimmed_duration_drops_both_classes_and_lists_each_row():
    df = shortcut_corpus()
    kept, out = select_rows(df, cfg(c=SourceRule(min_trimmed_s=2.0)))
    short = set(df.loc[df["trimmed_s"] < 2.0, "id"])
    assert set(kept) == set(df["id"]) - short
    assert {d["id"] for d in out["dropped"]} == short
    secs = dict(zip(df["id"], df["trimmed_s"], strict=True))
    assert all(d["rule"] == "min_trimmed_s" and d["reason"] == f"trimmed duration "
               f"{secs[d['id']]:.2f} s < 2.0 s in source c" for d in out["dropped"])


def test_caps_and_class_ratio_are_exact():
    df = pd.concat([rows("x", "bonafide", 300),
                    rows("x", "spoof", 500, "voc-a"), rows("x", "spoof", 120, "voc-b"),
                    rows("y", "bonafide", 200), rows("y", "spoof", 900, "tts-a")],
                   ignore_index=True)
    kept, out = select_rows(df, cfg(
        x=SourceRule(cap_per_generator=150, cap_per_class={"bonafide": 250}),
        y=SourceRule(class_ratio=RatioRule(per_other=1.5), cap=400)))
    n = df[df["id"].isin(kept)].groupby(["source", "generator"]).size().to_dict()
    assert n[("x", "voc-a")] == 150 and n[("x", "voc-b")] == 120 and n[("x", "bonafide")] == 250
    assert n[("y", "bonafide")] + n[("y", "tts-a")] == 400  # 200 + 300 (1.5:1), then capped
    counts = {(c["source"], c["generator"]): (c["before"], c["after"]) for c in out["counts"]}
    assert counts[("x", "voc-a")] == (500, 150) and counts[("y", "tts-a")][0] == 900
    assert out["by_rule"] == {"cap_per_generator": 350, "cap_per_class": 50,
                              "class_ratio": 600, "cap": 100}
    assert len(out["dropped"]) == len(df) - len(kept)


def test_class_ratio_alone_is_exact():
    df = pd.concat([rows("y", "bonafide", 200), rows("y", "spoof", 900)], ignore_index=True)
    kept, _ = select_rows(df, SelectionConfig.from_dict(
        {"sources": {"y": {"class_ratio": {"subsample": "spoof", "per_other": 1.0}}}}))
    assert (df[df["id"].isin(kept)]["label"] == "spoof").sum() == 200


def test_drop_rules_drop_and_list_every_row_of_a_generator_or_family():
    df = pd.concat([rows("x", "bonafide", 10), rows("x", "spoof", 7, "bad-1"),
                    rows("y", "spoof", 5, "bad-1"), rows("y", "spoof", 4, "smear-2"),
                    rows("y", "spoof", 6, "ok-1")], ignore_index=True)
    c = SelectionConfig(drop_generators=("bad-1",), drop_families=("smear",))
    kept, out = select_rows(df, c)
    assert set(df[df["id"].isin(kept)]["generator"]) == {"bonafide", "ok-1"}
    assert out["by_rule"] == {"drop_generators": 12, "drop_families": 4}
    reasons = {d["id"]: d["reason"] for d in out["dropped"]}
    assert reasons["y.bad-1.spoof.0"] == "generator bad-1 is dropped by the selection config"
    assert "family smear" in reasons["y.smear-2.spoof.3"]


def test_cuts_are_seeded_and_independent_of_row_order():
    df = shortcut_corpus()
    rule = SourceRule(match_duration=MatchRule(), cap=900)
    a, _ = select_rows(df, SelectionConfig(seed=1, sources={"c": rule}))
    b, _ = select_rows(df.sample(frac=1, random_state=3), SelectionConfig(seed=1,
                                                                         sources={"c": rule}))
    c, _ = select_rows(df, SelectionConfig(seed=2, sources={"c": rule}))
    assert set(a) == set(b) and len(a) == 900
    assert set(a) != set(c)


def test_the_config_refuses_unknown_keys_sources_and_generators():
    with pytest.raises(select.SelectionError, match=r"unknown selection config keys \['caps'\]"):
        SelectionConfig.from_dict({"caps": 3})
    with pytest.raises(select.SelectionError, match=r"sources\['x'\] keys \['cap_per_gen'\]"):
        SelectionConfig.from_dict({"sources": {"x": {"cap_per_gen": 3}}})
    with pytest.raises(select.SelectionError, match=r"match_duration keys \['bins'\]"):
        SelectionConfig.from_dict({"sources": {"x": {"match_duration": {"bins": 3}}}})
    with pytest.raises(select.SelectionError, match="subsample 'fake' is not one of"):
        SelectionConfig.from_dict({"sources": {"x": {"class_ratio": {"subsample": "fake"}}}})
    df = rows("x", "spoof", 3)
    with pytest.raises(select.SelectionError, match=r"sources \['nope'\] are not in the manifest"):
        select_rows(df, SelectionConfig.from_dict({"sources": {"nope": {}}}))
    with pytest.raises(select.SelectionError, match=r"drop_generators \['voc-b'\] are not"):
        select_rows(df, SelectionConfig(drop_generators=("voc-b",)))


def recipe_manifest():
    """A manifest of the example config's shape: core + three extra corpora."""
    return pd.concat([
        rows("core", "bonafide", 300, seed=1), rows("core", "spoof", 200, "tts-a", seed=2),
        rows("core", "spoof", 50, "dropped_a", seed=3),
        rows("extra_a", "bonafide", 500, seed=4), rows("extra_a", "spoof", 1200, "voc-x", seed=5),
        rows("extra_a", "spoof", 800, "voc-y", seed=6),
        rows("extra_a", "spoof", 1500, "voc-z", seed=7),
        rows("extra_a", "spoof", 40, "dropped_b", seed=8),
        rows("extra_b", "bonafide", 400, seed=9), rows("extra_b", "spoof", 2300, "tts-b", seed=10),
        rows("extra_b", "spoof", 600, "tts-c", seed=11),
        rows("extra_c", "bonafide", 1500, median=1.9, seed=12),
        rows("extra_c", "spoof", 3000, "clone-d", median=2.1, seed=13)], ignore_index=True)


def test_the_example_config_reproduces_the_recipe_shape():
    c = SelectionConfig.from_file(EXAMPLE)
    df = recipe_manifest()
    kept, out = select_rows(df, c)
    sel = df[df["id"].isin(kept)]
    n = sel.groupby(["source", "label"]).size().to_dict()
    assert not sel["generator"].isin(["dropped_a", "dropped_b"]).any()
    assert out["by_rule"]["drop_generators"] == 90
    assert n[("core", "bonafide")] == 300 and n[("core", "spoof")] == 200  # untouched
    assert n[("extra_a", "spoof")] == 2000 and n[("extra_a", "bonafide")] == 500
    assert sel[sel["source"] == "extra_a"].groupby("generator").size().max() <= 1000
    cut = pd.DataFrame(out["dropped"]).groupby(["source", "rule"]).size().to_dict()
    assert cut[("extra_a", "cap_per_generator")] == 200 + 500  # voc-x, voc-z over 1000
    assert cut[("extra_a", "cap_per_class")] == 2800 - 2000
    assert cut[("extra_b", "cap_per_generator")] == 300
    assert cut[("extra_b", "class_ratio")] == 2600 - 400
    assert n[("extra_b", "spoof")] == n[("extra_b", "bonafide")] == 400  # 1:1
    ec = sel[sel["source"] == "extra_c"]
    assert len(ec) == 1000 and ec["trimmed_s"].min() >= 2.0  # ~610 + ~610 matched, then capped
    assert duration_auc(df[df["source"] == "extra_c"]) > 0.6 and duration_auc(ec) <= 0.55
    assert json.loads(json.dumps(c.to_dict())) == c.to_dict()  # what bundle_meta records
