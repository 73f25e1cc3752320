"""hearsay.sound.audio: the one front end. Signals are made in code."""

import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from hearsay.sound import audio, decoder

SR = audio.SAMPLE_RATE


def tone(seconds, freq=440.0, rate=SR, amp=0.5):
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_trim_silence_finds_the_voiced_span():
    x = np.concatenate([np.zeros(SR), tone(1.0), np.zeros(SR // 2)]).astype(np.float32)
    start, end = audio.trim_silence(x)
    assert abs(start - SR) <= audio.TRIM_FRAME
    assert abs(end - 2 * SR) <= audio.TRIM_FRAME


def test_trim_silence_of_digital_silence_is_empty():
    assert audio.trim_silence(np.zeros(SR, np.float32)) == (0, 0)


def test_peak_guard_scales_without_clipping():
    x = tone(0.1, amp=1.7)
    y = audio.peak_guard(x)
    assert np.max(np.abs(y)) == pytest.approx(audio.PEAK, abs=1e-6)
    np.testing.assert_allclose(y / y.max(), x / x.max(), atol=1e-6)  # shape kept


def test_band_limit_removes_energy_above_cutoff_and_keeps_length():
    low, high = tone(1.0, 1000.0), tone(1.0, 7800.0)
    y_low, y_high = audio.band_limit(low), audio.band_limit(high)
    assert len(y_low) == len(low)
    mid = slice(500, -500)
    assert np.std(y_low[mid]) / np.std(low[mid]) > 0.99
    assert np.std(y_high[mid]) / np.std(high[mid]) < 0.01


def test_normalize_uses_valid_samples_only_and_zeros_padding():
    x = np.concatenate([tone(0.5) + 0.3, np.full(SR // 4, 9.0, np.float32)])
    n = SR // 2
    y = audio.normalize(x, n)
    assert abs(y[:n].mean()) < 1e-5 and abs(y[:n].std() - 1) < 1e-3
    assert np.all(y[n:] == 0)


def test_prepare_caps_to_max_s():
    y = audio.prepare(tone(12.0), max_s=8.0)
    assert len(y) == 8 * SR


@pytest.mark.parametrize("rate,channels", [(16000, 1), (48000, 2), (8000, 1), (22050, 2)])
def test_load_audio_resamples_and_mixes_down(tmp_path, rate, channels):
    x = tone(1.0, 440.0, rate)
    data = np.stack([x] * channels, axis=1) if channels > 1 else x
    p = tmp_path / "c.wav"
    sf.write(p, data, rate)
    y = audio.load_audio(p)
    assert y.dtype == np.float32 and y.ndim == 1
    assert abs(len(y) - SR) <= 2


def test_load_audio_decodes_compressed_formats_through_ffmpeg(tmp_path):
    wav = tmp_path / "c.wav"
    sf.write(wav, tone(1.0), SR)
    m4a = tmp_path / "c.m4a"
    subprocess.run([decoder.ffmpeg_exe(), "-v", "error", "-i", str(wav), "-c:a", "aac", str(m4a)],
                   check=True)
    y = audio.load_audio(m4a)
    assert abs(len(y) - SR) < SR * 0.1


@pytest.mark.parametrize("content,reason", [
    (b"", "empty file"),
    (b"this is not audio at all\n" * 10, "undecodable"),
    (b"RIFF\x24\x00\x00\x00WAVEfmt ", "undecodable"),
])
def test_load_audio_names_file_and_reason(tmp_path, content, reason):
    p = tmp_path / "bad.wav"
    p.write_bytes(content)
    with pytest.raises(audio.AudioError) as err:
        audio.load_audio(p)
    assert err.value.path == str(p) and reason in err.value.reason


def test_audio_module_never_imports_torch():
    code = "import sys, hearsay.sound.audio; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("n", [1, 7, audio.FIR_TAPS - 1, audio.FIR_TAPS, audio.FIR_TAPS + 3])
def test_band_limit_keeps_length_of_waves_shorter_than_its_filter(n):
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    assert len(audio.band_limit(x)) == n


@pytest.mark.parametrize("ext,codec", [("m4a", ["-c:a", "aac"]),
                                       ("amr", ["-ar", "8000", "-c:a", "libopencore_amrnb",
                                                "-b:a", "12.2k"])])
def test_ffmpeg_decoding_needs_no_writable_temp_dir(tmp_path, monkeypatch, ext, codec):
    """A read-only container has no usable /tmp: compressed clips still decode (via a pipe)."""
    import tempfile

    wav, clip = tmp_path / "c.wav", tmp_path / f"c.{ext}"
    sf.write(wav, tone(1.0, 300.0), SR)
    subprocess.run([decoder.ffmpeg_exe(), "-v", "error", "-i", str(wav), *codec, str(clip)],
                   check=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-dir"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "no-such-dir"))
    y = audio.load_audio(clip)
    assert abs(len(y) - SR) < SR * 0.1 and np.std(y) > 0.05


def test_ffmpeg_pipe_keeps_every_channel_and_the_files_rate(tmp_path):
    """Stereo 44.1 kHz AAC: the piped WAV is what ffmpeg writes to a file, bit for bit."""
    left, right = tone(1.0, 300.0, 44_100), tone(1.0, 500.0, 44_100, amp=0.2)
    wav, m4a, ref = tmp_path / "s.wav", tmp_path / "s.m4a", tmp_path / "ref.wav"
    sf.write(wav, np.stack([left, right], axis=1), 44_100)
    subprocess.run([decoder.ffmpeg_exe(), "-v", "error", "-i", str(wav), "-c:a", "aac", str(m4a)],
                   check=True)
    subprocess.run([decoder.ffmpeg_exe(), "-v", "error", "-i", str(m4a), "-c:a", "pcm_f32le",
                    str(ref)], check=True)
    data, rate = decoder._decode_ffmpeg(m4a)
    want, want_rate = sf.read(ref, dtype="float32", always_2d=True)
    assert rate == want_rate == 44_100 and data.shape[1] == 2
    np.testing.assert_array_equal(data, want)


def test_prepare_of_a_long_clip_is_the_training_crop_at_offset_zero():
    """trim -> cap -> band-limit -> normalise: past the cap, what training's crop path gives."""
    from hearsay.sound import example

    x = (tone(12.0, 220.0) + 0.05 * np.random.default_rng(0).standard_normal(12 * SR)) \
        .astype(np.float32)
    crop, n = example.take(x, 0, 8 * SR)
    np.testing.assert_array_equal(audio.prepare(x, 8.0, trim=False), example.finish(crop, n))
