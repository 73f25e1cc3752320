"""hearsay.demo.corpus: the synthetic corpus has the shape every later stage needs."""

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from hearsay.contracts.manifest import read_manifest
from hearsay.demo import corpus as dd


@pytest.fixture(scope="module")
def rows():
    return pd.DataFrame(dd.layout(dd.DemoDataConfig()))


def test_layout_has_every_kind_of_row(rows):
    assert set(rows["label"]) == {"bonafide", "spoof"}
    assert set(rows["generator"]) == {"bonafide", *dd.INNER_GENERATORS, *dd.HOLDOUT_GENERATORS,
                                      *dd.EXTRA_GENERATORS}
    assert set(rows["fmt"]) == {"wav", "stereo48", "flac22", "u8", "mp3", "m4a"}
    assert set(rows.loc[rows["fold"] == "test", "group"]) == {"test00", "test01", "test02"}
    assert (rows["train_scope"] == "extra").sum() == 12
    assert 120 <= len(dd.manifest_rows()) <= 200


def test_holdout_family_lives_only_in_holdout_groups(rows):
    core = rows[(rows["train_scope"] == "core") & (rows["fold"] != "test")]
    phq = core["generator"].str.startswith("phq")
    assert core.loc[phq, "group"].str.startswith("hold").all()
    assert not core.loc[~phq & (core["label"] == "spoof"), "group"].str.startswith("hold").any()


def test_every_inner_group_holds_both_classes(rows):
    inner = rows[rows["group"].str.startswith("spk") & (rows["train_scope"] == "core")]
    assert (inner.groupby("group")["label"].nunique() == 2).all()


def test_lengths_are_drawn_alike_for_both_classes(rows):
    from sklearn.metrics import roc_auc_score

    auc = roc_auc_score(rows["label"] == "spoof", rows["seconds"])
    assert 0.3 < auc < 0.7


def test_manifest_rows_match_the_written_corpus(demo_corpus, small_demo_config):
    df = read_manifest(demo_corpus)
    assert df.to_dict("records") == dd.manifest_rows(small_demo_config)
    fmts = {r["id"]: r["fmt"] for r in dd.layout(small_demo_config)}
    for rid, rel in zip(df["id"], df["path"], strict=True):
        p = demo_corpus.parent / rel
        assert p.is_file() and p.stat().st_size > 0
        if fmts[rid] == "stereo48":
            assert (sf.info(p).samplerate, sf.info(p).channels) == (48_000, 2)
        if fmts[rid] == "u8":
            assert sf.info(p).subtype == "PCM_U8"
    assert "SYNTHETIC" in (demo_corpus.parent / "README.txt").read_text()


def test_synthesis_is_deterministic_and_bounded():
    a = dd.synth_clip("smear-a", "field", 1.5, 150.0, np.random.default_rng(3))
    b = dd.synth_clip("smear-a", "field", 1.5, 150.0, np.random.default_rng(3))
    assert np.array_equal(a, b) and a.dtype == np.float32
    assert 0.1 < np.max(np.abs(a)) <= 0.9


@pytest.mark.parametrize("gen", ["bonafide", "voc-a", "voc-b", "smear-b", "phq-a"])
def test_every_generator_makes_a_finite_clip(gen):
    x = dd.synth_clip(gen, "phone", 1.0, 120.0, np.random.default_rng(0))
    assert np.isfinite(x).all() and len(x) >= dd.SR


def test_bad_files_are_written_and_listed(tmp_path):
    cfg = dd.DemoDataConfig(inner_groups=1, per_group=1, holdout_groups=0, test_groups=0,
                            extra_rows=0, max_s=1.5, bad_files=True)
    assert dd.main([str(tmp_path), "--inner-groups", "1", "--per-group", "1",
                    "--holdout-groups", "0", "--test-groups", "0", "--extra-rows", "0",
                    "--max-s", "1.5"]) == 0
    df = read_manifest(tmp_path / "manifest.csv")
    assert df.to_dict("records") == dd.manifest_rows(cfg)
    assert {b[0] for b in dd.BAD} <= set(df["id"])
    assert (tmp_path / "audio" / "bad-header.wav").stat().st_size == 16


def test_the_limiter_sets_the_crest_factor_asked_for():
    x = dd.synth_clip("voc-b", "studio", 1.0, 120.0, np.random.default_rng(1)).astype(np.float64)
    y = dd._limit(x, 4.5)
    assert np.max(np.abs(y)) / np.sqrt(np.mean(y * y)) == pytest.approx(4.5, rel=1e-3)


@pytest.mark.parametrize("source", dd.SOURCES)
def test_the_peak_of_a_normalised_clip_does_not_tell_the_class(source):
    """The model sees trimmed, unit-variance input: its peak is the crest factor, which the
    artefacts (buzz, ripple, random phase) would otherwise raise for the synthetic class."""
    from sklearn.metrics import roc_auc_score

    from hearsay.sound import audio

    peaks, spoof = [], []
    for i in range(24):
        rng = np.random.default_rng([11, i])
        gen = dd.INNER_GENERATORS[i // 2 % 4] if i % 2 else "bonafide"
        x = dd.synth_clip(gen, source, rng.uniform(1.0, 2.0), rng.uniform(90, 220), rng)
        peaks.append(float(np.max(np.abs(audio.prepare(x, 8.0)))))
        spoof.append(i % 2 == 1)
    auc = roc_auc_score(spoof, peaks)
    assert 0.25 < auc < 0.75, f"{source}: peak AUC {auc:.2f} (spoof = positive)"


def test_a_bona_fide_clip_and_its_synthetic_partner_share_their_level(demo_corpus,
                                                                     small_demo_config):
    rows = dd.layout(small_demo_config)
    pairs = [(a, b) for a, b in zip(rows[0::2], rows[1::2], strict=False)
             if a["label"] != b["label"] and a["fmt"] == b["fmt"] == "wav"]
    assert len(pairs) >= 5
    for a, b in pairs:
        pa, pb = (np.max(np.abs(sf.read(demo_corpus.parent / "audio" / f"{r['id']}.wav")[0]))
                  for r in (a, b))
        assert pa == pytest.approx(pb, abs=1e-4), (a["id"], b["id"])
