"""hearsay.contracts.protocol: the fold protocol, once — which run trains on, validates on and
scores which
rows — checked against what the trainer and the fold file actually do."""

import pandas as pd
import pytest

from hearsay.contracts import protocol
from hearsay.contracts.folds import SplitsConfig, train_ids
from hearsay.contracts.manifest import INNER_FOLDS


def test_six_runs_five_folds_and_the_full_model():
    assert protocol.RUN_KEYS == ("fold0", "fold1", "fold2", "fold3", "fold4", "full")
    assert [protocol.run_job(k) for k in protocol.RUN_KEYS] == [
        ("fold", 0), ("fold", 1), ("fold", 2), ("fold", 3), ("fold", 4), ("full", None)]
    assert all(protocol.run_key(*protocol.run_job(k)) == k for k in protocol.RUN_KEYS)


@pytest.mark.parametrize("bad", [("fold", 5), ("fold", None), ("pilot", None), ("folds", 1)])
def test_run_key_refuses_what_is_not_a_campaign_run(bad):
    with pytest.raises(ValueError, match="no campaign run"):
        protocol.run_key(*bad)


def test_every_inner_row_is_scored_by_the_model_that_did_not_train_on_it():
    rows = pd.DataFrame({"id": [f"r{i}" for i in range(7)],
                         "fold": list(INNER_FOLDS) + ["holdout", "test"],
                         "train_scope": "core", "generator": "g", "label": "spoof"})
    for _, row in rows.iterrows():
        split = {"holdout": "holdout", "test": "test"}.get(row["fold"], "inner_oof")
        scorer = protocol.scorer_of(split, row["fold"])
        job, fold = protocol.run_job(scorer)
        key = protocol.exclusion_key(job, fold)
        assert row["id"] not in train_ids(rows, SplitsConfig(), key)
        assert row["fold"] in protocol.SPLITS[split]


def test_the_pilot_validates_on_fold_4_and_the_full_model_on_nothing():
    assert protocol.validation_fold("pilot") == "4" == protocol.exclusion_key("pilot")
    assert protocol.validation_fold("fold", 2) == "2"
    assert protocol.validation_fold("full") is None and protocol.exclusion_key("full") == "full"


def test_scorer_of_refuses_an_unknown_split_or_fold():
    with pytest.raises(ValueError, match="split 'extra'"):
        protocol.scorer_of("extra")
    with pytest.raises(ValueError, match="fold 'holdout'"):
        protocol.scorer_of("inner_oof", "holdout")


def test_refusals_name_the_runs_splits_and_folds_to_choose_from():
    with pytest.raises(ValueError, match=r"^no campaign run for job 'fold' fold 7 "
                                         r"\(fold 0\.\.4 or full\)$"):
        protocol.run_key("fold", 7)
    with pytest.raises(ValueError, match=r"^run 'pilot' is not one of "
                                         r"fold0, fold1, fold2, fold3, fold4, full$"):
        protocol.run_job("pilot")
    with pytest.raises(ValueError, match=r"^inner row with fold '7': one of 0, 1, 2, 3, 4$"):
        protocol.scorer_of("inner_oof", "7")
    with pytest.raises(ValueError, match=r"^split 'extra': one of inner_oof, holdout, test$"):
        protocol.scorer_of("extra")
    with pytest.raises(ValueError,
                       match=r"^--split 'extra': one of inner_oof, holdout, test, probe$"):
        protocol.split_rows(pd.DataFrame({"fold": []}), "extra")


def manifest():
    return pd.DataFrame({"id": [f"r{i}" for i in range(9)],
                         "fold": ["0", "1", "1", "2", "holdout", "test", "1", "extra", "test"],
                         "train_scope": ["core"] * 6 + ["extra"] * 3})


def test_split_rows_of_one_inner_fold_are_its_core_rows_in_manifest_order():
    m = manifest()
    assert list(protocol.split_rows(m, "inner_oof", fold=1)["id"]) == ["r1", "r2"]
    assert list(protocol.split_rows(m, "inner_oof", fold="2")["id"]) == ["r3"]
    assert list(protocol.split_rows(m, "inner_oof")["id"]) == ["r0", "r1", "r2", "r3"]
    assert list(protocol.split_rows(m, "test")["id"]) == ["r5"]  # the extra test row never
    no_scope = m.drop(columns="train_scope")
    assert list(protocol.split_rows(no_scope, "test")["id"]) == ["r5", "r8"]


@pytest.mark.parametrize("split", ["holdout", "test"])
def test_split_rows_refuses_a_fold_outside_the_inner_split(split):
    with pytest.raises(ValueError, match=r"^--fold only applies to --split inner_oof$"):
        protocol.split_rows(manifest(), split, fold=1)
