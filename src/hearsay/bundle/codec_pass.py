"""`hearsay bundle codecs BUNDLE`: a bundle's codec copies, made where the GPU is, from its recipe.

    hearsay bundle codecs bundle/ --jobs 32     # on a box at setup (runner/box/job.sh), or here
    hearsay bundle codecs bundle/ --key         # prints the pass key (where the store keeps them)

A bundle built with `hearsay bundle --codec-copies box` (the default) holds the trimmed clips and
codec_recipe.json: the codecs, each one's ffmpeg encoder and settings (sound.codecs.CODECS), the
re-trim and cap applied to each copy, and the ffmpeg version and encoders it expects ("version":
null = any). The recipe is inside the bundle's tree-sha; the copies are not (hearsay.bundle).

This pass reads every audio/<id>.flac, encodes it into each codec this ffmpeg has with one ffmpeg
run (hearsay.sound.codecs.roundtrip), decodes each back, re-trims, caps and peak-guards it
(hearsay.bundle.build.finish_copy) -> codecs/<codec>/<id>.flac, in --jobs processes. Then it writes
codecs/codec_pass.json: the recipe's sha256, this ffmpeg's version, the codecs made and those whose
encoder this ffmpeg lacks (listed, never faked), the copies per clip, and the sha256 of the copies'
sha256sum listing. `check_copies` (what hearsay.contracts.bundle.load_bundle and training ask)
judges them.

* An existing codecs/codec_pass.json that verifies (its recipe, its listing re-hashed) is kept: the
  pass says "verified" and encodes nothing (a box that pulled the copies from the store).
* Refused (exit 3): no codec_recipe.json (a bundle built with its copies, or none asked); this
  ffmpeg's version is not the recipe's; this hearsay's codec settings are not the recipe's.
* The pass key (`--key`): sha256 of the recipe, the ffmpeg version and the codecs this ffmpeg can
  make, 16 hex. runner/box/job.sh keeps the copies in the store at codecs/<tree_sha>/<key>/, so a
  later box with the same image pulls them instead of re-encoding, and copies of another ffmpeg or
  encoder set never mix with them.

Exit codes: 0 copies made or verified; 1 unexpected error; 2 usage; 3 refused (above);
4 copies that fail to verify after being made (disk trouble: run again).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
import soundfile as sf

from hearsay.contracts.bundle import BundleError, clip_rel
from hearsay.contracts.codec_recipe import (
    PASS,
    RECIPE,
    CodecRecipeError,
    check_copies,
    ffmpeg_version,
    listing_sha,
    pass_key,
    read_recipe,
    settings,
    write_copies,
)
from hearsay.sound import codecs, decoder
from hearsay.util.hashing import sha256_file
from hearsay.util.progress import EVERY_S, Progress

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REFUSED, EXIT_UNVERIFIED = 0, 1, 2, 3, 4


class CodecPassRefused(BundleError):
    """This pass cannot make copies that match the recipe; the message names the fix."""


# --------------------------------------------------------------------------- the pass


def _copy_clip(task: dict) -> dict:
    """Encode one clip's FLAC into its codecs and write the finished copies (runs in a worker)."""
    root, rid = Path(task["root"]), task["id"]
    out = {"id": rid, "codecs": [], "errors": {}}
    x = sf.read(root / clip_rel(rid), dtype="float32")[0]  # (N,) float32 @ 16 kHz
    made, errors = write_copies(x, task["codecs"], task["top_db"], task["max_s"],
                                lambda name: root / clip_rel(rid, name))
    return {**out, "codecs": made, "errors": errors}


def run_pass(root: str | os.PathLike, jobs: int = 0, progress: bool = True) -> dict:
    """Make (or verify already present) copies of a recipe bundle; returns the pass record.
    Raises CodecPassRefused (exit 3) when this ffmpeg or hearsay cannot make the recipe's."""
    root = Path(root)
    recipe = read_recipe(root)
    if recipe is None:
        raise CodecPassRefused(f"{root}: no {RECIPE}: this bundle carries its codec copies (built "
                               "with --codec-copies here) or is not a bundle; nothing to make")
    ids = pd.read_csv(root / "manifest.csv", dtype=str, keep_default_na=False)["id"].tolist()
    if (root / PASS).is_file():
        try:
            check_copies(root, ids, verify=True)
            rec = json.loads((root / PASS).read_text())
            return {**rec, "outcome": "verified"}
        except CodecRecipeError as err:  # stale or torn (a pull cut short): made again below
            print(f"hearsay bundle codecs: existing copies refused, remaking them: {err}",
                  file=sys.stderr)
    ours = settings(recipe["codecs"])
    if ours != recipe["codecs"]:
        raise CodecPassRefused(f"{root}: this hearsay's codec settings {ours} differ from the "
                               f"recipe's {recipe['codecs']}: make the copies with the hearsay "
                               "the bundle was built with, or rebuild the bundle")
    ff = decoder.ffmpeg_exe()
    version, expect = ffmpeg_version(ff), recipe["ffmpeg"]["version"]
    if expect is not None and version != expect:
        raise CodecPassRefused(f"{root}: this ffmpeg ({ff}) is version {version}, the recipe "
                               f"expects {expect}: run the pass with that ffmpeg (HEARSAY_FFMPEG), "
                               "or rebuild the bundle with --codec-ffmpeg-version naming this one "
                               "(or 'any')")
    have, missing = codecs.available(list(recipe["codecs"]), ffmpeg=ff)
    shutil.rmtree(root / "codecs", ignore_errors=True)
    t0, n_proc = time.monotonic(), min(jobs if jobs > 0 else len(os.sched_getaffinity(0)),
                                       max(1, len(ids)))
    tasks = [{"root": str(root), "id": rid, "codecs": have, **{k: recipe["finish"][k] for k in
                                                               ("top_db", "max_s")}}
             for rid in ids]
    bar = Progress(len(tasks), desc=f"hearsay bundle codecs ({n_proc} proc)", unit="clip",
                   every_s=EVERY_S if progress else 0)
    results = {}
    with contextlib.ExitStack() as stack:
        if n_proc > 1 and have:
            pool = stack.enter_context(mp.get_context("forkserver").Pool(n_proc))
            done = pool.imap_unordered(_copy_clip, tasks, chunksize=4)
        else:
            done = map(_copy_clip, tasks) if have else ({"id": t["id"], "codecs": [],
                                                         "errors": {}} for t in tasks)
        for res in done:
            results[res["id"]] = res
            bar.update()
    bar.close()
    (root / "codecs").mkdir(exist_ok=True)
    sha, n = listing_sha(root)
    rec = {"recipe_sha256": sha256_file(root / RECIPE), "key": pass_key(root, version, have),
           "ffmpeg": {"path": ff, "version": version,
                      "encoders_missing": sorted({codecs.CODECS[c].encoder for c in missing})},
           "codecs": have, "codecs_missing": missing,
           "copies": {rid: sorted(results[rid]["codecs"]) for rid in ids
                      if results[rid]["codecs"]},
           "errors": {rid: results[rid]["errors"] for rid in ids if results[rid]["errors"]},
           "files": n, "listing_sha256": sha,
           "jobs": n_proc, "wall_s": round(time.monotonic() - t0, 2)}
    (root / PASS).write_text(json.dumps(rec, indent=1) + "\n")
    try:
        check_copies(root, ids, verify=True)
    except CodecRecipeError as err:
        raise OSError(f"copies made but not verified: {err}") from None
    return {**rec, "outcome": "made"}


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay bundle codecs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path, help="a bundle built with --codec-copies box")
    ap.add_argument("--jobs", type=int, default=0, help="processes (default: all CPUs)")
    ap.add_argument("--key", action="store_true",
                    help="print the pass key of this ffmpeg for the bundle's recipe; make nothing")
    ap.add_argument("--no-progress", action="store_true", help="no progress lines")
    args = ap.parse_args(argv)
    try:
        if args.key:
            recipe = read_recipe(args.bundle)
            if recipe is None:
                raise CodecPassRefused(f"{args.bundle}: no {RECIPE}: nothing to make")
            have, _ = codecs.available(list(recipe["codecs"]))
            print(pass_key(args.bundle, ffmpeg_version(), have))
            return EXIT_OK
        rec = run_pass(args.bundle, args.jobs, progress=not args.no_progress)
    except (CodecPassRefused, CodecRecipeError) as err:
        print(f"hearsay bundle codecs: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except OSError as err:
        print(f"hearsay bundle codecs: {err}", file=sys.stderr)
        return EXIT_UNVERIFIED
    took = (f" in {rec['wall_s']} s on {rec['jobs']} proc" if rec["outcome"] == "made"
            else " (already there: nothing encoded)")
    print(f"codecs: {args.bundle}: {rec['outcome']} {rec['files']} copies of "
          f"{len(rec['copies'])} clips ({', '.join(rec['codecs']) or 'none'}) by ffmpeg "
          f"{rec['ffmpeg']['version']}{took}; key {rec['key']}")
    if rec["codecs_missing"]:
        print(f"  encoders missing, copies not made: {rec['ffmpeg']['encoders_missing']} "
              f"({', '.join(rec['codecs_missing'])}; listed in {PASS})")
    for rid, errs in list(rec["errors"].items())[:10]:
        print(f"  {rid}: {errs}")
    return EXIT_OK
