"""hearsay.util.progress: a bar on a terminal; off one, a plain line every S seconds with the count,
rate and ETA, never a bar's carriage-return frames; the stages that use it say so in a log."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from hearsay.bundle.build import BundleConfig, build_bundle
from hearsay.util import progress


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clock(monkeypatch):
    """time.monotonic of hearsay.util.progress, moved by hand: clock[0] seconds."""
    now = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    return now


def test_off_a_terminal_a_line_every_interval_with_rate_and_eta(clock):
    out = io.StringIO()
    bar = progress.Progress(100, desc="hearsay bundle", unit="clip", every_s=30, stream=out)
    clock[0] += 10
    bar.update(20)  # 10 s: not due
    assert out.getvalue() == ""
    clock[0] += 20
    bar.update(10)  # 30 s: due; 30 clips in 30 s = 1/s, 70 left
    assert out.getvalue() == "hearsay bundle: 30/100 clips (30%), 1.0 clips/s, eta 1m10s, 30 s\n"
    clock[0] += 29
    bar.update(1, note="12 failed")  # 29 s after the last line: not due
    clock[0] += 1
    bar.update(0)
    assert out.getvalue().splitlines()[-1] == (
        "hearsay bundle: 31/100 clips (31%), 0.5 clips/s, eta 2m14s, 60 s [12 failed]")
    bar.close()  # no closing line: the last line already says where it ended
    assert len(out.getvalue().splitlines()) == 2 and "\r" not in out.getvalue()


def test_off_a_terminal_the_closing_line_comes_when_the_count_moved_since_the_last(clock):
    out = io.StringIO()
    bar = progress.Progress(100, desc="hearsay bundle", unit="clip", every_s=30, stream=out)
    clock[0] += 30
    bar.update(30)  # due: a line
    clock[0] += 5
    bar.update(70)  # 5 s later: not due
    bar.close()  # the count moved since the last line: the closing line says 100/100
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("hearsay bundle: 100/100 clips (100%)")


def test_a_terminal_gets_a_bar():
    out = Tty()
    with progress.Progress(10, desc="scoring", unit="clip", stream=out) as bar:
        bar.update(4)
    assert "4/10" in out.getvalue() and "%|" in out.getvalue()


def test_zero_seconds_is_silent_even_on_a_terminal(clock):
    for out in (io.StringIO(), Tty()):
        bar = progress.Progress(10, desc="x", every_s=0, stream=out)
        clock[0] += 100
        bar.update(10)
        bar.close()
        assert out.getvalue() == ""


def test_track_counts_every_item_and_stages_are_announced_as_they_start(clock):
    out = io.StringIO()
    seen = []
    for x in progress.track(range(3), desc="scoring", unit="clip", every_s=1, stream=out):
        clock[0] += 1
        seen.append(x)
    assert seen == [0, 1, 2]
    assert out.getvalue().splitlines()[-1].startswith("scoring: 3/3 clips (100%), 1.0 clips/s")
    out = io.StringIO()
    bar = progress.Progress(None, desc="hearsay export", unit="stage", stream=out)
    bar.stage("export (torchscript)")
    clock[0] += 12
    bar.stage("parity A")
    bar.close()
    assert out.getvalue().splitlines() == [
        "hearsay export: stage 1: export (torchscript), 0 s",
        "hearsay export: stage 2: parity A, 12 s", "hearsay export: 2 stages done, 12 s"]


@pytest.mark.parametrize(("s", "text"), [(9.4, "9s"), (75, "1m15s"), (3725, "1h02m")])
def test_duration_reads_as_hours_minutes_seconds(s, text):
    assert progress.duration(s) == text


def test_a_bundle_built_off_a_terminal_writes_plain_lines_not_bar_frames(tmp_path, capsys,
                                                                         monkeypatch):
    monkeypatch.setattr("hearsay.bundle.build.EVERY_S", 1e-9)  # a line per clip
    root = tmp_path / "corpus"
    root.mkdir()
    rows = []
    for i in range(4):
        sf.write(root / f"c{i}.wav", 0.3 * np.sin(np.arange(16000) * (0.05 + 0.01 * i)),
                 16000, subtype="PCM_16")
        rows.append({"id": f"c{i}", "path": f"c{i}.wav",
                     "label": "bonafide" if i % 2 == 0 else "spoof",
                     "generator": "bonafide" if i % 2 == 0 else "voc-a", "source": "s",
                     "group": f"g{i}", "fold": str(i % 5), "train_scope": "core"})
    pd.DataFrame(rows).to_csv(root / "manifest.csv", index=False)
    build_bundle(root / "manifest.csv", tmp_path / "b", None,
                 BundleConfig(codecs=(), workers=1), progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [x for x in err.splitlines() if x.startswith("hearsay bundle (1 proc): ")]
    assert [x.split(", ")[0] for x in lines[:4]] == [
        f"hearsay bundle (1 proc): {k}/4 clips ({25 * k}%)" for k in range(1, 5)]
