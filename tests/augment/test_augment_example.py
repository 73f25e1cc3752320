"""hearsay.sound.example: one training example per clip (padding zero, trim jitter before
the crop)."""


import numpy as np
from augment_signals import speechlike

from hearsay.sound import audio, augment, crops, example, transforms

SR = audio.SAMPLE_RATE
CFG = augment.AugmentConfig()


def test_training_example_keeps_padding_zero_and_finishes_last():
    x = speechlike(1.0, np.random.default_rng(21))
    for name in augment.WAVE_TYPES:
        wave, n_valid = example.training_example(x, name, 2 * SR, np.random.default_rng(22))
        assert n_valid == SR and np.all(wave[n_valid:] == 0)  # no noise in the padding
        assert abs(wave[:n_valid].std() - 1) < 1e-3  # normalised after augmenting
        # Same steps by hand with the same generator: crop, transform, then finish.
        rng = np.random.default_rng(22)
        crop, n = crops.random_crop(x, 2 * SR, rng)
        crop[:n] = transforms.apply(name, crop[:n], rng, CFG)
        np.testing.assert_array_equal(wave, crops.finish(crop, n))


def test_training_example_applies_trim_jitter_before_cropping():
    rng = np.random.default_rng(23)
    quiet = speechlike(0.5, rng, amp=0.3 * 10 ** (-38 / 20))
    x = np.concatenate([quiet, speechlike(1.0, rng), quiet])
    n_valids = {example.training_example(x, "trim_jitter", 4 * SR, rng)[1] for _ in range(20)}
    assert min(n_valids) < len(x)
