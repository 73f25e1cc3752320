"""`hearsay bundle MANIFEST OUT_DIR`: manifest -> trimmed 16 kHz FLAC bundle + codec copies/recipe.

    hearsay bundle corpus/manifest.csv bundle/ --folds splits/demo.folds.json [--workers 2]
        [--selection configs/selection.example.json]
    hearsay bundle demo_out/corpus/manifest.csv demo_out/bundle --folds splits/demo.folds.json \
        --max-fail-frac 0.02   # a demo-data corpus: its 2 planted undecodable files are 1.4 %
    hearsay bundle codecs bundle/ --jobs 32   # the copies from the recipe (on a box: job.sh)
    hearsay bundle info bundle/ --n-folds     # the meta's answers (hearsay.contracts.bundle)

Per clip (hearsay.sound.audio, in this order): load_audio -> trim_silence -> drop if < min_s left ->
cap max_s -> peak_guard -> audio/<id>.flac (16 kHz mono 16-bit); then one ffmpeg run encodes it
into every codec this ffmpeg has (hearsay.sound.codecs), each copy decoded back through load_audio,
re-trimmed, capped, peak-guarded -> codecs/<codec>/<id>.flac. Layout: docs/INTERFACES.md.

* Decode failures are listed with their reason in bundle_meta.json["failed"]; the batch goes on.
  The build fails (exit 4) when failed / rows > max_fail_frac (default 0.005 = 0.5 %).
* Clips with < min_s (0.5 s) left after trimming are dropped and listed in ["dropped"]; a WAV
  holding less data than its header declares is kept (what is there) and listed in ["notes"].
* An encoder this ffmpeg lacks is listed in ["encoders_missing"] and its copies skipped.
* --codec-copies box (the CLI's default; BundleConfig's is "here"): no copies here; the bundle
  carries codec_recipe.json (in the tree-sha) and each box makes them at setup with `hearsay
  bundle codecs BUNDLE` (hearsay.bundle.codec_pass). "here": made now, as above (small corpora).
* Resume: a FLAC is reused only when its source's size:mtime_ns stamp and the build settings are
  unchanged (kept in the sidecar OUT_DIR/.stamps.json, saved every 25 clips, so an interrupted
  build resumes; bundle_meta.json is removed when a build starts and written when it ends).
* --selection FILE (hearsay.bundle.select): its drop_extra_families removes extra rows of
  those generator families before the fold check (core rows stay; counts in bundle_meta.json
  ["counts"]["extra_family_dropped"] and ["selection"]["outcome"]["extra_families"]); then,
  once every clip is decoded, drop rules, per-source minimum trimmed duration, duration
  histogram matching, caps and class ratios pick the rows the bundle keeps (seeded); the
  others are listed with their reason in
  bundle_meta.json["selection"]["outcome"] and their FLACs not kept (a rebuild decodes them again).
* tree_sha (bundle_meta.json): sha256 of the sha256sum listing of manifest.csv, selection.json
  (the fold file's identity and config, the selection config and outcome), audio/ and codecs/,
  paths sorted bytewise - the same as `cd OUT_DIR && find manifest.csv selection.json audio
  codecs -type f | LC_ALL=C sort | xargs sha256sum | sha256sum`.
  bundle_meta.json, diagnostics.json and .stamps.json are outside it.
* diagnostics.json: per-scope AUC of trivial features (post-trim duration, pre-guard peak,
  leading silence) with the gate "warn when max(AUC, 1-AUC) >= auc_warn (0.85)", the per-source
  duration AUC before and after selection, clips with identical 16-bit PCM across scopes, and
  core clips identical to a test clip.

Exit codes: 0 built, 1 unexpected error, 2 usage, 3 manifest, fold file or selection config
rejected (schema, sha mismatch, extra generator from a holdout family, unknown selection key,
source or generator), 4 decode failures above --max-fail-frac.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import multiprocessing as mp
import os
import resource
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from hearsay.bundle.diagnostics import diagnostics
from hearsay.bundle.rows import prepare_manifest
from hearsay.bundle.select import (
    SelectionConfig,
    SelectionError,
    check_names,
    select_bundle,
)
from hearsay.contracts import codec_recipe
from hearsay.contracts.bundle import DIAG, META, STAMPS, clip_rel, tree_sha, write_identity
from hearsay.contracts.codec_recipe import write_copies, write_flac
from hearsay.contracts.folds import FoldError
from hearsay.contracts.manifest import ManifestError, resolve_path
from hearsay.metrics.shortcuts import SHORTCUT_BOUND
from hearsay.sound import audio, codecs, decoder
from hearsay.util.hashing import sha256_file
from hearsay.util.progress import EVERY_S, Progress

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REJECTED, EXIT_TOO_MANY_FAILURES = 0, 1, 2, 3, 4
STAMP_EVERY = 25  # clips between saves of the resume sidecar


@dataclass(frozen=True)
class BundleConfig:
    max_s: float = 15.0  # cap after trimming, seconds
    min_s: float = 0.5  # clips shorter than this after trimming are dropped
    top_db: float = audio.TRIM_TOP_DB  # trim threshold, dB below the loudest frame
    codecs: tuple[str, ...] = tuple(codecs.CODECS)  # codec copies to make (missing encoders skip)
    max_fail_frac: float = 0.005  # decode failures / rows above this fail the build
    workers: int = 0  # processes; 0 = every CPU this process may use
    auc_warn: float = SHORTCUT_BOUND  # diagnostics: a feature separating this well is a warning
    codec_copies: str = "here"  # "here": made now, in the bundle; "box": a recipe, made on the box
    codec_ffmpeg_version: str = ""  # "box": ffmpeg the recipe expects ("": this one's; "any")

    def settings_key(self) -> str:
        """Digest of what a FLAC depends on; a change invalidates every resumed FLAC."""
        s = json.dumps([self.max_s, self.min_s, self.top_db, list(self.codecs)])
        return hashlib.sha256(s.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- one clip


def process_clip(task: dict) -> dict:
    """Bundle one clip (runs in a worker). Never raises: the status says what happened; an
    unexpected error is a listed failure of this clip, never the end of the batch."""
    res = {"id": task["id"], "stamp": task["stamp"], "status": "ok", "reason": ""}
    cpu0 = _cpu_s()
    try:
        res = _process(task, res)
    except audio.AudioError as err:
        res = {**res, "status": "failed", "reason": err.reason}
    except Exception as err:  # noqa: BLE001 - one clip's bug must not end the batch
        res = {**res, "status": "failed", "reason": f"internal error {type(err).__name__}: {err}"}
    return {**res, "cpu_s": round(_cpu_s() - cpu0, 4)}


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children (ffmpeg)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _process(task: dict, res: dict) -> dict:
    rid, src, out, cfg = task["id"], Path(task["src"]), Path(task["out"]), task["cfg"]
    x = audio.load_audio(src)
    note = wav_truncation(src)
    if note:
        res["note"] = note
    sr = audio.SAMPLE_RATE
    start, end = audio.trim_silence(x, top_db=cfg["top_db"])
    y = x[start:end]
    if len(y) < cfg["min_s"] * sr:
        why = "silent" if len(y) == 0 else f"{len(y) / sr:.2f} s"
        return {**res, "status": "dropped",
                "reason": f"too short after trimming ({why} < {cfg['min_s']} s)"}
    peak = float(np.max(np.abs(y)))
    y = audio.peak_guard(audio.cap(y, cfg["max_s"]))
    flac = out / clip_rel(rid)
    write_flac(flac, y)
    pcm = sf.read(flac, dtype="int16")[0]
    res.update(duration=round(len(y) / sr, 4), trimmed_s=round((end - start) / sr, 4),
               peak=round(peak, 6), lead_s=round(start / sr, 4),
               pcm_sha=hashlib.sha256(pcm.tobytes()).hexdigest(), codec_ids=[],
               codec_errors={})
    res["codec_ids"], res["codec_errors"] = write_copies(
        y, cfg["codecs"], cfg["top_db"], cfg["max_s"], lambda name: out / clip_rel(rid, name))
    return res


def wav_truncation(path: Path) -> str | None:
    """A note when a RIFF/WAVE file holds fewer data bytes than its header declares (libsndfile
    then quietly decodes what is there); None for complete WAVs and for other formats."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos = 12
    while pos + 8 <= len(head):
        size = int.from_bytes(head[pos + 4:pos + 8], "little")
        if head[pos:pos + 4] == b"data":
            held = path.stat().st_size - (pos + 8)
            if 0 < held < size and size != 0xFFFFFFFF:  # 0xFFFFFFFF: streamed, size unknown
                return (f"truncated WAV: header declares {size} data bytes, file holds {held}; "
                        "kept what is there")
            return None
        pos += 8 + size + (size & 1)
    return None


def stamp_of(path: Path) -> str:
    """size:mtime_ns of a source file ("missing" when absent)."""
    try:
        st = path.stat()
    except OSError:
        return "missing"
    return f"{st.st_size}:{st.st_mtime_ns}"


# --------------------------------------------------------------------------- the build


def _workers(n: int) -> int:
    return n if n > 0 else len(os.sched_getaffinity(0))


def build_bundle(manifest: str | os.PathLike, out: str | os.PathLike,
                 folds: str | os.PathLike | None = None,
                 cfg: BundleConfig = BundleConfig(), progress: bool = True,
                 selection: str | os.PathLike | None = None) -> dict:
    """Build the bundle; returns its meta dict. Raises ManifestError / FoldError / SelectionError
    on bad input; a build over the failure threshold still writes its meta (status "failed")."""
    manifest, out = Path(manifest), Path(out)
    scfg = SelectionConfig() if selection is None else SelectionConfig.from_file(selection)
    df, folds_meta, dropped_extra = prepare_manifest(manifest, None if folds is None else
                                                      Path(folds), scfg)
    check_names(df, scfg)  # before any decoding: a misspelt source is exit 3 at once
    recipe, have, missing = codec_recipe.plan(cfg)  # "box": a recipe here, no copies
    out.mkdir(parents=True, exist_ok=True)
    (out / META).unlink(missing_ok=True)  # a half-rebuilt bundle must not look finished
    stamps_path = out / STAMPS
    old = json.loads(stamps_path.read_text()) if stamps_path.is_file() else {}
    key = BundleConfig(**{**asdict(cfg), "codecs": tuple(have)}).settings_key()
    old = old.get("entries", {}) if old.get("settings") == key else {}
    wcfg = {"top_db": cfg.top_db, "min_s": cfg.min_s, "max_s": cfg.max_s, "codecs": have}
    results, tasks = {}, []
    for rid, rel in zip(df["id"], df["path"], strict=True):
        src = resolve_path(rel, manifest.parent)
        stamp = stamp_of(src)
        prev = old.get(rid)
        if prev and prev["stamp"] == stamp and prev["status"] != "failed" and _outputs_exist(
                out, prev):
            results[rid] = {**prev, "reused": True}
        else:
            tasks.append({"id": rid, "src": str(src), "out": str(out), "cfg": wcfg,
                          "stamp": stamp})
    n_proc = min(_workers(cfg.workers), max(1, len(tasks)))
    bar = Progress(len(tasks), desc=f"hearsay bundle ({n_proc} proc)", unit="clip",
                   every_s=EVERY_S if progress else 0)
    def save_stamps() -> None:  # atomically, so an interrupted build resumes from here
        tmp = stamps_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"settings": key, "entries": results}, indent=0))
        tmp.replace(stamps_path)

    with contextlib.ExitStack() as stack:
        if n_proc > 1:
            pool = stack.enter_context(mp.get_context("forkserver").Pool(n_proc))
            done = pool.imap_unordered(process_clip, tasks, chunksize=1)
        else:
            done = map(process_clip, tasks)
        for i, res in enumerate(done, start=1):
            results[res["id"]] = res
            bar.update()
            if i % STAMP_EVERY == 0:
                save_stamps()
    bar.close()
    save_stamps()
    decoded = [rid for rid in df["id"] if results[rid]["status"] == "ok"]
    ok, sel_meta = select_bundle(df, decoded, {r: results[r]["trimmed_s"] for r in decoded},
                                 scfg, None if selection is None else str(selection),
                                 dropped_extra)
    listed = {status: [{"id": rid, "path": p, "reason": results[rid]["reason"]}
                       for rid, p in zip(df["id"], df["path"], strict=True)
                       if results[rid]["status"] == status] for status in ("failed", "dropped")}
    bdf = df.set_index("id").loc[ok].reset_index()
    bdf["duration"] = [f"{results[r]['duration']:.4f}" for r in ok]
    bdf["codec_ids"] = [";".join(results[r]["codec_ids"]) for r in ok]
    bdf["flac"] = [clip_rel(r) for r in ok]
    bdf.to_csv(out / "manifest.csv", index=False)
    _remove_stale(out, {rid: results[rid] for rid in ok})
    fail_frac = len(listed["failed"]) / max(1, len(df))  # of the rows drop_extra_families left
    status = "ok" if fail_frac <= cfg.max_fail_frac else "failed"
    diag = diagnostics(bdf, results, cfg.auc_warn,
                       before=df.set_index("id").loc[decoded].reset_index())
    (out / DIAG).write_text(json.dumps(diag, indent=1) + "\n")
    write_identity(out, {"folds": folds_meta, "selection": sel_meta})  # hashed: tree-sha below
    codec_recipe.write_recipe(out, recipe)  # hashed too (None: removed): the recipe is identity
    meta = {
        "status": status,
        "tree_sha": tree_sha(out),
        "tree_sha_method": "sha256 of `sha256sum` lines of manifest.csv, selection.json, "
                           "audio/**, codecs/** (paths relative, LC_ALL=C sorted)",
        "counts": {"rows": len(df) + len(dropped_extra), "ok": len(ok),
                   "extra_family_dropped": len(dropped_extra), "failed": len(listed["failed"]),
                   "dropped": len(listed["dropped"]), "deselected": len(decoded) - len(ok),
                   "reused": sum(1 for r in ok if results[r].get("reused")),
                   "codec_copies": sum(len(results[r]["codec_ids"]) for r in ok),
                   "cpu_s": round(sum(r.get("cpu_s", 0) for r in results.values()
                                      if not r.get("reused")), 2)},  # this run's clip work
        "fail_frac": round(fail_frac, 6), "max_fail_frac": cfg.max_fail_frac,
        "failed": listed["failed"], "dropped": listed["dropped"],
        "notes": [{"id": r, "note": results[r]["note"]} for r in ok if results[r].get("note")],
        "codec_errors": {r: results[r]["codec_errors"] for r in ok if results[r]["codec_errors"]},
        "codecs": have, "encoders_missing": missing,
        "codec_copies": cfg.codec_copies, "codec_recipe": recipe,
        "config": asdict(cfg), "folds": folds_meta, "selection": sel_meta,
        "manifest": {"path": str(manifest), "sha256": sha256_file(manifest)},
        "front_end": {"sample_rate": audio.SAMPLE_RATE, "resampler": decoder.RESAMPLER,
                      "peak": audio.PEAK, "top_db": cfg.top_db, "max_s": cfg.max_s},
        "warnings": diag["warnings"],
    }
    (out / META).write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def _outputs_exist(out: Path, res: dict) -> bool:
    if res["status"] != "ok":
        return True
    files = [out / clip_rel(res["id"])] + [out / clip_rel(res["id"], c)
                                           for c in res["codec_ids"]]
    return all(f.is_file() for f in files)


def _remove_stale(out: Path, ok: dict) -> None:
    """Delete audio/codec files of rows no longer in the bundle (they would enter the tree-sha)."""
    keep = {clip_rel(rid) for rid in ok}
    keep |= {clip_rel(rid, c) for rid, r in ok.items() for c in r["codec_ids"]}
    for d in ("audio", "codecs"):
        for p in (out / d).rglob("*") if (out / d).is_dir() else []:
            if p.is_file() and p.relative_to(out).as_posix() not in keep:
                p.unlink()


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay bundle", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest", type=Path)
    ap.add_argument("out", type=Path, help="bundle folder (created; a rerun resumes)")
    ap.add_argument("--folds", type=Path, help="pinned fold file that fills the fold column")
    ap.add_argument("--selection", type=Path,
                    help="selection config JSON (hearsay.bundle.select; configs/"
                         "selection.example.json): caps, ratios, duration rules, drops")
    ap.add_argument("--workers", type=int, default=0, help="processes (default: all CPUs)")
    ap.add_argument("--max-fail-frac", type=float, default=BundleConfig.max_fail_frac,
                    help="decode failures / rows above this fail the build (default 0.005)")
    ap.add_argument("--codecs", default=",".join(codecs.CODECS),
                    help="comma list of codec copies to make ('' for none)")
    ap.add_argument("--codec-copies", choices=("box", "here"), default="box",
                    help="box (default): the bundle carries codec_recipe.json and each box makes "
                         "the copies at setup (hearsay bundle codecs); here: make them now, into "
                         "the bundle (small corpora: about six times the upload)")
    ap.add_argument("--codec-ffmpeg-version", default="",
                    help="with --codec-copies box: the ffmpeg version the boxes must make the "
                         "copies with (default: this machine's ffmpeg; 'any' = not checked)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["info"]:  # hearsay bundle info BUNDLE: the meta's answers (the runner asks)
        from hearsay.contracts import bundle as artefact

        return artefact.main(argv[1:])
    if argv[:1] == ["codecs"]:  # hearsay bundle codecs BUNDLE: the codec pass
        from hearsay.bundle import codec_pass

        return codec_pass.main(argv[1:])
    args = ap.parse_args(argv)
    cfg = BundleConfig(workers=args.workers, max_fail_frac=args.max_fail_frac,
                       codecs=tuple(c for c in args.codecs.split(",") if c),
                       codec_copies=args.codec_copies,
                       codec_ffmpeg_version=args.codec_ffmpeg_version)
    try:
        meta = build_bundle(args.manifest, args.out, args.folds, cfg,
                            progress=not args.no_progress, selection=args.selection)
    except (ManifestError, FoldError, SelectionError, ValueError) as err:
        print(f"hearsay bundle: {err}", file=sys.stderr)
        return EXIT_REJECTED
    c = meta["counts"]
    print(f"bundle: {args.out}: {c['ok']} clips, {c['codec_copies']} codec copies, "
          f"{c['dropped']} dropped, {c['deselected']} deselected, {c['failed']} failed, "
          f"{c['reused']} reused; tree_sha {meta['tree_sha']}")
    for rule, n in meta["selection"]["outcome"]["by_rule"].items():
        print(f"  selection: {n} rows dropped by {rule} (listed in bundle_meta.json)")
    for item in meta["failed"] + meta["dropped"]:
        print(f"  {item['id']} ({item['path']}): {item['reason']}")
    for item in meta["notes"]:
        print(f"  {item['id']}: {item['note']}")
    if meta["codec_recipe"] is not None:
        print(f"  {codec_recipe.describe(meta['codec_recipe'], args.out)}")
    if meta["encoders_missing"]:
        print(f"  encoders missing, copies skipped: {meta['encoders_missing']}")
    for w in meta["warnings"]:
        print(f"  warning: {w}")
    if meta["status"] != "ok":
        passes = math.ceil(meta["fail_frac"] * 1000) / 1000  # the least 0.001 step that passes
        print(f"hearsay bundle: {c['failed']} decode failures (listed above) = "
              f"{meta['fail_frac']:.2%} of rows > --max-fail-frac {cfg.max_fail_frac:.2%}: build "
              f"failed (fix or remove those clips, or accept them knowingly with --max-fail-frac "
              f"{passes:g}; a `hearsay demo-data` corpus plants 2 undecodable files on purpose, "
              "so its bundle needs --max-fail-frac 0.02)", file=sys.stderr)
        return EXIT_TOO_MANY_FAILURES
    return EXIT_OK
