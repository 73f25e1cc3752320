"""hearsay.train.config: unknown keys are errors, the config hash is canonical."""

from __future__ import annotations

import json

import pytest

from hearsay.train import config as tcfg
from hearsay.train import errors as terrors


def test_unknown_config_keys_are_errors():
    with pytest.raises(terrors.ConfigError, match="lr_hed"):
        tcfg.resolve_config("fold", 0, overrides={"train": {"lr_hed": 1.0}})
    with pytest.raises(terrors.ConfigError, match="unknown config sections"):
        tcfg.resolve_config("fold", 0, overrides={"trian": {}})


def test_config_hash_is_canonical_and_covers_every_section():
    a = tcfg.resolve_config("fold", 1)
    assert tcfg.config_hash(a) == tcfg.config_hash(json.loads(json.dumps(a)))
    assert tcfg.config_hash(a) != tcfg.config_hash(tcfg.resolve_config("fold", 2))
    b = tcfg.resolve_config("fold", 1, overrides={"augment": {"p_aug": 0.5}})
    assert tcfg.config_hash(a) != tcfg.config_hash(b)


@pytest.mark.parametrize("batch_size, ok", [(0, False), (1, False), (2, True), (3, False),
                                            (4, True)])
def test_a_batch_needs_at_least_one_clip_of_each_class(batch_size, ok):
    over = {"train": {"batch_size": batch_size}}
    if ok:
        assert tcfg.resolve_config("fold", 0, overrides=over)["train"]["batch_size"] == batch_size
        return
    with pytest.raises(terrors.ConfigError, match=f"batch_size.*{batch_size}"):
        tcfg.resolve_config("fold", 0, overrides=over)
