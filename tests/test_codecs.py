"""hearsay.sound.codecs: real ffmpeg round-trips; a missing encoder is reported, never faked."""

import numpy as np
import pytest
from fakes.fake_ffmpeg import fake_ffmpeg_without

from hearsay.sound import audio, codecs

SR = audio.SAMPLE_RATE


def tone(seconds, freq):
    t = np.arange(int(seconds * SR)) / SR
    return (0.4 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_the_wheel_ffmpeg_has_all_five_encoders():
    have, missing = codecs.available()
    assert have == list(codecs.CODECS) and missing == []


def test_roundtrip_returns_16k_waves_of_the_same_length(tmp_path):
    x = tone(1.5, 440.0)
    out = codecs.roundtrip(x, list(codecs.CODECS), tmp_path)
    assert set(out) == set(codecs.CODECS)
    for name, y in out.items():
        assert y.dtype == np.float32 and y.ndim == 1, name
        assert abs(len(y) - len(x)) < 0.1 * SR, name  # codec delay/padding < 100 ms


@pytest.mark.parametrize("name", ["amrnb", "mulaw"])
def test_8khz_codecs_really_remove_content_above_4khz(tmp_path, name):
    y = codecs.roundtrip(tone(1.0, 6000.0), [name], tmp_path)[name]
    assert np.std(y[SR // 10: -SR // 10]) < 0.02  # the 6 kHz tone (std 0.28) is gone


def test_mp3_roundtrip_keeps_a_low_tone(tmp_path):
    x = tone(1.0, 440.0)
    y = codecs.roundtrip(x, ["mp3"], tmp_path)["mp3"]
    assert np.std(y) == pytest.approx(np.std(x), rel=0.15)


def test_missing_encoder_is_reported_missing(tmp_path):
    have, missing = codecs.available(ffmpeg=fake_ffmpeg_without(tmp_path, "libopus"))
    assert missing == ["opus"] and "opus" not in have and len(have) == 4


def test_unknown_codec_name_is_an_error():
    with pytest.raises(ValueError, match="unknown codec.*known"):
        codecs.available(["flac"])
