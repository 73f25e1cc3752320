"""hearsay.train.rates: realised rates per class and the stream shortcut AUCs."""

import json

import numpy as np
import pytest
from augment_signals import speechlike

from hearsay.contracts.manifest import LABELS
from hearsay.sound import audio, augment, example
from hearsay.train import rates as train_rates

SR = audio.SAMPLE_RATE
CFG = augment.AugmentConfig()


def simulate(rate_log, rng, n, codecs_by_label=None, p_aug_by_label=None):
    """A label-balanced stream through `choose`, as the trainer draws it."""
    codecs_by_label = codecs_by_label or {}
    for i in range(n):
        label = LABELS[i % 2]
        cfg = augment.AugmentConfig(p_aug=(p_aug_by_label or {}).get(label, CFG.p_aug))
        name = augment.choose(rng, cfg, codecs_by_label.get(label, "mp3;opus;aac;amrnb;mulaw"))
        rate_log.record("src_a", label, name)


def test_both_classes_get_equal_realised_rates():
    log = train_rates.RateLog()
    simulate(log, np.random.default_rng(17), 8000)
    rates = log.rates()["src_a"]
    assert rates["bonafide"]["augmented"] == pytest.approx(0.65, abs=0.03)
    assert rates["spoof"]["augmented"] == pytest.approx(0.65, abs=0.03)
    rawboost_share = rates["spoof"]["types"]["rawboost"] / rates["spoof"]["augmented"]
    assert rawboost_share == pytest.approx(0.25, abs=0.03)
    assert log.check_balanced() == {"status": "balanced", "compared": ["all", "src_a"],
                                    "single_class": []}


def test_rate_log_with_nothing_to_compare_is_unknown_not_balanced():
    log = train_rates.RateLog()
    assert log.check_balanced()["status"] == "unknown"
    log.record("extra_tts", "spoof", "noise")
    assert log.check_balanced() == {"status": "unknown", "compared": [],
                                    "single_class": ["all", "extra_tts"]}


def test_rate_log_detects_codecs_missing_for_one_class():
    log = train_rates.RateLog()
    simulate(log, np.random.default_rng(18), 4000, codecs_by_label={"bonafide": ""})
    with pytest.raises(train_rates.AugmentRateError, match="src_a/codec"):
        log.check_balanced()


def test_rate_log_detects_one_codec_missing_for_one_class():
    log = train_rates.RateLog()
    simulate(log, np.random.default_rng(27), 8000,
             codecs_by_label={"bonafide": "mp3;opus;aac;amrnb"})
    with pytest.raises(train_rates.AugmentRateError, match="src_a/codec:mulaw"):
        log.check_balanced()


def test_rate_log_detects_diverging_augmentation_probability():
    log = train_rates.RateLog()
    simulate(log, np.random.default_rng(19), 4000, p_aug_by_label={"bonafide": 0.55})
    with pytest.raises(train_rates.AugmentRateError, match="src_a/augmented"):
        log.check_balanced()


def test_rate_log_state_round_trips_through_json():
    log = train_rates.RateLog()
    simulate(log, np.random.default_rng(20), 200)
    again = train_rates.RateLog(json.loads(json.dumps(log.state())))
    assert again.rates() == log.rates()


def stream(rng, n_per_class, bona_s, spoof_s, crop_s, sources=("src_a",)):
    """Records of the realised stream: choose -> crop -> augment -> finish -> features."""
    records = []
    for source in sources:
        for label, secs in (("bonafide", bona_s), ("spoof", spoof_s)):
            for _ in range(n_per_class):
                x = speechlike(rng.uniform(*secs), rng)
                name = augment.choose(rng, CFG, "")
                wave, n_valid = example.training_example(x, name, int(crop_s * SR), rng)
                records.append(train_rates.stream_record(source, label, wave, n_valid))
    return records


def test_shortcut_auc_detects_a_planted_duration_shortcut():
    rng = np.random.default_rng(24)
    records = stream(rng, 30, bona_s=(1.5, 2.0), spoof_s=(0.5, 1.0), crop_s=1.5)
    out = train_rates.stream_shortcut_aucs(records)
    assert "duration_s" in out["per_source"]["src_a"]["flagged"]
    assert out["per_source"]["src_a"]["auc"]["duration_s"] < 0.15  # spoof shorter
    assert out["status"] == "warn" and out["warnings"]
    json.dumps(out)


@pytest.mark.parametrize("feature", ["lead_silence_s", "peak"])
def test_shortcut_auc_detects_planted_silence_and_peak_shortcuts(feature):
    """Spoof clips (shorter than the crop, so never cut) carry 0.3 s of leading silence (bona
    fide clips 0.3 s more speech instead: same durations), or one loud click."""
    rng = np.random.default_rng(28)
    records = []
    for label in LABELS:
        for _ in range(30):
            x = speechlike(rng.uniform(0.6, 0.9), rng)
            if feature == "lead_silence_s":
                lead = (np.zeros(int(0.3 * SR), np.float32) if label == "spoof"
                        else speechlike(0.3, rng))
                x = np.concatenate([lead, x])
            if label == "spoof" and feature == "peak":
                x[int(rng.integers(len(x)))] = 8.0
            wave, n_valid = example.training_example(x, "none", int(1.5 * SR), rng)
            records.append(train_rates.stream_record("src_a", label, wave, n_valid))
    out = train_rates.stream_shortcut_aucs(records)
    assert feature in out["per_source"]["src_a"]["flagged"]
    assert "duration_s" not in out["per_source"]["src_a"]["flagged"]
    assert out["per_source"]["src_a"]["auc"][feature] > 0.85


def test_shortcut_auc_stays_low_without_a_shortcut():
    rng = np.random.default_rng(25)
    records = stream(rng, 30, bona_s=(0.5, 2.0), spoof_s=(0.5, 2.0), crop_s=1.5,
                     sources=("src_a", "src_b"))
    out = train_rates.stream_shortcut_aucs(records)
    for source in ("src_a", "src_b", "all"):
        aucs = out["per_source"][source]["auc"]
        assert all(abs(a - 0.5) < 0.3 for a in aucs.values()), (source, aucs)
        assert out["per_source"][source]["flagged"] == []
    assert out["status"] == "ok"
    json.dumps(out)


def test_shortcut_auc_of_a_one_class_source_is_unknown_not_ok():
    recs = [{"source": "s", "label": "spoof", "duration_s": 1.0, "peak": 1.0,
             "lead_silence_s": 0.0}] * 20
    out = train_rates.stream_shortcut_aucs(recs)
    assert out["status"] == "unknown" and out["per_source"]["s"]["auc"]["duration_s"] is None


def test_a_bona_fide_only_source_beside_both_classes_is_single_class_not_unknown():
    rng = np.random.default_rng(26)
    records = stream(rng, 30, bona_s=(0.5, 2.0), spoof_s=(0.5, 2.0), crop_s=1.5)
    records += [{"source": "audiobook", "label": "bonafide", "duration_s": 1.0, "peak": 1.0,
                 "lead_silence_s": 0.0}] * 20
    out = train_rates.stream_shortcut_aucs(records)
    book = out["per_source"]["audiobook"]
    assert book["single_class"] is True and set(book["auc"].values()) == {None}
    assert out["per_source"]["src_a"]["single_class"] is False
    assert out["status"] == "ok" and out["unknown_sources"] == []
    few = records[:39] + records[-20:]                      # src_a: 30 bona fide, 9 synthetic
    assert train_rates.stream_shortcut_aucs(few)["status"] == "unknown"


@pytest.mark.parametrize("only", LABELS)
def test_a_codec_that_only_one_class_gets_is_refused_whichever_class_it_is(only):
    # both classes: 10% augmented, all codecs; "opus" only for `only`, mp3 shared (5% vs 10%)
    log = train_rates.RateLog()
    for label in LABELS:
        for name, k in ({"none": 1800, "codec:mp3": 100, "codec:opus": 100} if label == only
                        else {"none": 1800, "codec:mp3": 200}).items():
            for _ in range(k):
                log.record("src_a", label, name)
    with pytest.raises(train_rates.AugmentRateError, match="src_a/codec:opus") as err:
        log.check_balanced()
    assert "src_a/codec:mp3" not in str(err.value)  # the shared codec is within its bound
    assert "src_a/augmented" not in str(err.value) and "src_a/codec:" in str(err.value)
