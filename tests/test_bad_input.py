"""Bad input through `hearsay bundle`: every kind gets one clear, listed outcome; nothing crashes
the batch; nothing undecodable reaches the bundle manifest (so nothing is silently scored)."""

import json
import subprocess

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from hearsay.bundle import build as bundle
from hearsay.bundle.build import BundleConfig, build_bundle
from hearsay.contracts.bundle import load_bundle
from hearsay.sound import audio, decoder

SR = audio.SAMPLE_RATE


def speechy(seconds, rate=SR):
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
            ).astype(np.float32)


def _ffmpeg(src, dst, *args):
    subprocess.run([decoder.ffmpeg_exe(), "-v", "error", "-y", "-i", str(src), *args, str(dst)],
                   check=True)


def write_cases(d):
    """{id: (file name, expected status, words in the reason / note, expected duration s)}"""
    sf.write(d / "ref.wav", speechy(2.0), SR, subtype="PCM_16")
    ref = (d / "ref.wav").read_bytes()
    (d / "empty.wav").write_bytes(b"")
    (d / "text.wav").write_text("definitely not a RIFF file\n" * 20)
    (d / "truncated.wav").write_bytes(ref[: 44 + (len(ref) - 44) // 2])  # half its data
    (d / "header_only.wav").write_bytes(ref[:44])
    bad = speechy(1.0)
    bad[100] = np.nan
    sf.write(d / "nan.wav", bad, SR, subtype="FLOAT")
    bad[100] = np.inf
    sf.write(d / "inf.wav", bad, SR, subtype="FLOAT")
    sf.write(d / "u8.wav", speechy(1.0), SR, subtype="PCM_U8")
    st = speechy(1.5, 48_000)
    sf.write(d / "stereo48.wav", np.stack([st, 0.5 * st], axis=1), 48_000, subtype="PCM_16")
    sf.write(d / "long40.wav", speechy(40.0), SR, subtype="PCM_16")
    sf.write(d / "silent.wav", np.zeros(SR, np.float32), SR, subtype="PCM_16")
    sf.write(d / "short.wav", np.concatenate([np.zeros(SR), speechy(0.3), np.zeros(SR)]), SR,
             subtype="PCM_16")
    _ffmpeg(d / "ref.wav", d / "clip.mp3", "-c:a", "libmp3lame")
    _ffmpeg(d / "ref.wav", d / "clip.m4a", "-c:a", "aac")
    _ffmpeg(d / "ref.wav", d / "clip.opus", "-c:a", "libopus")
    _ffmpeg(d / "ref.wav", d / "clip.amr", "-ar", "8000", "-c:a", "libopencore_amrnb")
    return {
        "empty": ("empty.wav", "failed", "empty file (0 bytes)", None),
        "text": ("text.wav", "failed", "undecodable", None),
        "truncated": ("truncated.wav", "ok", "truncated WAV", 1.0),
        "header_only": ("header_only.wav", "failed", "no audio samples", None),
        "nan": ("nan.wav", "failed", "NaN or inf", None),
        "inf": ("inf.wav", "failed", "NaN or inf", None),
        "missing": ("nowhere.wav", "failed", "file not found", None),
        "u8": ("u8.wav", "ok", "", 1.0),
        "stereo48": ("stereo48.wav", "ok", "", 1.5),
        "long40": ("long40.wav", "ok", "", 15.0),  # capped at 15 s
        "silent": ("silent.wav", "dropped", "silent", None),
        "short": ("short.wav", "dropped", "too short after trimming", None),
        "mp3": ("clip.mp3", "ok", "", 2.0),
        "m4a": ("clip.m4a", "ok", "", 2.0),
        "opus": ("clip.opus", "ok", "", 2.0),
        "amr": ("clip.amr", "ok", "", 2.0),
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    (root / "a").mkdir()
    cases = write_cases(root / "a")
    rows = [{"id": cid, "path": f"a/{name}", "label": "bonafide" if i % 2 else "spoof",
             "generator": "bonafide" if i % 2 else "voc-a", "source": "s", "group": f"g{i}",
             "fold": str(i % 5), "train_scope": "core"}
            for i, (cid, (name, *_)) in enumerate(cases.items())]
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    cfg = BundleConfig(codecs=("mulaw",), workers=2, max_fail_frac=1.0)  # failures on purpose
    meta = build_bundle(root / "manifest.csv", root / "b", None, cfg, progress=False)
    return cases, meta, root / "b"


CASES = ["empty", "text", "truncated", "header_only", "nan", "inf", "missing", "u8", "stereo48",
         "long40", "silent", "short", "mp3", "m4a", "opus", "amr"]


@pytest.mark.parametrize("cid", CASES)
def test_each_bad_input_gets_its_listed_outcome(built, cid):
    cases, meta, root = built
    _, status, words, duration = cases[cid]
    listed = {i["id"]: i for i in meta["failed"] + meta["dropped"]}
    in_bundle = load_bundle(root).manifest.set_index("id")
    if status == "ok":
        assert cid in in_bundle.index and cid not in listed
        assert in_bundle.loc[cid, "duration"] == pytest.approx(duration, abs=0.06)
        info = sf.info(root / in_bundle.loc[cid, "flac"])
        assert (info.samplerate, info.channels) == (SR, 1)
        notes = {n["id"]: n["note"] for n in meta["notes"]}
        assert (words in notes.get(cid, "")) if words else cid not in notes
    else:
        assert cid not in in_bundle.index  # never reaches training or scoring
        assert cid in [i["id"] for i in meta[status]] and words in listed[cid]["reason"]


def test_every_row_is_accounted_for_exactly_once(built):
    cases, meta, root = built
    ok = list(load_bundle(root).manifest["id"])
    listed = [i["id"] for i in meta["failed"] + meta["dropped"]]
    assert sorted(ok + listed) == sorted(cases)
    assert meta["counts"]["failed"] == 6 and meta["counts"]["dropped"] == 2
    assert json.loads((root / bundle.META).read_text())["fail_frac"] == pytest.approx(6 / 16)


def test_a_capped_clip_and_its_codec_copy_stay_at_15_s(built):
    _, _, root = built
    b = load_bundle(root)
    assert sf.info(b.flac("long40", "mulaw")).duration == pytest.approx(15.0, abs=0.05)


def test_the_default_threshold_fails_this_batch(tmp_path, built):
    """6 failures in 16 rows is far above 0.5 %: without the explicit option the build fails."""
    _, _, root = built
    manifest = root.parent / "manifest.csv"
    args = [str(manifest), str(tmp_path / "b"), "--codecs", "", "--no-progress"]
    assert bundle.main(args) == bundle.EXIT_TOO_MANY_FAILURES
