"""hearsay.sound.example: one training example per clip (padding zero, trim jitter before
the crop)."""


import numpy as np
from augment_signals import speechlike

from hearsay.sound import audio, augment, example

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
        crop, n = example.random_crop(x, 2 * SR, rng)
        crop[:n] = augment.apply(name, crop[:n], rng, CFG)
        np.testing.assert_array_equal(wave, example.finish(crop, n))


def test_training_example_applies_trim_jitter_before_cropping():
    rng = np.random.default_rng(23)
    quiet = speechlike(0.5, rng, amp=0.3 * 10 ** (-38 / 20))
    x = np.concatenate([quiet, speechlike(1.0, rng), quiet])
    n_valids = {example.training_example(x, "trim_jitter", 4 * SR, rng)[1] for _ in range(20)}
    assert min(n_valids) < len(x)


def _bundle_like(tmp_path):
    """A root with one clip and its mp3 "codec copy" (another signal: which file was read shows,
    through the normalisation too)."""
    import soundfile as sf

    x = speechlike(1.5, np.random.default_rng(31))
    (tmp_path / "audio").mkdir()
    (tmp_path / "codecs").mkdir()
    sf.write(tmp_path / "audio" / "c1.flac", x, SR)
    sf.write(tmp_path / "codecs" / "c1.mp3.flac", speechlike(1.5, np.random.default_rng(32)), SR)
    row = {"id": "c1", "flac": "audio/c1.flac", "codec_ids": "mp3"}

    def locate(r, name):
        return f"codecs/{r['id']}.mp3.flac" if name.startswith("codec:") else r["flac"]

    return row, locate


def test_build_is_choose_load_then_the_training_example(tmp_path):
    row, locate = _bundle_like(tmp_path)
    cfg = augment.AugmentConfig(p_aug=1.0)
    names = set()
    for seed in range(30):  # seed 25 draws the codec copy
        ex = example.build(tmp_path, row, SR, np.random.default_rng(seed), cfg, locate=locate)
        rng = np.random.default_rng(seed)  # the same steps by hand
        name = augment.choose(rng, cfg, row["codec_ids"])
        x = audio.load_audio(tmp_path / locate(row, name))
        wave, n_valid = example.training_example(x, name, SR, rng, cfg)
        assert (ex.name, ex.n_valid, ex.params) == (name, n_valid, None)
        np.testing.assert_array_equal(ex.wave, wave)
        names.add(name)
    assert "codec:mp3" in names and len(names) > 2


def test_the_gpu_path_draws_what_the_numpy_path_draws(tmp_path):
    """render=False stops after the draw: same type, same crop, and the generator moved on by
    exactly the same draws (the next clip of the batch sees the same stream either way)."""
    row, locate = _bundle_like(tmp_path)
    cfg = augment.AugmentConfig(p_aug=1.0)
    names = set()
    for seed in range(30):
        rng_np, rng_gpu = np.random.default_rng(seed), np.random.default_rng(seed)
        done = example.build(tmp_path, row, SR, rng_np, cfg, locate=locate)
        drawn = example.build(tmp_path, row, SR, rng_gpu, cfg, locate=locate, render=False)
        assert (drawn.name, drawn.n_valid) == (done.name, done.n_valid)
        assert (drawn.params is None) == (done.name not in augment.WAVE_TYPES)
        assert rng_np.random() == rng_gpu.random()
        names.add(drawn.name)
    assert len(names) > 2  # several types were drawn
