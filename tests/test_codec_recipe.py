"""hearsay.contracts.codec_recipe: how a recipe bundle's codec copies are judged and keyed, on
hand-written recipe and pass records (no ffmpeg run, no audio)."""

import json

import pytest

from hearsay.contracts import codec_recipe as cr

RECIPE_CODECS = ("mp3", "opus", "aac")


def recipe_root(tmp_path, made, missing=(), version="7.1.1", copies=None):
    """A bundle root holding a recipe for RECIPE_CODECS and a pass record of `made` codecs
    (`missing`: those its ffmpeg lacked), one clip c0 with a copy in each made codec."""
    root = tmp_path / "b"
    (root / "codecs").mkdir(parents=True)
    cr.write_recipe(root, cr.make_recipe(RECIPE_CODECS, 40.0, 8.0, version))
    rec = {"recipe_sha256": cr.sha256_file(root / cr.RECIPE),
           "ffmpeg": {"version": version, "encoders_missing": []},
           "codecs": list(made), "codecs_missing": list(missing),
           "copies": {"c0": list(made)} if copies is None else copies,
           "files": 0, "listing_sha256": cr.listing_sha(root)[0]}
    (root / cr.PASS).write_text(json.dumps(rec))
    return root


@pytest.mark.parametrize("made, missing", [
    (("mp3", "opus", "aac"), ()),  # every codec made
    (("mp3", "opus"), ("aac",)),  # one made by no encoder: listed, counted as the recipe's
    ((), ("mp3", "opus", "aac")),
])
def test_copies_that_account_for_every_codec_of_the_recipe_are_accepted(tmp_path, made, missing):
    root = recipe_root(tmp_path, made, missing)
    assert cr.check_copies(root, ["c0"], verify=True) == {"c0": list(made)}


@pytest.mark.parametrize("made, missing", [
    (("mp3", "opus"), ()),  # one codec neither made nor listed as lacking
    (("mp3",), ()),
    (("mp3", "opus", "aac", "mulaw"), ()),  # one the recipe does not name
    (("mp3", "opus"), ("aac", "mulaw")),
])
def test_copies_covering_only_some_of_the_recipes_codecs_are_refused(tmp_path, made, missing):
    root = recipe_root(tmp_path, made, missing)
    with pytest.raises(cr.CodecRecipeError, match=r"the codec copies cover .* the recipe names "
                       r"\['aac', 'mp3', 'opus'\]: remove .*codecs and make them again"):
        cr.check_copies(root, ["c0"])


def test_the_pass_key_changes_with_the_ffmpeg_version_and_the_codecs_made(tmp_path):
    root = recipe_root(tmp_path, RECIPE_CODECS)
    key = cr.pass_key(root, "7.1.1", ["mp3", "opus"])
    assert len(key) == 16 and int(key, 16) >= 0
    assert cr.pass_key(root, "7.1.1", ["opus", "mp3"]) == key  # the codecs' order: the same key
    assert cr.pass_key(root, "7.1.2", ["mp3", "opus"]) != key  # another ffmpeg: other copies
    assert cr.pass_key(root, "7.1.1", ["mp3"]) != key  # another encoder set
    cr.write_recipe(root, cr.make_recipe(RECIPE_CODECS, 40.0, 9.0, "7.1.1"))  # another recipe
    assert cr.pass_key(root, "7.1.1", ["mp3", "opus"]) != key


def test_the_build_line_names_the_codecs_and_the_ffmpeg_version_or_none_and_any():
    line = cr.describe(cr.make_recipe(("mp3", "opus"), 40.0, 8.0, "7.1.1"), "B")
    assert line == ("codec copies: made on each box from codec_recipe.json (mp3, opus; "
                    "ffmpeg 7.1.1): hearsay bundle codecs B")
    line = cr.describe(cr.make_recipe((), 40.0, 8.0, None), "B")
    assert line == ("codec copies: made on each box from codec_recipe.json (none; ffmpeg any): "
                    "hearsay bundle codecs B")
