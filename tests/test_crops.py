"""hearsay.sound.example: crop length, offset, padding, the finish step and the test-time input."""

import numpy as np
import pytest

from hearsay.sound import audio, example
from hearsay.sound.audio import pad_batch

SR = audio.SAMPLE_RATE


def ramp(n):
    """(n,) float32 with every sample distinct and non-zero: a tiled copy would show."""
    return (np.arange(1, n + 1, dtype=np.float32) / n).astype(np.float32)


def tone(seconds, freq, amp=0.5):
    t = np.arange(int(seconds * SR)) / SR
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_crop_handles_clip_exactly_max_len():
    x = ramp(4 * SR)
    rng = np.random.default_rng(0)
    for _ in range(20):
        wave, n_valid = example.random_crop(x, 4 * SR, rng)
        assert n_valid == 4 * SR and wave.dtype == np.float32
        np.testing.assert_array_equal(wave, x)


@pytest.mark.parametrize("length", [1, 128, 319, 2 * SR - 1])
def test_shorter_clip_is_zero_padded_never_tiled(length):
    x = ramp(length)
    wave, n_valid = example.random_crop(x, 2 * SR, np.random.default_rng(1))
    assert wave.shape == (2 * SR,) and n_valid == length
    np.testing.assert_array_equal(wave[:length], x)
    assert np.all(wave[length:] == 0)


def test_longer_clip_is_a_contiguous_window():
    x = ramp(10 * SR)
    wave, n_valid = example.random_crop(x, 3 * SR, np.random.default_rng(2))
    assert n_valid == 3 * SR
    start = int(round(wave[0] * len(x))) - 1
    np.testing.assert_array_equal(wave, x[start: start + 3 * SR])


def test_offset_varies_across_epochs_with_fresh_rng():
    """The trainer seeds one generator per (seed, epoch): offsets move, and replay exactly."""
    offsets = [example.crop_offset(10 * SR, 3 * SR, np.random.default_rng([7, epoch]))
               for epoch in range(10)]
    assert len(set(offsets)) >= 8
    again = [example.crop_offset(10 * SR, 3 * SR, np.random.default_rng([7, epoch]))
             for epoch in range(10)]
    assert offsets == again  # a resumed run sees the same windows


def test_offset_reaches_both_ends_of_the_clip():
    rng = np.random.default_rng(3)
    offsets = [example.crop_offset(1000, 990, rng) for _ in range(400)]
    assert min(offsets) == 0 and max(offsets) == 10


def test_take_cuts_a_codec_copy_at_the_originals_offset():
    original, copy = ramp(5 * SR), ramp(5 * SR) * 2
    off = example.crop_offset(len(original), 2 * SR, np.random.default_rng(4))
    a, na = example.take(original, off, 2 * SR)
    b, nb = example.take(copy, off, 2 * SR)
    assert na == nb == 2 * SR
    np.testing.assert_allclose(b, 2 * a)


def test_take_pads_a_copy_shorter_than_the_offset_window():
    wave, n_valid = example.take(ramp(SR), SR - 100, 400)
    assert n_valid == 100 and np.all(wave[100:] == 0)


def test_crop_length_mixes_test_distribution_and_uniform():
    """Test durations all 1.5 s (outside 3–14 s): the two components are separable."""
    cfg = example.CropConfig(buckets_s=())
    rng = np.random.default_rng(5)
    lengths = np.array([example.crop_length_s(rng, [1.5], 20.0, cfg) for _ in range(4000)])
    from_test = np.isclose(lengths, 1.5)
    assert abs(from_test.mean() - 0.7) < 0.03
    uniform = lengths[~from_test]
    assert uniform.min() >= 3.0 - 0.02 and uniform.max() <= 14.0
    quartiles = np.quantile(uniform, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(quartiles, [5.75, 8.5, 11.25], atol=0.35)


def test_crop_length_draws_from_the_test_durations_given():
    rng = np.random.default_rng(6)
    cfg = example.CropConfig(p_test_dist=1.0, buckets_s=())
    lengths = {example.crop_length_s(rng, [2.0, 4.0, 6.0], 20.0, cfg) for _ in range(200)}
    assert lengths == {2.0, 4.0, 6.0}


@pytest.mark.parametrize("cap_s", [0.5, 2.01, 4.3, 13.9])
def test_crop_length_respects_cap_and_grid(cap_s):
    for cfg in (example.CropConfig(), example.CropConfig(buckets_s=())):
        rng = np.random.default_rng(7)
        lengths = [example.crop_length_s(rng, [1.0, 6.0, 15.0], cap_s, cfg) for _ in range(500)]
        assert max(lengths) <= cap_s
        n = np.array([example.n_samples(s) for s in lengths])
        assert np.all(n % cfg.grid_samples == 0) and n.min() >= cfg.min_samples


def test_crop_lengths_fall_in_the_buckets_and_keep_the_mean():
    """The recipe's buckets: a handful of shapes for torch.compile, the mean length of the
    continuous draw kept (stochastic rounding between neighbours)."""
    rng = np.random.default_rng(8)
    test = np.random.default_rng(9).uniform(1.0, 12.0, 300)
    cfg, plain = example.CropConfig(), example.CropConfig(buckets_s=())
    got = np.array([example.crop_length_s(rng, test, 20.0, cfg) for _ in range(6000)])
    ref = np.array([example.crop_length_s(rng, test, 20.0, plain) for _ in range(6000)])
    assert set(np.round(got, 6)) <= set(cfg.buckets_s) and len(set(got)) >= 8
    assert abs(got.mean() - ref.mean()) < 0.1  # s; the means of 6000 draws each
    capped = {example.crop_length_s(rng, test, 5.0, cfg) for _ in range(500)}
    assert capped <= {1.0, 2.0, 3.0, 4.0}  # buckets above the class cap are not used
    assert {example.crop_length_s(rng, test, 0.5, cfg) for _ in range(50)} == {0.5}
    with pytest.raises(ValueError, match="strictly rising"):
        example.CropConfig(buckets_s=(4.0, 2.0))


def test_crop_length_without_test_durations_names_the_fix():
    with pytest.raises(ValueError, match="p_test_dist=0"):
        example.crop_length_s(np.random.default_rng(0), [], 5.0)
    only_uniform = example.CropConfig(p_test_dist=0.0)
    assert 3.0 <= example.crop_length_s(np.random.default_rng(0), [], 20.0, only_uniform) <= 14.0


def test_class_cap_is_the_longest_length_both_classes_reach():
    assert example.class_cap_s([3.0, 9.0, 4.0], [2.0, 5.0]) == 5.0
    assert example.class_cap_s([3.0], [2.0, 12.0]) == 3.0
    with pytest.raises(ValueError, match="both classes"):
        example.class_cap_s([], [2.0])


def test_pad_batch_masks_valid_samples_and_zeros_the_rest():
    waves = [np.ones(100, np.float32), np.full(60, 2.0, np.float32), np.ones(100, np.float32)]
    values, mask = pad_batch(waves, [100, 40, 70])
    assert values.shape == mask.shape == (3, 100)
    assert values.dtype == np.float32 and mask.dtype == np.int64
    assert mask.sum(axis=1).tolist() == [100, 40, 70]
    assert np.all(values[mask == 0] == 0) and np.all(values[1, :40] == 2.0)


def test_pad_batch_rejects_mismatched_counts():
    with pytest.raises(ValueError, match="same non-zero count"):
        pad_batch([np.ones(3, np.float32)], [3, 3])


def test_finish_band_limits_before_normalising():
    """Order matters: normalise last, so the valid samples have unit variance *after* the
    7.25 kHz low-pass removed the loud 7.8 kHz tone (the other order leaves std << 1)."""
    x = tone(1.0, 500.0, amp=0.1) + tone(1.0, 7800.0, amp=0.9)
    n = len(x) - 3000
    x[n:] = 0
    y = example.finish(x, n)
    mid = slice(500, n - 500)
    assert abs(y[:n].std() - 1.0) < 1e-3 and abs(y[:n].mean()) < 1e-4
    ref = example.audio.normalize(example.audio.band_limit(x[:n]))
    np.testing.assert_allclose(y[mid], ref[mid], atol=1e-5)
    assert np.all(y[n:] == 0)
    spectrum = np.abs(np.fft.rfft(y[mid]))
    freqs = np.fft.rfftfreq(len(y[mid]), 1 / SR)
    assert spectrum[freqs > 7500].max() < 0.01 * spectrum.max()


def test_finish_keeps_length_for_waves_shorter_than_the_fir():
    y = example.finish(ramp(50), 50)
    assert y.shape == (50,) and abs(y.std() - 1) < 1e-3


def test_test_input_is_the_deploy_front_end_capped_at_max_s():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(20 * SR) * 0.1).astype(np.float32)
    for max_s in (8.0, 14.0):
        y = example.test_input(x, max_s)
        assert len(y) == int(max_s * SR)
        np.testing.assert_array_equal(y, audio.prepare(x, max_s, trim=False))


def test_test_input_of_a_short_clip_equals_the_training_path():
    x = (np.random.default_rng(9).standard_normal(3 * SR) * 0.1).astype(np.float32)
    np.testing.assert_array_equal(example.test_input(x, 8.0), example.finish(x, len(x)))


def test_crop_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown CropConfig key"):
        example.CropConfig.from_dict({"p_test": 0.5})
    assert example.CropConfig.from_dict({"p_test_dist": 0.5}).p_test_dist == 0.5


def test_crops_and_augment_import_no_torch():
    """Data-loader workers and the deploy side import these: torch must stay out."""
    import subprocess
    import sys

    code = ("import sys, hearsay.sound.example, hearsay.sound.audio, hearsay.sound.augment, "
            "hearsay.sound.example; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("longest", "n", "want"), [
    (32000, 48000, 32000),  # exactly a bucket: that bucket
    (32001, 48000, 48000),  # one sample over the 2 s bucket: the 3 s one (= the crop, no cut)
    (32001, 64000, 48000),  # ... shorter than a 4 s crop: cut to 3 s
    (100, 48000, 16000),  # a tiny clip: the first bucket
    (16000, 16000, 16000),  # already the smallest bucket holding it
    (48000, 48000, 48000),  # every clip fills the crop: no cut
    (20000, 24000, 24000),  # a crop off the buckets (the class cap): no bucket in between
])
def test_cut_samples_is_the_smallest_bucket_holding_the_longest_clip(longest, n, want):
    assert example.cut_samples(longest, n, example.CropConfig().buckets_s) == want


def test_cut_samples_without_buckets_never_cuts():
    assert example.cut_samples(100, 48000, ()) == 48000
