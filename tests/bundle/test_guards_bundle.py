"""hearsay.bundle guards: the decode-failure gate's boundary, the resume stamp (size and mtime),
the peak guard on the main FLAC path, room noise trimmed before the FLAC is written, a resume that
rebuilds a clip whose codec copy is gone, and codec ids that name only copies written."""

import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from signals import speech_like, with_room_noise

from hearsay.bundle import build as bundle
from hearsay.bundle.build import BundleConfig, build_bundle
from hearsay.contracts.bundle import load_bundle
from hearsay.sound import audio, decoder

SR = audio.SAMPLE_RATE
COLS = ["id", "path", "label", "generator", "source", "group", "fold", "train_scope"]


def tone(seconds, freq=300.0, amp=0.4):
    t = np.arange(int(seconds * SR)) / SR
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def corpus(root, clips, subtype="PCM_16"):
    """clips: [(id, wave or bytes[, suffix])] -> manifest path; waves as 16 kHz WAVs in
    `subtype`, bytes as they are; labels alternate, one group per clip, inner folds 0..4."""
    (root / "a").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (rid, wave, *suffix) in enumerate(clips):
        p = root / "a" / f"{rid}{suffix[0] if suffix else '.wav'}"
        if isinstance(wave, bytes):
            p.write_bytes(wave)
        else:
            sf.write(p, wave, SR, subtype=subtype)
        label = "bonafide" if i % 2 == 0 else "spoof"
        rows.append({"id": rid, "path": f"a/{p.name}", "label": label,
                     "generator": "bonafide" if label == "bonafide" else "voc-a",
                     "source": "s", "group": f"g{i}", "fold": str(i % 5), "train_scope": "core"})
    pd.DataFrame(rows, columns=COLS).to_csv(root / "manifest.csv", index=False)
    return root / "manifest.csv"


def build(manifest, out, **kw):
    cfg = BundleConfig(**{"codecs": (), "workers": 1, **kw})
    return build_bundle(manifest, out, None, cfg, progress=False)


def test_decode_failures_exactly_at_max_fail_frac_pass_and_one_row_fewer_fails(tmp_path):
    # the build fails only when failed / rows > --max-fail-frac: 1 of 40 = 2.5 % is exactly it
    clips = [(f"c{i:02d}", tone(0.55, 150 + 9 * i)) for i in range(39)] + [("junk", b"no\n")]
    m = corpus(tmp_path / "corpus", clips)
    args = [str(m), str(tmp_path / "b"), "--codecs", "", "--workers", "1", "--no-progress",
            "--max-fail-frac", "0.025"]
    assert bundle.main(args) == 0
    meta = json.loads((tmp_path / "b" / bundle.META).read_text())
    assert (meta["status"], meta["counts"]["failed"], meta["counts"]["rows"]) == ("ok", 1, 40)
    assert len(load_bundle(tmp_path / "b").manifest) == 39
    # one good row fewer: 1 of 39 = 2.56 % > 2.5 % fails (the other clips are reused)
    df = pd.read_csv(m, dtype=str, keep_default_na=False)
    df[df["id"] != "c00"].to_csv(m, index=False)
    assert bundle.main(args) == bundle.EXIT_TOO_MANY_FAILURES
    assert json.loads((tmp_path / "b" / bundle.META).read_text())["status"] == "failed"


def test_resume_rebuilds_a_source_edited_to_the_same_byte_size(tmp_path):
    m = corpus(tmp_path / "corpus", [(f"c{i}", tone(0.8 + 0.1 * i, 200 + 50 * i))
                                     for i in range(3)])
    first = build(m, tmp_path / "b")
    src = m.parent / "a" / "c1.wav"
    size = src.stat().st_size
    sf.write(src, tone(0.9, 700.0), SR, subtype="PCM_16")  # same length, new content
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # an edit a second later
    assert src.stat().st_size == size
    again = build(m, tmp_path / "b")
    assert again["counts"]["reused"] == 2 and again["tree_sha"] != first["tree_sha"]
    flac = sf.read(tmp_path / "b" / "audio" / "c1.flac", dtype="float32")[0]
    np.testing.assert_allclose(flac, tone(0.9, 700.0), atol=1e-4)


def encoded(x: np.ndarray, tmp, suffix: str, encoder: str) -> bytes:
    """x as a float WAV, encoded by the real ffmpeg into `suffix` (64 kb/s)."""
    src, out = tmp / "src.wav", tmp / f"enc{suffix}"
    sf.write(src, x, SR, subtype="FLOAT")
    subprocess.run([decoder.ffmpeg_exe(), "-nostdin", "-v", "error", "-y", "-i", str(src),
                    "-c:a", encoder, "-b:a", "64k", str(out)], check=True)
    return out.read_bytes()


@pytest.mark.parametrize("suffix,encoder", [(".wav", None), (".mp3", "libmp3lame"),
                                            (".m4a", "aac")])
def test_a_source_louder_than_full_scale_is_scaled_to_the_peak_not_clipped(tmp_path, suffix,
                                                                          encoder):
    # a float WAV with overs (a DAW export), or an MP3/AAC that decodes above 1.0: peak ~1.5
    x = tone(1.0, 220.0, amp=1.5)
    loud = x if encoder is None else encoded(x, tmp_path, suffix, encoder)
    m = corpus(tmp_path / "corpus", [("loud", loud, suffix), ("ok", tone(1.0))],
               subtype="FLOAT")
    build(m, tmp_path / "b")
    decoded = audio.load_audio(m.parent / "a" / f"loud{suffix}")
    s, e = audio.trim_silence(decoded)  # a codec's onset delay is trimmed first
    src = decoded[s:e]
    top = float(np.max(np.abs(src)))
    assert top > 1.2, f"decoded peak {top}: load_audio clipped the overs (decode to float)"
    y = sf.read(tmp_path / "b" / "audio" / "loud.flac", dtype="float32")[0]
    assert len(y) == len(src)
    assert np.max(np.abs(y)) == pytest.approx(audio.PEAK, abs=2 / 32768)
    # the decoded wave scaled by 0.999 / peak, to 16-bit precision: no flattened crests
    np.testing.assert_allclose(y, src * (audio.PEAK / top), atol=2 / 32768)


def test_the_bundle_trims_room_noise_so_duration_and_lead_carry_no_shortcut(tmp_path):
    rng = np.random.default_rng(5)
    speech = [speech_like(1.2, rng), speech_like(1.2, rng)]
    clips = [("clean", speech[0]), ("roomy", with_room_noise(speech[1], 1.0, 0.7, 55.0, rng))]
    build(corpus(tmp_path / "corpus", clips), tmp_path / "b")
    m = load_bundle(tmp_path / "b").manifest.set_index("id")
    assert m.loc["roomy", "duration"] == pytest.approx(m.loc["clean", "duration"], abs=0.06)
    stamps = json.loads((tmp_path / "b" / bundle.STAMPS).read_text())["entries"]
    assert stamps["roomy"]["lead_s"] == pytest.approx(1.0, abs=0.03)


def test_resume_rebuilds_a_clip_whose_codec_copy_is_missing(tmp_path):
    m = corpus(tmp_path / "corpus", [(f"c{i}", tone(0.8 + 0.1 * i, 200 + 50 * i))
                                     for i in range(3)])
    first = build(m, tmp_path / "b", codecs=("mulaw",))
    lost = tmp_path / "b" / "codecs" / "mulaw" / "c1.flac"
    lost.unlink()  # the main FLAC and its stamp are intact: only the copy is gone
    again = build(m, tmp_path / "b", codecs=("mulaw",))
    assert again["counts"]["reused"] == 2 and lost.is_file()
    assert again["tree_sha"] == first["tree_sha"]
    assert load_bundle(tmp_path / "b", verify=True).manifest["codec_ids"].tolist() == \
        ["mulaw"] * 3


def test_manifest_codec_ids_list_only_the_copies_that_were_written(tmp_path, monkeypatch):
    from fakes.fake_ffmpeg import fake_ffmpeg_without

    monkeypatch.setenv("HEARSAY_FFMPEG", fake_ffmpeg_without(tmp_path, "libopus"))
    real, calls = bundle.codecs.roundtrip, []

    def second_silent_third_fails(y, names, tmp):
        calls.append(list(names))
        if len(calls) == 3:
            raise audio.AudioError(None, "codec encode failed (planted)")
        copies = real(y, names, tmp)
        return {n: 0 * z for n, z in copies.items()} if len(calls) == 2 else copies

    monkeypatch.setattr(bundle.codecs, "roundtrip", second_silent_third_fails)
    m = corpus(tmp_path / "corpus", [(f"c{i}", tone(1.0, 250 + 60 * i)) for i in range(3)])
    meta = build(m, tmp_path / "b", codecs=("opus", "mulaw"))
    assert calls == [["mulaw"]] * 3  # the missing encoder is never asked for
    b = load_bundle(tmp_path / "b")
    ids = dict(zip(b.manifest["id"], b.manifest["codec_ids"].fillna(""), strict=True))
    assert ids == {"c0": "mulaw", "c1": "", "c2": ""}
    for rid, listed in ids.items():  # every listed id names a file that exists
        for c in filter(None, listed.split(";")):
            assert b.flac(rid, c).is_file(), (rid, c)
    assert set(meta["codec_errors"]) == {"c1", "c2"} and meta["counts"]["codec_copies"] == 1
    assert meta["encoders_missing"] == ["opus"]
