"""hearsay.train.data: sampler quotas, the fold protocol, leaks, batched device augmentation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from train_world import family_of

from hearsay import augment
from hearsay.train import data as tdata
from hearsay.train import errors as terrors


def test_sampler_quotas_balance_labels_and_keep_the_source_mix():
    df = pd.DataFrame({"label": ["bonafide"] * 40 + ["spoof"] * 40,
                       "source": ["a"] * 30 + ["b"] * 10 + ["a"] * 20 + ["b"] * 20})
    s = tdata.Sampler(df, batch_size=8, mix="proportional", seed=0)
    assert s.quotas == {("bonafide", "a"): 3, ("bonafide", "b"): 1,
                        ("spoof", "a"): 2, ("spoof", "b"): 2}
    plan = s.epoch_plan(1, n_batches=10)
    for batch in plan:
        got = df.iloc[batch].value_counts().to_dict()
        assert got == s.quotas
    # without replacement inside a pass over a pool: the 10 small "bonafide/b" draws are distinct
    small = plan[:, 3]
    assert len(set(small)) == 10
    assert not np.array_equal(plan, s.epoch_plan(2, 10))  # fresh order each epoch
    np.testing.assert_array_equal(plan, s.epoch_plan(1, 10))  # a function of (seed, epoch)
    # half-batch 5 over 30:10 bona fide -> 3.75:1.25 -> largest remainder gives 4:1
    assert tdata.quotas(df, 10, "proportional")[("bonafide", "a")] == 4
    assert sum(tdata.quotas(df, 10, "proportional").values()) == 10
    assert s.without_quota == []
    many = pd.DataFrame({"label": ["bonafide"] * 6 + ["spoof"] * 6,
                         "source": [f"s{i}" for i in range(6)] * 2})
    assert len(tdata.Sampler(many, batch_size=4, mix="proportional", seed=0).without_quota) == 8
    eq = tdata.Sampler(df, batch_size=8, mix="equal", seed=0)
    assert eq.quotas[("bonafide", "a")] == eq.quotas[("bonafide", "b")] == 2


def test_fold_protocol(bundle):
    df = bundle.manifest
    for k in range(5):
        train, val, excl = tdata.plan_job(bundle, "fold", k)
        assert not train["fold"].isin([str(k), "holdout", "test"]).any()
        assert set(val["fold"]) == {str(k)} and set(val["train_scope"]) == {"core"}
        assert set(val["label"]) == {"bonafide", "spoof"}
        assert set(train["id"]).isdisjoint(val["id"])
        # derived from the fold file: every family fold k validates on (spoof rows) is kept
        # out of its extra rows, on top of the hand list (smear for fold 0)
        val_fams = set(val.loc[val["label"] == "spoof", "generator"].map(family_of))
        assert set(excl["listed"]) == ({"smear"} if k == 0 else set())
        assert set(excl["listed"]) | set(excl["derived"]) == val_fams | set(excl["listed"])
        extra = train.loc[train["train_scope"] == "extra"]
        assert not extra["generator"].map(family_of).isin(val_fams).any()
        # and nothing else is left out: every other inner / extra row trains
        rest = df.loc[~df["id"].isin(train["id"])]
        excluded = (rest["train_scope"] == "extra") & rest["generator"].map(family_of).isin(
            val_fams | set(excl["listed"]))
        assert rest.loc[~excluded, "fold"].isin([str(k), "holdout", "test"]).all()
    train, val, _ = tdata.plan_job(bundle, "pilot", None)
    assert set(train["fold"]) <= {"0", "1", "2", "3", "extra"} and set(val["fold"]) == {"4"}
    train, val, excl = tdata.plan_job(bundle, "full", None)
    assert set(train["fold"]) == {"0", "1", "2", "3", "4", "extra"} and val is None
    assert excl["derived"] == []  # no validation split: the hand list only


def test_a_forgotten_exclusion_is_derived_and_a_leak_is_a_train_error(bundle, monkeypatch):
    """Family exclusion follows the fold file even with an empty hand list, and the fold-leak
    guard is a TrainError with its own exit code (not an assert, which python -O drops)."""
    import dataclasses

    from hearsay import folds

    forgot = dataclasses.replace(bundle, meta={**bundle.meta, "folds": {"config": {}}})
    train, val, excl = tdata.plan_job(forgot, "fold", 0)
    val_fams = set(val.loc[val["label"] == "spoof", "generator"].map(family_of))
    assert set(excl["derived"]) == val_fams and excl["extra_rows_dropped"] > 0
    extra = train.loc[train["train_scope"] == "extra", "generator"].map(family_of)
    assert not extra.isin(val_fams).any()
    real = folds.train_ids
    monkeypatch.setattr(folds, "train_ids", lambda df, cfg, model: [
        *real(df, cfg, model), *df.loc[df["fold"] == "holdout", "id"][:1]])
    with pytest.raises(terrors.FoldLeak, match="holdout/test/validation rows") as err:
        tdata.plan_job(bundle, "fold", 0)
    assert err.value.code == terrors.EXIT_FOLD_LEAK == 10


def test_batched_device_augmentation_matches_the_numpy_path(bundle):
    """gpu_augment (draw in the worker, render + finish batched in torch) must give the model
    the same input as augment.training_example clip by clip (here on the CPU)."""
    from hearsay import crops
    from hearsay.augment import gpu as augment_gpu

    train, _, _ = tdata.plan_job(bundle, "fold", 1)
    rows = train[["id", "flac", "label", "source", "codec_ids"]].to_dict("records")
    sampler = tdata.Sampler(train, 8, "proportional", 0)
    test_durs = bundle.manifest.loc[bundle.manifest["fold"] == "test", "duration"].to_numpy()
    ctx = tdata.BatchContext(seed=0, world=1, rank=0, test_durations=test_durs, cap_s=2.0,
                             crop=crops.CropConfig(), augment=augment.AugmentConfig(p_aug=1.0),
                             max_crop_s=0.0, gpu_augment=False)
    for b in range(3):
        ref = tdata.EpochBatches(bundle.root, rows, sampler, 3, ctx)[(1, b)]
        dev = tdata.EpochBatches(bundle.root, rows, sampler, 3,
                                 dataclasses.replace(ctx, gpu_augment=True))[(1, b)]
        assert ref["names"] == dev["names"]
        mask = tdata.sample_mask(dev["lengths"], dev["input_values"].shape[1])
        got = augment_gpu.train_batch(dev["input_values"], mask, dev["names"], dev["params"])
        torch.testing.assert_close(got, ref["input_values"], atol=2e-3, rtol=1e-3)
