"""The train config described from its typed sections: `hearsay train --print-config` prints every
resolved key with its value, type, default and help; docs/CONFIG.md is generated from the same
sections and must be current."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from hearsay.train import config_doc
from hearsay.train import main as train_main
from hearsay.train.config import SECTIONS, resolve_config
from hearsay.util import config

LINE = re.compile(r"^([ *])(\w+)\.(\w+) = (.*?)  # ([^;]+); default (.*?); (.+)$")


@dataclasses.dataclass(frozen=True)
class Example:
    """A section as the stages write theirs."""

    a: int = 1  # the a count, per clip
    # the b and
    # c pair, s
    b: float = 2.0
    c: float = 3.0
    d: str | None = None  # a comment that goes on
    #                       over two lines
    e: tuple[int, ...] = (1, 2)


def test_keys_read_type_default_and_the_fields_own_comment():
    got = {k.name: (k.type, k.default, k.help) for k in config.keys(Example)}
    assert got == {"a": ("int", 1, "the a count, per clip"),
                   "b": ("float", 2.0, "the b and c pair, s"),
                   "c": ("float", 3.0, ""),  # shares b's comment: the reference says so
                   "d": ("str | None", None, "a comment that goes on over two lines"),
                   "e": ("tuple[int, ...]", [1, 2], "")}


def test_print_config_prints_every_resolved_key_with_value_type_and_default(capsys):
    argv = ["--print-config", "--fold", "3", "--set", "train.lr_head=0.001",
            "--set", "crop.buckets_s=[2.0, 4.0]"]
    assert train_main(argv) == 0
    out = capsys.readouterr().out
    resolved = resolve_config("fold", 3, sets=["train.lr_head=0.001", "crop.buckets_s=[2.0, 4.0]"])
    assert out.splitlines()[0] == "# hearsay train: resolved config for fold 3"
    seen = {}
    for line in out.splitlines():
        if m := LINE.match(line):
            mark, section, key, value, typ, default, help_ = m.groups()
            seen[(section, key)] = (mark, json.loads(value), typ, json.loads(default), help_)
    want = {(s, k.name) for s, cls in SECTIONS.items() for k in config.keys(cls)}
    assert set(seen) == want  # every key, nothing else
    for (section, key), (mark, value, _, default, help_) in seen.items():
        assert value == json.loads(json.dumps(resolved[section][key]))  # the resolved value
        assert (mark == "*") == (value != default), (section, key)
        assert help_
    assert seen[("train", "lr_head")][:4] == ("*", 0.001, "float", 0.0005)
    assert seen[("crop", "buckets_s")][0] == "*" and seen[("crop", "buckets_s")][1] == [2.0, 4.0]
    assert seen[("train", "epochs")][0] == " " and seen[("train", "epochs")][2] == "int"


def test_print_config_refuses_a_bad_value_as_a_run_would(capsys):
    assert train_main(["--print-config", "--full", "--set", "train.lr_head=fast"]) == 2
    assert "train.lr_head" in capsys.readouterr().err


def test_print_config_shows_the_cpu_smoke_preset_as_not_the_default(capsys):
    assert train_main(["--print-config", "--full", "--cpu-smoke"]) == 0
    out = capsys.readouterr().out
    assert "(--cpu-smoke preset)" in out.splitlines()[0]
    assert "*train.batch_size = 8  # int; default 64;" in out


def test_config_md_is_generated_from_the_sections_and_current(tmp_path, capsys):
    assert config_doc.main(["--check"]) == 0, capsys.readouterr().err
    text = config_doc.DOC.read_text()
    for section, cls in SECTIONS.items():
        assert f"## `{section}`" in text
        for k in config.keys(cls):
            assert f"| `{k.name}` | `{k.type.replace('|', chr(92) + '|')}` |" in text
    stale = tmp_path / "CONFIG.md"
    stale.write_text(text.replace("| `lr_head` | `float` | `0.0005` |",
                                  "| `lr_head` | `float` | `0.001` |"))
    assert config_doc.main(["--check", "--out", str(stale)]) == 1
    assert "python -m hearsay.train.config_doc" in capsys.readouterr().err
    assert config_doc.main(["--out", str(stale)]) == 0 and stale.read_text() == text


@pytest.mark.parametrize("cls", list(SECTIONS.values()), ids=list(SECTIONS))
def test_every_section_key_has_a_help_or_shares_the_one_above(cls):
    keys = config.keys(cls)
    assert keys[0].help, f"{cls.__name__}.{keys[0].name} has no comment in the source"
