"""hearsay splits import: fold files made elsewhere, pinned like `make`'s, refused like them, and
extra rows that keep a given inner fold (never trained on by that fold's model, never scored)."""

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from hearsay.bundle import splits
from hearsay.contracts import folds as fo
from hearsay.contracts import protocol
from hearsay.contracts.manifest import scorable
from hearsay.demo.corpus import DemoDataConfig, manifest_rows
from hearsay.train.data import plan_job

REPO_SPLITS = Path(__file__).resolve().parents[1] / "splits"
CFG = fo.SplitsConfig(holdout_families=("phq",), family_exclusion={"0": ["smear"]})
KEPT = "xtra01"  # an extra-only group (no core rows): speaker-grouped into fold 2 elsewhere


@pytest.fixture(scope="module")
def demo_df():
    return pd.DataFrame(manifest_rows(DemoDataConfig()))  # the full demo layout, no audio


@pytest.fixture(scope="module")
def made(demo_df):
    """{id: fold} as made elsewhere: `make`'s folds with group xtra01 kept in inner fold 2."""
    folds = fo.assign_folds(demo_df, CFG)
    for rid in demo_df.loc[demo_df["group"] == KEPT, "id"]:
        assert folds[rid] == "extra"
        folds[rid] = "2"
    return folds


def _write(tmp_path, df, folds):
    manifest, src, cfg = tmp_path / "manifest.csv", tmp_path / "ext.csv", tmp_path / "cfg.json"
    df.to_csv(manifest, index=False)
    pd.DataFrame({"id": list(folds), "fold": list(folds.values())}).to_csv(src, index=False)
    cfg.write_text(json.dumps(asdict(CFG)))
    return manifest, src, cfg


def test_imported_folds_are_pinned_and_refused_when_edited(tmp_path, demo_df, made, capsys):
    manifest, src, cfg = _write(tmp_path, demo_df, made)
    out = tmp_path / "splits"
    assert splits.main(["import", str(src), "--manifest", str(manifest), "--out", str(out),
                    "--name", "ext", "--config", str(cfg)]) == 0
    path = out / "ext.folds.json"
    assert "pinned in" in capsys.readouterr().out
    loaded = fo.load_folds(path)
    assert loaded.folds == made and loaded.config == CFG
    assert (out / fo.SUMS).read_text() == f"{loaded.sha256}  ext.folds.json\n"
    assert json.loads(path.read_text())["imported"] == {"from": "ext.csv",
                                                        "sha256": fo.sha256_file(src)}
    assert splits.main(["verify", str(path), "--manifest", str(manifest)]) == 0
    doc = json.loads(path.read_text())
    doc["folds"][next(iter(doc["folds"]))] = "holdout"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    with pytest.raises(fo.FoldError, match="does not match the pinned"):
        fo.load_folds(path)
    assert splits.main(["verify", str(path)]) == 3


def test_an_extra_row_keeping_inner_fold_k_never_trains_fold_k_and_is_never_scored(
        tmp_path, demo_df, made):
    manifest, src, _ = _write(tmp_path, demo_df, made)
    path = fo.import_folds(demo_df, src, CFG, tmp_path / "splits", "ext")
    df = fo.apply_folds(demo_df, fo.load_folds(path))
    kept = set(df.loc[df["group"] == KEPT, "id"])
    assert set(df.loc[df["id"].isin(kept), "fold"]) == {"2"}
    assert not kept & set(fo.train_ids(df, CFG, "2"))
    assert kept <= set(fo.train_ids(df, CFG, "1")) and kept <= set(fo.train_ids(df, CFG, "full"))
    bundle = SimpleNamespace(manifest=df, meta={"folds": {"config": asdict(CFG)}})
    train, val, _ = plan_job(bundle, "fold", 2)
    assert not kept & set(train["id"]) and not kept & set(val["id"])
    assert not kept & set(scorable(df)["id"])
    assert not kept & set(protocol.split_rows(df, "inner_oof", fold=2)["id"])
    # the bundle stage records the imported file's pinned sha and its config
    from hearsay.bundle.rows import prepare_manifest
    from hearsay.bundle.select import SelectionConfig

    _, meta, _ = prepare_manifest(manifest, path, SelectionConfig())
    assert meta["sha256"] == fo.load_folds(path).sha256 and meta["config"] == asdict(CFG)


def test_importing_the_projects_json_keeps_its_config_and_a_bad_csv_names_its_format(
        tmp_path, demo_df):
    pinned = fo.load_folds(REPO_SPLITS / "demo.folds.json")
    path = fo.import_folds(demo_df, REPO_SPLITS / "demo.folds.json", None, tmp_path, "again")
    again = fo.load_folds(path)
    assert again.folds == pinned.folds and again.config == pinned.config
    bad = tmp_path / "bad.csv"
    bad.write_text("id,split\nspk00-0000,0\n")
    with pytest.raises(fo.FoldError, match="exactly the header id,fold"):
        fo.import_folds(demo_df, bad, CFG, tmp_path, "bad")


def test_a_test_group_with_a_holdout_family_stays_test_for_make_and_import(demo_df):
    df = demo_df.copy()
    i = df.index[(df["fold"] == "test") & (df["label"] == "spoof")][0]
    df.loc[i, "generator"] = "phq-a"
    folds = fo.assign_folds(df, CFG)
    assert folds[df.loc[i, "id"]] == "test"
    fo.check_imported(df, folds, CFG, "ext.csv")  # accepted, as make made it


def _holdout_extra(df, folds):
    i = df.index[(df["train_scope"] == "extra") & (df["label"] == "spoof")][0]
    df.loc[i, "generator"] = "phq-z"


def _test_group_split(df, folds):
    g = df.loc[df["fold"] == "test", "group"].iloc[0]
    i = df.index[(df["group"] == g) & (df["train_scope"] == "core")][0]
    df.loc[i, "fold"] = ""
    folds[df.loc[i, "id"]] = "1"


@pytest.mark.parametrize("break_it", [_holdout_extra, _test_group_split])
def test_import_refuses_what_make_refuses_with_the_same_message(demo_df, made, break_it):
    df, folds = demo_df.copy(), dict(made)
    break_it(df, folds)
    with pytest.raises(fo.FoldError) as by_make:
        fo.assign_folds(df, CFG)
    with pytest.raises(fo.FoldError) as by_import:
        fo.check_imported(df, folds, CFG, "ext.csv")
    assert str(by_import.value) == str(by_make.value)


def _first(df, folds, **where):
    mask = pd.Series(True, index=df.index)
    for col, val in where.items():
        mask &= df[col] == val
    return df.loc[mask, "id"].iloc[0]


@pytest.mark.parametrize("edit, fix", [
    (lambda df, f: f.pop(_first(df, f)), "1 manifest id"),
    (lambda df, f: f.update({"ghost": "0"}), "unknown id"),
    (lambda df, f: f.update({_first(df, f, train_scope="core", fold=""): "7"}), "outside"),
    (lambda df, f: f.update({_first(df, f, train_scope="core", fold=""): "extra"}),
     "only train_scope extra"),
    (lambda df, f: f.update({_first(df, f, fold="test"): "0"}), "disagree with the manifest"),
    (lambda df, f: f.update({_first(df, f, generator="phq-a"): "0"}), "'holdout', whole"),
    (lambda df, f: f.update({_first(df, f, generator="voc-a"): "holdout"}), "'holdout', whole"),
    (lambda df, f: f.update({_first(df, f, group="spk01", train_scope="extra"): "3"}),
     "span folds"),
    (lambda df, f: f.update({i: "test" for i in df.loc[df["group"] == KEPT, "id"]}),
     "keeps an inner fold"),
])
def test_import_refuses_folds_that_break_the_rules_and_names_the_fix(demo_df, made, edit, fix):
    folds = dict(made)
    edit(demo_df, folds)
    with pytest.raises(fo.FoldError, match=fix):
        fo.check_imported(demo_df, folds, CFG, "ext.csv")
