"""The bundle folder `hearsay bundle` writes (docs/INTERFACES.md, "Bundle"), as an artefact: its
file names, its layout (the one place that spells a clip's path), its tree-sha and identity check,
and `load_bundle`. Building one is hearsay.bundle.build (`hearsay bundle`); its shortcut
diagnostics are hearsay.bundle.diagnostics. Every stage reads a bundle through this module.

    from hearsay.contracts.bundle import load_bundle
    b = load_bundle("bundle/", verify=True)     # re-hashes every file against the tree-sha
    b.flac("c0042"), b.flac("c0042", "mp3")     # audio/c0042.flac, codecs/mp3/c0042.flac

Layout (docs/INTERFACES.md): manifest.csv, audio/<id>.flac (16 kHz mono 16-bit, trimmed),
codecs/<codec>/<id>.flac (each copy decoded back and re-trimmed), selection.json (what decides
the training rows: the fold file's identity and config, the selection config and its outcome),
bundle_meta.json (with the tree-sha), diagnostics.json, .stamps.json (the build's resume sidecar).

Codec copies made on a box (hearsay.bundle.codec_pass, `hearsay bundle codecs`): the bundle holds
codec_recipe.json in place of codecs/ in its tree-sha; once made, codecs/codec_pass.json records
the copies, load_bundle judges them against the recipe (hearsay.contracts.codec_recipe) and fills
codec_ids from that record.

`hearsay bundle info BUNDLE` (main below) answers the runner from bundle_meta.json, never jq:
    hearsay bundle info BUNDLE               tree_sha <sha> and n_folds <n>, one a line
    hearsay bundle info BUNDLE --tree-sha    the tree-sha alone
    hearsay bundle info BUNDLE --n-folds     the fold file's n_folds alone: its fold models are
                                             fold0..fold<n-1>
    hearsay bundle info BUNDLE --fold K      exit 0 when K is one of them, 4 (named) when not
    hearsay bundle info BUNDLE --identity    exit 0 when the meta's folds/selection are the hashed
                                             selection.json's (check_identity), 5 when not
BUNDLE is the bundle folder or its bundle_meta.json (the runner keeps a copy: RUNNER_BUNDLE_META;
--identity needs the folder).
Exit codes: 0 answered; 2 usage (K not a whole number); 3 no readable bundle_meta.json, or it
records no tree_sha / no folds.config.n_folds (the one asked for); 4 fold K is not one of the
bundle's folds 0..n_folds-1; 5 the meta's folds or selection differ from the hashed
selection.json (--identity).

Identity: the tree-sha covers manifest.csv, selection.json, audio/ and codecs/ (or the recipe).
bundle_meta.json is outside it, so `load_bundle` refuses a meta whose "folds" or "selection"
(less their local "path") differ from the hashed selection.json: a fold or selection change is a
new bundle.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hearsay.contracts.codec_recipe import PASS, RECIPE, CodecRecipeError, check_copies, read_recipe
from hearsay.util.hashing import sha256_file

META, DIAG, STAMPS = "bundle_meta.json", "diagnostics.json", ".stamps.json"
IDENTITY = "selection.json"  # inside the tree-sha: the part of the meta that decides the rows


class BundleError(RuntimeError):
    """A bundle that cannot be built or read; the message names the fix."""


def clip_rel(rid: str, codec: str | None = None) -> str:
    """A clip's FLAC relative to the bundle root: audio/<id>.flac, or codecs/<codec>/<id>.flac."""
    return f"audio/{rid}.flac" if codec is None else f"codecs/{codec}/{rid}.flac"


def tree_sha(root: Path) -> str:
    """sha256 over the sha256sum listing of manifest.csv, selection.json (when there), audio/ and
    codecs/, paths sorted bytewise (`find manifest.csv selection.json audio codecs -type f |
    LC_ALL=C sort | xargs sha256sum | sha256sum`; runner/lib/bundles.sh makes the same).
    A bundle whose copies are made on the box holds codec_recipe.json instead: the listing then
    covers that recipe and not codecs/ (its copies are judged against the recipe by
    hearsay.contracts.codec_recipe)."""
    root = Path(root)
    on_box = (root / RECIPE).is_file()
    names = ("manifest.csv", IDENTITY, RECIPE) if on_box else ("manifest.csv", IDENTITY)
    files = [root / n for n in names if (root / n).is_file()]
    files += [p for d in (("audio",) if on_box else ("audio", "codecs"))
              for p in (root / d).rglob("*") if p.is_file()]
    rels = sorted(p.relative_to(root).as_posix() for p in files)
    listing = "".join(f"{sha256_file(root / r)}  {r}\n" for r in rels)
    return hashlib.sha256(listing.encode()).hexdigest()


def identity_of(meta: dict) -> dict:
    """The part of a bundle meta that decides which rows train: "folds" and "selection", each
    less its "path" (where the file was read is no part of what it says); None when absent.
    runner/bundle_put.sh asks for the check (`hearsay bundle info DIR --identity`)."""
    def strip(d):
        return {k: v for k, v in d.items() if k != "path"} if isinstance(d, dict) else d
    return json.loads(json.dumps({"folds": strip(meta.get("folds")),
                                  "selection": strip(meta.get("selection"))}))


def write_identity(root: Path, meta: dict) -> None:
    """root/selection.json: identity_of(meta), canonical (sorted keys), before the tree-sha."""
    text = json.dumps(identity_of(meta), sort_keys=True, indent=1) + "\n"
    (Path(root) / IDENTITY).write_text(text)


def check_identity(root: Path, meta: dict) -> None:
    """BundleError unless the meta's folds/selection are the hashed selection.json's (a bundle
    without the file passes only when its meta records neither)."""
    path = Path(root) / IDENTITY
    hashed = json.loads(path.read_text()) if path.is_file() else {"folds": None,
                                                                    "selection": None}
    recorded = identity_of(meta)
    for key in ("folds", "selection"):
        if hashed.get(key) != recorded[key]:
            raise BundleError(
                f"{root}: bundle_meta.json's {key!r} differs from the hashed {IDENTITY}"
                f"{'' if path.is_file() else ' (absent: built before the identity covered it)'}"
                f": which rows train is not the bundle's identity; rebuild it with hearsay bundle"
                f" (the fold and selection configs are build inputs, never edited afterwards)")


def read_meta(path: str | os.PathLike) -> dict:
    """bundle_meta.json as written, from the bundle folder or the file itself (the runner's copy,
    RUNNER_BUNDLE_META); BundleError when it is absent or not a JSON object. Judges nothing else
    (load_bundle judges the bundle)."""
    path = Path(path)
    meta_path = path / META if path.is_dir() else path
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BundleError(f"cannot read the bundle meta {meta_path} ({err}): pass a built "
                          f"bundle's folder or its {META} (hearsay bundle MANIFEST DIR)") from None
    if not isinstance(meta, dict):
        raise BundleError(f"{meta_path} is not a bundle meta (a JSON object): rebuild the bundle")
    return meta


def meta_tree_sha(meta: dict, where: object = META) -> str:
    """The meta's tree-sha; BundleError when it records none."""
    sha = meta.get("tree_sha")
    if not isinstance(sha, str) or not sha:
        raise BundleError(f"{where} records no tree_sha: is it a finished bundle? rebuild it "
                          "with hearsay bundle")
    return sha


def meta_n_folds(meta: dict, where: object = META) -> int:
    """The fold file's n_folds as the build recorded it (meta "folds"."config"."n_folds"): how
    many fold models a campaign on this bundle trains; BundleError when it records none."""
    try:
        return int(meta["folds"]["config"]["n_folds"])
    except (KeyError, TypeError, ValueError):
        raise BundleError(f"{where} records no folds.config.n_folds: rebuild the bundle with "
                          "hearsay bundle") from None


@dataclass(frozen=True)
class Bundle:
    root: Path
    manifest: pd.DataFrame  # bundle manifest; str columns except duration (float)
    meta: dict
    tree_sha: str
    codecs: tuple[str, ...] = field(default=())

    @property
    def n_folds(self) -> int:
        """The fold file's n_folds (meta_n_folds): how many fold models a campaign on this
        bundle trains."""
        return meta_n_folds(self.meta, f"{self.root}: {META}")

    def flac(self, rid: str, codec: str | None = None) -> Path:
        """Path of a clip's FLAC, or of its `codec` copy."""
        return self.root / clip_rel(rid, codec)


def load_bundle(root: str | os.PathLike, verify: bool = False) -> Bundle:
    """Open a built bundle. Refuses one whose build failed; `verify` re-hashes every file."""
    root = Path(root)
    meta_path = root / META
    if not meta_path.is_file():
        raise BundleError(f"{root}: no {META} (build it: hearsay bundle MANIFEST {root})")
    meta = json.loads(meta_path.read_text())
    if meta.get("status") != "ok":
        raise BundleError(f"{root}: the build failed ({meta['counts']['failed']} decode failures"
                          f", {meta['fail_frac']:.2%} > {meta['max_fail_frac']:.2%}); fix or "
                          f"remove the clips listed under 'failed' in {meta_path} and rebuild")
    check_identity(root, meta)
    if verify:
        actual = tree_sha(root)
        if actual != meta["tree_sha"]:
            raise BundleError(f"{root}: tree-sha {actual[:12]}… != recorded "
                              f"{meta['tree_sha'][:12]}… (files changed; rebuild the bundle)")
    df = pd.read_csv(root / "manifest.csv", dtype=str, keep_default_na=False)
    df["duration"] = df["duration"].astype(float)
    names = tuple(meta.get("codecs", ()))
    if (root / RECIPE).is_file():  # copies made from the recipe: their own record says which
        try:
            made = check_copies(root, df["id"].tolist(), verify=verify) or {}
        except CodecRecipeError as err:
            raise BundleError(str(err)) from None
        df["codec_ids"] = [";".join(made.get(rid, [])) for rid in df["id"]]
        names = tuple(sorted({c for cs in made.values() for c in cs}))
    return Bundle(root, df, meta, meta["tree_sha"], names)


def require_copies(bundle) -> None:
    """Training's rule: a recipe bundle trains only once its copies are made (load_bundle has
    judged them); a bundle that carries its own copies passes."""
    if read_recipe(bundle.root) is not None and not (Path(bundle.root) / PASS).is_file():
        raise BundleError(f"{bundle.root}: the bundle holds a codec recipe but no codec copies "
                          f"({PASS} missing): make them first: hearsay bundle codecs "
                          f"{bundle.root} (runner/box/job.sh does it on a box)")


EXIT_OK, EXIT_USAGE, EXIT_NO_META, EXIT_FOLD_OUTSIDE, EXIT_IDENTITY = 0, 2, 3, 4, 5  # `... info`


def main(argv: list[str] | None = None) -> int:
    """`hearsay bundle info` (module docstring)."""
    from hearsay.contracts.protocol import FoldOutside, check_fold

    ap = argparse.ArgumentParser(prog="hearsay bundle info", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path, help=f"the bundle folder or its {META}")
    ask = ap.add_mutually_exclusive_group()
    ask.add_argument("--tree-sha", action="store_true", help="print the tree-sha alone")
    ask.add_argument("--n-folds", action="store_true", help="print the fold count alone")
    ask.add_argument("--fold", metavar="K", help="exit 0 when K is one of the bundle's folds")
    ask.add_argument("--identity", action="store_true",
                     help="exit 0 when the meta's folds/selection are the hashed selection.json's")
    args = ap.parse_args(argv)
    try:
        meta = read_meta(args.bundle)
        if args.identity:
            root = args.bundle if args.bundle.is_dir() else args.bundle.parent
            try:
                check_identity(root, meta)
            except BundleError as err:
                print(f"hearsay bundle info: {err}", file=sys.stderr)
                return EXIT_IDENTITY
        elif args.tree_sha:
            print(meta_tree_sha(meta, args.bundle))
        elif args.n_folds:
            print(meta_n_folds(meta, args.bundle))
        elif args.fold is not None:
            if not args.fold.isdigit():
                ap.error(f"--fold {args.fold!r}: give a whole number (0, 1, ...)")
            check_fold(args.fold, meta_n_folds(meta, args.bundle))
        else:
            print(f"tree_sha {meta_tree_sha(meta, args.bundle)}\n"
                  f"n_folds {meta_n_folds(meta, args.bundle)}")
    except BundleError as err:
        print(f"hearsay bundle info: {err}", file=sys.stderr)
        return EXIT_NO_META
    except FoldOutside as err:
        print(f"hearsay bundle info: {err}", file=sys.stderr)
        return EXIT_FOLD_OUTSIDE
    return EXIT_OK
