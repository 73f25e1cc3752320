"""`hearsay bundle codecs` as its user reads it: --help, the pass key printed in process, the line
that says what was made or verified, the missing encoders and the per-clip errors it lists, the
progress switch and the exit codes (the pass itself: tests/bundle/test_codec_pass.py)."""

import os
import re

import pytest
from test_codec_pass import CODECS, recipe_bundle

from hearsay.bundle import codec_pass
from hearsay.contracts import codec_recipe as cp
from hearsay.util.progress import EVERY_S


def test_help_tells_the_docstring_and_every_option(capsys):
    with pytest.raises(SystemExit) as done:
        codec_pass.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hearsay bundle codecs [-h] [--jobs JOBS] [--key] "
                          "[--no-progress] bundle\n")
    # the description keeps its layout (RawDescriptionHelpFormatter): the examples as written
    assert "\n    hearsay bundle codecs bundle/ --jobs 32     # on a box at setup" in out
    assert "Exit codes: 0 copies made or verified; 1 unexpected error; 2 usage" in out
    for words in ("a bundle built with --codec-copies box", "processes (default: all CPUs)",
                  "print the pass key of this ffmpeg for the bundle's recipe; make nothing",
                  "no progress lines"):
        assert words in " ".join(out.split())


def test_key_prints_the_pass_key_and_makes_nothing(tmp_path, capsys):
    root = recipe_bundle(tmp_path)
    assert codec_pass.main([str(root), "--key"]) == codec_pass.EXIT_OK
    assert capsys.readouterr().out == cp.pass_key(root, cp.ffmpeg_version(), list(CODECS)) + "\n"
    assert not (root / "codecs").exists()
    (root / cp.RECIPE).unlink()
    assert codec_pass.main([str(root), "--key"]) == codec_pass.EXIT_REFUSED
    assert capsys.readouterr().err == (f"hearsay bundle codecs: refused: {root}: no "
                                       f"{cp.RECIPE}: nothing to make\n")


def test_the_line_says_made_then_verified_with_counts_ffmpeg_processes_and_key(tmp_path, capsys):
    root = recipe_bundle(tmp_path)
    assert codec_pass.main([str(root), "--no-progress"]) == 0  # --jobs left at all CPUs
    out = capsys.readouterr().out
    procs = min(len(os.sched_getaffinity(0)), 4)
    key = cp.pass_key(root, cp.ffmpeg_version(), list(CODECS))
    assert re.fullmatch(rf"codecs: {re.escape(str(root))}: made 8 copies of 4 clips \(mp3, mulaw\)"
                        rf" by ffmpeg {re.escape(cp.ffmpeg_version())} in [0-9.]+ s on {procs} "
                        rf"proc; key {key}\n", out), out
    assert codec_pass.main([str(root), "--no-progress"]) == 0
    assert capsys.readouterr().out == (
        f"codecs: {root}: verified 8 copies of 4 clips (mp3, mulaw) by ffmpeg "
        f"{cp.ffmpeg_version()} (already there: nothing encoded); key {key}\n")


def test_a_pass_that_can_make_no_codec_says_none_and_lists_the_encoder(tmp_path, monkeypatch,
                                                                       capsys):
    from fakes.fake_ffmpeg import fake_ffmpeg_without

    root = recipe_bundle(tmp_path, codecs=("mp3",))
    monkeypatch.setenv("HEARSAY_FFMPEG", fake_ffmpeg_without(tmp_path, "libmp3lame"))
    assert codec_pass.main([str(root), "--jobs", "1", "--no-progress"]) == 0
    made, missing = capsys.readouterr().out.splitlines()
    assert " made 0 copies of 0 clips (none) by ffmpeg " in made
    assert missing == ("  encoders missing, copies not made: ['libmp3lame'] (mp3; listed in "
                       "codecs/codec_pass.json)")


def test_per_clip_errors_are_listed_ten_at_most(tmp_path, monkeypatch, capsys):
    root = recipe_bundle(tmp_path, codecs=("mulaw",), n=12)
    monkeypatch.setattr(codec_pass, "write_copies",  # --jobs 1: the clips are encoded here
                        lambda *a: ([], {"mulaw": "silent after round-trip"}))
    assert codec_pass.main([str(root), "--jobs", "1", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [f"  c{i}: {{'mulaw': 'silent after round-trip'}}" for i in range(10)]


@pytest.mark.parametrize("argv, every_s", [([], EVERY_S), (["--no-progress"], 0)])
def test_progress_lines_come_unless_no_progress(tmp_path, monkeypatch, argv, every_s):
    root = recipe_bundle(tmp_path, codecs=("mulaw",), n=1)
    seen = []

    class Recorded(codec_pass.Progress):
        def __init__(self, total, **kw):
            seen.append(kw["every_s"])
            super().__init__(total, **kw)

    monkeypatch.setattr(codec_pass, "Progress", Recorded)
    assert codec_pass.main([str(root), "--jobs", "1", *argv]) == 0
    assert seen == [every_s]


def test_copies_that_do_not_verify_after_the_pass_exit_4_naming_why(tmp_path, monkeypatch, capsys):
    def torn(*a, **kw):
        raise OSError("copies made but not verified: codecs/mulaw/c0.flac hashes to 00")

    monkeypatch.setattr(codec_pass, "run_pass", torn)
    assert codec_pass.main([str(tmp_path)]) == codec_pass.EXIT_UNVERIFIED
    assert capsys.readouterr().err == ("hearsay bundle codecs: copies made but not verified: "
                                       "codecs/mulaw/c0.flac hashes to 00\n")
