"""`hearsay bundle --selection` end to end, and the bundle identity covering what decides the
training rows: the selection config and outcome, the fold file's config (selection.json)."""

import json
import shutil

import pytest
from test_bundle_build import corpus, tone

from hearsay.bundle import build as bundle
from hearsay.bundle.build import BundleConfig, build_bundle
from hearsay.contracts.bundle import (
    IDENTITY,
    META,
    BundleError,
    load_bundle,
    tree_sha,
    write_identity,
)
from hearsay.contracts.folds import SplitsConfig, write_folds
from hearsay.contracts.manifest import read_manifest

SELECTION = {"seed": 3, "drop_generators": ["bad-1"], "sources": {"s": {"min_trimmed_s": 2.0}}}


def small(tmp_path):
    """8 clips of source s: bona fide 1.0/1.5/2.5/3.0 s, voc-a 2.2/2.6/1.2 s, bad-1 2.4 s."""
    clips = [(f"b{i}", tone(d), {"label": "bonafide"}) for i, d in enumerate((1.0, 1.5, 2.5, 3.0))]
    clips += [(f"v{i}", tone(d, 500), {"label": "spoof", "generator": "voc-a"})
              for i, d in enumerate((2.2, 2.6, 1.2))]
    clips += [("x0", tone(2.4, 700), {"label": "spoof", "generator": "bad-1"})]
    return corpus(tmp_path, clips)


def write(path, doc):
    path.write_text(json.dumps(doc))
    return path


def test_hearsay_bundle_selection_keeps_lists_and_hashes_the_selection(tmp_path, capsys):
    manifest, out = small(tmp_path), tmp_path / "b"
    sel = write(tmp_path / "sel.json", SELECTION)
    rc = bundle.main([str(manifest), str(out), "--selection", str(sel), "--codecs", "",
                      "--workers", "1", "--no-progress"])
    printed = capsys.readouterr().out
    assert rc == 0
    b = load_bundle(out, verify=True)
    assert sorted(b.manifest["id"]) == ["b2", "b3", "v0", "v1"]
    outcome = b.meta["selection"]["outcome"]
    assert {d["id"]: d["rule"] for d in outcome["dropped"]} == {
        "x0": "drop_generators", "b0": "min_trimmed_s", "b1": "min_trimmed_s",
        "v2": "min_trimmed_s"}
    assert b.meta["counts"]["deselected"] == 4 and b.meta["selection"]["config"] == {
        **SELECTION, "drop_families": [], "drop_extra_families": [], "family_sep": "-", "note": "",
        "sources": {"s": {"min_trimmed_s": 2.0, "match_duration": None,
                          "cap_per_generator": None, "class_ratio": None,
                          "cap_per_class": {}, "cap": None}}}
    assert not (out / "audio" / "b0.flac").exists()  # a deselected clip is not in the tree
    hashed = json.loads((out / IDENTITY).read_text())
    assert hashed["selection"]["outcome"] == outcome and hashed["folds"]["config"]
    diag = json.loads((out / "diagnostics.json").read_text())["duration_auc_by_source"]["s"]
    assert (diag["n_before"], diag["n_after"]) == (8, 4)
    assert "selection: 1 rows dropped by drop_generators" in printed
    write(sel, {**SELECTION, "sources": {"nope": {}}})
    assert bundle.main([str(manifest), str(tmp_path / "c"), "--selection", str(sel),
                        "--codecs", "", "--workers", "1", "--no-progress"]) == bundle.EXIT_REJECTED
    assert "selection sources ['nope'] are not in the manifest" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()  # refused before any clip was decoded


def test_a_changed_selection_config_is_a_new_bundle_and_an_edited_meta_is_refused(tmp_path):
    manifest = small(tmp_path)
    cfg = BundleConfig(codecs=(), workers=1)
    a = build_bundle(manifest, tmp_path / "a", cfg=cfg, progress=False,
                     selection=write(tmp_path / "s1.json", SELECTION))
    b = build_bundle(manifest, tmp_path / "b", cfg=cfg, progress=False,
                     selection=write(tmp_path / "s2.json", {**SELECTION, "note": "other"}))
    # the same rows and audio, another selection config: another identity
    assert (tmp_path / "a/manifest.csv").read_bytes() == (tmp_path / "b/manifest.csv").read_bytes()
    assert a["tree_sha"] != b["tree_sha"]
    # bundle_meta.json edited afterwards (outside the tree-sha): refused even without re-hashing
    meta = json.loads((tmp_path / "a" / META).read_text())
    meta["selection"]["config"]["sources"]["s"]["min_trimmed_s"] = 1.0
    (tmp_path / "a" / META).write_text(json.dumps(meta))
    with pytest.raises(BundleError, match="'selection' differs from the hashed selection.json"):
        load_bundle(tmp_path / "a")
    # ... and with selection.json edited to agree, the tree-sha no longer holds
    write_identity(tmp_path / "a", meta)
    assert tree_sha(tmp_path / "a") != a["tree_sha"]
    with pytest.raises(BundleError, match="tree-sha .* != recorded"):
        load_bundle(tmp_path / "a", verify=True)


def test_a_changed_fold_config_is_a_new_bundle_and_an_edited_one_is_refused(tmp_path):
    manifest = small(tmp_path)
    df = read_manifest(manifest).assign(fold="")
    df.to_csv(manifest, index=False)
    cfg, metas = BundleConfig(codecs=(), workers=1), []
    for name, excl in (("one", {}), ("two", {"full": ["voc"]})):
        folds = write_folds(df, SplitsConfig(family_exclusion=excl), tmp_path / name, "f")
        metas.append(build_bundle(manifest, tmp_path / name / "b", folds, cfg, progress=False))
    assert metas[0]["tree_sha"] != metas[1]["tree_sha"]  # same rows, another family exclusion
    assert metas[1]["folds"]["config"]["family_exclusion"] == {"full": ["voc"]}
    copy = shutil.copytree(tmp_path / "one" / "b", tmp_path / "edited")
    meta = json.loads((copy / META).read_text())
    meta["folds"]["config"]["family_exclusion"] = {"full": ["voc"]}
    (copy / META).write_text(json.dumps(meta))
    with pytest.raises(BundleError, match="'folds' differs from the hashed selection.json"):
        load_bundle(copy)
    # where the fold file was read is no part of the identity
    (copy / META).write_text(json.dumps({**meta, "folds": metas[0]["folds"] | {"path": "x"}}))
    assert load_bundle(copy, verify=True).tree_sha == metas[0]["tree_sha"]
