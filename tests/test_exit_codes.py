"""The first-use cases (a --device this machine lacks, an unbuilt bundle, a demo corpus's planted
bad files) exit with a documented code and a message that names the fix, and every command's
--help lists its exit codes. That each listed code is reached, one case per (command, code), is
tests/test_exit_codes_every_command.py (it reads the lists with `listed_codes` below)."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
import torch
from fakes.fake_runs import make_run

import hearsay.deploy.cli as score_cli
from hearsay import train as tr
from hearsay.bundle import build, splits
from hearsay.demo import corpus
from hearsay.evaluate import score
from hearsay.train import errors as terrors


def listed_codes(module) -> set[int]:
    """The codes of the "Exit codes:" paragraph of a command's --help (its module docstring)."""
    text = module.__doc__.split("Exit codes:", 1)[1].split("\n\n", 1)[0]
    return {int(n) for n in re.findall(r"(?:^|[;,]) ?(\d+) ", " " + " ".join(text.split()))}


def test_listed_codes_reads_each_commands_help():
    assert listed_codes(score) == {0, 2, 3, 4}
    assert listed_codes(build) == {0, 1, 2, 3, 4}
    assert listed_codes(tr) == set(range(12))
    assert listed_codes(corpus) == {0, 2, 3} and listed_codes(splits) == {0, 2, 3, 4}
    assert listed_codes(score_cli) == {0, 1, 2, 3, 4, 5, 6, 130, 141}


def _run(main, argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's usage error
            code = e.code
    return code, err.getvalue()


# --------------------------------------------------------------------------- hearsay score


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:1", "tpu", "cpu:x"])
def test_score_on_a_device_this_machine_lacks_is_a_usage_error_naming_the_fix(tmp_path, device):
    code, err = _run(score.main, ["--bundle", str(tmp_path), "--run", str(tmp_path), "--split",
                                  "test", "-o", str(tmp_path / "o.csv"), "--device", device])
    assert code == score.EXIT_USAGE and f"hearsay score: --device {device!r}"[:22] in err
    assert ("use --device cpu" in err) or ("use cpu or cuda" in err), err
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_score_run_and_assemble_on_a_device_this_machine_lacks_are_usage_errors(tmp_path):
    from hearsay.evaluate import assemble, score_run

    run = make_run(tmp_path / "full", job="full", fold=None, seed=9)
    code, err = _run(score_run.main, ["--run", str(run), "--bundle", str(tmp_path), "--out",
                                      str(tmp_path / "s"), "--device", "cuda"])
    assert code == score_run.EXIT_USAGE and "use --device cpu" in err
    assert not (tmp_path / "s").exists()
    code, err = _run(assemble.main, ["--pinned", str(tmp_path / "pin.json"), "--bundle",
                                     str(tmp_path), "--device", "cuda"])
    assert code == assemble.EXIT_USAGE and "use --device cpu" in err


def test_device_problem_takes_the_cpu():
    assert score.device_problem("cpu") is None


# --------------------------------------------------------------------------- hearsay bundle


def _corpus(root, bad: bool = False):
    """4 tone clips (+ one text file named .wav when `bad`) and their manifest."""
    root.mkdir(parents=True)
    rows = []
    for i in range(5 if bad else 4):
        p = root / f"c{i}.wav"
        if i == 4:
            p.write_text("not audio")
        else:
            sf.write(p, 0.3 * np.sin(np.arange(16000) * (0.05 + 0.01 * i)), 16000,
                     subtype="PCM_16")
        rows.append({"id": f"c{i}", "path": p.name, "label": "bonafide" if i % 2 else "spoof",
                     "generator": "bonafide" if i % 2 else "voc-a", "source": "s",
                     "group": f"g{i}", "fold": str(i % 5), "train_scope": "core"})
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    return root / "manifest.csv"


def test_bundle_over_the_failure_gate_says_why_and_the_value_that_passes(tmp_path):
    opts = ["--codecs", "", "--workers", "1", "--no-progress"]
    bad = _corpus(tmp_path / "bad", bad=True)
    code, err = _run(build.main, [str(bad), str(tmp_path / "b4"), *opts])
    assert code == build.EXIT_TOO_MANY_FAILURES
    # the failure says why and the value that would pass: 1 undecodable clip of 5 = 20 %
    assert "1 decode failures (listed above) = 20.00% of rows" in err
    assert "--max-fail-frac 0.2;" in err and "needs --max-fail-frac 0.02" in err
    code, _ = _run(build.main, [str(bad), str(tmp_path / "b5"), *opts, "--max-fail-frac", "0.2"])
    assert code == build.EXIT_OK  # the value named passes


# --------------------------------------------------------------------------- hearsay train


def test_train_on_a_missing_or_unbuilt_bundle_is_a_usage_error_naming_the_build(tmp_path):
    (tmp_path / "unbuilt").mkdir()
    for bundle in (tmp_path / "missing", tmp_path / "unbuilt"):
        code, err = _run(tr.main, ["--bundle", str(bundle), "--fold", "0", "--out",
                                   str(tmp_path / "r"), "--cpu-smoke"])
        assert code == terrors.EXIT_USAGE
        assert f"no bundle_meta.json (build it: hearsay bundle MANIFEST {bundle})" in err


def test_train_with_a_missing_config_file_is_a_usage_error(tmp_path):
    code, err = _run(tr.main, ["--bundle", str(tmp_path), "--fold", "0", "--out",
                               str(tmp_path / "r"), "--cpu-smoke", "--config",
                               str(tmp_path / "none.json")])
    assert code == terrors.EXIT_USAGE and "none.json" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_train_without_cuda_or_cpu_smoke_is_device_refused(tmp_path):
    code, err = _run(tr.main, ["--bundle", str(tmp_path), "--fold", "0", "--out",
                               str(tmp_path / "r")])
    assert code == terrors.EXIT_DEVICE and "--cpu-smoke" in err


# --------------------------------------------------------------------------- every command


def test_every_commands_help_lists_its_exit_codes_with_0_and_2():
    import importlib

    from hearsay.cli import COMMANDS

    modules = {name: importlib.import_module(mod) for name, (mod, _) in COMMANDS.items()}
    modules["hearsay-score"] = score_cli
    for name, module in modules.items():
        assert "Exit codes" in (module.__doc__ or ""), name
        assert {0, 2} <= listed_codes(module), name
