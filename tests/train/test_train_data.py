"""hearsay.train.data: sampler quotas and share tables, the fold protocol, leaks, batched device
augmentation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from train_world import family_of

from hearsay.sound import augment
from hearsay.train import config as tcfg
from hearsay.train import data as tdata
from hearsay.train import errors as terrors
from hearsay.train import rates
from hearsay.train import shares as tshares


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
        assert not train["fold"].isin([str(k), "holdout", "test", "probe"]).any()
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
        assert rest.loc[~excluded, "fold"].isin([str(k), "holdout", "test", "probe"]).all()
    train, val, _ = tdata.plan_job(bundle, "pilot", None)
    assert set(train["fold"]) <= {"0", "1", "2", "3", "extra"} and set(val["fold"]) == {"4"}
    train, val, excl = tdata.plan_job(bundle, "full", None)
    assert set(train["fold"]) == {"0", "1", "2", "3", "4", "extra"} and val is None
    assert excl["derived"] == []  # no validation split: the hand list only


def test_a_forgotten_exclusion_is_derived_and_a_leak_is_a_train_error(bundle, monkeypatch):
    """Family exclusion follows the fold file even with an empty hand list, and the fold-leak
    guard is a TrainError with its own exit code (not an assert, which python -O drops)."""
    import dataclasses

    from hearsay.contracts import folds

    forgot = dataclasses.replace(bundle, meta={**bundle.meta, "folds": {"config": {}}})
    train, val, excl = tdata.plan_job(forgot, "fold", 0)
    val_fams = set(val.loc[val["label"] == "spoof", "generator"].map(family_of))
    assert set(excl["derived"]) == val_fams and excl["extra_rows_dropped"] > 0
    extra = train.loc[train["train_scope"] == "extra", "generator"].map(family_of)
    assert not extra.isin(val_fams).any()
    real = folds.train_ids
    monkeypatch.setattr(folds, "train_ids", lambda df, cfg, model: [
        *real(df, cfg, model), *df.loc[df["fold"] == "holdout", "id"][:1]])
    with pytest.raises(terrors.FoldLeak, match="holdout/test/probe/validation rows") as err:
        tdata.plan_job(bundle, "fold", 0)
    assert err.value.code == terrors.EXIT_FOLD_LEAK == 10


def test_batched_device_augmentation_matches_the_numpy_path(bundle):
    """gpu_augment (draw in the worker, render + finish batched in torch) must give the model
    the same input as example.training_example clip by clip (here on the CPU)."""
    from hearsay.sound import example
    from hearsay.train import augment_gpu

    train, _, _ = tdata.plan_job(bundle, "fold", 1)
    rows = train[["id", "flac", "label", "source", "codec_ids"]].to_dict("records")
    sampler = tdata.Sampler(train, 8, "proportional", 0)
    test_durs = bundle.manifest.loc[bundle.manifest["fold"] == "test", "duration"].to_numpy()
    ctx = tdata.BatchContext(seed=0, world=1, rank=0, test_durations=test_durs, cap_s=2.0,
                             crop=example.CropConfig(), augment=augment.AugmentConfig(p_aug=1.0),
                             max_crop_s=0.0, gpu_augment=False)
    for b in range(3):
        ref = tdata.EpochBatches(bundle.root, rows, sampler, 3, ctx)[(1, b)]
        dev = tdata.EpochBatches(bundle.root, rows, sampler, 3,
                                 dataclasses.replace(ctx, gpu_augment=True))[(1, b)]
        assert ref["names"] == dev["names"]
        mask = tdata.sample_mask(dev["lengths"], dev["input_values"].shape[1])
        got = augment_gpu.train_batch(dev["input_values"], mask, dev["names"], dev["params"])
        torch.testing.assert_close(got, ref["input_values"], atol=2e-3, rtol=1e-3)


def test_device_batch_renders_the_drawn_batch_like_the_numpy_path(bundle):
    """What the loop feeds the model: device_batch of a drawn (gpu_augment) batch equals the
    numpy path's batch on the device; the mask is 1 on exactly the valid samples."""
    from hearsay.sound import example

    train, _, _ = tdata.plan_job(bundle, "fold", 1)
    rows = train[["id", "flac", "label", "source", "codec_ids"]].to_dict("records")
    sampler = tdata.Sampler(train, 8, "proportional", 0)
    test_durs = bundle.manifest.loc[bundle.manifest["fold"] == "test", "duration"].to_numpy()
    ctx = tdata.BatchContext(seed=0, world=1, rank=0, test_durations=test_durs, cap_s=2.0,
                             crop=example.CropConfig(), augment=augment.AugmentConfig(p_aug=1.0),
                             max_crop_s=0.0, gpu_augment=False)
    cpu = torch.device("cpu")
    ref = tdata.EpochBatches(bundle.root, rows, sampler, 3, ctx)[(1, 0)]
    dev = tdata.EpochBatches(bundle.root, rows, sampler, 3,
                             dataclasses.replace(ctx, gpu_augment=True))[(1, 0)]
    iv, am, y = tdata.device_batch(dev, cpu, gpu_augment=True)
    iv_ref, am_ref, y_ref = tdata.device_batch(ref, cpu, gpu_augment=False)
    torch.testing.assert_close(iv, iv_ref, atol=2e-3, rtol=1e-3)
    assert torch.equal(am, am_ref) and torch.equal(y, y_ref)
    assert am.sum(dim=1).tolist() == ref["lengths"].tolist()


SHARES = json.loads((Path(__file__).resolve().parents[2] / "configs" /
                     "train.shares.example.json").read_text())["train"]


def _three_sources():
    """Uneven pools: the table, not the counts, must set the mix."""
    counts = {"studio": 50, "phone": 7, "field": 23}
    src = [s for s, n in counts.items() for _ in range(n)]
    return pd.DataFrame({"label": ["bonafide"] * 80 + ["spoof"] * 80, "source": src * 2})


def test_a_share_table_is_realised_over_an_epoch_within_its_tolerance():
    df, table, tol = _three_sources(), SHARES["source_mix"], SHARES["share_tol"]
    s = tdata.Sampler(df, batch_size=64, mix=table, seed=3, share_tol=tol)
    plan = s.epoch_plan(1, n_batches=25)
    got = df.iloc[plan.ravel()].value_counts()  # (label, source) -> clips over the epoch
    for label, want in table.items():
        n = got[label].sum()
        assert n == 25 * 32
        for source, share in want.items():
            assert abs(got[label][source] / n - share) <= tol, (label, source)
    np.testing.assert_array_equal(plan, tdata.Sampler(df, 64, table, seed=3).epoch_plan(1, 25))
    assert not np.array_equal(plan, tdata.Sampler(df, 64, table, seed=4).epoch_plan(1, 25))
    # a share of 0: that source is never drawn and is listed, not dropped silently
    zero = {**table, "spoof": {"studio": 0.7, "phone": 0.3, "field": 0}}
    z = tdata.Sampler(df, 64, zero, seed=0, share_tol=tol)
    assert z.without_quota == ["spoof|field"]


def test_a_share_table_names_the_fix_when_it_does_not_fit_the_rows_or_the_batch():
    df, table = _three_sources(), SHARES["source_mix"]
    with pytest.raises(terrors.ConfigError, match=r"no spoof clips .*\['field', 'phone', 'studio'"):
        tdata.Sampler(df, 64, {**table, "spoof": {"studio": 0.5, "radio": 0.5}}, seed=0)
    with pytest.raises(terrors.ConfigError, match=r"no share to source\(s\) \['field'\]"):
        tdata.Sampler(df, 64, {**table, "spoof": {"studio": 0.5, "phone": 0.5}}, seed=0)
    # 4 clips per class cannot make 25/35/40: refused before training, with the batch that fits
    with pytest.raises(terrors.ShareDrift, match=r"batch_size >= \d+") as err:
        tdata.Sampler(df, 8, table, seed=0, share_tol=0.02)
    assert err.value.code == terrors.EXIT_SHARES == 11


@pytest.mark.parametrize("bad, fix", [
    ({"bonafide": {"a": 1.0}}, "give exactly"),
    ({"bonafide": {"a": 0.5, "b": 0.4}, "spoof": {"a": 1.0}}, "sum to 0.9"),
    ({"bonafide": {"a": 1.5, "b": -0.5}, "spoof": {"a": 1.0}}, ">= 0"),
    ({"bonafide": {}, "spoof": {"a": 1.0}}, "non-empty"),
    ("weighted", "table of shares"),
])
def test_a_bad_share_table_is_a_config_error_that_names_the_fix(bad, fix):
    with pytest.raises(terrors.ConfigError, match=fix):
        tcfg.resolve_config("fold", 0, overrides={"train": {"source_mix": bad}})


def test_realised_shares_that_drift_from_the_table_in_one_epoch_stop_the_run():
    tc = tcfg.TrainConfig(source_mix=SHARES["source_mix"], share_tol=0.02)
    log = rates.RateLog()

    def epoch(extra_studio_spoof=0):
        for label, want in SHARES["source_mix"].items():
            for source, share in want.items():
                for _ in range(round(share * 1000)):
                    log.record(source, label, "none")
        for _ in range(extra_studio_spoof):
            log.record("studio", "spoof", "none")

    meta: dict = {}
    epoch()
    assert tshares.check_realised(tc, log, meta)["status"] == "within"
    # epoch 2: 60 more studio spoof clips: 680/1060 = 0.64 > 0.62 + 0.02 in this epoch (over
    # both epochs 1300/2060 = 0.631 would pass: the check is per epoch)
    epoch(extra_studio_spoof=60)
    with pytest.raises(terrors.ShareDrift, match="spoof/studio"):
        tshares.check_realised(tc, log, meta)
    assert meta["source_mix"]["status"] == "drifted"
    assert meta["source_mix"]["realised"]["spoof"]["studio"] == pytest.approx(680 / 1060)
    assert meta["source_mix"]["clips"] == {"bonafide": 1000, "spoof": 1060}
