"""hearsay.util.config.from_dict: every stage's config is typed strictly, in range, and an unknown
key names the nearest known one (the selection and splits configs here; train in tests/train)."""

from __future__ import annotations

import pytest

from hearsay.bundle.select import SelectionConfig, SelectionError
from hearsay.contracts.folds import FoldError, SplitsConfig
from hearsay.util import config


@pytest.mark.parametrize(("doc", "named"), [
    ({"seed": "1"}, "selection config.seed = '1': input should be a valid integer"),
    ({"drop_generators": ["a", 3]}, "selection config.drop_generators = ('a', 3)"),
    ({"sources": {"studio": {"min_trimmed_s": "1.5"}}},
     "selection sources['studio'].min_trimmed_s = '1.5'"),
    ({"sources": {"studio": {"cap": True}}}, "selection sources['studio'].cap = True"),
    ({"sources": {"studio": {"cap_per_gen": 3}}}, "(did you mean 'cap_per_generator'?)"),
])
def test_selection_config_refuses_wrong_types_and_unknown_keys_naming_them(doc, named):
    with pytest.raises(SelectionError) as err:
        SelectionConfig.from_dict(doc)
    assert named in str(err.value)


def test_selection_config_takes_well_typed_values():
    cfg = SelectionConfig.from_dict({"seed": 2, "sources": {"studio": {"min_trimmed_s": 1,
                                                                       "cap": None}}})
    assert cfg.seed == 2 and cfg.sources["studio"].min_trimmed_s == 1


@pytest.mark.parametrize(("doc", "named"), [
    ({"n_folds": "5"}, "splits config.n_folds = '5'"),
    ({"holdout_family": ["x"]}, "(did you mean 'holdout_families'?)"),
])
def test_splits_config_refuses_wrong_types_and_unknown_keys(doc, named):
    with pytest.raises(FoldError) as err:
        SplitsConfig.from_dict(doc)
    assert named in str(err.value)


def test_a_config_that_is_not_an_object_is_refused():
    with pytest.raises(FoldError, match="a JSON object"):
        config.from_dict(SplitsConfig, [1, 2], what="splits config", error=FoldError)


def test_did_you_mean_is_empty_without_a_close_key():
    assert config.did_you_mean(["zzz"], {"lr_head"}) == ""
    assert config.did_you_mean(["lr_hed"], {"lr_head", "seed"}) == " (did you mean 'lr_head'?)"
