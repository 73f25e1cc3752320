"""hearsay.protocol: the fold protocol, once — which run trains on, validates on and scores which
rows — checked against what the trainer and the fold file actually do."""

import pandas as pd
import pytest

from hearsay import protocol
from hearsay.folds import SplitsConfig, train_ids
from hearsay.manifest import INNER_FOLDS


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
