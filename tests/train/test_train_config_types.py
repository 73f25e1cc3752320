"""`hearsay train --check-config` and a run judge every config value's type and range before any
work, name the key (and the nearest known one), and take `--set SECTION.KEY=VALUE` overrides
into the resolved config and its hash."""

from __future__ import annotations

import json

import pytest

import hearsay.train as tr
from hearsay.train import config as tcfg
from hearsay.train import errors as terrors


def _check(tmp_path, capsys, doc: dict, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "train.json"
    path.write_text(json.dumps(doc))
    code = tr.main(["--check-config", "--config", str(path), "--fold", "3", *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(("doc", "named"), [
    ({"train": {"lr_head": "5e-4"}}, "train.lr_head = '5e-4': input should be a valid number"),
    ({"train": {"bf16": "false"}}, "train.bf16 = 'false': input should be a valid boolean"),
    ({"train": {"bf16": 0}}, "train.bf16 = 0: input should be a valid boolean"),
    ({"train": {"epochs": "3"}}, "train.epochs = '3': input should be a valid integer"),
    ({"train": {"epochs": 2.5}}, "train.epochs = 2.5: input should be a valid integer"),
    ({"train": {"tripwire_auc": "off"}}, "train.tripwire_auc = 'off'"),
    ({"model": {"keep_layers": "12"}}, "model.keep_layers = '12'"),
    ({"crop": {"buckets_s": [2.0, "4"]}}, "crop.buckets_s = (2.0, '4')"),
    ({"augment": {"p_aug": True}}, "augment.p_aug = True: input should be a valid number"),
])
def test_check_config_refuses_a_value_of_the_wrong_type_naming_the_key(tmp_path, capsys, doc,
                                                                        named):
    code, out, err = _check(tmp_path, capsys, doc)
    assert code == terrors.EXIT_USAGE and out == ""
    assert named in err


@pytest.mark.parametrize(("key", "bad", "edge"), [
    ("epochs", 0, 1), ("lr_head", 0.0, 1e-9), ("warmup_frac", 1.01, 1.0),
    ("label_smoothing", 1.0, 0.99), ("workers", -1, 0), ("log_every_s", -0.5, 0.0),
])
def test_check_config_refuses_a_value_out_of_range_and_takes_the_edge(tmp_path, capsys, key, bad,
                                                                       edge):
    code, _, err = _check(tmp_path, capsys, {"train": {key: bad}})
    assert code == terrors.EXIT_USAGE and f"train.{key} = {bad!r}" in err
    code, out, _ = _check(tmp_path, capsys, {"train": {key: edge}})
    assert code == terrors.EXIT_OK and "config hash" in out


def test_an_integer_is_a_float_and_keeps_the_hash_of_the_same_json(tmp_path, capsys):
    code, out, _ = _check(tmp_path, capsys, {"train": {"lr_head": 1, "grad_clip": 0}})
    assert code == terrors.EXIT_OK
    resolved = tcfg.resolve_config("fold", 3, overrides={"train": {"lr_head": 1, "grad_clip": 0}})
    assert resolved["train"]["lr_head"] == 1 and tcfg.config_hash(resolved) in out


def test_unknown_keys_and_sections_name_the_nearest_known_one(tmp_path, capsys):
    code, _, err = _check(tmp_path, capsys, {"train": {"lr_hed": 1e-4}})
    assert code == terrors.EXIT_USAGE and "(did you mean 'lr_head'?)" in err
    code, _, err = _check(tmp_path, capsys, {"trian": {}})
    assert code == terrors.EXIT_USAGE and "(did you mean 'train'?)" in err
    code, _, err = _check(tmp_path, capsys, {"train": {"zzzz": 1}})
    assert code == terrors.EXIT_USAGE and "did you mean" not in err and "known:" in err


def test_set_overrides_the_config_file_and_changes_the_recorded_hash(tmp_path, capsys):
    doc = {"train": {"lr_head": 5e-4, "bf16": True}}
    code, base, _ = _check(tmp_path, capsys, doc)
    assert code == 0
    code, out, _ = _check(tmp_path, capsys, doc, "--set", "train.lr_head=1e-4",
                          "--set", "train.bf16=false", "--set", "train.source_mix=equal")
    resolved = tcfg.resolve_config("fold", 3, overrides=doc, sets=[
        "train.lr_head=1e-4", "train.bf16=false", "train.source_mix=equal"])
    assert resolved["train"]["lr_head"] == 1e-4 and resolved["train"]["bf16"] is False
    assert resolved["train"]["source_mix"] == "equal"  # not JSON: the string itself
    assert code == 0 and tcfg.config_hash(resolved) in out and out != base


@pytest.mark.parametrize(("item", "named"), [
    ("train.lr_head=abc", "train.lr_head = 'abc'"),
    ("train.lr_hed=1e-4", "did you mean 'lr_head'?"),
    ("lr_head=1e-4", "give SECTION.KEY=VALUE"),
    ("train.lr_head", "give SECTION.KEY=VALUE"),
    ("trian.lr_head=1", "unknown section 'trian' (did you mean 'train'?)"),
])
def test_a_bad_set_is_a_usage_error_naming_it(tmp_path, capsys, item, named):
    code, _, err = _check(tmp_path, capsys, {}, "--set", item)
    assert code == terrors.EXIT_USAGE and named in err


def test_a_run_refuses_a_string_lr_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    code = tr.main(["--bundle", str(tmp_path / "no-bundle"), "--fold", "0", "--out", str(out),
                    "--cpu-smoke", "--set", "train.lr_head=\"5e-4\""])
    assert code == terrors.EXIT_USAGE
    assert "train.lr_head = '5e-4'" in capsys.readouterr().err and not out.exists()
