"""hearsay.bundle.select at each rule's boundary: the family split, the minimum trimmed
duration, duration matching at a ratio other than 1, and drop_generators names that are not
spoof generators of the manifest."""

import pandas as pd
import pytest

from hearsay.bundle.select import (
    MatchRule,
    RatioRule,
    SelectionConfig,
    SelectionError,
    SourceRule,
    select_rows,
)


def table(*specs):
    """Rows from (source, label, generator, [trimmed_s, ...]) specs; ids name all four."""
    out = []
    for src, label, gen, secs in specs:
        out += [{"id": f"{src}.{gen}.{label}.{i}", "label": label, "generator": gen,
                 "source": src, "trimmed_s": s} for i, s in enumerate(secs)]
    return pd.DataFrame(out)


def test_a_generators_family_is_its_name_up_to_the_first_separator():
    df = table(("x", "bonafide", "bonafide", [2.0] * 3), ("x", "spoof", "tts-b-v2", [2.0] * 4),
               ("x", "spoof", "tts-b", [2.0] * 2), ("x", "spoof", "voc-a", [2.0] * 5))
    kept, out = select_rows(df, SelectionConfig(drop_families=("tts",)))
    left = set(df.loc[df["id"].isin(kept), "generator"])
    assert left == {"bonafide", "voc-a"}
    assert out["by_rule"] == {"drop_families": 6}
    # "tts-b" is no family of tts-b-v2: naming it drops nothing
    kept, out = select_rows(df, SelectionConfig(drop_families=("tts-b",)))
    assert len(kept) == len(df) and out["dropped"] == []


def test_a_family_separator_other_than_the_default_splits_at_its_first_occurrence():
    df = table(("x", "spoof", "tts_b_v2", [2.0] * 2), ("x", "spoof", "tts-b", [2.0] * 3))
    kept, _ = select_rows(df, SelectionConfig(family_sep="_", drop_families=("tts",)))
    assert set(df.loc[df["id"].isin(kept), "generator"]) == {"tts-b"}


@pytest.mark.parametrize("secs, kept_n", [(1.99, 0), (2.0, 1), (2.01, 1)])
def test_min_trimmed_s_keeps_a_clip_exactly_that_long_and_drops_only_shorter(secs, kept_n):
    df = table(("x", "bonafide", "bonafide", [secs]), ("x", "spoof", "voc-a", [secs]))
    kept, out = select_rows(df, SelectionConfig(sources={"x": SourceRule(min_trimmed_s=2.0)}))
    assert len(kept) == 2 * kept_n
    assert out["by_rule"] == ({"min_trimmed_s": 2} if kept_n == 0 else {})


@pytest.mark.parametrize("ratio, per_bin", [(0.75, {0: 3, 1: 2, 2: 1}), (1.5, {0: 6, 1: 3, 2: 2}),
                                            (2.0, {0: 8, 1: 4, 2: 2})])
def test_duration_matching_keeps_round_ratio_times_the_other_class_per_bin(ratio, per_bin):
    # bins of 1 s: bona fide 4, 2, 1 rows; spoof 10, 5, 3 rows (kept: min(spoof, round(r * bf)))
    df = table(("x", "bonafide", "bonafide", [0.5] * 4 + [1.5] * 2 + [2.5]),
               ("x", "spoof", "voc-a", [0.5] * 10 + [1.5] * 5 + [2.5] * 3))
    rule = SourceRule(match_duration=MatchRule(bin_s=1.0, ratio=ratio))
    kept, out = select_rows(df, SelectionConfig(sources={"x": rule}))
    sel = df[df["id"].isin(kept)]
    got = (sel.loc[sel["label"] == "spoof", "trimmed_s"] // 1).astype(int).value_counts()
    assert {k: int(got.get(k, 0)) for k in per_bin} == per_bin
    assert (sel["label"] == "bonafide").sum() == 7  # the other class is never cut
    want = {0: round(ratio * 4), 1: round(ratio * 2), 2: round(ratio * 1)}
    assert {int(b["bin_s"][0]): b["target"] for b in out["match_duration"]["x"]} == want


def test_duration_matching_can_subsample_bona_fide_at_a_ratio():
    df = table(("x", "bonafide", "bonafide", [0.5] * 9), ("x", "spoof", "voc-a", [0.5] * 4))
    rule = SourceRule(match_duration=MatchRule(subsample="bonafide", bin_s=1.0, ratio=1.5))
    kept, _ = select_rows(df, SelectionConfig(sources={"x": rule}))
    assert df[df["id"].isin(kept)]["label"].value_counts().to_dict() == {"bonafide": 6, "spoof": 4}


@pytest.mark.parametrize("name", ["bonafide", "voc", "voc-a-v2", "VOC-A", "nope"])
def test_a_drop_generators_name_that_is_no_spoof_generator_of_the_manifest_is_refused(name):
    # "bonafide" is a generator value of the manifest, but of bona fide rows; "voc" a family
    df = table(("x", "bonafide", "bonafide", [2.0] * 2), ("x", "spoof", "voc-a", [2.0] * 2),
               ("y", "spoof", "tts-b", [2.0]))
    with pytest.raises(SelectionError, match=rf"drop_generators \['{name}'\] are not spoof "
                                             "generators of the manifest"):
        select_rows(df, SelectionConfig(drop_generators=(name, "voc-a")))
    kept, _ = select_rows(df, SelectionConfig(drop_generators=("voc-a", "tts-b")))
    assert len(kept) == 2


def key_order(ids, seed, rule, source):
    """The documented cut order: ascending sha256(seed NUL rule NUL source NUL id)."""
    import hashlib
    return sorted(ids, key=lambda i: hashlib.sha256(
        f"{seed}\0{rule}\0{source}\0{i}".encode()).hexdigest())


def test_each_cut_keeps_the_rows_with_the_smallest_seeded_key_of_its_rule():
    df = table(("x", "bonafide", "bonafide", [0.5] * 3 + [1.5] * 20),
               ("x", "spoof", "voc-a", [0.5] * 9 + [1.5] * 8), ("x", "spoof", "voc-b", [1.5] * 6))
    rule = SourceRule(match_duration=MatchRule(bin_s=1.0), cap_per_generator=5,
                      cap_per_class={"bonafide": 12}, cap=20)
    kept, out = select_rows(df, SelectionConfig(seed=11, sources={"x": rule}))
    ids = lambda gen, secs: [i for i, g, s in zip(df["id"], df["generator"], df["trimmed_s"],  # noqa
                                                   strict=True) if g == gen and s == secs]
    want = set(key_order(ids("voc-a", 0.5), 11, "match_duration", "x")[:3])  # bin 0: 3 of 9
    want |= set(ids("voc-a", 1.5)) | set(ids("voc-b", 1.5))  # bin 1: 14 spoof <= 20 bona fide
    a = [i for i in key_order(list(want), 11, "cap_per_generator:voc-a", "x") if "voc-a" in i]
    want -= set(a[5:])
    want -= set(key_order(ids("voc-b", 1.5), 11, "cap_per_generator:voc-b", "x")[5:])
    bona = key_order([i for i in df["id"] if "bonafide" in i], 11, "cap_per_class:bonafide", "x")
    want |= set(bona[:12])
    want = set(key_order(list(want), 11, "cap", "x")[:20])
    assert set(kept) == want and len(kept) == 20
    assert [b["bin_s"] for b in out["match_duration"]["x"]] == [[0.0, 1.0], [1.0, 2.0]]
    reasons = {d["rule"]: d["reason"] for d in out["dropped"]}
    assert reasons["match_duration"] == ("spoof over 1.0 x bonafide in trimmed-duration bin "
                                         "[0.00, 1.00) s of source x")


@pytest.mark.parametrize("secs, bin_k", [(1.9999, 7), (2.0, 8), (2.2499, 8), (2.25, 9)])
def test_a_clip_exactly_on_a_bin_edge_falls_in_the_upper_bin(secs, bin_k):
    df = table(("x", "bonafide", "bonafide", [secs]), ("x", "spoof", "voc-a", [secs] * 2))
    _, out = select_rows(df, SelectionConfig(sources={"x": SourceRule(
        match_duration=MatchRule(bin_s=0.25))}))
    assert out["match_duration"]["x"][0]["bin_s"] == [bin_k * 0.25, (bin_k + 1) * 0.25]


@pytest.mark.parametrize("rule, match", [
    ({"match_duration": {"bin_s": 0}}, r"match_duration: bin_s and ratio must be > 0"),
    ({"match_duration": {"ratio": 0}}, r"match_duration: bin_s and ratio must be > 0"),
    ({"match_duration": {"subsample": "fake"}}, r"subsample 'fake' is not one of"),
    ({"class_ratio": {"per_other": 0}}, r"class_ratio: per_other must be > 0"),
    ({"cap_per_class": {"spoofs": 3}}, r"cap_per_class: keys \['spoofs'\] are not"),
    ({"cap": -1}, r"caps must be whole numbers >= 0"),
    ({"cap_per_generator": 2.5}, r"cap_per_generator = 2.5: input should be a valid integer"),
    ({"cap_per_class": {"spoof": -2}}, r"caps must be whole numbers >= 0"),
])
def test_the_config_refuses_values_a_rule_cannot_work_with(rule, match):
    with pytest.raises(SelectionError, match=r"selection sources\['x'\]" + ".*" + match):
        SelectionConfig.from_dict({"sources": {"x": rule}})


def test_the_config_accepts_the_smallest_working_values_and_round_trips():
    d = {"seed": 3, "sources": {"x": {"cap": 0, "cap_per_generator": 0, "cap_per_class":
                                      {"spoof": 0}, "match_duration": {"bin_s": 0.01,
                                                                       "ratio": 0.01},
                                      "class_ratio": {"per_other": 0.01}}}}
    cfg = SelectionConfig.from_dict(d)
    again = SelectionConfig.from_dict(cfg.to_dict())
    assert again == cfg and cfg.to_dict()["sources"]["x"]["match_duration"]["bin_s"] == 0.01


def test_an_unreadable_config_file_is_refused_naming_the_file(tmp_path):
    (tmp_path / "s.json").write_text("{not json")
    with pytest.raises(SelectionError, match=r"s\.json: not a readable selection config"):
        SelectionConfig.from_file(tmp_path / "s.json")


def test_select_bundle_keeps_decoded_rows_and_records_the_config_and_outcome():
    from hearsay.bundle.select import select_bundle
    df = table(("x", "bonafide", "bonafide", [0.0] * 3), ("x", "spoof", "voc-a", [0.0] * 3))
    ok = [i for i in df["id"] if not i.endswith(".1")]  # the .1 rows failed to decode
    secs = {i: 1.0 + n for n, i in enumerate(ok)}
    cfg = SelectionConfig(sources={"x": SourceRule(min_trimmed_s=2.0)})
    kept, meta = select_bundle(df.drop(columns="trimmed_s"), ok, secs, cfg, path="s.json")
    assert kept == [i for i in ok if secs[i] >= 2.0]
    assert meta["path"] == "s.json" and meta["config"] == cfg.to_dict()
    assert meta["outcome"]["by_rule"] == {"min_trimmed_s": 1}


def test_class_ratio_can_cut_bona_fide_keeping_its_smallest_seeded_keys():
    df = table(("x", "bonafide", "bonafide", [2.0] * 10), ("x", "spoof", "voc-a", [2.0] * 4))
    rule = SourceRule(class_ratio=RatioRule(subsample="bonafide", per_other=1.5))
    kept, out = select_rows(df, SelectionConfig(seed=5, sources={"x": rule}))
    bona = [i for i in df["id"] if "bonafide" in i]
    assert set(kept) == set(key_order(bona, 5, "class_ratio", "x")[:6]) | {
        i for i in df["id"] if "voc-a" in i}
    assert {d["reason"] for d in out["dropped"]} == {"bonafide over 1.5 x spoof in source x"}


def test_every_cut_lists_its_reason_and_the_counts_before_and_after():
    df = table(("x", "bonafide", "bonafide", [0.4, 2.0, 2.0, 2.0]),
               ("x", "spoof", "voc-a", [2.0] * 4), ("x", "spoof", "voc-b", [2.0] * 2))
    rule = SourceRule(min_trimmed_s=0.5, cap_per_generator=3, cap_per_class={"spoof": 4}, cap=5)
    kept, out = select_rows(df, SelectionConfig(sources={"x": rule}))
    reasons = {d["rule"]: d["reason"] for d in out["dropped"]}
    assert reasons == {"min_trimmed_s": "trimmed duration 0.40 s < 0.5 s in source x",
                       "cap_per_generator": "generator voc-a over 3 rows in source x",
                       "cap_per_class": "spoof over 4 rows in source x",
                       "cap": "over 5 rows in source x"}
    assert out["counts"] == [
        {"source": "x", "label": "bonafide", "generator": "bonafide", "before": 4,
         "after": sum("bonafide" in i for i in kept)},
        {"source": "x", "label": "spoof", "generator": "voc-a", "before": 4,
         "after": sum("voc-a" in i for i in kept)},
        {"source": "x", "label": "spoof", "generator": "voc-b", "before": 2,
         "after": sum("voc-b" in i for i in kept)}]
    gone = select_rows(df, SelectionConfig(drop_generators=("voc-b",)))[1]["counts"]
    assert gone[-1] == {"source": "x", "label": "spoof", "generator": "voc-b", "before": 2,
                        "after": 0}


def test_the_match_record_counts_the_other_class_per_bin_including_empty_bins():
    df = table(("x", "bonafide", "bonafide", [0.5, 0.5]), ("x", "spoof", "voc-a", [0.5, 1.0]))
    _, out = select_rows(df, SelectionConfig(sources={"x": SourceRule(
        match_duration=MatchRule(bin_s=1.0))}))
    assert out["match_duration"]["x"] == [
        {"bin_s": [0.0, 1.0], "bonafide": 2, "spoof": 1, "target": 2, "kept": 1},
        {"bin_s": [1.0, 2.0], "bonafide": 0, "spoof": 1, "target": 0, "kept": 0}]


def test_select_bundle_does_not_refuse_a_dropped_generator_whose_clips_all_failed_to_decode():
    from hearsay.bundle.select import select_bundle
    df = table(("x", "bonafide", "bonafide", [0.0] * 2), ("x", "spoof", "voc-a", [0.0] * 2),
               ("x", "spoof", "voc-b", [0.0]))
    ok = [i for i in df["id"] if "voc-b" not in i]  # voc-b's one clip failed to decode
    kept, _ = select_bundle(df.drop(columns="trimmed_s"), ok, dict.fromkeys(ok, 2.0),
                            SelectionConfig(drop_generators=("voc-b",)))
    assert kept == ok
