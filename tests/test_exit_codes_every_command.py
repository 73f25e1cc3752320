"""Every exit code each command's --help lists is reached, one case per (command, code), and on
that case's input no other code occurs: `hearsay <command>` for every command of hearsay.cli and
`hearsay-score`. A code without an input here fails by name ("no input reaches ..."); an input
for a code the help does not list fails too. A case's command runs in this process through
`hearsay.cli.main`, so an exception (exit 1 with a traceback for a user error) fails it.

Most cases are real inputs (a missing file, a refused run, a real tiny export). A few codes are
reached through a patch, said so at the case: a complete training run and a complete demo (their
real runs are tests/train/test_train_run.py and `make demo`), train's error classes (each is
raised for real by its own tests), assemble's F1-F6 failure, export's failed parity A (the real
failing graph is tests/export/test_export.py) and hearsay-score's interrupt. Code 1 of `bundle` is
its "unexpected error" (a bug): its case is an unexpected exception, which reaches the
interpreter, as it would from the console script.

Closed stdout (`| head`): every command ends quietly with 141 (tested in a subprocess, the only
place where the interpreter's own flush at exit shows)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
import torch
from fakes.fake_runs import TREE_SHA, make_bundle, make_run
from test_exit_codes import _corpus, listed_codes

import hearsay.deploy.cli as score_cli
from hearsay import cli
from hearsay.contracts import ledger

SRC = Path(__file__).resolve().parents[1] / "src"
COMMANDS = [*cli.COMMANDS, "hearsay-score"]


def module_of(command: str):
    import importlib

    return score_cli if command == "hearsay-score" else importlib.import_module(
        cli.COMMANDS[command][0])


LISTED = [(c, code) for c in COMMANDS for code in sorted(listed_codes(module_of(c)))]


@dataclass
class Call:
    argv: list[str]
    closed_stdout: bool = False  # run in a subprocess whose stdout's reader has gone
    unexpected: bool = False  # the input raises (a bug's path): the interpreter exits 1


CASES: dict[tuple[str, int], Callable] = {}


def case(command: str, code: int):
    def register(make):
        CASES[(command, code)] = make
        return make
    return register


class World:
    """What several cases read, built once per module on first use (tiny: seconds each)."""

    def __init__(self, root: Path, request):
        self.root, self.request = root, request

    @cached_property
    def bundle(self):
        return make_bundle(self.root / "bundle", n_per_fold=1, n_holdout=2, n_test=2)

    @cached_property
    def full(self) -> Path:
        return make_run(self.root / "full", job="full", fold=None, seed=9)

    @cached_property
    def other(self) -> Path:  # a complete run of another bundle
        return make_run(self.root / "other", job="full", fold=None, seed=1, tree_sha="f" * 64)

    @cached_property
    def model(self) -> Path:
        """The full run exported (no int8), the folder hearsay-score and parity read."""
        out = self.root / "model"
        code, err = call("export", ["onnx", str(self.full), "--out", str(out), *EXPORT])
        assert code == 0, err
        return out

    @cached_property
    def box_logits(self) -> Path:
        """The full run's parity-B logits as score-run records them on its box."""
        from hearsay.evaluate import score, score_run

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(score, "load_bundle", lambda _p, verify=False: self.bundle)
            code, err = call("score-run", ["--run", str(self.full), "--bundle",
                                           str(self.bundle.root), "--out",
                                           str(self.root / "box"), "--parity-clips", "2"])
        assert code == 0, err
        return self.root / "box" / score_run.PARITY_FILE

    @cached_property
    def pin(self) -> Path:
        """A campaign's pin: five fold runs and the full run on `bundle`."""
        from test_assemble import write_pin

        runs = {f"fold{k}": make_run(self.root / "runs" / f"fold{k}", fold=k, seed=k)
                for k in range(5)}
        runs["full"] = self.full
        return write_pin(self.root / "models" / "s1", runs)

    @cached_property
    def clips(self) -> Path:
        d = self.root / "clips"
        d.mkdir()
        t = np.arange(16000) / 16000
        sf.write(d / "a.wav", (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000)
        return d

    @cached_property
    def corpus(self) -> Path:
        return self.request.getfixturevalue("demo_corpus")


@pytest.fixture(scope="module")
def world(tmp_path_factory, request):
    return World(tmp_path_factory.mktemp("world"), request)


def call(command: str, argv: list[str]) -> tuple[int, str]:
    """Run a command here: (exit code, stderr). argparse's usage error is its SystemExit."""
    err, out = io.StringIO(), io.StringIO()
    run = score_cli.main if command == "hearsay-score" else (lambda a: cli.main([command, *a]))
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = run(argv)
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def call_closed_stdout(command: str, argv: list[str], env: dict | None = None):
    """Run a command in a subprocess whose stdout is a pipe with no reader: (code, stderr)."""
    r, w = os.pipe()
    os.close(r)
    prog = ["hearsay.deploy"] if command == "hearsay-score" else ["hearsay.cli", command]
    base = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env = {**base, "PYTHONPATH": str(SRC), **(env or {})}
    try:
        p = subprocess.run([sys.executable, "-m", *prog, *argv], stdout=w, stderr=subprocess.PIPE,
                           text=True, env=env, timeout=300)
    finally:
        os.close(w)
    return p.returncode, p.stderr


@pytest.mark.parametrize(("command", "code"), LISTED, ids=[f"{c}-{n}" for c, n in LISTED])
def test_each_listed_exit_code_is_reached(command, code, world, tmp_path, monkeypatch):
    make = CASES.get((command, code))
    assert make is not None, (f"no input reaches `{command}` exit {code}: add a case here, or "
                              "take the code off its --help")
    got = make(world, tmp_path, monkeypatch)
    if got.closed_stdout:
        rc, err = call_closed_stdout(command, got.argv)
        assert "Traceback" not in err and "Exception ignored" not in err, err  # quiet
    elif got.unexpected:
        with pytest.raises(Exception):  # noqa: B017, PT011 - any exception: the interpreter's 1
            call(command, got.argv)
        rc, err = 1, ""
    else:
        rc, err = call(command, got.argv)
    assert rc == code, f"`{command} {' '.join(got.argv)}` exited {rc}, not {code}:\n{err}"


def test_every_case_is_of_a_listed_code():
    assert set(CASES) - set(LISTED) == set()


# --------------------------------------------------------------------------- the stage commands


@case("demo", 0)
def _(w, tmp, mp):  # patched: the real run is `make demo` (minutes)
    from hearsay import demo

    mp.setattr(demo, "run_demo", lambda out: {"out": out, "metrics": {}})
    mp.setattr(demo, "summary", lambda ctx: ["a summary line"])
    return Call(["--out", str(tmp / "d")])


@case("demo", 1)
def _(w, tmp, mp):
    (tmp / "afile").write_text("")
    return Call(["--out", str(tmp / "afile" / "d")])  # the first stage cannot write


@case("demo", 2)
def _(w, tmp, mp):
    return Call(["--outt", str(tmp)])


TINY_DEMO = ["--inner-groups", "1", "--per-group", "1", "--holdout-groups", "0", "--test-groups",
             "0", "--extra-rows", "0", "--max-s", "1.2", "--bad-files", "false"]


@case("demo-data", 0)
def _(w, tmp, mp):
    return Call([str(tmp / "c"), *TINY_DEMO])


@case("demo-data", 2)
def _(w, tmp, mp):
    return Call([str(tmp / "c"), *TINY_DEMO, "--min-s", "2", "--max-s", "1"])


@case("demo-data", 3)
def _(w, tmp, mp):
    (tmp / "afile").write_text("")
    return Call([str(tmp / "afile" / "c"), *TINY_DEMO])


def _itw(tmp: Path) -> Path:
    rel = tmp / "release_in_the_wild"
    rel.mkdir()
    (rel / "meta.csv").write_text("file,speaker,label\n0.wav,A,bona-fide\n1.wav,B,spoof\n")
    for name in ("0.wav", "1.wav"):
        (rel / name).write_bytes(b"")
    return rel / "meta.csv"


@case("manifest-import", 0)
def _(w, tmp, mp):
    return Call(["in-the-wild", str(_itw(tmp)), "--out", str(tmp / "m.csv")])


@case("manifest-import", 2)
def _(w, tmp, mp):
    return Call(["in-the-wild", str(tmp / "meta.csv")])  # no --out


@case("manifest-import", 3)
def _(w, tmp, mp):
    return Call(["in-the-wild", str(tmp / "none.csv"), "--out", str(tmp / "m.csv")])


@case("manifest-import", 4)
def _(w, tmp, mp):
    (tmp / "m.csv").write_text("")
    return Call(["in-the-wild", str(_itw(tmp)), "--out", str(tmp / "m.csv")])


SPLITS_CONFIG = {"holdout_families": ["phq"], "family_exclusion": {"0": ["smear"]}}


@case("splits", 0)
def _(w, tmp, mp):
    (tmp / "c.json").write_text(json.dumps(SPLITS_CONFIG))
    return Call(["make", str(w.corpus), "--out", str(tmp / "s"), "--config", str(tmp / "c.json")])


@case("splits", 2)
def _(w, tmp, mp):
    return Call(["make"])


@case("splits", 3)
def _(w, tmp, mp):
    return Call(["make", str(w.corpus), "--out", str(tmp / "s"), "--config",
                 str(tmp / "none.json")])  # a config file that is not there


@case("splits", 4)
def _(w, tmp, mp):
    (tmp / "afile").write_text("")
    (tmp / "c.json").write_text(json.dumps(SPLITS_CONFIG))
    return Call(["make", str(w.corpus), "--out", str(tmp / "afile" / "s"), "--config",
                 str(tmp / "c.json")])


BUNDLE_OPTS = ["--codecs", "", "--workers", "1", "--no-progress"]


@case("bundle", 0)
def _(w, tmp, mp):
    return Call([str(_corpus(tmp / "good")), str(tmp / "b"), *BUNDLE_OPTS])


@case("bundle", 1)
def _(w, tmp, mp):  # an unexpected error, as a bug would raise it
    from hearsay.bundle import build

    def boom(*_a, **_k):
        raise RuntimeError("a bug")

    mp.setattr(build, "build_bundle", boom)
    return Call([str(_corpus(tmp / "good")), str(tmp / "b"), *BUNDLE_OPTS], unexpected=True)


@case("bundle", 2)
def _(w, tmp, mp):
    return Call([str(tmp / "manifest.csv")])  # no OUT


@case("bundle", 3)
def _(w, tmp, mp):
    good = _corpus(tmp / "good")
    pd.read_csv(good).drop(columns=["label"]).to_csv(tmp / "m.csv", index=False)
    return Call([str(tmp / "m.csv"), str(tmp / "b"), *BUNDLE_OPTS])


@case("bundle", 4)
def _(w, tmp, mp):
    return Call([str(_corpus(tmp / "bad", bad=True)), str(tmp / "b"), *BUNDLE_OPTS])


TRAIN = ["--fold", "0", "--cpu-smoke"]


def _train_raises(code: int):
    """train's run() patched to raise the error class of `code` (its own tests raise it)."""
    from hearsay import store as stores
    from hearsay.detector.model import WeightsError
    from hearsay.train import errors as terrors
    from hearsay.train import rates

    by_code = {c.code: c for c in (terrors.DeviceRefused, terrors.NonFinite, terrors.Tripwire,
                                   terrors.ResumeRefused, terrors.FoldLeak, terrors.ShareDrift)}
    by_code.update({terrors.EXIT_STORE: stores.StoreError, terrors.EXIT_WEIGHTS: WeightsError,
                    terrors.EXIT_RATES: rates.AugmentRateError, 1: OSError})

    def make(w, tmp, mp):
        from hearsay import train

        def boom(*_a, **_k):
            raise by_code[code]("x")

        mp.setattr(train, "run", boom)
        return Call(["--bundle", str(tmp), "--out", str(tmp / "r"), *TRAIN])
    return make


for _code in (1, *range(3, 12)):
    case("train", _code)(_train_raises(_code))


@case("train", 0)
def _(w, tmp, mp):  # patched: a complete run is tests/train/test_train_run.py
    from hearsay import train

    mp.setattr(train, "run", lambda *_a, **_k: {"steps": 2, "epochs": 1})
    return Call(["--bundle", str(tmp), "--out", str(tmp / "r"), *TRAIN])


@case("train", 2)
def _(w, tmp, mp):
    return Call(["--bundle", str(tmp / "none"), "--out", str(tmp / "r"), *TRAIN])  # no bundle


def _pilot_run(tmp: Path, job: str) -> str:
    val = [{"step": 4 * e, "epoch": e, "epoch_end": True, "auc": 0.8, "eer": 0.2, "min_dcf": m,
            "pi": 0.3, "n": 10} for e, m in ((1, 0.5), (2, 0.31), (3, 0.3))]
    (tmp / job).mkdir()
    (tmp / job / "run_meta.json").write_text(json.dumps({
        "job": job, "fold": None, "complete": True, "epochs": 3, "history": {"val": val}}))
    return str(tmp / job)


@case("pilot-epochs", 0)
def _(w, tmp, mp):
    return Call([_pilot_run(tmp, "pilot")])


@case("pilot-epochs", 2)
def _(w, tmp, mp):
    return Call([])


@case("pilot-epochs", 3)
def _(w, tmp, mp):
    return Call([str(tmp / "none")])


@case("pilot-epochs", 4)
def _(w, tmp, mp):
    return Call([_pilot_run(tmp, "full")])  # not a pilot run


def _hand_made_bundle(w, mp):
    from hearsay.evaluate import score

    mp.setattr(score, "load_bundle", lambda _p, verify=False: w.bundle)
    mp.setattr("hearsay.contracts.bundle.load_bundle", lambda _p, verify=False: w.bundle)
    return ["--bundle", str(w.bundle.root)]


@case("score", 0)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--split", "test", "--run", str(w.full), "-o",
                 str(tmp / "a.csv")])


@case("score", 2)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--split", "test", "--run", str(w.full)])  # no -o


@case("score", 3)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--split", "test", "--run", str(tmp / "none"), "-o",
                 str(tmp / "a.csv")])


@case("score", 4)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--split", "test", "--run", str(w.other), "-o",
                 str(tmp / "a.csv")])  # the run trained on another bundle


@case("score-run", 0)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--run", str(w.full), "--out", str(tmp / "s")])


@case("score-run", 2)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--run", str(w.full), "--out", str(tmp / "s"),
                 "--workers", "many"])


@case("score-run", 3)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--run", str(tmp / "none"), "--out", str(tmp / "s")])


@case("score-run", 4)
def _(w, tmp, mp):
    return Call([*_hand_made_bundle(w, mp), "--run", str(w.other), "--out", str(tmp / "s")])


def _scores_and_key(tmp: Path) -> list[str]:
    paths = [f"c{i}" for i in range(8)]
    pd.DataFrame({"path": paths, "logit": np.arange(8.0)}).to_csv(tmp / "s.csv", index=False)
    pd.DataFrame({"path": paths, "label": ["bonafide"] * 4 + ["spoof"] * 4}).to_csv(
        tmp / "key.csv", index=False)
    return [str(tmp / "s.csv"), "--key", str(tmp / "key.csv")]


@case("metrics", 0)
def _(w, tmp, mp):
    return Call(_scores_and_key(tmp))


@case("metrics", 2)
def _(w, tmp, mp):
    return Call([*_scores_and_key(tmp), "--pi", "1.5"])


@case("metrics", 3)
def _(w, tmp, mp):
    return Call([str(tmp / "none.csv"), "--key", str(tmp / "none.csv")])


def _drop_rule(tmp: Path, n_with: int = 1000) -> list[str]:
    """corpus-probe --drop-rule over two recipes' inner-fold scores and probe files
    (tests/test_corpus_decision.py's); `n_with` other than 1000: the with-side probe file holds
    other clips (refused)."""
    from test_corpus_decision import key_and_oof, probe_csv, probe_result

    key, without = key_and_oof(tmp, "core", 2.0)
    _, with_ = key_and_oof(tmp, "extra", 5.0)
    key.to_csv(tmp / "key.csv", index=False)
    (tmp / "probe.json").write_text(json.dumps(probe_result()))
    return ["--drop-rule", "--without", str(without), "--with", str(with_),
            "--probe-without", str(probe_csv(tmp / "p0.csv", 30)),
            "--probe-with", str(probe_csv(tmp / "p1.csv", 50, n=n_with)),
            "--key", str(tmp / "key.csv"), "--probe-result", str(tmp / "probe.json"),
            "--decision", str(tmp / "decision.json")]


@case("corpus-probe", 0)
def _(w, tmp, mp):
    return Call(_drop_rule(tmp))


@case("corpus-probe", 4)
def _(w, tmp, mp):
    return Call(_drop_rule(tmp, n_with=999))


@case("corpus-probe", 2)
def _(w, tmp, mp):
    return Call([])


@case("corpus-probe", 3)
def _(w, tmp, mp):
    return Call([str(tmp / "none.csv"), "--corpus", "a"])


def _recipes(tmp: Path, held: bool = False) -> list[str]:
    """Two recipes' inner-fold score CSVs over 20 clips (a holdout row in the first if `held`)."""
    paths = [f"c{i}" for i in range(20)]
    y = np.arange(20) >= 10
    for name, z in (("a", 3.0 * y), ("b", 0.5 * y)):
        df = pd.DataFrame({"path": paths, "fold": "0", "split": "inner_oof",
                           "logit": z + np.random.default_rng(0).normal(size=20)})
        if held and name == "a":
            df.loc[0, "split"] = "holdout"
        df.to_csv(tmp / f"{name}.csv", index=False)
    pd.DataFrame({"path": paths, "label": np.where(y, "spoof", "bonafide")}).to_csv(
        tmp / "key.csv", index=False)
    return ["--recipe", f"a={tmp / 'a.csv'}", "--recipe", f"b={tmp / 'b.csv'}",
            "--key", str(tmp / "key.csv")]


@case("compare", 0)
def _(w, tmp, mp):
    return Call(_recipes(tmp))


@case("compare", 2)
def _(w, tmp, mp):
    return Call(_recipes(tmp)[2:])  # one recipe


@case("compare", 3)
def _(w, tmp, mp):
    return Call([*_recipes(tmp)[:3], f"b={tmp / 'nothing'}", *_recipes(tmp)[4:]])


@case("compare", 4)
def _(w, tmp, mp):
    return Call(_recipes(tmp, held=True))  # a holdout row offered for selection


def _bar(w, tmp, mp, pick: str) -> list[str]:
    """An earlier detector's folder scoring every row of the bundle, picked by --pick."""
    m = w.bundle.manifest
    mp.setattr("hearsay.contracts.bundle.load_bundle", lambda _p: w.bundle)
    rows = m[["path", "fold"]].copy()
    rows["split"] = rows["fold"].map(lambda f: f if f in ("holdout", "test") else "inner_oof")
    rows["logit"] = np.linspace(-1, 1, len(rows))
    (tmp / "earlier" / "la").mkdir(parents=True)
    rows.to_csv(tmp / "earlier" / "la" / "scores.csv", index=False)
    (tmp / "earlier" / "la" / "meta.json").write_text(json.dumps({"name": "la", "train": "la"}))
    return ["--from", str(tmp / "earlier"), "--bundle", "B", "--pick", pick,
            "--out", str(tmp / "bar")]


@case("bar", 0)
def _(w, tmp, mp):
    return Call(_bar(w, tmp, mp, "train=la"))


@case("bar", 2)
def _(w, tmp, mp):
    return Call(_bar(w, tmp, mp, "train=la")[:4])  # no --pick, no --out


@case("bar", 3)
def _(w, tmp, mp):
    return Call(["--from", str(tmp), "--bundle", str(tmp / "none"), "--pick", "train=la",
                 "--out", str(tmp / "bar")])


@case("bar", 4)
def _(w, tmp, mp):
    return Call(_bar(w, tmp, mp, "train=itw"))  # no candidate matches


def _assemble(w, tmp, mp, pin: Path) -> list[str]:
    return ["--pinned", str(pin), *_hand_made_bundle(w, mp), "--outputs", str(tmp / "o"),
            "--reports", str(tmp / "r"), "--ledger", str(tmp / "no_ledger.csv")]


def _pin_copy(w, tmp: Path, **change) -> Path:
    """The campaign's pin, changed, beside the original (its run paths are relative)."""
    pin = json.loads(w.pin.read_text())
    path = w.pin.parent / f"{tmp.name}.json"
    path.write_text(json.dumps({**pin, **change}))
    return path


@case("assemble", 0)
def _(w, tmp, mp):
    return Call(_assemble(w, tmp, mp, _pin_copy(w, tmp)))


@case("assemble", 2)
def _(w, tmp, mp):
    return Call([*_assemble(w, tmp, mp, w.pin), "--fa-rate", "1"])


@case("assemble", 3)
def _(w, tmp, mp):
    return Call(_assemble(w, tmp, mp, tmp / "none.json"))  # no pin file


@case("assemble", 4)
def _(w, tmp, mp):
    return Call(_assemble(w, tmp, mp, _pin_copy(w, tmp, min_steps=10**6)))


@case("assemble", 5)
def _(w, tmp, mp):  # patched: the frame written holds one row twice, and F3 reads it back
    from hearsay.evaluate import assemble

    real = assemble.assemble_frame
    mp.setattr(assemble, "assemble_frame", lambda m, f: (lambda d: pd.concat([d, d.iloc[:1]]))(
        real(m, f)))
    mp.setattr(assemble.scoring, "no_extra_rows", lambda *_a: None)
    return Call(_assemble(w, tmp, mp, _pin_copy(w, tmp)))


EXPORT = ["--no-int8", "--no-fuse", "--exporter", "torchscript", "--parity-clips", "2"]  # fast


@case("export", 0)
def _(w, tmp, mp):
    return Call(["onnx", str(w.full), "--out", str(tmp / "m"), *EXPORT])


@case("export", 1)
def _(w, tmp, mp):  # patched: parity A measured for real, then judged failed
    from hearsay.export import probe

    real = probe.parity_a
    mp.setattr(probe, "parity_a", lambda *a, **k: {**real(*a, **k), "passed": False})
    return Call(["onnx", str(w.full), "--out", str(tmp / "m"), *EXPORT])


@case("export", 2)
def _(w, tmp, mp):
    return Call(["tflite", str(w.full), "--out", str(tmp / "m")])


@case("export", 3)
def _(w, tmp, mp):
    return Call(["onnx", str(tmp / "none"), "--out", str(tmp / "m"), *EXPORT])


def _model_copy(w, tmp: Path) -> Path:
    shutil.copytree(w.model, tmp / "model")
    return tmp / "model"


def _box(w, tmp, mp, shift: float = 0.0) -> list[str]:
    data = json.loads(w.box_logits.read_text())
    data["logits"] = list(np.asarray(data["logits"]) + shift)
    (tmp / "box.json").write_text(json.dumps(data))
    return [str(_model_copy(w, tmp)), "--box-logits", str(tmp / "box.json"),
            *_hand_made_bundle(w, mp)]


@case("parity", 0)
def _(w, tmp, mp):
    return Call(_box(w, tmp, mp))


@case("parity", 1)
def _(w, tmp, mp):
    return Call(_box(w, tmp, mp, shift=0.1))  # the box's logits 0.1 off


@case("parity", 2)
def _(w, tmp, mp):
    return Call([str(tmp)])  # no --checkpoint / --random-init / --box-logits


@case("parity", 3)
def _(w, tmp, mp):
    return Call([str(_model_copy(w, tmp)), "--checkpoint", str(w.other), "--device", "cpu"])


@case("parity", 4)
def _(w, tmp, mp):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: parity B would be measured")
    return Call([str(tmp), "--random-init", "tiny"])


def _release(tmp: Path) -> tuple[Path, str]:
    """A checkpoint folder uploaded to a folder release: (release, SHA256SUMS sha256)."""
    from hearsay import publish

    (tmp / "ckpt").mkdir()
    (tmp / "ckpt" / "model.safetensors").write_bytes(bytes(range(256)))
    return tmp / "rel", publish.upload(tmp / "ckpt", str(tmp / "rel"))


@case("publish", 0)
def _(w, tmp, mp):
    rel, digest = _release(tmp)
    return Call(["download", str(rel), "--dest", str(tmp / "d"), "--sums-sha256", digest])


@case("publish", 1)
def _(w, tmp, mp):
    rel, _ = _release(tmp)
    return Call(["download", str(rel), "--dest", str(tmp / "d"), "--sums-sha256", "0" * 64])


@case("publish", 2)
def _(w, tmp, mp):
    return Call(["download", str(tmp)])  # no --dest


@case("publish", 3)
def _(w, tmp, mp):
    rel, _ = _release(tmp)
    return Call(["upload", str(tmp / "ckpt"), "--to", str(rel)])  # a release is immutable


@case("publish", 4)
def _(w, tmp, mp):
    rel, _ = _release(tmp)
    return Call(["download", str(rel), "--dest", str(tmp / "d")])  # no pin


@case("run", 0)
def _(w, tmp, mp):
    return Call(["check", str(w.full), "--key", "full", "--bundle", TREE_SHA])


@case("run", 2)
def _(w, tmp, mp):
    return Call(["check"])


@case("run", 3)
def _(w, tmp, mp):
    return Call(["check", str(tmp / "none")])


@case("run", 4)
def _(w, tmp, mp):
    return Call(["check", str(w.other), "--key", "full", "--bundle", TREE_SHA])


@case("pin", 0)
def _(w, tmp, mp):
    (tmp / "m.json").write_text(json.dumps({"folds": {"config": {"n_folds": 5}}}))
    return Call(["keys", str(tmp / "m.json")])


@case("pin", 2)
def _(w, tmp, mp):
    return Call(["write", str(tmp / "p.json"), "--name", "c", "--bundle", TREE_SHA,
                 "--run", str(w.full)])  # not KEY=DIR


@case("pin", 3)
def _(w, tmp, mp):
    return Call(["check", str(tmp / "none.json")])


@case("pin", 4)
def _(w, tmp, mp):
    (tmp / "m.json").write_text(json.dumps({"tree_sha": TREE_SHA}))  # no fold count
    return Call(["keys", str(tmp / "m.json")])


LEDGER_HEAD = ",".join(ledger.HEADER) + "\n"
CLOSED = "1,fold,g1,9,2.0,2026-11-30T00:00:00Z,2026-11-30T01:30:00Z,1.5000,3.0000\n"


@case("ledger", 0)
def _(w, tmp, mp):
    (tmp / "l.csv").write_text(LEDGER_HEAD + CLOSED)
    return Call(["sum", str(tmp / "l.csv")])


@case("ledger", 1)
def _(w, tmp, mp):
    (tmp / "l.csv").write_text(LEDGER_HEAD + CLOSED + "2,full,g2,9,1.0,2026-11-30T00:00:00Z,,,\n")
    return Call(["sum", str(tmp / "l.csv")])  # a rental still open


@case("ledger", 3)
def _(w, tmp, mp):
    (tmp / "l.csv").write_text(LEDGER_HEAD + CLOSED.replace("1.5000,3.0000", ",3.0000"))
    return Call(["hours", str(tmp / "l.csv"), "--job-prefix", "fold", "--open-default", "1"])


@case("ledger", 2)
def _(w, tmp, mp):
    (tmp / "l.csv").write_text("a,b\n")  # no ledger header
    return Call(["sum", str(tmp / "l.csv")])


# --------------------------------------------------------------------------- hearsay-score


def _score(w, *more: str) -> list[str]:
    return ["--model", str(w.model), "--progress", "0", *more]


@case("hearsay-score", 0)
def _(w, tmp, mp):
    return Call([str(w.clips), *_score(w, "-o", str(tmp / "o.csv"))])


@case("hearsay-score", 1)
def _(w, tmp, mp):
    shutil.copytree(w.clips, tmp / "clips")
    (tmp / "clips" / "bad.wav").write_text("not audio")
    return Call([str(tmp / "clips"), *_score(w, "-o", str(tmp / "o.csv"), "--strict")])


@case("hearsay-score", 2)
def _(w, tmp, mp):
    return Call(_score(w))  # no CLIPS


@case("hearsay-score", 3)
def _(w, tmp, mp):
    return Call([str(w.clips), "--model", str(tmp / "none"), "-o", str(tmp / "o.csv")])


@case("hearsay-score", 4)
def _(w, tmp, mp):
    (tmp / "empty").mkdir()
    return Call([str(tmp / "empty"), *_score(w, "-o", str(tmp / "o.csv"))])


@case("hearsay-score", 5)
def _(w, tmp, mp):
    return Call([str(w.clips), *_score(w, "-o", str(tmp))])  # -o is a folder


@case("hearsay-score", 6)
def _(w, tmp, mp):  # another run holds -o: its lock is held here until the module ends
    from hearsay.deploy import lock

    held = lock.hold([tmp / "o.csv"])
    held.__enter__()
    w.request.addfinalizer(lambda: held.__exit__(None, None, None))
    return Call([str(w.clips), *_score(w, "-o", str(tmp / "o.csv"))])


@case("hearsay-score", 130)
def _(w, tmp, mp):  # patched: a signal arrives while the first rows are written
    from hearsay.deploy import io as deploy_io

    mp.setattr(deploy_io, "stop_requested", lambda: True)
    return Call([str(w.clips), *_score(w, "-o", str(tmp / "o.csv"))])


@case("hearsay-score", 141)
def _(w, tmp, mp):
    return Call([str(w.clips), *_score(w)], closed_stdout=True)  # rows to a closed stdout


# --------------------------------------------------------------------------- user errors

def _file(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text)
    return str(tmp / name)


# More user errors, each once a traceback or exit 1: (command, argv in tmp, the listed code[,
# what the message must say]).
USER_ERRORS = {
    "demo-data, a count below its minimum": ("demo-data", lambda t: [str(t / "c"),
                                                                     "--per-group", "0"], 2),
    "demo-data, a negative seed": ("demo-data", lambda t: [str(t / "c"), *TINY_DEMO,
                                                           "--seed", "-1"], 2),
    "manifest-import, an --out under a file": ("manifest-import", lambda t: [
        "in-the-wild", str(_itw(t)), "--out", str(Path(_file(t, "afile", "")) / "m.csv")], 2),
    "train, an --out under a file": ("train", lambda t: [
        "--bundle", str(t), "--out", str(Path(_file(t, "afile", "")) / "r"), *TRAIN], 2,
        "afile is not a folder"),
    "splits, a --config that is not JSON": ("splits", lambda t: [
        "make", str(t / "m.csv"), "--out", str(t / "s"), "--config", _file(t, "c.json", "{")], 3),
    "pin keys, a bundle meta that is not JSON": ("pin", lambda t: [
        "keys", _file(t, "m.json", "{")], 4),
    "publish upload, no such folder": ("publish", lambda t: [
        "upload", str(t / "none"), "--to", str(t / "rel")], 2),
    "export, an --out under a file": ("export", lambda t: [
        "onnx", str(make_run(t / "run", job="full", fold=None)), "--out",
        str(Path(_file(t, "afile", "")) / "m")], 2),
    "compare, a --json that cannot be written": ("compare", lambda t: [
        *_recipes(t), "--json", str(Path(_file(t, "afile", "")) / "d.json")], 3),
    "compare, a --markdown that cannot be written": ("compare", lambda t: [
        *_recipes(t), "--markdown", str(Path(_file(t, "afile", "")) / "d.md")], 3),
    "corpus-probe, a --json that cannot be written": ("corpus-probe", lambda t: [
        *_drop_rule(t), "--json", str(Path(_file(t, "afile", "")) / "x.json")], 3),
}


@pytest.mark.parametrize("what", USER_ERRORS)
def test_a_user_error_exits_with_a_listed_code_and_a_message(what, tmp_path):
    command, make, code, *said = USER_ERRORS[what]
    assert code in listed_codes(module_of(command))
    got, err = call(command, make(tmp_path))
    assert got == code and f"hearsay {command}" in err, err
    assert all(s in err for s in said), err


def test_bar_with_an_out_that_cannot_be_written_is_bad_input(world, tmp_path, monkeypatch):
    argv = _bar(world, tmp_path, monkeypatch, "train=la")
    argv[-1] = _file(tmp_path, "afile", "") + "/bar"
    got, err = call("bar", argv)
    assert got == 3 and "hearsay bar: " in err and "afile" in err, err


# --------------------------------------------------------------------------- a closed stdout


@pytest.mark.parametrize("command", [None, *cli.COMMANDS])
def test_help_into_a_closed_stdout_ends_quietly_with_141(command):
    """`hearsay [COMMAND] --help | head -1`: no BrokenPipeError traceback, the shell's 141."""
    argv = ["--help"] if command is None else [command, "--help"]
    code, err = call_closed_stdout(argv[0], argv[1:])
    assert (code, err) == (cli.EXIT_CLOSED, "")


def test_a_commands_output_into_a_closed_stdout_ends_quietly_with_141(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"job": "full", "fold": None, "step": 1}))
    code, err = call_closed_stdout("run", ["readout", str(tmp_path / "r.json")])
    assert (code, err) == (cli.EXIT_CLOSED, "")
    code, err = call_closed_stdout("run", ["readout", str(tmp_path / "r.json")],
                                   env={"PYTHONUNBUFFERED": "1"})  # written at once, not at exit
    assert (code, err) == (cli.EXIT_CLOSED, "")


def test_a_broken_pipe_that_is_not_stdout_is_the_commands_error(monkeypatch):
    """A child process's pipe breaking is no `| head`: it is not turned into a quiet 141."""
    def boom(_argv):
        raise BrokenPipeError("ffmpeg's stdin")

    monkeypatch.setattr(cli, "_dispatch", boom)
    with pytest.raises(BrokenPipeError):
        cli.main(["ledger"])


def test_train_lets_a_closed_stdout_through_to_the_quiet_exit(tmp_path, monkeypatch):
    """The per-step log prints on stdout: `hearsay train ... | head` is not train's error 1."""
    from hearsay import train

    def closed(*_a, **_k):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(train, "run", closed)
    with pytest.raises(BrokenPipeError):
        train.main(["--bundle", str(tmp_path), "--out", str(tmp_path / "r"), *TRAIN])
