"""hearsay.sound.augment's pure numpy transforms keep their length, depend only on their generator
and do what their name says."""


import numpy as np
import pytest
from augment_signals import power_db, speechlike

from hearsay.sound import audio, augment

SR = audio.SAMPLE_RATE
CFG = augment.AugmentConfig()


@pytest.mark.parametrize("name", augment.WAVE_TYPES)
@pytest.mark.parametrize("length", [1, 100, 320, 3 * SR + 7])
def test_wave_types_do_not_change_num_samples(name, length):
    x = speechlike(length / SR + 1e-9, np.random.default_rng(length))[:length]
    y = augment.apply(name, x, np.random.default_rng(0), CFG)
    assert y.shape == x.shape and y.dtype == np.float32 and np.all(np.isfinite(y))


@pytest.mark.parametrize("name", augment.WAVE_TYPES + ("trim_jitter",))
def test_transforms_are_pure_functions_of_their_generator(name):
    x = speechlike(2.0, np.random.default_rng(1))
    x_before = x.copy()
    a = augment.apply(name, x, np.random.default_rng(42), CFG)
    b = augment.apply(name, x, np.random.default_rng(42), CFG)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(x, x_before)  # input untouched


@pytest.mark.parametrize("snr_db", [5.0, 12.5, 30.0])
def test_noise_snr_realised_within_tolerance(snr_db):
    x = speechlike(3.0, np.random.default_rng(2))
    y = augment.add_noise(x, SR, np.random.default_rng(3), CFG, snr_db=snr_db)
    assert power_db(x) - power_db(y.astype(np.float64) - x) == pytest.approx(snr_db, abs=0.05)


def test_noise_snr_drawn_within_the_configured_range():
    x = speechlike(1.0, np.random.default_rng(4))
    rng = np.random.default_rng(5)
    snrs = [power_db(x) - power_db(augment.add_noise(x, SR, rng, CFG).astype(np.float64) - x)
            for _ in range(200)]
    assert 5.0 - 0.05 <= min(snrs) < 8.0 and 27.0 < max(snrs) <= 30.0 + 0.05


def test_bandlimit_removes_energy_above_the_telephone_band():
    x = speechlike(2.0, np.random.default_rng(6))
    y = augment.bandlimit(x, SR, np.random.default_rng(7), CFG)
    spec_x, spec_y = np.abs(np.fft.rfft(x)) ** 2, np.abs(np.fft.rfft(y)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / SR)
    assert spec_y[f > 5000].sum() < 1e-3 * spec_x[f > 5000].sum()
    assert spec_y[f < 3000].sum() > 0.95 * spec_x[f < 3000].sum()


def test_reverb_keeps_the_direct_path_aligned():
    x = speechlike(2.0, np.random.default_rng(8))
    rng = np.random.default_rng(9)
    for _ in range(5):
        y = augment.reverb(x, SR, rng, CFG)
        lags = np.arange(-200, 201)
        xc = [np.dot(x[max(0, -k): len(x) - max(0, k)], y[max(0, k): len(y) - max(0, -k)])
              for k in lags]
        assert lags[int(np.argmax(xc))] == 0
        assert power_db(y) == pytest.approx(power_db(x), abs=0.01)
        assert not np.allclose(y, x, atol=1e-3)  # a tail was added


def test_gain_clip_hard_clips_at_the_ceiling():
    x = speechlike(1.0, np.random.default_rng(10), amp=0.05)
    y = augment.gain_clip(x, SR, np.random.default_rng(11), CFG)
    assert np.max(np.abs(y)) == pytest.approx(CFG.clip_ceiling, abs=1e-6)
    assert np.mean(np.abs(y) >= CFG.clip_ceiling - 1e-6) > 0.001


def test_rawboost_changes_the_wave_and_keeps_its_power():
    x = speechlike(1.0, np.random.default_rng(12))
    y = augment.rawboost(x, SR, np.random.default_rng(13), CFG)
    assert power_db(y) == pytest.approx(power_db(x), abs=0.01)
    assert np.corrcoef(x, y)[0, 1] < 0.99


def test_trim_jitter_returns_a_shorter_slice_with_bounded_margins():
    rng = np.random.default_rng(14)
    loud = speechlike(1.0, rng)
    quiet = speechlike(0.5, rng, amp=0.3 * 10 ** (-35 / 20))  # 35 dB down: trimmed at 30 dB
    x = np.concatenate([quiet, loud, quiet])
    lengths = []
    for _ in range(30):
        y = augment.trim_jitter(x, SR, rng, CFG)
        start = int(np.flatnonzero(x == y[0])[0])
        np.testing.assert_array_equal(y, x[start: start + len(y)])  # a contiguous slice
        lengths.append(len(y))
    assert min(lengths) < len(x)  # some draws trim into the quiet ends
    assert min(lengths) >= len(loud) - 2 * audio.TRIM_FRAME


def test_apply_refuses_codecs_and_unknown_names():
    x = np.ones(10, np.float32)
    with pytest.raises(ValueError, match="codecs/<codec>/<id>.flac"):
        augment.apply("codec:mp3", x, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown augmentation"):
        augment.apply("echo", x, np.random.default_rng(0))
