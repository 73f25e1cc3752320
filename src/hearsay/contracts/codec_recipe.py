"""A bundle's codec recipe and the record of its copies: what they are and how they are judged.

    from hearsay.contracts import codec_recipe as cr
    recipe, have, missing = cr.plan(BundleConfig(codec_copies="box"))   # hearsay bundle
    made = cr.check_copies(root, ids, verify=True)   # {id: [codecs]} or None; raises on mismatch

codec_recipe.json (bundle root, inside the tree-sha): {"format": 1, "codecs": {name: {encoder,
args, ext}}, "finish": {top_db, max_s, source}, "ffmpeg": {"version": expected or null = any,
"encoders": [needed]}}. codecs/codec_pass.json (beside the copies, outside the tree-sha), written
by hearsay.bundle.codec_pass: {recipe_sha256, key, ffmpeg: {path, version, encoders_missing},
codecs (made), codecs_missing, copies: {id: [codecs]}, errors: {id: {codec: reason}}, files,
listing_sha256, jobs, wall_s}. Copies match the recipe when the record names this recipe's sha256,
the ffmpeg version the recipe expects (unless null), exactly the recipe's codecs (made + lacking),
only the bundle's clips, and (verify) the files re-hash to listing_sha256.

A leaf: hearsay.contracts.bundle, hearsay.bundle.build and hearsay.bundle.codec_pass import it.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

from hearsay.sound import audio, codecs, decoder
from hearsay.util.hashing import sha256_file

RECIPE = "codec_recipe.json"  # bundle root, inside the tree-sha of a bundle whose box makes copies
PASS = "codecs/codec_pass.json"  # the pass record, beside the copies (outside the tree-sha)


class CodecRecipeError(ValueError):
    """Copies that are not the recipe's, or a recipe that cannot be made; names the fix."""


def write_flac(path: Path, x: np.ndarray) -> None:
    """(N,) float32 @ 16 kHz -> 16-bit mono FLAC, folders made: every clip and copy of a bundle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, x, audio.SAMPLE_RATE, subtype="PCM_16", format="FLAC")


def finish_copy(z: np.ndarray, top_db: float, max_s: float) -> np.ndarray:
    """A decoded codec copy -> re-trimmed (codecs add onset/offset silence), capped, guarded."""
    s, e = audio.trim_silence(z, top_db=top_db)
    return audio.peak_guard(audio.cap(z[s:e], max_s))


def write_copies(x: np.ndarray, names, top_db: float, max_s: float,
                 path_of) -> tuple[list[str], dict[str, str]]:
    """Every codec copy of one clip (x: (N,) float32 @ 16 kHz) made in one ffmpeg run, each
    finished (finish_copy) and written to path_of(codec): (the codecs made, {codec: why not})."""
    made: list[str] = []
    errors: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hearsay-codec-") as tmp:
        try:
            copies = codecs.roundtrip(x, names, Path(tmp))
        except audio.AudioError as err:
            return made, {c: err.reason for c in names}
    for name, z in copies.items():
        z = finish_copy(z, top_db, max_s)
        if len(z) == 0:
            errors[name] = "silent after round-trip"
            continue
        write_flac(path_of(name), z)
        made.append(name)
    return made, errors


# --------------------------------------------------------------------------- the recipe


def ffmpeg_version(ffmpeg: str | None = None) -> str:
    """The version word of `ffmpeg -version` ("n9.0.2-17-g2a571b6068-20260930", "7.1.1")."""
    exe = ffmpeg or decoder.ffmpeg_exe()
    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise CodecRecipeError(f"{exe} -version failed ({err}): set HEARSAY_FFMPEG to a working "
                               "ffmpeg") from None
    m = re.match(r"ffmpeg version (\S+)", out)
    if m is None:
        raise CodecRecipeError(f"{exe} -version printed no 'ffmpeg version …' line: is it ffmpeg?")
    return m.group(1)


def settings(names) -> dict:
    """{codec: {encoder, args, ext}} of this hearsay (hearsay.sound.codecs.CODECS), for `names`."""
    return {n: {"encoder": codecs.CODECS[n].encoder, "args": list(codecs.CODECS[n].args),
                "ext": codecs.CODECS[n].ext} for n in names}


def make_recipe(names, top_db: float, max_s: float, version: str | None) -> dict:
    """The recipe a bundle carries: codecs and their settings, the copy's finishing, the ffmpeg
    version it expects (None = any) and the encoders the codecs need."""
    names = list(names)
    unknown = [c for c in names if c not in codecs.CODECS]
    if unknown:
        raise ValueError(f"unknown codec(s) {unknown}; known: {list(codecs.CODECS)}")
    return {"format": 1, "codecs": settings(names),
            "finish": {"top_db": top_db, "max_s": max_s, "source": "audio/<id>.flac"},
            "ffmpeg": {"version": version,
                       "encoders": sorted({codecs.CODECS[n].encoder for n in names})}}


def plan(cfg) -> tuple[dict | None, list[str], list[str]]:
    """A bundle build's codec plan from its BundleConfig: (recipe, codecs made now, lacking).
    "box": the recipe, nothing made now; "here": no recipe, the codecs this ffmpeg has/lacks."""
    if cfg.codec_copies == "here" or not cfg.codecs:  # no codecs asked: no recipe to carry
        have, missing = codecs.available(cfg.codecs)
        return None, have, missing
    if cfg.codec_copies != "box":
        raise ValueError(f"codec_copies {cfg.codec_copies!r}: 'here' or 'box'")
    version = (None if cfg.codec_ffmpeg_version == "any"
               else cfg.codec_ffmpeg_version or ffmpeg_version())
    return make_recipe(cfg.codecs, cfg.top_db, cfg.max_s, version), [], []


def describe(recipe: dict, root) -> str:
    return (f"codec copies: made on each box from {RECIPE} ({', '.join(recipe['codecs']) or 'none'}"
            f"; ffmpeg {recipe['ffmpeg']['version'] or 'any'}): hearsay bundle codecs {root}")


def write_recipe(root: Path, recipe: dict | None) -> None:
    """root/codec_recipe.json, canonical; None removes it (a bundle that carries its copies)."""
    if recipe is None:
        (Path(root) / RECIPE).unlink(missing_ok=True)
        return
    (Path(root) / RECIPE).write_text(json.dumps(recipe, sort_keys=True, indent=1) + "\n")


def read_recipe(root: Path) -> dict | None:
    """The bundle's recipe, or None for a bundle that carries its copies (or none)."""
    path = Path(root) / RECIPE
    return json.loads(path.read_text()) if path.is_file() else None


def pass_key(root: Path, version: str, made) -> str:
    """Where copies of this recipe made by this ffmpeg (version, codecs it can make) are kept."""
    s = json.dumps([sha256_file(Path(root) / RECIPE), version, sorted(made)])
    return hashlib.sha256(s.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- judging copies


def listing_sha(root: Path) -> tuple[str, int]:
    """(sha256 of the sorted `sha256sum` lines of codecs/<codec>/*.flac, file count)."""
    rels = sorted(p.relative_to(root).as_posix() for p in (Path(root) / "codecs").glob("*/*")
                  if p.is_file())
    text = "".join(f"{sha256_file(Path(root) / r)}  {r}\n" for r in rels)
    return hashlib.sha256(text.encode()).hexdigest(), len(rels)


def check_copies(root: Path, ids, verify: bool = False) -> dict[str, list[str]] | None:
    """{id: [codecs]} of a recipe bundle's copies, or None when it has none yet.
    CodecRecipeError when they are not the recipe's: made for another recipe, by another ffmpeg
    than it expects, of codecs it does not name, for clips not in the bundle, or (verify) files
    changed since the pass."""
    root = Path(root)
    recipe, path = read_recipe(root), root / PASS
    if recipe is None or not path.is_file():
        return None
    rec = json.loads(path.read_text())
    fix = (f"remove {root / 'codecs'} and make them again: hearsay bundle codecs {root}")
    want_sha = sha256_file(root / RECIPE)
    if rec.get("recipe_sha256") != want_sha:
        raise CodecRecipeError(f"{root}: the codec copies were made for recipe "
                               f"{str(rec.get('recipe_sha256'))[:12]}…, the bundle's "
                               f"{RECIPE} is {want_sha[:12]}…: {fix}")
    expect = recipe["ffmpeg"]["version"]
    if expect is not None and rec["ffmpeg"]["version"] != expect:
        raise CodecRecipeError(f"{root}: the codec copies were made by ffmpeg "
                               f"{rec['ffmpeg']['version']}, the recipe expects {expect}: {fix} "
                               "with that ffmpeg (HEARSAY_FFMPEG)")
    if sorted(rec["codecs"] + rec["codecs_missing"]) != sorted(recipe["codecs"]):
        raise CodecRecipeError(f"{root}: the codec copies cover {rec['codecs']} (+ lacking "
                               f"{rec['codecs_missing']}), the recipe names "
                               f"{list(recipe['codecs'])}: {fix}")
    copies = rec["copies"]
    stray = sorted(set(copies) - set(ids))
    if stray or any(set(c) - set(rec["codecs"]) for c in copies.values()):
        raise CodecRecipeError(f"{root}: the codec record lists copies of clips or codecs the "
                               f"bundle does not hold ({stray[:3]}…): {fix}")
    if verify:
        got, n = listing_sha(root)
        if got != rec["listing_sha256"]:
            raise CodecRecipeError(f"{root}: the codec copies hash to {got[:12]}… ({n} files), "
                                   f"their record says {rec['listing_sha256'][:12]}… "
                                   f"({rec['files']}): {fix}")
    return {rid: list(copies.get(rid, [])) for rid in ids}
