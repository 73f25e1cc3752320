"""hearsay.augment: the transforms, the choice, realised rates and stream shortcut AUCs."""

import json

import numpy as np
import pytest

from hearsay import audio, augment, crops, metrics

SR = audio.SAMPLE_RATE
CFG = augment.AugmentConfig()


def speechlike(seconds, rng, amp=0.3):
    """Noise bursts under a 4 Hz syllable envelope: broadband, with quiet gaps."""
    n = int(seconds * SR)
    env = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * np.arange(n) / SR + rng.uniform(0, 6))
    return (amp * env * rng.standard_normal(n)).astype(np.float32)


def power_db(x):
    return 10 * np.log10(np.mean(np.square(x, dtype=np.float64)))


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


def test_apply_refuses_codecs_and_unknown_names():
    x = np.ones(10, np.float32)
    with pytest.raises(ValueError, match="codecs/<codec>/<id>.flac"):
        augment.apply("codec:mp3", x, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown augmentation"):
        augment.apply("echo", x, np.random.default_rng(0))


def simulate(rate_log, rng, n, codecs_by_label=None, p_aug_by_label=None):
    """A label-balanced stream through `choose`, as the trainer draws it."""
    codecs_by_label = codecs_by_label or {}
    for i in range(n):
        label = augment.LABELS[i % 2]
        cfg = augment.AugmentConfig(p_aug=(p_aug_by_label or {}).get(label, CFG.p_aug))
        name = augment.choose(rng, cfg, codecs_by_label.get(label, "mp3;opus;aac;amrnb;mulaw"))
        rate_log.record("src_a", label, name)


def test_both_classes_get_equal_realised_rates():
    log = augment.RateLog()
    simulate(log, np.random.default_rng(17), 8000)
    rates = log.rates()["src_a"]
    assert rates["bonafide"]["augmented"] == pytest.approx(0.65, abs=0.03)
    assert rates["spoof"]["augmented"] == pytest.approx(0.65, abs=0.03)
    rawboost_share = rates["spoof"]["types"]["rawboost"] / rates["spoof"]["augmented"]
    assert rawboost_share == pytest.approx(0.25, abs=0.03)
    assert log.check_balanced() == {"status": "balanced", "compared": ["all", "src_a"],
                                    "single_class": []}


def test_rate_log_with_nothing_to_compare_is_unknown_not_balanced():
    log = augment.RateLog()
    assert log.check_balanced()["status"] == "unknown"
    log.record("extra_tts", "spoof", "noise")
    assert log.check_balanced() == {"status": "unknown", "compared": [],
                                    "single_class": ["all", "extra_tts"]}


def test_rate_log_detects_codecs_missing_for_one_class():
    log = augment.RateLog()
    simulate(log, np.random.default_rng(18), 4000, codecs_by_label={"bonafide": ""})
    with pytest.raises(augment.AugmentRateError, match="src_a/codec"):
        log.check_balanced()


def test_rate_log_detects_one_codec_missing_for_one_class():
    log = augment.RateLog()
    simulate(log, np.random.default_rng(27), 8000,
             codecs_by_label={"bonafide": "mp3;opus;aac;amrnb"})
    with pytest.raises(augment.AugmentRateError, match="src_a/codec:mulaw"):
        log.check_balanced()


def test_rate_log_detects_diverging_augmentation_probability():
    log = augment.RateLog()
    simulate(log, np.random.default_rng(19), 4000, p_aug_by_label={"bonafide": 0.55})
    with pytest.raises(augment.AugmentRateError, match="src_a/augmented"):
        log.check_balanced()


def test_rate_log_state_round_trips_through_json():
    log = augment.RateLog()
    simulate(log, np.random.default_rng(20), 200)
    again = augment.RateLog(json.loads(json.dumps(log.state())))
    assert again.rates() == log.rates()


def test_training_example_keeps_padding_zero_and_finishes_last():
    x = speechlike(1.0, np.random.default_rng(21))
    for name in augment.WAVE_TYPES:
        wave, n_valid = augment.training_example(x, name, 2 * SR, np.random.default_rng(22))
        assert n_valid == SR and np.all(wave[n_valid:] == 0)  # no noise in the padding
        assert abs(wave[:n_valid].std() - 1) < 1e-3  # normalised after augmenting
        # Same steps by hand with the same generator: crop, transform, then finish.
        rng = np.random.default_rng(22)
        crop, n = crops.random_crop(x, 2 * SR, rng)
        crop[:n] = augment.apply(name, crop[:n], rng, CFG)
        np.testing.assert_array_equal(wave, crops.finish(crop, n))


def test_training_example_applies_trim_jitter_before_cropping():
    rng = np.random.default_rng(23)
    quiet = speechlike(0.5, rng, amp=0.3 * 10 ** (-38 / 20))
    x = np.concatenate([quiet, speechlike(1.0, rng), quiet])
    n_valids = {augment.training_example(x, "trim_jitter", 4 * SR, rng)[1] for _ in range(20)}
    assert min(n_valids) < len(x)


def stream(rng, n_per_class, bona_s, spoof_s, crop_s, sources=("src_a",)):
    """Records of the realised stream: choose -> crop -> augment -> finish -> features."""
    records = []
    for source in sources:
        for label, secs in (("bonafide", bona_s), ("spoof", spoof_s)):
            for _ in range(n_per_class):
                x = speechlike(rng.uniform(*secs), rng)
                name = augment.choose(rng, CFG, "")
                wave, n_valid = augment.training_example(x, name, int(crop_s * SR), rng)
                records.append(augment.stream_record(source, label, wave, n_valid))
    return records


def test_shortcut_auc_detects_a_planted_duration_shortcut():
    rng = np.random.default_rng(24)
    records = stream(rng, 30, bona_s=(1.5, 2.0), spoof_s=(0.5, 1.0), crop_s=1.5)
    out = augment.stream_shortcut_aucs(records)
    assert "duration_s" in out["per_source"]["src_a"]["flagged"]
    assert out["per_source"]["src_a"]["auc"]["duration_s"] < 0.15  # spoof shorter
    assert out["status"] == "warn" and out["warnings"]
    json.dumps(out)


@pytest.mark.parametrize("feature", ["leading_silence_s", "peak"])
def test_shortcut_auc_detects_planted_silence_and_peak_shortcuts(feature):
    """Spoof clips (shorter than the crop, so never cut) carry 0.3 s of leading silence (bona
    fide clips 0.3 s more speech instead: same durations), or one loud click."""
    rng = np.random.default_rng(28)
    records = []
    for label in augment.LABELS:
        for _ in range(30):
            x = speechlike(rng.uniform(0.6, 0.9), rng)
            if feature == "leading_silence_s":
                lead = (np.zeros(int(0.3 * SR), np.float32) if label == "spoof"
                        else speechlike(0.3, rng))
                x = np.concatenate([lead, x])
            if label == "spoof" and feature == "peak":
                x[int(rng.integers(len(x)))] = 8.0
            wave, n_valid = augment.training_example(x, "none", int(1.5 * SR), rng)
            records.append(augment.stream_record("src_a", label, wave, n_valid))
    out = augment.stream_shortcut_aucs(records)
    assert feature in out["per_source"]["src_a"]["flagged"]
    assert "duration_s" not in out["per_source"]["src_a"]["flagged"]
    assert out["per_source"]["src_a"]["auc"][feature] > 0.85


def test_shortcut_auc_stays_low_without_a_shortcut():
    rng = np.random.default_rng(25)
    records = stream(rng, 30, bona_s=(0.5, 2.0), spoof_s=(0.5, 2.0), crop_s=1.5,
                     sources=("src_a", "src_b"))
    out = augment.stream_shortcut_aucs(records)
    for source in ("src_a", "src_b", "all"):
        aucs = out["per_source"][source]["auc"]
        assert all(abs(a - 0.5) < 0.3 for a in aucs.values()), (source, aucs)
        assert out["per_source"][source]["flagged"] == []
    assert out["status"] == "ok"
    json.dumps(out)


def test_shortcut_auc_of_a_one_class_source_is_unknown_not_ok():
    recs = [{"source": "s", "label": "spoof", "duration_s": 1.0, "peak": 1.0,
             "leading_silence_s": 0.0}] * 20
    out = augment.stream_shortcut_aucs(recs)
    assert out["status"] == "unknown" and out["per_source"]["s"]["auc"]["duration_s"] is None


def test_auc_matches_the_mann_whitney_definition_with_ties():
    rng = np.random.default_rng(26)
    pos, neg = rng.integers(0, 5, 40), rng.integers(1, 6, 50)
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert metrics.auc(np.r_[pos, neg], np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)]) == pytest.approx(brute, abs=1e-12)


def test_augment_config_rejects_unknown_keys_and_bad_codecs():
    with pytest.raises(ValueError, match="unknown AugmentConfig key"):
        augment.AugmentConfig.from_dict({"p_augment": 0.5})
    with pytest.raises(ValueError, match="unknown"):
        augment.AugmentConfig(codecs=("flac",))
    cfg = augment.AugmentConfig.from_dict({"noise_snr_db": [10, 20]})
    assert cfg.noise_snr_db == (10, 20)


def test_torch_batch_path_agrees_with_the_numpy_reference():
    torch = pytest.importorskip("torch")
    from hearsay.augment import gpu as augment_gpu

    names = list(augment.WAVE_TYPES) * 2 + ["none", "codec:mp3", "trim_jitter"]
    lengths = [int(s * SR) for s in np.linspace(0.3, 2.5, len(names))]
    n_samples = 2 * SR
    crops_, n_valids, params, reference = [], [], [], []
    for i, (name, length) in enumerate(zip(names, lengths, strict=True)):
        x = speechlike(length / SR, np.random.default_rng(100 + i))
        ref, n_ref = augment.training_example(x, name, n_samples, np.random.default_rng(i))
        crop, n_valid, p = augment.plan_example(x, name, n_samples, np.random.default_rng(i))
        assert n_valid == n_ref
        crops_.append(crop), n_valids.append(n_valid), params.append(p), reference.append(ref)
    values, mask = crops.pad_batch(crops_, n_valids)
    out = augment_gpu.train_batch(torch.from_numpy(values), torch.from_numpy(mask), names,
                                  params).numpy()
    for i, name in enumerate(names):
        np.testing.assert_allclose(out[i], reference[i], atol=5e-5, err_msg=name)
        assert np.all(out[i, n_valids[i]:] == 0)


def test_torch_finish_batch_equals_crops_finish():
    torch = pytest.importorskip("torch")
    from hearsay.augment import gpu as augment_gpu

    rng = np.random.default_rng(30)
    waves = [speechlike(s, rng) for s in (0.004, 0.5, 1.0)]
    values, mask = crops.pad_batch(waves, [len(w) for w in waves])
    out = augment_gpu.finish_batch(torch.from_numpy(values), torch.from_numpy(mask)).numpy()
    for i, w in enumerate(waves):
        np.testing.assert_allclose(out[i, : len(w)], crops.finish(w), atol=5e-5)


def test_torch_render_batch_leaves_the_padding_zero():
    torch = pytest.importorskip("torch")
    from hearsay.augment import gpu as augment_gpu

    rng = np.random.default_rng(31)
    names = list(augment.WAVE_TYPES)
    planned = [augment.plan_example(speechlike(0.5, rng), nm, SR, rng) for nm in names]
    values, mask = crops.pad_batch([p[0] for p in planned], [p[1] for p in planned])
    out = augment_gpu.render_batch(torch.from_numpy(values), torch.from_numpy(mask), names,
                                   [p[2] for p in planned]).numpy()
    assert np.all(out[mask == 0] == 0)
    assert not np.allclose(out, values)
