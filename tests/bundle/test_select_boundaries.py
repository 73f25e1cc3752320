"""hearsay.bundle.select at each rule's boundary: the family split, the minimum trimmed
duration, duration matching at a ratio other than 1, and drop_generators names that are not
spoof generators of the manifest."""

import pandas as pd
import pytest

from hearsay.bundle.select import (
    MatchRule,
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
