"""configs/m5.json, the campaign's recipe: the run spec's amended augmentation (overall p_aug 0.65,
RawBoost convolutive on 0.25 of the augmented clips, trim jitter, band-limit upweighted by the
factor chosen in configs/README.md), resolved the way `hearsay train --config` resolves it, and
its realised rates per source x class equal across the classes."""

import json
from pathlib import Path

import numpy as np
import pytest

from hearsay.sound import augment
from hearsay.train.config import resolve_config, sections
from hearsay.train.rates import RateLog

M5 = Path(__file__).resolve().parents[2] / "configs" / "m5.json"
BANDLIMIT_FACTOR = 2.0  # chosen (configs/README.md): the amendment names no number


def m5_augment() -> augment.AugmentConfig:
    return sections(resolve_config("full", None, overrides=json.loads(M5.read_text())))[3]


def test_m5_is_the_amended_recipe():
    cfg = m5_augment()
    w = cfg.weights()
    assert cfg.p_aug == 0.65
    assert w["rawboost"] / sum(w.values()) == 0.25  # RawBoost convolutive (LnL) at p 0.25
    assert w["trim_jitter"] > 0 and cfg.trim_top_db == (30.0, 40.0)
    assert cfg.trim_margin_ms == (0.0, 200.0)
    others = {t: v for t, v in w.items() if t not in ("bandlimit", "rawboost")}
    assert set(others.values()) == {w["bandlimit"] / BANDLIMIT_FACTOR}


def test_m5_realised_rates_per_source_and_class_are_the_recipes_and_balanced():
    cfg, log = m5_augment(), RateLog()
    rng = np.random.default_rng(0)
    codecs = ";".join(augment.CODECS)
    n = 6000  # clips per source x class
    for source in ("studio", "phone"):
        for label in ("bonafide", "spoof"):
            for _ in range(n):
                log.record(source, label, augment.choose(rng, cfg, codecs))
    assert log.check_balanced()["status"] == "balanced"
    w = cfg.weights()
    for by_label in log.rates().values():
        for got in by_label.values():
            se = np.sqrt(0.25 / got["n"])  # the binomial standard error's bound
            assert got["augmented"] == pytest.approx(0.65, abs=4 * se)
            for t in ("rawboost", "bandlimit", "noise"):
                want = 0.65 * w[t] / sum(w.values())
                assert got["types"][t] == pytest.approx(want, abs=4 * se)
