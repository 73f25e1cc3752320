"""hearsay.contracts.folds at its boundaries: the fold count's range, the greedy assignment's
balance where groups hold one class, fold CSVs as text, and each refusal's message naming its
fix (a user reads that line and nothing else)."""

import re

import pandas as pd
import pytest

from hearsay.contracts import folds as fo
from hearsay.contracts.manifest import LABELS


@pytest.mark.parametrize("n", [2, 5])
def test_two_to_five_inner_folds_are_allowed(n):
    assert fo.SplitsConfig.from_dict({"n_folds": n}).n_folds == n


@pytest.mark.parametrize("n", [1, 6])
def test_a_fold_count_outside_two_to_five_is_refused_with_the_range(n):
    with pytest.raises(fo.FoldError, match=rf"^n_folds {n} must be 2\.\.5$"):
        fo.SplitsConfig.from_dict({"n_folds": n})


def test_family_exclusion_may_name_the_full_model_but_not_a_fold_beyond_n_folds():
    cfg = fo.SplitsConfig.from_dict({"n_folds": 3, "family_exclusion": {"full": ["smear"]}})
    assert cfg.family_exclusion == {"full": ["smear"]}
    with pytest.raises(fo.FoldError, match=re.escape(
            "family_exclusion keys ['3'] are not models; use ['0', '1', '2', 'full']")):
        fo.SplitsConfig.from_dict({"n_folds": 3, "family_exclusion": {"3": ["smear"]}})


def _one_class_groups(sizes: dict[str, tuple[int, int]]) -> pd.DataFrame:
    """A core manifest of groups {name: (bona fide clips, synthetic clips)}."""
    rows = []
    for g, (n_bona, n_spoof) in sizes.items():
        rows += [(f"{g}b{i}", "bonafide", "", g) for i in range(n_bona)]
        rows += [(f"{g}s{i}", "spoof", "voc-a", g) for i in range(n_spoof)]
    df = pd.DataFrame(rows, columns=["id", "label", "generator", "group"])
    return df.assign(fold="", train_scope="core")


def _label_counts(df: pd.DataFrame, folds: dict[str, str]) -> pd.DataFrame:
    return pd.crosstab(df["id"].map(folds), df["label"]).reindex(columns=list(LABELS),
                                                                 fill_value=0)


@pytest.mark.parametrize("seed", range(4))
def test_groups_of_one_class_each_are_spread_so_every_fold_holds_both_classes(seed):
    # the greedy assignment weighs each class against its own per-fold target: a fold that
    # took a large bona fide group takes synthetic groups next, and a group of one class has
    # zero clips of the other (not a missing, NaN count)
    df = _one_class_groups({"A": (4, 0), "B": (0, 4), "C": (2, 0), "D": (0, 2), "E": (2, 0),
                            "F": (0, 2)})
    cfg = fo.SplitsConfig(n_folds=2, seed=seed)
    counts = _label_counts(df, fo.assign_folds(df, cfg))
    assert counts.to_dict("index") == {"0": {"bonafide": 4, "spoof": 4},
                                       "1": {"bonafide": 4, "spoof": 4}}


def test_inner_rows_of_one_class_only_are_still_spread_over_every_fold():
    # every synthetic clip is in a holdout family, so the inner rows hold no spoof at all: the
    # spoof count is zero everywhere (no phantom clip per group), and the bona fide clips are
    # balanced: the 4-clip group alone, the four 1-clip groups together
    df = _one_class_groups({"g0": (4, 0)} | {f"g{k}": (1, 0) for k in range(1, 5)})
    df = pd.concat([df, _one_class_groups({"h": (0, 3)}).assign(generator="phq-a")])
    folds = fo.assign_folds(df, fo.SplitsConfig(n_folds=2, holdout_families=("phq",)))
    inner = df.loc[df["group"] != "h", "id"].map(folds)
    assert inner.value_counts().to_dict() == {"0": 4, "1": 4}
    assert {folds[i] for i in df.loc[df["group"] == "h", "id"]} == {"holdout"}


@pytest.mark.parametrize("seed", range(4))
def test_the_smaller_class_is_spread_as_evenly_as_the_larger(seed):
    # 12 bona fide clips and 4 synthetic: each class is judged against its own per-fold share
    # (6 and 2), so the two synthetic groups never meet in one fold
    df = _one_class_groups({f"b{k}": (2, 0) for k in range(6)} | {"s1": (0, 2), "s2": (0, 2)})
    counts = _label_counts(df, fo.assign_folds(df, fo.SplitsConfig(n_folds=2, seed=seed)))
    assert counts.to_numpy().tolist() == [[6, 2], [6, 2]]


def test_between_two_equally_even_folds_the_lighter_one_takes_the_group():
    # a mixed group first, then four one-clip groups: where both folds stay as even per class,
    # the fold with fewer clips takes the next group, so the folds end 3 and 3 clips, not 4 and 2
    df = _one_class_groups({"a": (1, 0), "b": (0, 1), "c": (1, 0), "d": (0, 1), "e": (1, 1)})
    counts = _label_counts(df, fo.assign_folds(df, fo.SplitsConfig(n_folds=2)))
    assert sorted(counts.sum(axis=1).tolist()) == [3, 3]


def test_a_large_group_of_one_class_is_weighed_per_class_not_by_clip_count():
    # three folds, a 6-clip bona fide group and 2-clip groups of each class: judged per class,
    # the synthetic groups fill the big group's fold up to its synthetic share first
    df = _one_class_groups({"big": (6, 0), "b1": (2, 0), "b2": (2, 0), "b3": (2, 0),
                            "b4": (2, 0), "b5": (2, 0), "b6": (2, 0), "s1": (0, 2),
                            "s2": (0, 2), "s3": (0, 2), "s4": (0, 2), "s5": (0, 2),
                            "s6": (0, 2), "s7": (0, 2), "s8": (0, 2), "s9": (0, 2)})
    counts = _label_counts(df, fo.assign_folds(df, fo.SplitsConfig(n_folds=3)))
    assert counts["bonafide"].tolist() == [6, 6, 6] and counts["spoof"].tolist() == [6, 6, 6]


def _csv(tmp_path, text: str):
    path = tmp_path / "folds.csv"
    path.write_text(text)
    return path


def test_a_fold_csv_is_read_as_text_ids_and_folds_kept_as_written(tmp_path):
    # "007" stays "007" (not the number 7) and "NA" and "null" are ids, not missing values
    path = _csv(tmp_path, "id,fold\n007,0\nNA,1\nnull,holdout\n")
    assert fo.read_fold_source(path) == ({"007": "0", "NA": "1", "null": "holdout"}, None)


def test_a_fold_csv_listing_an_id_twice_is_refused(tmp_path):
    path = _csv(tmp_path, "id,fold\na,0\nb,1\na,2\n")
    with pytest.raises(fo.FoldError, match=re.escape(
            f"{path}: id(s) ['a'] listed more than once; one fold per id")):
        fo.read_fold_source(path)


def test_each_unreadable_fold_source_names_what_it_should_be(tmp_path):
    with pytest.raises(fo.FoldError, match=re.escape(
            f"{tmp_path / 'none.csv'}: not found (a CSV with header id,fold, or a .folds.json)")):
        fo.read_fold_source(tmp_path / "none.csv")
    bad_json = tmp_path / "x.folds.json"
    bad_json.write_text('{"folds": 3}')
    with pytest.raises(fo.FoldError, match=re.escape(
            'the JSON is {"config": {...}, "folds": {"<id>": "<fold>"}}')):
        fo.read_fold_source(bad_json)
    empty = _csv(tmp_path, "")
    with pytest.raises(fo.FoldError, match=re.escape(f"{empty}: not a readable CSV (")):
        fo.read_fold_source(empty)


def _three_groups() -> pd.DataFrame:
    """Three core groups of one bona fide and one synthetic clip each (g0, g1, g2)."""
    return _one_class_groups({"g0": (1, 1), "g1": (1, 1), "g2": (1, 1)})


def _three_groups_and_an_extra_row(generator: str) -> pd.DataFrame:
    """_three_groups and one synthetic extra row x0 of `generator`, in a group of its own (gx)."""
    extra = _one_class_groups({"gx": (0, 1)}).assign(id="x0", generator=generator,
                                                      train_scope="extra")
    return pd.concat([_three_groups(), extra], ignore_index=True)


def test_import_messages_name_the_source_file_and_the_fix(tmp_path):
    df = _three_groups()
    src = _csv(tmp_path, "id,fold\n" + "".join(f"{i},0\n" for i in df["id"][:-1]))
    with pytest.raises(fo.FoldError, match=re.escape(
            f"{src} does not cover the manifest: 1 manifest id(s) missing ['g2s0'], 0 unknown "
            "id(s) [] (import the fold file made for this manifest)")):
        fo.import_folds(df, src, fo.SplitsConfig(n_folds=2), tmp_path / "out", "x")


def test_a_core_row_in_fold_extra_is_named_by_its_id():
    df = _three_groups()
    folds = {i: "0" for i in df["id"]} | {"g1b0": "extra", "g1s0": "extra"}
    with pytest.raises(fo.FoldError, match=re.escape(
            "ext.csv: core id(s) ['g1b0', 'g1s0'] in fold 'extra' (only train_scope extra rows "
            "may be)")):
        fo.check_imported(df, folds, fo.SplitsConfig(n_folds=2), "ext.csv")


@pytest.mark.parametrize("fold", ["holdout", "test"])
def test_an_extra_row_of_a_group_without_core_rows_may_not_sit_in_holdout_or_test(fold):
    # `make` gives such a row 'extra' (or its own speaker's inner fold, imported): never a fold
    # that is scored as unseen
    df = _three_groups_and_an_extra_row("voc-b")
    folds = {"g0b0": "0", "g0s0": "0", "g1b0": "1", "g1s0": "1", "g2b0": "0", "g2s0": "0"}
    fo.check_imported(df, folds | {"x0": "extra"}, fo.SplitsConfig(n_folds=2), "ext.csv")
    with pytest.raises(fo.FoldError, match=re.escape(
            "ext.csv: extra id(s) ['x0'] of groups with no core rows in 'holdout'/'test': such a "
            "row keeps an inner fold or 'extra'")):
        fo.check_imported(df, folds | {"x0": fold}, fo.SplitsConfig(n_folds=2), "ext.csv")


def test_fold_files_are_written_into_a_folder_made_on_the_way(tmp_path):
    out = tmp_path / "new" / "splits"
    path = fo.write_folds(_three_groups(), fo.SplitsConfig(n_folds=2), out, "d")
    loaded = fo.load_folds(path)
    assert loaded.path == path and loaded.sha256 == fo.sha256_file(path)


def test_a_missing_fold_file_says_how_to_make_one(tmp_path):
    path = tmp_path / "splits" / "d.folds.json"
    with pytest.raises(fo.FoldError, match=re.escape(
            f"{path}: fold file not found (make one: hearsay splits make MANIFEST --out "
            f"{path.parent} --name NAME)")):
        fo.load_folds(path)


def test_an_unpinned_or_changed_fold_file_names_the_fix(tmp_path):
    path = fo.write_folds(_three_groups(), fo.SplitsConfig(n_folds=2), tmp_path, "d")
    pinned = fo.sha256_file(path)
    path.write_text(path.read_text().replace('"n_folds": 2', '"n_folds": 3'))
    actual = fo.sha256_file(path)
    with pytest.raises(fo.FoldError, match=re.escape(
            f"{path}: sha256 {actual[:12]}… does not match the pinned {pinned[:12]}… in "
            f"{tmp_path / fo.SUMS}; the fold file changed. Restore it (git checkout -- {path}) "
            "or, if the new folds are intended, re-make them with `hearsay splits make`, which "
            "re-pins them")):
        fo.load_folds(path)
    (tmp_path / fo.SUMS).write_text("")
    with pytest.raises(fo.FoldError, match=re.escape(
            f"{path}: not pinned in {tmp_path / fo.SUMS} (fold files are written and pinned by "
            "`hearsay splits make`; add its `sha256sum` line if intended)")):
        fo.load_folds(path)
    (tmp_path / fo.SUMS).write_text("not a sums line\n")
    with pytest.raises(fo.FoldError, match=re.escape(
            "; fix or delete that line, then re-pin with `hearsay splits make`")):
        fo.load_folds(path)


def test_a_manifest_row_missing_from_the_fold_file_names_the_fix(tmp_path):
    df = _three_groups()
    folds = fo.load_folds(fo.write_folds(df, fo.SplitsConfig(n_folds=2), tmp_path, "d"))
    grown = pd.concat([df, _one_class_groups({"g9": (1, 0)})], ignore_index=True)
    with pytest.raises(fo.FoldError, match=re.escape(
            f"row 7 id 'g9b0' is not in {folds.path} (re-make the folds for this manifest: "
            "hearsay splits make, with the bundle's --selection)")):
        fo.apply_folds(grown, folds)


def test_an_unknown_model_names_the_models_of_the_fold_count():
    with pytest.raises(fo.FoldError, match=re.escape(
            "model 'fold3' is not one of fold0..fold2, full or pilot")):
        fo.trains_on("fold3", 3)


def test_refusals_list_at_most_five_ids():
    # a manifest with many bad rows gets a readable line: the first five ids
    df = _one_class_groups({f"g{k}": (1, 0) for k in range(8)})
    folds = {i: "extra" for i in df["id"]}
    with pytest.raises(fo.FoldError) as err:
        fo.check_imported(df, folds, fo.SplitsConfig(n_folds=2), "ext.csv")
    assert "['g0b0', 'g1b0', 'g2b0', 'g3b0', 'g4b0'] in fold" in str(err.value)


def test_an_extra_row_of_a_holdout_family_is_refused_by_splits_naming_both_fixes():
    df = _three_groups_and_an_extra_row("phq-b")
    cfg = fo.SplitsConfig(n_folds=2, holdout_families=("phq",))
    with pytest.raises(fo.FoldError, match="^" + re.escape(
            "extra row(s) ['x0'] come from holdout families ['phq']: training on them leaks the "
            "holdout, so splits refuses. Drop them (--selection FILE with the rule "
            '{"drop_extra_families": [FAMILY]}: extra rows only, core rows stay) or remove the '
            "family from holdout_families and re-make the folds.") + "$"):
        fo.assign_folds(df, cfg)


def _imported(edit):
    """check_imported's message for the three-group manifest's folds after `edit`."""
    df = _three_groups().assign(generator=lambda d: d["generator"].where(d["id"] != "g2s0",
                                                                         "phq-a"))
    folds = {"g0b0": "0", "g0s0": "0", "g1b0": "1", "g1s0": "1", "g2b0": "holdout",
             "g2s0": "holdout"}
    df, folds = edit(df, folds)
    with pytest.raises(fo.FoldError) as err:
        fo.check_imported(df, folds, fo.SplitsConfig(n_folds=2, holdout_families=("phq",)),
                          "ext.csv")
    return str(err.value)


def test_import_messages_in_full_each_naming_its_fix():
    assert _imported(lambda df, f: (df.assign(fold=df["fold"].mask(df["id"] == "g0b0", "1")), f)) \
        == ("ext.csv: id(s) ['g0b0'] disagree with the manifest's fold column (empty the "
            "manifest's fold column or fix the fold file)")
    assert _imported(lambda df, f: (df, f | {"g1b0": "holdout", "g1s0": "holdout"})) == (
        "ext.csv: id(s) ['g1b0', 'g1s0']: a core group goes to 'holdout', whole, exactly when it "
        "holds a generator of holdout_families ['phq'] (fix the fold file or holdout_families)")
    assert _imported(lambda df, f: (df, f | {"g1b0": "0"})) == (
        "ext.csv: group(s) ['g1'] span folds [['0', '1']]; folds are group-disjoint: one fold "
        "per group (an extra row takes its group's fold)")
    assert _imported(lambda df, f: (df, f | {"g0b0": "test"})) == (
        "group(s) ['g0'] have rows both in fold 'test' and outside it; folds are "
        "group-disjoint: put the whole group in 'test' or none of it")
    assert _imported(lambda df, f: (df, f | {"g0b0": "7"})).startswith(
        "ext.csv: id(s) ['g0b0'] have folds ['7'] outside ['0', '1', 'extra', 'holdout', "
        "'probe', 'test'] (n_folds 2: fix the fold file or n_folds in the config)")


def test_a_fold_csv_with_another_header_is_refused_naming_the_header(tmp_path):
    path = _csv(tmp_path, "id,split\na,0\n")
    with pytest.raises(fo.FoldError, match="^" + re.escape(
            f"{path}: columns ['id', 'split']; an imported fold CSV has exactly the header "
            "id,fold") + "$"):
        fo.read_fold_source(path)
