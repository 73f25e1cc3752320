"""hearsay.contracts.folds: group-disjoint stratified folds, pinned digests, holdout and family
exclusion."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hearsay.bundle import splits
from hearsay.contracts import folds as fo
from hearsay.contracts.manifest import INNER_FOLDS
from hearsay.demo.corpus import DemoDataConfig, manifest_rows

REPO_SPLITS = Path(__file__).resolve().parents[1] / "splits"
DEMO_SPLITS = fo.SplitsConfig(holdout_families=("phq",), family_exclusion={"0": ["smear"]})


@pytest.fixture(scope="module")
def demo_df():
    return pd.DataFrame(manifest_rows(DemoDataConfig()))  # the full demo layout, no audio


@pytest.fixture(scope="module")
def assigned(demo_df):
    df = demo_df.copy()
    df["fold"] = df["id"].map(fo.assign_folds(demo_df, DEMO_SPLITS))
    return df


def test_folds_are_group_disjoint(assigned):
    assert (assigned.groupby("group")["fold"].nunique() == 1).all()


def test_inner_folds_are_label_stratified(assigned):
    counts = pd.crosstab(assigned["fold"], assigned["label"]).loc[list(INNER_FOLDS)]
    assert (counts > 0).all().all()
    for label in counts:  # each inner fold within 3 clips of the mean, per label
        assert (counts[label] - counts[label].mean()).abs().max() <= 3


def test_holdout_family_never_enters_an_inner_fold(assigned):
    fam = assigned["generator"].map(DEMO_SPLITS.family)
    assert set(assigned.loc[fam == "phq", "fold"]) == {"holdout"}
    inner = assigned["fold"].isin(INNER_FOLDS)
    assert set(assigned.loc[inner & (assigned["label"] == "spoof"), "generator"].map(
        DEMO_SPLITS.family)) == {"voc", "smear"}


def test_test_rows_stay_test_and_extra_rows_inherit_their_group(demo_df, assigned):
    assert set(assigned.loc[demo_df["fold"] == "test", "fold"]) == {"test"}
    extra = assigned[assigned["train_scope"] == "extra"]
    core_fold = assigned[assigned["train_scope"] == "core"].groupby("group")["fold"].first()
    for _, row in extra.iterrows():
        assert row["fold"] == core_fold.get(row["group"], "extra")
    assert "extra" in set(extra["fold"]) and set(extra["fold"]) & set(INNER_FOLDS)


def test_make_refuses_prefilled_inner_folds(demo_df):
    df = demo_df.copy()
    df.loc[0, "fold"] = "2"
    with pytest.raises(fo.FoldError, match="only 'test' and 'probe' are kept"):
        fo.assign_folds(df, DEMO_SPLITS)


def test_extra_generator_from_a_holdout_family_refuses(demo_df):
    df = demo_df.copy()
    i = df.index[df["train_scope"] == "extra"][1]
    df.loc[i, ["label", "generator"]] = ["spoof", "phq-z"]
    with pytest.raises(fo.FoldError, match="leaks the holdout"):
        fo.assign_folds(df, DEMO_SPLITS)
    df.loc[i, "fold"] = "extra"
    with pytest.raises(fo.FoldError, match="the build refuses"):
        fo.check_no_holdout_leak(df, DEMO_SPLITS)


def test_family_exclusion_keeps_excluded_extra_generators_from_that_model(assigned):
    fam = assigned.set_index("id")["generator"].map(DEMO_SPLITS.family)
    extra_smear = set(assigned.loc[(assigned["train_scope"] == "extra")
                                   & (fam.values == "smear"), "id"])
    assert extra_smear
    ids0, ids1 = set(fo.train_ids(assigned, DEMO_SPLITS, "0")), set(
        fo.train_ids(assigned, DEMO_SPLITS, "1"))
    assert not ids0 & extra_smear  # fold 0's model never sees the excluded family
    assert extra_smear - set(assigned.loc[assigned["fold"] == "1", "id"]) <= ids1


@pytest.mark.parametrize("model", ["0", "3", "full"])
def test_train_ids_never_hold_the_models_own_fold_holdout_or_test(assigned, model):
    ids = set(fo.train_ids(assigned, DEMO_SPLITS, model))
    held = assigned.loc[assigned["fold"].isin([model, "holdout", "test"]), "id"]
    assert ids and not ids & set(held)


def test_make_is_deterministic_and_pins_its_file(tmp_path, demo_corpus):
    from hearsay.contracts.manifest import read_manifest

    df = read_manifest(demo_corpus)
    a = fo.write_folds(df, DEMO_SPLITS, tmp_path / "a", "x")
    b = fo.write_folds(df, DEMO_SPLITS, tmp_path / "b", "x")
    assert a.read_bytes() == b.read_bytes()
    sums = (tmp_path / "a" / fo.SUMS).read_text()
    assert sums == f"{fo.sha256_file(a)}  x.folds.json\n"
    assert fo.load_folds(a).folds == json.loads(a.read_text())["folds"]


def test_tampered_fold_file_refuses_and_names_the_fix(tmp_path, demo_splits):
    d = tmp_path / "s"
    shutil.copytree(demo_splits.parent, d)
    p = d / demo_splits.name
    doc = json.loads(p.read_text())
    rid = next(iter(doc["folds"]))
    doc["folds"][rid] = "holdout" if doc["folds"][rid] != "holdout" else "0"
    p.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    with pytest.raises(fo.FoldError, match="does not match the pinned.*git checkout"):
        fo.load_folds(p)
    assert splits.main(["verify", str(p)]) == 3


def test_unpinned_fold_file_refuses(tmp_path, demo_splits):
    p = tmp_path / demo_splits.name
    shutil.copy(demo_splits, p)
    with pytest.raises(fo.FoldError, match="not pinned"):
        fo.load_folds(p)


def test_apply_folds_refuses_a_disagreeing_manifest(demo_corpus, demo_splits):
    from hearsay.contracts.manifest import read_manifest

    folds = fo.load_folds(demo_splits)
    df = read_manifest(demo_corpus)
    filled = fo.apply_folds(df, folds)
    assert (filled["fold"] != "").all()
    i = filled.index[filled["fold"] == "0"][0]
    df.loc[i, "fold"] = "1"
    with pytest.raises(fo.FoldError, match="manifest fold '1' != '0'"):
        fo.apply_folds(df, folds)


def test_unknown_config_key_is_an_error():
    with pytest.raises(fo.FoldError, match="unknown splits config key.*holdout_family"):
        fo.SplitsConfig.from_dict({"holdout_family": ["phq"]})
    with pytest.raises(fo.FoldError, match="not models"):
        fo.SplitsConfig.from_dict({"family_exclusion": {"7": ["voc"]}})
    with pytest.raises(fo.FoldError, match="must be a list of family names"):
        fo.SplitsConfig.from_dict({"family_exclusion": {"0": "smear"}})


def test_cli_make_then_verify(tmp_path, demo_corpus, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"holdout_families": ["phq"]}))
    out = tmp_path / "sp"
    assert splits.main(["make", str(demo_corpus), "--out", str(out), "--name", "d",
                    "--config", str(cfg)]) == 0
    assert splits.main(["verify", str(out / "d.folds.json"), "--manifest", str(demo_corpus)]) == 0
    assert "ok (sha256" in capsys.readouterr().out


def test_repo_pinned_demo_folds_verify_and_match_a_fresh_make(tmp_path, demo_df):
    """splits/demo.folds.json is what `splits make` gives for the default demo corpus."""
    pinned = fo.load_folds(REPO_SPLITS / "demo.folds.json")
    fresh = fo.write_folds(demo_df, DEMO_SPLITS, tmp_path, "demo")
    assert fo.sha256_file(fresh) == pinned.sha256


def test_family_exclusion_drops_only_extra_rows_of_the_family():
    df = pd.DataFrame({
        "id": ["core_smear", "core_voc", "extra_smear", "extra_smear_v2", "extra_voc",
               "extra_smearish", "extra_smear_f1"],
        "generator": ["smear-a", "voc-a", "smear-b", "smear-b-v2", "voc-b", "smearish-a",
                      "smear-c"],
        "label": "spoof",
        "train_scope": ["core", "core", "extra", "extra", "extra", "extra", "extra"],
        "fold": ["1", "1", "extra", "extra", "extra", "extra", "1"]})
    ids0 = fo.train_ids(df, DEMO_SPLITS, "0")
    # core rows of the excluded family stay; extra rows of it (any version) go; others stay
    assert ids0 == ["core_smear", "core_voc", "extra_voc", "extra_smearish"]
    assert fo.train_ids(df, DEMO_SPLITS, "2") == list(df["id"])  # no exclusion for model 2


def small_manifest():
    """Ten inner groups (one bona fide and one synthetic clip each), a holdout-family group, a
    test group, and extra rows in the holdout group, the test group, an inner group and their
    own."""
    rows = []
    for g in range(10):
        rows += [(f"b{g}", "bonafide", "", f"g{g}", "", "core"),
                 (f"s{g}", "spoof", "voc-a", f"g{g}", "", "core")]
    rows += [("h0", "spoof", "phq-x", "gh", "", "core"), ("h1", "bonafide", "", "gh", "", "core"),
             ("t0", "bonafide", "", "gt", "test", "core"), ("t1", "spoof", "voc-a", "gt", "test",
                                                                "core"),
             ("xh", "bonafide", "", "gh", "", "extra"), ("xt", "bonafide", "", "gt", "", "extra"),
             ("xi", "spoof", "voc-b", "g3", "extra", "extra"), ("xo", "spoof", "voc-b", "gx", "",
                                                                   "extra")]
    return pd.DataFrame(rows, columns=["id", "label", "generator", "group", "fold", "train_scope"])


def test_extra_rows_take_their_group_s_fold_holdout_and_test_included():
    df = small_manifest()
    got = fo.assign_folds(df, DEMO_SPLITS)
    assert got["h0"] == got["h1"] == "holdout" and got["t0"] == got["t1"] == "test"
    assert got["xh"] == "holdout" and got["xt"] == "test"     # never trained on: their group isn't
    assert got["xi"] == got["b3"] and got["xo"] == "extra"     # an inner group's, or its own
    inner = {k: v for k, v in got.items() if k[0] in "bs"}
    assert sorted(pd.Series(inner).value_counts().tolist()) == [4] * 5   # two groups a fold


def test_a_preset_fold_other_than_test_is_refused_but_an_extra_row_may_say_extra():
    df = small_manifest()
    df.loc[df["id"] == "b0", "fold"] = "extra"                 # a core row cannot
    with pytest.raises(fo.FoldError, match=r"^rows \['b0'\] come with fold values; `splits make` "
                       r"assigns inner and holdout folds itself \(only 'test' and 'probe' are "
                       r"kept\): empty those cells$"):
        fo.assign_folds(df, DEMO_SPLITS)
    df = small_manifest()
    df.loc[df["id"] == "xo", "fold"] = "2"                     # nor an extra row another fold
    with pytest.raises(fo.FoldError, match=r"rows \['xo'\] come with fold values"):
        fo.assign_folds(df, DEMO_SPLITS)


def test_make_keeps_the_probe_fold_whole_and_refuses_a_group_split_across_it(demo_df):
    folds = fo.assign_folds(demo_df, DEMO_SPLITS)
    probe = demo_df.loc[demo_df["fold"] == "probe", "id"]
    assert len(probe) and {folds[i] for i in probe} == {"probe"}
    assert {f for i, f in folds.items() if i not in set(probe)} & {"probe"} == set()
    df = demo_df.copy()
    df.loc[df.index[0], "group"] = df.loc[df["fold"] == "probe", "group"].iloc[0]
    with pytest.raises(fo.FoldError, match=r"have rows both in fold 'probe' and outside it"):
        fo.assign_folds(df, DEMO_SPLITS)
