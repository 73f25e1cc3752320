"""Codec copies made where the GPU is: a bundle built with its codec recipe (`--codec-copies box`),
the pass that makes the copies from it (`hearsay bundle codecs`), and the rules that judge them."""

import json
import shutil
import subprocess

import pytest
from test_bundle_build import corpus, tone

from hearsay.bundle import build as bundle
from hearsay.bundle import codec_pass
from hearsay.bundle.build import BundleConfig, build_bundle
from hearsay.contracts import codec_recipe as cp
from hearsay.contracts.bundle import BundleError, load_bundle, require_copies, tree_sha
from hearsay.contracts.codec_recipe import RECIPE

CODECS = ("mp3", "mulaw")  # two encoders the wheel's ffmpeg has: quick, and enough to judge


def recipe_bundle(tmp_path, name="b", version="", codecs=CODECS, n=4):
    """A bundle of n tones whose codec copies are left to the pass (its recipe only)."""
    m = corpus(tmp_path, [(f"c{i}", tone(1.0 + 0.2 * i, 300 + 50 * i), {}) for i in range(n)])
    cfg = BundleConfig(codecs=codecs, workers=1, codec_copies="box", codec_ffmpeg_version=version)
    build_bundle(m, tmp_path / name, None, cfg, progress=False)
    return tmp_path / name


def test_a_recipe_bundle_holds_no_copies_and_its_identity_covers_the_recipe(tmp_path):
    root = recipe_bundle(tmp_path)
    meta = json.loads((root / "bundle_meta.json").read_text())
    assert not (root / "codecs").exists() and meta["codecs"] == [] and meta["codec_copies"] == "box"
    recipe = json.loads((root / RECIPE).read_text())
    assert recipe["codecs"] == cp.settings(CODECS) and recipe == meta["codec_recipe"]
    assert recipe["ffmpeg"] == {"version": cp.ffmpeg_version(),
                                "encoders": ["libmp3lame", "pcm_mulaw"]}
    assert tree_sha(root) == meta["tree_sha"]
    recipe["codecs"]["mp3"]["args"] = ["-b:a", "64k"]  # another encoder setting: another bundle
    (root / RECIPE).write_text(json.dumps(recipe, sort_keys=True, indent=1) + "\n")
    assert tree_sha(root) != meta["tree_sha"]
    with pytest.raises(BundleError, match="tree-sha"):
        load_bundle(root, verify=True)


def test_the_pass_makes_verified_copies_and_load_bundle_lists_them(tmp_path):
    root = recipe_bundle(tmp_path)
    sha = tree_sha(root)
    rec = codec_pass.run_pass(root, jobs=2, progress=False)
    assert rec["outcome"] == "made" and rec["codecs"] == list(CODECS) and rec["files"] == 8
    assert rec["codecs_missing"] == [] and rec["ffmpeg"]["encoders_missing"] == []
    assert tree_sha(root) == sha  # the copies are judged by their record, not by the tree-sha
    b = load_bundle(root, verify=True)
    assert b.manifest["codec_ids"].tolist() == ["mp3;mulaw"] * 4 and b.codecs == CODECS
    assert b.flac("c0", "mp3").is_file()
    assert codec_pass.run_pass(root, progress=False)["outcome"] == "verified"  # none encoded


def test_copies_changed_after_the_pass_fail_verification_and_the_pass_remakes_them(tmp_path):
    root = recipe_bundle(tmp_path)
    codec_pass.run_pass(root, jobs=1, progress=False)
    shutil.copy(root / "codecs/mp3/c1.flac", root / "codecs/mp3/c0.flac")  # a torn pull, say
    load_bundle(root)  # cheap checks pass: only a re-hash sees it
    with pytest.raises(BundleError, match="copies hash to"):
        load_bundle(root, verify=True)
    assert codec_pass.run_pass(root, progress=False)["outcome"] == "made"
    load_bundle(root, verify=True)


def test_a_pass_whose_ffmpeg_lacks_an_encoder_records_it_and_fakes_nothing(tmp_path, monkeypatch,
                                                                           capsys):
    from fakes.fake_ffmpeg import fake_ffmpeg_without

    root = recipe_bundle(tmp_path)  # the recipe wants mp3 and mu-law
    monkeypatch.setenv("HEARSAY_FFMPEG", fake_ffmpeg_without(tmp_path, "libmp3lame"))
    assert bundle.main(["codecs", str(root), "--jobs", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "encoders missing, copies not made: ['libmp3lame'] (mp3;" in out
    rec = json.loads((root / cp.PASS).read_text())
    assert rec["codecs"] == ["mulaw"] and rec["codecs_missing"] == ["mp3"]
    assert rec["ffmpeg"]["encoders_missing"] == ["libmp3lame"]
    assert not (root / "codecs" / "mp3").exists()
    assert load_bundle(root, verify=True).manifest["codec_ids"].tolist() == ["mulaw"] * 4
    full_key = cp.pass_key(root, rec["ffmpeg"]["version"], list(CODECS))
    assert rec["key"] != full_key  # kept apart in the store from a full encoder set's copies


def test_a_pass_with_another_ffmpeg_version_than_the_recipe_expects_is_refused(tmp_path, capsys):
    root = recipe_bundle(tmp_path, version="0.0-not-this-one")
    assert bundle.main(["codecs", str(root), "--no-progress"]) == codec_pass.EXIT_REFUSED
    err = capsys.readouterr().err
    assert "the recipe expects 0.0-not-this-one" in err and "--codec-ffmpeg-version" in err
    assert not (root / cp.PASS).exists()


def test_a_bundle_that_carries_its_copies_needs_no_pass(tmp_path, capsys):
    m = corpus(tmp_path, [("c0", tone(1.0), {})])
    build_bundle(m, tmp_path / "b", None, BundleConfig(codecs=("mulaw",), workers=1),
                 progress=False)
    assert not (tmp_path / "b" / RECIPE).exists()
    assert load_bundle(tmp_path / "b", verify=True).codecs == ("mulaw",)
    assert bundle.main(["codecs", str(tmp_path / "b")]) == codec_pass.EXIT_REFUSED
    assert "carries its codec copies" in capsys.readouterr().err


def test_the_cli_builds_a_recipe_by_default_and_here_on_request(tmp_path, capsys):
    m = corpus(tmp_path, [("c0", tone(1.0), {})])
    common = ["--codecs", "mulaw", "--workers", "1", "--no-progress"]
    assert bundle.main([str(m), str(tmp_path / "box"), *common]) == 0
    assert "codec copies: made on each box from codec_recipe.json (mulaw" in capsys.readouterr().out
    assert bundle.main([str(m), str(tmp_path / "here"), *common, "--codec-copies", "here"]) == 0
    assert (tmp_path / "box" / RECIPE).is_file() and not (tmp_path / "box" / "codecs").exists()
    assert (tmp_path / "here" / "codecs/mulaw/c0.flac").is_file()
    assert not (tmp_path / "here" / RECIPE).exists()


def test_the_key_names_recipe_ffmpeg_and_encoders(tmp_path):
    root = recipe_bundle(tmp_path)
    run = subprocess.run(["hearsay", "bundle", "codecs", str(root), "--key"], capture_output=True,
                         text=True, check=True)
    assert run.stdout.strip() == cp.pass_key(root, cp.ffmpeg_version(), list(CODECS))
    assert not (root / "codecs").exists()


# --------------------------------------------------------------------------- training's rule


def _train(root, tmp_path, *extra):
    from hearsay import train as tr

    return tr.main(["--bundle", str(root), "--full", "--out", str(tmp_path / "run"),
                    "--cpu-smoke", *extra])


def test_training_refuses_copies_made_for_another_recipe(tmp_path, capsys):
    from hearsay.train import EXIT_USAGE

    mine = recipe_bundle(tmp_path, "mine", version="any")
    other = recipe_bundle(tmp_path, "other")  # same clips, a recipe expecting this ffmpeg
    codec_pass.run_pass(other, jobs=1, progress=False)
    shutil.copytree(other / "codecs", mine / "codecs")  # the wrong bundle's copies pulled
    for extra in ([], ["--no-verify-bundle"]):  # a cheap check: no re-hash needed to see it
        assert _train(mine, tmp_path, *extra) == EXIT_USAGE
        err = capsys.readouterr().err
        assert "the codec copies were made for recipe" in err
        assert f"hearsay bundle codecs {mine}" in err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_training_refuses_copies_of_another_ffmpeg_than_the_recipe_expects(tmp_path, capsys):
    from hearsay.train import EXIT_USAGE

    root = recipe_bundle(tmp_path)
    codec_pass.run_pass(root, jobs=1, progress=False)
    rec = json.loads((root / cp.PASS).read_text())
    rec["ffmpeg"]["version"] = "6.0-elsewhere"
    (root / cp.PASS).write_text(json.dumps(rec))
    assert _train(root, tmp_path) == EXIT_USAGE
    assert "made by ffmpeg 6.0-elsewhere, the recipe expects" in capsys.readouterr().err


def test_training_refuses_a_recipe_bundle_whose_copies_are_not_made(tmp_path, capsys):
    from hearsay.train import EXIT_USAGE

    root = recipe_bundle(tmp_path)
    assert _train(root, tmp_path) == EXIT_USAGE
    assert f"make them first: hearsay bundle codecs {root}" in capsys.readouterr().err


def test_a_box_build_asked_for_no_codecs_carries_no_recipe_and_trains_as_it_is(tmp_path):
    m = corpus(tmp_path, [("c0", tone(1.0), {})])
    assert bundle.main([str(m), str(tmp_path / "b"), "--codecs", "", "--workers", "1",
                        "--no-progress"]) == 0
    assert not (tmp_path / "b" / RECIPE).exists()
    require_copies(load_bundle(tmp_path / "b", verify=True))  # nothing to make


@pytest.mark.parametrize("change", [None, "args", "encoder", "ext"])
def test_a_pass_whose_codec_settings_differ_from_the_recipes_for_the_same_names_is_refused(
        tmp_path, capsys, change):
    root = recipe_bundle(tmp_path, codecs=("mulaw",), n=1)
    if change is not None:  # the recipe's settings of mulaw, one field other than this hearsay's
        recipe = json.loads((root / RECIPE).read_text())
        mulaw = recipe["codecs"]["mulaw"]
        mulaw[change] = mulaw[change] + ["-ar", "8000"] if change == "args" else "other"
        (root / RECIPE).write_text(json.dumps(recipe, sort_keys=True, indent=1) + "\n")
    got = bundle.main(["codecs", str(root), "--no-progress", "--jobs", "1"])
    if change is None:
        assert got == codec_pass.EXIT_OK and (root / cp.PASS).is_file()
        return
    assert got == codec_pass.EXIT_REFUSED
    err = capsys.readouterr().err
    assert "this hearsay's codec settings" in err and "differ from the recipe's" in err
    assert not (root / cp.PASS).exists() and not (root / "codecs").exists()


def test_with_two_jobs_the_clips_are_encoded_in_fresh_worker_processes(tmp_path, monkeypatch):
    # forkserver workers import hearsay anew: none inherits this process's state (torch's threads,
    # a patched function), so an encoder broken here only is never the one that runs
    root = recipe_bundle(tmp_path, codecs=("mulaw",), n=2)

    def not_here(*a):
        raise AssertionError("a clip was encoded in the calling process")

    monkeypatch.setattr(codec_pass, "write_copies", not_here)
    rec = codec_pass.run_pass(root, jobs=2, progress=False)
    assert rec["jobs"] == 2 and rec["copies"] == {"c0": ["mulaw"], "c1": ["mulaw"]}
