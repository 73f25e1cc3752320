"""hearsay.sound.augment: the label-blind choice and the config's checks."""


import numpy as np
import pytest

from hearsay.sound import augment

CFG = augment.AugmentConfig()


def test_codec_choice_only_among_available_codecs():
    rng = np.random.default_rng(15)
    names = [augment.choose(rng, CFG, "mp3;aac") for _ in range(3000)]
    codecs = {n for n in names if n.startswith("codec:")}
    assert codecs == {"codec:mp3", "codec:aac"}
    only_mp3 = augment.AugmentConfig(codecs=("mp3",))
    names = [augment.choose(rng, only_mp3, ["mp3", "opus"]) for _ in range(3000)]
    assert {n for n in names if n.startswith("codec:")} == {"codec:mp3"}


@pytest.mark.parametrize("available", ["", None, float("nan"), []])
def test_clip_without_codec_copies_keeps_p_aug_and_never_gets_a_codec(available):
    rng = np.random.default_rng(16)
    names = [augment.choose(rng, CFG, available) for _ in range(4000)]
    assert not any(n.startswith("codec:") for n in names)
    assert np.mean([n != "none" for n in names]) == pytest.approx(CFG.p_aug, abs=0.03)


def test_augment_config_rejects_unknown_keys_and_bad_codecs():
    with pytest.raises(ValueError, match="unknown AugmentConfig key"):
        augment.AugmentConfig.from_dict({"p_augment": 0.5})
    with pytest.raises(ValueError, match="unknown"):
        augment.AugmentConfig(codecs=("flac",))
    cfg = augment.AugmentConfig.from_dict({"noise_snr_db": [10, 20]})
    assert cfg.noise_snr_db == (10, 20)
