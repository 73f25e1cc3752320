"""hearsay.bundle: layout, trimming, tree-sha, resume, thresholds, missing encoders, diagnostics."""

import json
import os
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from hearsay.bundle import build as bundle
from hearsay.bundle.build import BundleConfig, build_bundle
from hearsay.contracts import codec_recipe
from hearsay.contracts.bundle import BundleError, load_bundle
from hearsay.sound import audio

SR = audio.SAMPLE_RATE
COLS = ["id", "path", "label", "generator", "source", "group", "fold", "train_scope"]


def tone(seconds, freq=300.0, amp=0.4):
    t = np.arange(int(seconds * SR)) / SR
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def corpus(tmp_path, clips):
    """clips: [(id, wave or bytes, {manifest overrides})] -> manifest path (16 kHz PCM_16 WAVs)."""
    root = tmp_path / "corpus"
    (root / "a").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (rid, wave, over) in enumerate(clips):
        p = root / "a" / f"{rid}.wav"
        if isinstance(wave, bytes):
            p.write_bytes(wave)
        else:
            sf.write(p, wave, SR, subtype="PCM_16")
        label = over.get("label", "bonafide" if i % 2 == 0 else "spoof")
        rows.append({"id": rid, "path": f"a/{rid}.wav", "label": label,
                     "generator": "bonafide" if label == "bonafide" else "voc-a",
                     "source": "s", "group": f"g{i}", "fold": str(i % 5),
                     "train_scope": "core", **over})
    pd.DataFrame(rows, columns=COLS).to_csv(root / "manifest.csv", index=False)
    return root / "manifest.csv"


def build(manifest, out, **kw):
    cfg = BundleConfig(**{"codecs": (), "workers": 1, **kw})
    return build_bundle(manifest, out, None, cfg, progress=False)


def test_demo_bundle_layout_follows_the_interface(demo_bundle):
    m, root = demo_bundle.manifest, demo_bundle.root
    assert list(m.columns) == COLS + ["duration", "codec_ids", "flac"]
    assert demo_bundle.meta["encoders_missing"] == [] and demo_bundle.meta["failed"] == []
    for _, row in m.iterrows():
        info = sf.info(root / row["flac"])
        assert (info.samplerate, info.channels, info.subtype) == (SR, 1, "PCM_16")
        assert info.frames / SR == pytest.approx(row["duration"], abs=1e-3) and info.frames
        assert row["codec_ids"].split(";") == ["mp3", "opus", "aac", "amrnb", "mulaw"]
        for c in row["codec_ids"].split(";"):
            assert sf.info(demo_bundle.flac(row["id"], c)).samplerate == SR
    assert demo_bundle.meta["counts"]["codec_copies"] == 5 * len(m)


def test_tree_sha_equals_the_documented_shell_pipeline(demo_bundle):
    cmd = ("find manifest.csv selection.json audio codecs -type f | LC_ALL=C sort "
           "| xargs sha256sum | sha256sum | cut -d' ' -f1")
    out = subprocess.run(["bash", "-c", cmd], cwd=demo_bundle.root, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == demo_bundle.tree_sha == load_bundle(demo_bundle.root, verify=True).tree_sha


def test_a_changed_file_fails_verification(tmp_path, demo_bundle):
    copy = shutil.copytree(demo_bundle.root, tmp_path / "b")
    f = copy / demo_bundle.manifest["flac"].iloc[0]
    x, _ = sf.read(f, dtype="int16")
    x[0] ^= 1
    sf.write(f, x, SR, subtype="PCM_16", format="FLAC")
    with pytest.raises(BundleError, match="tree-sha .* != recorded"):
        load_bundle(copy, verify=True)


def test_bundle_trims_silence_from_clips_and_codec_copies(tmp_path):
    x = np.concatenate([np.zeros(SR), tone(1.0), np.zeros(int(0.7 * SR))])
    m = corpus(tmp_path, [("pad", x, {})])
    meta = build(m, tmp_path / "b", codecs=("mp3", "mulaw"))
    b = load_bundle(tmp_path / "b")
    assert b.manifest["duration"].iloc[0] == pytest.approx(1.0, abs=0.05)  # 25 ms frames
    for c in ("mp3", "mulaw"):
        assert sf.info(b.flac("pad", c)).duration == pytest.approx(1.0, abs=0.08), c
    assert meta["counts"]["codec_copies"] == 2


def test_codec_copies_are_re_trimmed_capped_and_peak_guarded():
    z = np.concatenate([np.zeros(SR // 2), tone(20.0, amp=1.5), np.zeros(SR // 3)])
    y = codec_recipe.finish_copy(z, audio.TRIM_TOP_DB, 15.0)
    assert len(y) == 15 * SR and np.max(np.abs(y)) <= audio.PEAK + 1e-6
    assert np.argmax(np.abs(y) > 0.1) < audio.TRIM_FRAME  # the tone starts within one frame
    assert len(codec_recipe.finish_copy(np.zeros(SR, np.float32), audio.TRIM_TOP_DB, 15.0)) == 0


def test_resume_reuses_a_flac_only_while_its_source_is_unchanged(tmp_path):
    m = corpus(tmp_path, [(f"c{i}", tone(0.8 + 0.1 * i, 200 + 50 * i), {}) for i in range(4)])
    first = build(m, tmp_path / "b", codecs=("mulaw",))
    again = build(m, tmp_path / "b", codecs=("mulaw",))
    assert again["counts"]["reused"] == 4 and again["tree_sha"] == first["tree_sha"]
    src = m.parent / "a" / "c2.wav"
    sf.write(src, tone(1.5, 500), SR, subtype="PCM_16")
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**9))
    third = build(m, tmp_path / "b", codecs=("mulaw",))
    assert third["counts"]["reused"] == 3 and third["tree_sha"] != first["tree_sha"]
    assert load_bundle(tmp_path / "b").manifest.set_index("id").loc["c2", "duration"] == \
        pytest.approx(1.5, abs=0.05)
    other = build(m, tmp_path / "b", codecs=("mulaw",), max_s=1.0)  # new settings: no reuse
    assert other["counts"]["reused"] == 0


def test_an_interrupted_build_resumes_and_never_looks_finished(tmp_path, monkeypatch):
    m = corpus(tmp_path, [(f"c{i}", tone(0.6 + 0.05 * i, 200 + 30 * i), {}) for i in range(6)])
    build(m, tmp_path / "b")
    real, calls = bundle.process_clip, []

    def dies_on_the_fifth(task):
        calls.append(task["id"])
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(bundle, "STAMP_EVERY", 2)
    monkeypatch.setattr(bundle, "process_clip", dies_on_the_fifth)
    with pytest.raises(KeyboardInterrupt):
        build(m, tmp_path / "b", max_s=5.0)  # new settings: every clip is redone
    with pytest.raises(BundleError, match="no bundle_meta.json"):
        load_bundle(tmp_path / "b")
    monkeypatch.setattr(bundle, "process_clip", real)
    assert build(m, tmp_path / "b", max_s=5.0)["counts"]["reused"] == 4


def test_parallel_build_equals_serial_build(tmp_path):
    m = corpus(tmp_path, [(f"c{i}", tone(0.7 + 0.2 * i, 150 + 40 * i), {}) for i in range(6)])
    one = build(m, tmp_path / "one", codecs=("mulaw",), workers=1)
    two = build(m, tmp_path / "two", codecs=("mulaw",), workers=2)
    assert one["tree_sha"] == two["tree_sha"]


def test_decode_failures_over_the_threshold_fail_the_build_and_are_listed(tmp_path, capsys):
    clips = [(f"c{i}", tone(1.0, 200 + 30 * i), {}) for i in range(4)]
    m = corpus(tmp_path, clips + [("junk", b"not audio\n", {})])
    args = [str(m), str(tmp_path / "b"), "--codecs", "", "--workers", "1", "--no-progress"]
    assert bundle.main(args) == bundle.EXIT_TOO_MANY_FAILURES
    err = capsys.readouterr()
    assert "junk (a/junk.wav): undecodable" in err.out and "build failed" in err.err
    meta = json.loads((tmp_path / "b" / bundle.META).read_text())
    assert meta["status"] == "failed" and meta["failed"][0]["id"] == "junk"
    with pytest.raises(BundleError, match="the build failed"):
        load_bundle(tmp_path / "b")
    assert bundle.main(args + ["--max-fail-frac", "0.25"]) == 0  # 1/5 = 20 % allowed knowingly
    assert "junk" not in set(load_bundle(tmp_path / "b").manifest["id"])


def test_missing_encoder_is_recorded_and_its_copies_skipped(tmp_path, monkeypatch):
    from fakes.fake_ffmpeg import fake_ffmpeg_without

    monkeypatch.setenv("HEARSAY_FFMPEG", fake_ffmpeg_without(tmp_path, "libopus"))
    m = corpus(tmp_path, [("c0", tone(1.0), {})])
    meta = build(m, tmp_path / "b", codecs=("opus", "mulaw"))
    assert meta["encoders_missing"] == ["opus"] and meta["codecs"] == ["mulaw"]
    assert load_bundle(tmp_path / "b").manifest["codec_ids"].tolist() == ["mulaw"]
    assert not (tmp_path / "b" / "codecs" / "opus").exists()


def test_a_planted_leading_silence_shortcut_is_flagged(tmp_path):
    clips = [(f"c{i}", np.concatenate([np.zeros(SR if i % 2 else 0), tone(1.0, 200 + 20 * i)]),
              {}) for i in range(10)]  # every spoof (odd i) starts with 1 s of silence
    meta = build(corpus(tmp_path, clips), tmp_path / "b")
    diag = json.loads((tmp_path / "b" / bundle.DIAG).read_text())
    assert diag["trivial_feature_auc"]["core"]["lead_silence_s"] == 1.0
    assert any("lead_silence_s" in w and "scope core" in w for w in meta["warnings"])


def test_the_demo_corpus_has_no_trivial_feature_shortcut(demo_bundle):
    diag = json.loads((demo_bundle.root / bundle.DIAG).read_text())
    core = diag["trivial_feature_auc"]["core"]
    for f in ("duration_s", "peak", "lead_silence_s"):
        assert max(core[f], 1 - core[f]) < diag["auc_gate"]["warn_at"], f


def test_a_core_clip_identical_to_a_test_clip_is_reported(tmp_path):
    x = tone(1.2, 333.0)
    clips = [("c0", x, {}), ("c1", tone(1.0, 250.0), {}), ("t0", x, {"fold": "test"})]
    build(corpus(tmp_path, clips), tmp_path / "b")
    diag = json.loads((tmp_path / "b" / bundle.DIAG).read_text())
    assert diag["core_identical_to_test"] == ["c0"]
    assert diag["duplicates_across_scopes"][0]["ids"] == ["c0", "t0"]


def test_extra_generator_from_a_holdout_family_refuses_the_build(tmp_path, capsys):
    clips = [("h0", tone(1.0), {"fold": "holdout", "label": "spoof", "generator": "phq-a"}),
             ("i0", tone(1.0), {"fold": "0", "label": "spoof", "generator": "voc-a"}),
             ("x0", tone(1.0), {"fold": "extra", "label": "spoof", "generator": "phq-x",
                                "train_scope": "extra"})]
    m = corpus(tmp_path, clips)
    assert bundle.main([str(m), str(tmp_path / "b"), "--codecs", ""]) == bundle.EXIT_REJECTED
    assert "holdout families ['phq']" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_empty_folds_need_a_fold_file_and_a_tampered_one_refuses(tmp_path, demo_corpus,
                                                                 demo_splits, capsys):
    out = str(tmp_path / "b")
    assert bundle.main([str(demo_corpus), out]) == bundle.EXIT_REJECTED
    assert "empty fold" in capsys.readouterr().err
    bad = shutil.copytree(demo_splits.parent, tmp_path / "s") / demo_splits.name
    bad.write_text(bad.read_text().replace('"holdout"', '"0"', 1))
    assert bundle.main([str(demo_corpus), out, "--folds", str(bad)]) == bundle.EXIT_REJECTED
    assert "does not match the pinned" in capsys.readouterr().err


def test_an_unexpected_error_in_one_clip_is_listed_and_the_batch_goes_on(tmp_path, monkeypatch):
    real = audio.trim_silence

    def flaky(x, **kw):
        if len(x) == int(1.3 * SR):
            raise IndexError("boom")
        return real(x, **kw)

    monkeypatch.setattr(audio, "trim_silence", flaky)
    m = corpus(tmp_path, [("a", tone(1.0), {}), ("b", tone(1.3), {}), ("c", tone(1.1), {})])
    meta = build(m, tmp_path / "b", max_fail_frac=0.5)
    assert meta["failed"] == [{"id": "b", "path": "a/b.wav",
                               "reason": "internal error IndexError: boom"}]
    assert meta["counts"]["ok"] == 2
