"""hearsay.train.selection: a recipe picks its training rows from one bundle (core only vs
core + extra), inside the config hash, recorded in run_meta, never touching what a fold
validates or scores."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
import torch

from hearsay import train as tr
from hearsay.contracts import protocol
from hearsay.train import config as tcfg
from hearsay.train import data as tdata
from hearsay.train import errors as terrors
from hearsay.train import prepare
from hearsay.train.selection import select_training_rows, stream_groups

CORE_ONLY = {"rules": [{"action": "keep", "train_scope": ["core"]}]}


def _resolved(selection=None, job="fold", fold=0):
    over = {"train": {"epochs": 1, "batches_per_epoch": 2}}
    if selection is not None:
        over["selection"] = selection
    return tcfg.resolve_config(job, fold, cpu_smoke=True, overrides=over)


def test_a_recipe_selection_changes_the_config_hash_and_the_same_rules_spelt_out_do_not():
    everything, core = _resolved(), _resolved(CORE_ONLY)
    assert everything["selection"] == {"rules": (), "corpus_decision": ""}
    assert tcfg.config_hash(core) != tcfg.config_hash(everything)
    # the empty selection is the default; a rule with its empty criteria spelt out is the same
    assert tcfg.config_hash(_resolved({"rules": []})) == tcfg.config_hash(everything)
    spelt = {"rules": [{"action": "keep", "train_scope": ["core"], "source": [], "family": []}]}
    assert tcfg.config_hash(_resolved(spelt)) == tcfg.config_hash(core)
    # a --set on the command line is in the hash too
    by_set = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {"epochs": 1, "batches_per_epoch": 2}},
        sets=['selection.rules=[{"action": "keep", "train_scope": ["core"]}]'])
    assert tcfg.config_hash(by_set) == tcfg.config_hash(core)


@pytest.mark.parametrize("bad, fix", [
    ({"rules": [{"action": "kep", "train_scope": ["core"]}]}, "use one of ['keep', 'drop']"),
    ({"rules": [{"action": "keep"}]}, "name at least one of"),
    ({"rules": [{"action": "keep", "scope": ["core"]}]}, "did you mean 'train_scope'"),
    ({"rules": [{"action": "drop", "train_scope": ["extras"]}]}, "use ['core', 'extra']"),
    ({"rules": [{"action": "drop", "source": "studio"}]}, "expected tuple[str, ...]"),
    ({"rule": []}, "did you mean 'rules'"),
    ({"corpus_decision": "decision.json"}, "the sha256 (64 lowercase hex digits)"),
    ({"corpus_decision": "A" * 64}, "the sha256 (64 lowercase hex digits)"),
])
def test_a_bad_selection_is_a_config_error_that_names_the_fix(bad, fix):
    with pytest.raises(terrors.ConfigError) as err:
        _resolved(bad)
    assert fix in str(err.value)


def _job(bundle, selection, job="fold", fold=0):
    resolved = _resolved(selection, job, fold)
    tc, _, cc, ac = tcfg.sections(resolved)
    return prepare._data(resolved, tc, cc, ac, bundle, torch.device("cpu"), world=1, rank=0)


@pytest.mark.parametrize("job, fold", [("fold", 0), ("fold", 3), ("pilot", None)])
def test_selection_leaves_validation_and_scored_rows_and_the_bundle_unchanged(bundle, job, fold):
    before = bundle.manifest.copy()
    _, planned_val, _ = tdata.plan_job(bundle, job, fold)  # what the fold protocol validates on
    everything = _job(bundle, None, job, fold)
    core = _job(bundle, CORE_ONLY, job, fold)
    # the training rows: exactly the extra rows left out
    extra = everything.train["train_scope"] == "extra"
    assert extra.any()
    assert list(core.train["id"]) == list(everything.train.loc[~extra, "id"])
    # a rule that would also drop validation rows (core rows of a source) if it reached them
    src = sorted(set(planned_val["source"]))[0]
    no_src = _job(bundle, {"rules": [{"action": "drop", "source": [src]}]}, job, fold)
    assert not (no_src.train["source"] == src).any()
    for data in (everything, core, no_src):
        pd.testing.assert_frame_equal(data.val, planned_val)
        assert data.val_rows == planned_val[prepare.ROW_COLUMNS].to_dict("records")
    # what is scored comes from the bundle manifest, which the selection never modifies
    pd.testing.assert_frame_equal(bundle.manifest, before)
    for split in protocol.SPLITS:
        assert len(protocol.split_rows(bundle.manifest, split)) == len(
            protocol.split_rows(before, split))


def test_a_rule_matches_only_rows_meeting_every_criterion(bundle):
    train, _, _ = tdata.plan_job(bundle, "full", None)
    extra = train["train_scope"] == "extra"
    src = sorted(set(train.loc[extra, "source"]) & set(train.loc[~extra, "source"]))[0]
    rule = {"action": "drop", "train_scope": ["extra"], "source": [src]}
    kept, out = select_training_rows(train, bundle, {"rules": [rule]})
    gone = train.loc[~train["id"].isin(kept["id"])]
    assert len(gone) and (gone["train_scope"] == "extra").all() and (gone["source"] == src).all()
    assert (kept["source"] == src).any()  # the core rows of that source stay
    assert out["rules"][0]["dropped"] == len(gone) and out["rows_after"] == len(kept)
    # family: an extra voc row and the core voc rows
    fam = {"rules": [{"action": "drop", "train_scope": ["extra"], "family": ["voc"]}]}
    kept, _ = select_training_rows(train, bundle, fam)
    gone = train.loc[~train["id"].isin(kept["id"])]
    assert set(gone["generator"].str.split("-").str[0]) == {"voc"}
    assert (kept["generator"].str.startswith("voc-") & (kept["train_scope"] == "core")).any()


def test_corpus_is_the_manifest_corpus_column_where_there_is_one_else_the_source(bundle):
    train, _, _ = tdata.plan_job(bundle, "full", None)
    src = sorted(set(train["source"]))[0]
    by_source, _ = select_training_rows(train, bundle, {"rules": [
        {"action": "keep", "corpus": [src, *sorted(set(train["source"]) - {src})[:1]]}]})
    assert set(by_source["source"]) == {src, sorted(set(train["source"]) - {src})[0]}
    m = bundle.manifest.copy()
    m["corpus"] = ["la" if s == "audiobook" or i % 2 else "itw" for i, s in enumerate(m["source"])]
    named = dataclasses.replace(bundle, manifest=m)
    train, _, _ = tdata.plan_job(named, "full", None)
    kept, out = select_training_rows(train, named, {"rules": [{"action": "drop",
                                                               "corpus": ["itw"]}]})
    assert set(kept["corpus"]) == {"la"} and out["rules"][0]["dropped"] == (
        train["corpus"] == "itw").sum()


def test_a_name_no_bundle_row_has_or_a_selection_without_a_label_is_refused(bundle):
    train, _, _ = tdata.plan_job(bundle, "full", None)
    with pytest.raises(terrors.ConfigError, match=r"selection.rules\[0\].source \['studoi'\]: "
                       r"no row of the bundle has that source \(it has \["):
        select_training_rows(train, bundle, {"rules": [{"action": "drop", "source": ["studoi"]}]})
    with pytest.raises(terrors.ConfigError, match="leaves no bonafide training rows"):
        select_training_rows(train, bundle, {"rules": [{"action": "keep", "family": ["voc"]}]})
    kept, _ = select_training_rows(train, bundle, {"rules": [
        {"action": "keep", "family": ["voc", "bonafide"]}]})
    assert set(kept["label"]) == {"bonafide", "spoof"}


def test_the_selection_and_its_counts_are_in_run_meta(bundle_dir, bundle, tmp_path):
    cfg = tcfg.resolve_config("fold", 0, cpu_smoke=True, overrides={
        "train": {"epochs": 1, "batches_per_epoch": 2}, "selection": CORE_ONLY})
    tr.run(cfg, bundle_dir, tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "run_meta.json").read_text())
    allowed, _, _ = tdata.plan_job(bundle, "fold", 0)
    n_extra = int((allowed["train_scope"] == "extra").sum())
    assert meta["selection"] == {
        "rows_before": len(allowed), "rows_after": len(allowed) - n_extra,
        "corpus_decision": None,
        "rules": [{"action": "keep", "train_scope": ["core"], "source": [], "corpus": [],
                   "family": [], "rows_seen": len(allowed), "kept": len(allowed) - n_extra,
                   "dropped": n_extra}]}
    assert meta["train_rows"] == len(allowed) - n_extra
    assert meta["val_rows"] == len(tdata.plan_job(bundle, "fold", 0)[1])  # validation: all of it
    assert meta["config_hash"] == tcfg.config_hash(cfg)
    groups = meta["stream_groups"]                    # what a corpus decision is checked against
    assert {g["train_scope"] for g in groups} == {"core"}
    assert sum(g["rows"] for g in groups) == meta["train_rows"]
    for lab in ("bonafide", "spoof"):
        assert sum(g["share"] for g in groups if g["label"] == lab) == pytest.approx(1.0, abs=1e-5)


def test_stream_groups_give_each_group_its_source_s_slots_times_its_part_of_the_source():
    train = pd.DataFrame({
        "label": ["bonafide"] * 4 + ["spoof"] * 6,
        "source": ["ls"] * 4 + ["a", "a", "a", "a", "b", "b"],
        "train_scope": ["core"] * 4 + ["core", "core", "core", "extra", "extra", "extra"]})
    quotas = {("bonafide", "ls"): 2, ("spoof", "a"): 1, ("spoof", "b"): 3}
    got = {(g["label"], g["source"], g["train_scope"]): (g["rows"], g["share"], g["corpus"])
           for g in stream_groups(train, quotas)}
    assert got == {("bonafide", "ls", "core"): (4, 1.0, "ls"),   # no corpus column: the source
                   ("spoof", "a", "core"): (3, 0.1875, "a"),     # 1/4 of the slots x 3/4 rows
                   ("spoof", "a", "extra"): (1, 0.0625, "a"),
                   ("spoof", "b", "extra"): (2, 0.75, "b")}
    no_slot = stream_groups(train, {("bonafide", "ls"): 2, ("spoof", "a"): 4})
    assert [g["share"] for g in no_slot if g["source"] == "b"] == [0.0]


def test_hearsay_train_refuses_a_selection_naming_what_the_bundle_lacks(bundle_dir, tmp_path,
                                                                        capsys):
    cfg = tmp_path / "core_only.json"
    cfg.write_text(json.dumps({"selection": {"rules": [{"action": "keep",
                                                        "corpus": ["asvspoof2019-la"]}]}}))
    code = tr.main(["--bundle", str(bundle_dir), "--fold", "0", "--out", str(tmp_path / "r"),
                    "--cpu-smoke", "--config", str(cfg)])
    assert code == terrors.EXIT_USAGE
    assert "selection.rules[0].corpus ['asvspoof2019-la']: no row of the bundle has that " \
           "corpus" in capsys.readouterr().err
    assert not (tmp_path / "r" / "checkpoints").exists()


def test_a_recipe_citing_a_corpus_decision_records_its_sha_in_run_meta_and_the_hash(bundle_dir,
                                                                                 bundle):
    cited = {"rules": [], "corpus_decision": "ab" * 32}
    assert tcfg.config_hash(_resolved(cited)) != tcfg.config_hash(_resolved())
    train, _, _ = tdata.plan_job(bundle, "fold", 0)
    _, outcome = select_training_rows(train, bundle, _resolved(cited)["selection"])
    assert outcome["corpus_decision"] == "ab" * 32
    _, outcome = select_training_rows(train, bundle, _resolved()["selection"])
    assert outcome["corpus_decision"] is None


def _rows(*rows):
    """(label, source, train_scope, generator) rows as a manifest frame."""
    return pd.DataFrame([{"id": f"r{i}", "label": lab, "source": src, "train_scope": scope,
                          "generator": gen} for i, (lab, src, scope, gen) in enumerate(rows)])


def _bundle(manifest, family_sep="-"):
    return type("B", (), {"manifest": manifest,
                          "meta": {"folds": {"config": {"family_sep": family_sep}}}})()


BONA = ("bonafide", "ls", "core", "bonafide")


@pytest.mark.parametrize("family, kept", [
    ("tts", ["tts-b-v2", "tts-a"]),  # up to the first separator
    ("voc", ["voc"]),  # a name without a separator is its own family
])
def test_a_family_is_the_generator_name_up_to_the_first_separator(family, kept):
    rows = _rows(BONA, ("spoof", "s", "core", "tts-b-v2"), ("spoof", "s", "core", "tts-a"),
                 ("spoof", "s", "core", "voc"))
    got, _ = select_training_rows(rows, _bundle(rows), {"rules": [
        {"action": "keep", "family": [family, "bonafide"]}]})
    assert list(got.loc[got["label"] == "spoof", "generator"]) == kept
    # the name up to the last separator is no family the bundle has
    with pytest.raises(terrors.ConfigError, match=r"family \['tts-b'\]: no row of the bundle"):
        select_training_rows(rows, _bundle(rows), {"rules": [
            {"action": "keep", "family": ["tts-b", "bonafide"]}]})


@pytest.mark.parametrize("value, refused", [
    ("fold-only", False),  # in the bundle, not in this job's training rows: the rule selects none
    ("mlaad", False),  # in both
    ("nowhere", True),  # in neither: a typo
])
def test_a_value_the_bundle_has_is_accepted_though_this_jobs_rows_lack_it(value, refused):
    bundle_rows = _rows(BONA, ("spoof", "mlaad", "extra", "x"), ("spoof", "fold-only", "core", "y"),
                        ("spoof", "s", "core", "z"))
    train = bundle_rows.loc[bundle_rows["source"] != "fold-only"].reset_index(drop=True)
    section = {"rules": [{"action": "drop", "source": [value]}]}
    if refused:
        with pytest.raises(terrors.ConfigError,
                           match=r"source \['nowhere'\]: no row of the bundle"):
            select_training_rows(train, _bundle(bundle_rows), section)
        return
    kept, out = select_training_rows(train, _bundle(bundle_rows), section)
    assert list(kept["source"]) == [s for s in train["source"] if s != value]
    assert out["rules"][0]["dropped"] == int((train["source"] == value).sum())


@pytest.mark.parametrize("cited, ok", [("a" * 64, True), ("a" * 63, False), ("a" * 65, False),
                                       ("0123456789abcdef" * 4, True), ("g" * 64, False),
                                       ("", True)])
def test_a_cited_corpus_decision_is_exactly_64_lowercase_hex_digits(cited, ok):
    section = {"rules": [], "corpus_decision": cited}
    if ok:
        assert _resolved(section)["selection"]["corpus_decision"] == cited
        return
    with pytest.raises(terrors.ConfigError, match="the sha256 \\(64 lowercase hex digits\\)"):
        _resolved(section)
