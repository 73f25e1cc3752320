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


MIX = {"bonafide": {"studio": 0.6, "phone": 0.4}, "spoof": {"tts": 1}}


@pytest.mark.parametrize("table, says", [
    ({"bonafide": MIX["bonafide"]}, "source_mix table has classes ['bonafide']: give exactly "
                                    "['bonafide', 'spoof'], each {SOURCE: SHARE, ...}"),
    ({**MIX, "noise": {"x": 1}}, "source_mix table has classes ['bonafide', 'noise', 'spoof']"),
    ({**MIX, "spoof": {}}, "source_mix['spoof'] = {}: a non-empty {SOURCE: SHARE, ...}, e.g. "
                           '{"studio": 0.6, "phone": 0.4}'),
    ({**MIX, "spoof": [1]}, "source_mix['spoof'] = [1]: a non-empty"),
    ({**MIX, "bonafide": {"studio": True}}, "source_mix['bonafide'] shares {'studio': True}: "
                                            "each a number >= 0 (0 = that source is never drawn)"),
    ({**MIX, "spoof": {"tts": "1"}}, "source_mix['spoof'] shares {'tts': '1'}"),
    ({**MIX, "spoof": {"tts": 1.5, "vc": -0.5}}, "source_mix['spoof'] shares {'vc': -0.5}"),
    ({**MIX, "spoof": {"tts": float("nan")}}, "source_mix['spoof'] shares {'tts': nan}"),
    ({**MIX, "spoof": {"tts": 0.5, "vc": 0.4999}}, "source_mix['spoof'] shares sum to 0.9999: "
                                                   "they must sum to 1 (+-1e-06) within each "
                                                   "class; rescale them"),
    ({**MIX, "bonafide": {"studio": 1 + 1.5e-6}}, "source_mix['bonafide'] shares sum to 1"),
])
def test_a_share_table_is_refused_naming_what_to_fix(table, says):
    with pytest.raises(ValueError) as err:
        tcfg.check_share_table(table)
    assert str(err.value).startswith(says)


@pytest.mark.parametrize("table", [MIX, {**MIX, "spoof": {"tts": 0, "vc": 1}},
                                   {**MIX, "bonafide": {"studio": 1 - 0.9e-6}},
                                   {**MIX, "bonafide": {"studio": 1 + 0.9e-6}}])
def test_a_share_table_of_both_classes_summing_to_one_within_the_tolerance_is_accepted(table):
    assert tcfg.check_share_table(table) is None
    assert tcfg.TrainConfig(source_mix=table).source_mix == table


def test_a_train_config_judges_its_share_table():
    with pytest.raises(ValueError, match=r"source_mix\['spoof'\] = \{\}"):
        tcfg.TrainConfig(source_mix={**MIX, "spoof": {}})


def test_the_config_hash_is_the_sha256_of_its_canonical_json():
    """The run's identity: sorted keys, no spaces, non-ASCII escaped, so a config written with
    its keys in another order, or its file re-indented, keeps its hash."""
    import hashlib

    canonical = b'{"a":{"x":[1,2.5]},"b":"caf\\u00e9"}'
    want = hashlib.sha256(canonical).hexdigest()
    assert tcfg.config_hash({"b": "café", "a": {"x": [1, 2.5]}}) == want
    assert tcfg.config_hash({"a": {"x": [1, 2.5]}, "b": "café"}) == want


def test_the_demo_preset_is_what_the_readme_says_it_is():
    """README: "128 optimiser steps of 8 crops of up to 2 s, augmentation probability 0.2, a
    frozen CNN of 32 channels, twice the `--cpu-smoke` learning rates"."""
    smoke = tcfg.resolve_config("full", None, cpu_smoke=True)
    demo = tcfg.resolve_config("full", None, cpu_smoke=True, overrides=tcfg.demo_overrides())
    t = demo["train"]
    assert (t["epochs"] * t["batches_per_epoch"], t["batch_size"], t["max_crop_s"]) == (128, 8,
                                                                                        2.0)
    assert (t["epochs"], t["batches_per_epoch"]) == (4, 32)
    assert (t["lr_head"], t["lr_backbone"]) == (2 * smoke["train"]["lr_head"],
                                                2 * smoke["train"]["lr_backbone"])
    assert demo["augment"]["p_aug"] == 0.2
    assert list(demo["model"]["conv_dim"]) == [32] * 7
    # the rest of the model is --cpu-smoke's tiny one
    assert {k: v for k, v in demo["model"].items() if k != "conv_dim"} == {
        k: v for k, v in smoke["model"].items() if k != "conv_dim"}


def test_sections_are_the_stage_sections_of_a_resolved_config_in_order():
    resolved = tcfg.resolve_config("fold", 2, cpu_smoke=True, sets=["train.lr_head=5e-4"])
    got = tcfg.sections(resolved)
    assert [type(s) for s in got] == [tcfg.SECTIONS[n] for n in tcfg.STAGE_SECTIONS]
    assert tcfg.STAGE_SECTIONS == ("train", "model", "crop", "augment")
    assert got[0].lr_head == 5e-4 and got[0].epochs == 2


def test_versions_name_each_library_a_run_records():
    import platform

    import numpy as np
    import torch
    import transformers

    import hearsay

    assert tcfg.versions() == {"python": platform.python_version(),
                               "torch": torch.__version__,
                               "transformers": transformers.__version__,
                               "numpy": np.__version__, "hearsay": hearsay.__version__,
                               "cuda": torch.version.cuda}


@pytest.mark.parametrize("kwargs,says", [
    ({"grad_accum": 0}, "grad_accum and epochs must be >= 1"),
    ({"epochs": 0}, "grad_accum and epochs must be >= 1"),
    ({"grad_clip": -0.5}, "grad_clip=-0.5: must be >= 0 (the max global grad norm; 0 switches "
                          "clipping off)"),
    ({"source_mix": "even"}, "source_mix='even': use proportional, equal or a table of shares "
                             '{"bonafide": {SOURCE: SHARE, ...}, "spoof": {...}}'),
    ({"pack": "dense"}, "pack='dense': use one of off, sdpa, flex"),
    ({"cuda_graphs": True, "compile": False},
     "cuda_graphs=true needs compile=true (CUDA graphs are torch.compile's reduce-overhead "
     "mode): set both, or cuda_graphs false"),
    ({"share_tol": 0.0}, "share_tol=0.0: a share gap in (0, 1), e.g. 0.02"),
    ({"share_tol": 1.0}, "share_tol=1.0: a share gap in (0, 1), e.g. 0.02"),
])
def test_each_train_setting_out_of_its_range_is_refused_in_its_own_words(kwargs, says):
    with pytest.raises(ValueError) as err:
        tcfg.TrainConfig(**kwargs)
    assert str(err.value) == says


@pytest.mark.parametrize("kwargs", [{"grad_accum": 1, "epochs": 1}, {"grad_clip": 0.0},
                                    {"cuda_graphs": True, "compile": True},
                                    {"cuda_graphs": False, "compile": False},
                                    {"share_tol": 0.999}, {"share_tol": 1e-9}])
def test_each_train_setting_at_its_edge_is_taken(kwargs):
    assert tcfg.TrainConfig(**kwargs)


def test_a_config_layer_or_section_that_is_no_object_is_refused_naming_it():
    with pytest.raises(tcfg.ConfigError) as err:
        tcfg.resolve_config("full", None, overrides="train")
    assert str(err.value) == ("config: a JSON object {section: {key: value}} is needed, not "
                              "'train'")
    with pytest.raises(tcfg.ConfigError) as err:
        tcfg.resolve_config("full", None, overrides={"train": 3})
    assert str(err.value) == ("config section 'train' = 3: a JSON object {KEY: VALUE, ...} is "
                              "needed")
    assert tcfg.resolve_config("full", None)["cpu_smoke"] is False
    assert tcfg.resolve_config("full", None)["train"]["epochs"] != 2  # no smoke preset
