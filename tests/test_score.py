"""hearsay.evaluate.score on a small hand-made bundle (docs/INTERFACES.md layout) and tiny random
runs.

`make_bundle` and `make_run` are reused by test_assemble / test_report.
"""

import copy
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from fakes.fake_runs import TREE_SHA, make_bundle, make_run

from hearsay.contracts import score_file
from hearsay.detector.model import load_detector
from hearsay.evaluate import score
from hearsay.sound import audio, example
from hearsay.sound import bundle_inputs as inputs

SR = audio.SAMPLE_RATE


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("score")
    bundle = make_bundle(root / "bundle")
    runs = {k: make_run(root / f"fold{k}", fold=k, seed=k) for k in range(3)}
    runs["full"] = make_run(root / "full", job="full", fold=None, seed=9)
    return bundle, runs


def test_scores_are_the_models_logits_on_the_training_front_end(world):
    bundle, runs = world
    df, side = score.score_split(bundle, runs["full"], "holdout")
    rows = bundle.manifest[bundle.manifest["fold"] == "holdout"]
    assert list(df["path"]) == list(rows["path"]) and list(df.columns) == score_file.COLUMNS
    det, _ = load_detector(runs["full"])
    for (_, r), logit in zip(rows.iterrows(), df["logit"], strict=True):
        x = example.test_input(audio.load_audio(bundle.root / r["flac"]), 8.0)
        with torch.inference_mode():
            one = det(torch.from_numpy(x)[None], torch.ones(1, len(x), dtype=torch.int64))
        assert logit == pytest.approx(float(one), abs=1e-4)  # batched+padded == alone
    assert np.allclose(df["score"], 1 / (1 + np.exp(-df["logit"])))
    assert side["weights_sha256"] and side["bundle_tree_sha"] == TREE_SHA


def test_feeding_processes_give_the_same_scores_in_manifest_order(world):
    bundle, runs = world
    cfg = score.ScoreConfig(max_batch=1)  # a batch per clip, so the workers run ahead
    alone, side_alone = score.score_split(bundle, runs["full"], "holdout", cfg=cfg, augmented=True)
    fed, side_fed = score.score_split(bundle, runs["full"], "holdout", cfg=cfg, augmented=True,
                                      workers=2)
    assert len(score.length_batches([1] * len(fed), cfg)) == len(fed) >= 4
    pd.testing.assert_frame_equal(alone, fed)  # bit for bit: the same inputs, the same model
    assert side_alone == side_fed  # how the batches were fed is not part of a score's identity


def test_a_feeding_worker_hands_over_padded_batches_through_shared_memory(world):
    bundle, _ = world
    rows = bundle.manifest[bundle.manifest["fold"] == "holdout"]
    cfg = score.ScoreConfig(max_batch=2)
    augs = ["none"] * len(rows)
    fed = score.feed_rows(bundle.root, rows, augs, cfg, workers=1)
    n = 0
    for batch, (values, mask) in zip(fed.batches, fed.inputs, strict=True):
        # torch tensors arrive as shared-memory handles; numpy arrays would be pickled by pipe
        assert isinstance(values, torch.Tensor) and values.is_shared() and mask.is_shared()
        waves = [inputs.model_input(bundle.root, fed.recs[i], "none", cfg) for i in batch]
        v, m = audio.pad_batch(waves, [len(w) for w in waves])
        assert np.array_equal(values.numpy(), v) and np.array_equal(mask.numpy(), m)
        n += len(batch)
    assert n == len(rows) and len(fed.batches) >= 2


def test_a_feeding_worker_s_unreadable_clip_is_bad_input(world, tmp_path):
    bundle, runs = world
    root = tmp_path / "bundle"
    shutil.copytree(bundle.root, root)
    rows = bundle.manifest[bundle.manifest["fold"] == "holdout"]
    (root / rows.iloc[0]["flac"]).write_bytes(b"fLaC not really")
    broken = copy.copy(bundle)
    broken.root = root
    with pytest.raises(score.ScoreError, match="unreadable"):
        score.score_split(broken, runs["full"], "holdout", workers=1)


def test_max_s_caps_what_the_model_sees(world):
    bundle, runs = world
    short, _ = score.score_split(bundle, runs["full"], "holdout", cfg=score.ScoreConfig(max_s=0.5))
    full, _ = score.score_split(bundle, runs["full"], "holdout")
    assert not np.allclose(short["logit"], full["logit"])


def test_inner_oof_scores_only_the_runs_own_fold_and_never_extra_rows(world):
    bundle, runs = world
    df, side = score.score_split(bundle, runs[2], "inner_oof")
    m = bundle.manifest
    want = m[(m["fold"] == "2") & (m["train_scope"] == "core")]["path"]
    assert list(df["path"]) == list(want) and side["fold"] == 2
    assert (df["split"] == "inner_oof").all() and (df["fold"] == "2").all()


@pytest.mark.parametrize("run, split, fold", [("full", "inner_oof", 0), (1, "inner_oof", 0)])
def test_a_model_never_scores_inner_rows_it_trained_on(world, run, split, fold):
    bundle, runs = world
    with pytest.raises(score.ScoreRefused):
        score.score_split(bundle, runs[run], split, fold)


def test_a_run_from_another_bundle_is_refused(world, tmp_path):
    bundle, _ = world
    other = make_run(tmp_path / "other", job="full", fold=None, tree_sha="x" * 40)
    with pytest.raises(score.ScoreRefused, match="bundle"):
        score.score_split(bundle, other, "holdout")


def test_augmented_slice_is_fixed_and_the_same_for_every_model(world):
    bundle, runs = world
    a, _ = score.score_split(bundle, runs["full"], "holdout", augmented=True)
    b, _ = score.score_split(bundle, runs[0], "holdout", augmented=True)
    clean, _ = score.score_split(bundle, runs["full"], "holdout")
    assert list(a["augmentation"]) == list(b["augmentation"])
    assert list(a["codec"]) == list(b["codec"])
    assert not np.allclose(a["logit"], clean["logit"])
    again, _ = score.score_split(bundle, runs["full"], "holdout", augmented=True)
    assert np.array_equal(again["logit"], a["logit"])


def test_augmentation_plan_depends_on_clip_id_and_seed_only():
    rows = pd.DataFrame({"id": [f"clip{i}" for i in range(60)], "codec_ids": "mp3;opus"})
    plan = inputs.aug_plan(rows, 7)
    assert len(set(plan)) >= 4  # clips differ: not one draw for all
    assert "trim_jitter" not in plan and "none" not in plan  # test-time types, one per clip
    assert inputs.aug_plan(rows.iloc[::-1], 7) == plan[::-1]  # order / subset free
    assert inputs.aug_plan(rows.iloc[10:20], 7) == plan[10:20]
    assert inputs.aug_plan(rows, 8) != plan


def test_length_batches_group_similar_lengths_under_the_budget():
    cfg = score.ScoreConfig(batch_seconds=4.0, max_batch=3)
    lengths = [SR, 3 * SR, SR // 2, SR, 2 * SR]
    batches = score.length_batches(lengths, cfg)
    assert sorted(i for b in batches for i in b) == list(range(5))
    for b in batches:
        assert len(b) <= 3 and lengths[b[0]] * len(b) <= 4 * SR
        assert lengths[b[0]] == max(lengths[i] for i in b)


def test_cli_writes_csv_and_sidecar(world, tmp_path, monkeypatch):
    bundle, runs = world
    monkeypatch.setattr(score, "load_bundle", lambda _p: bundle)  # hand-made bundle object
    out = tmp_path / "t.csv"
    rc = score.main(["--bundle", str(bundle.root), "--run", str(runs["full"]), "--split", "test",
                     "-o", str(out)])
    assert rc == 0
    df = pd.read_csv(out)
    assert list(df.columns) == score_file.COLUMNS and len(df) == 3
    side = json.loads(score_file.sidecar(out).read_text())
    assert side["split"] == "test" and side["n_rows"] == 3
    rc = score.main(["--bundle", str(bundle.root), "--run", str(runs["full"]), "--split",
                     "inner_oof", "--fold", "1", "-o", str(tmp_path / "x.csv")])
    assert rc == 4


def test_cli_a_run_without_its_meta_or_its_weights_is_bad_input_naming_the_fix(
        world, tmp_path, monkeypatch, capsys):
    import shutil

    bundle, runs = world
    monkeypatch.setattr(score, "load_bundle", lambda _p: bundle)
    bare = tmp_path / "bare"
    bare.mkdir()
    unfinished = tmp_path / "unfinished"
    shutil.copytree(runs["full"], unfinished)
    (unfinished / "final" / "model.safetensors").unlink()
    for run, said in ((bare, "no run_meta.json at or above"),
                      (unfinished, "no final/model.safetensors under")):
        rc = score.main(["--bundle", str(bundle.root), "--run", str(run), "--split", "test",
                         "-o", str(tmp_path / "x.csv")])
        err = capsys.readouterr().err
        assert rc == score.EXIT_BAD_INPUT and err.startswith(f"hearsay score: {said} {run}")
        assert "(pass a run dir" in err or "(is the run complete?" in err
    assert not (tmp_path / "x.csv").exists()


def test_cli_on_a_real_bundle_scores_clean_and_augmented_holdout(demo_bundle, tmp_path):
    run = make_run(tmp_path / "full", job="full", fold=None, tree_sha=demo_bundle.tree_sha)
    m = demo_bundle.manifest
    want = list(m[(m["fold"] == "holdout") & (m["train_scope"] == "core")]["path"])
    for extra in ([], ["--augmented"]):
        out = tmp_path / f"h{len(extra)}.csv"
        rc = score.main(["--bundle", str(demo_bundle.root), "--run", str(run), "--split",
                         "holdout", "-o", str(out), *extra])
        assert rc == 0
        df = pd.read_csv(out, keep_default_na=False)
        assert list(df["path"]) == want and np.isfinite(df["logit"]).all()
    from hearsay.sound.augment import CODECS

    assert set(df["codec"]) - {""} <= set(CODECS) and "augmentation" in df
    assert score.main(["--bundle", str(tmp_path / "nope"), "--run", str(run), "--split", "test",
                       "-o", str(tmp_path / "x.csv")]) == 3
