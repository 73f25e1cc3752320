"""`hearsay score-run`: a trained run scores its own rows where it was trained (the box, after
`hearsay train`), writing the per-run files `hearsay assemble` verifies and reuses.

    hearsay score-run --run RUN_DIR --bundle BUNDLE --out RUN_DIR/scores
    hearsay score-run --run RUN_DIR --bundle BUNDLE --out RUN_DIR/scores --parity-clips 50
    hearsay score-run --run RUN_DIR --bundle BUNDLE --out DIR --device cpu   # force CPU fp32
    hearsay score-run --run RUN_DIR --bundle BUNDLE --out RUN_DIR/scores --overlap

The rows are those assemble asks of the run (`jobs_of`): a fold-K run scores inner_oof fold K; the
full run scores holdout, the augmented holdout, the codec panel, the test-length crops, the whole
clips up to 14 s and test; and every run scores the probe set (fold probe's bona fide clips, e.g.
In-the-Wild's: <key>_probe.csv with its set_sha256; the full run's is the probe the gate reads, a
recipe's fold run's the probe of the drop rule; hearsay.evaluate.probe_set). Each file is
<key>_<split><suffix>.csv (key fold0-4 or full, from run_meta.json) with its `.meta.json` sidecar
(hearsay.contracts.score_file), byte for byte what assemble writes for the same model, settings and
precision (the sidecar's "run" is the scoring machine's path).

Device and precision are the trainer's: run_meta "device" "cpu" -> CPU fp32; a GPU -> cuda with
bf16 autocast when the run trained in bf16 (config.json train.bf16), as `hearsay train` does.
Both are in every sidecar (config.device, config.precision, and device_name).

A file whose sidecar already names the same weights sha256, bundle tree-sha, split, fold and
settings (hearsay.contracts.score_file.refusal) is kept: a relaunched box does not score twice.

The reuse rule (assemble): device and precision are recorded, not compared. A GPU bf16 file is
reused exactly like a CPU fp32 one; parity B (hearsay.contracts.parity_b) measures the gap on the
same model (Spearman > 0.99, max |dlogit| < 0.05) and `hearsay assemble --rescore` scores all
again on the laptop when that is wanted.

--overlap (default off: --no-overlap): the fed batches' device copies overlapped with the model's
compute and the logits read back once per few batches (hearsay.evaluate.overlap); the same
logits bit for bit, so no sidecar records it. The test-length crops (a few dozen batches made in
memory, not fed) run as without it.

--parity-clips N (full run): also write full_parity_logits.json, the model's logits on N test
clips in this precision, for parity B on the laptop (hearsay.contracts.parity_b).

Exit codes: 0 written (or kept), 2 usage (also a --device, or with auto the trainer's GPU, that
this machine lacks), 3 bad input (bundle, run or clip unreadable),
4 refused (bundle tree-sha differs from the run's, or a protocol violation: hearsay score's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from hearsay.contracts import parity_b, run_dir, score_file
from hearsay.contracts.protocol import N_FOLDS, run_job, run_key
from hearsay.evaluate import probe_set, readouts
from hearsay.evaluate import score as scoring

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 2, 3, 4  # module docstring
PARITY_FILE = parity_b.FILE


def jobs_of(key: str) -> list[tuple[str, int | None, bool | str]]:
    """(split, fold, augmented) each pinned run scores; augmented "codecs" is the codec readout
    (hearsay.evaluate.readouts.score_codec_panel: every codec copy of the same holdout rows);
    "test_length" and "whole" the holdout at fixed-seed test-length crops and up to 14 s; split
    "probe" the probe set, scored by every run (hearsay.evaluate.probe_set)."""
    probe = (probe_set.SPLIT, None, False)
    if key == "full":
        return [("holdout", None, False), ("holdout", None, True), ("holdout", None, "codecs"),
                ("holdout", None, "test_length"), ("holdout", None, "whole"),
                ("test", None, False), probe]
    return [("inner_oof", run_job(key)[1], False), probe]


def key_of(meta: dict) -> str:
    """fold0-4 or full, from run_meta.json; a pilot (or anything else) is refused."""
    if meta.get("job") == "full":
        return "full"
    if meta.get("job") == "fold" and meta.get("fold") in range(N_FOLDS):
        return run_key("fold", meta["fold"])
    raise scoring.ScoreRefused(f"a {meta.get('job')!r} run (fold {meta.get('fold')!r}) has no "
                               "rows of record: only fold0-4 and full runs are scored")


def wanted(weights_sha: str, bundle_sha: str, split: str, fold, aug,
           cfg: scoring.ScoreConfig) -> dict:
    """What a reusable file's sidecar must say (device and precision are not compared)."""
    return score_file.wanted(weights_sha, bundle_sha, split, fold, aug, aug_seed=cfg.aug_seed,
                             max_s=readouts.WHOLE_MAX_S if aug == "whole" else cfg.max_s)


def score_one(bundle, run: Path, split: str, fold, aug, cfg: scoring.ScoreConfig,
              workers: int = 0, overlap: bool = False):
    """(frame, sidecar) of one file, by the one function assemble has always used for it;
    `overlap`: the device copies overlapped with compute (the same logits, --overlap)."""
    if aug == "codecs":
        df, side = readouts.score_codec_panel(bundle, run, cfg, overlap)
    elif aug in ("test_length", "whole"):
        df, side = readouts.score_holdout_variant(bundle, run, aug, cfg, overlap)
    elif split == probe_set.SPLIT:
        df, side = probe_set.score(bundle, run, cfg, workers, overlap)
    else:
        df, side = scoring.score_split(bundle, run, split, fold, cfg, aug, workers,
                                       overlap=overlap)
    from hearsay.evaluate.parity_record import device_name

    return df, {**side, "device_name": device_name(cfg.device)}


def ensure_scores(bundle, run: Path, key: str, weights_sha: str, out_dir: Path,
                  cfg: scoring.ScoreConfig, force: bool = False, say=None, workers: int = 0,
                  overlap: bool = False):
    """({(split, aug): csv}, [(file, why, rows)] scored here) for one run: each file reused when
    its sidecar passes score_file.refusal, else (or with `force`) scored and written."""
    out, scored = {}, []
    for split, fold, aug in jobs_of(key):
        csv = Path(out_dir) / score_file.file_name(key, split, aug)
        why = "--rescore" if force else score_file.refusal(
            csv, wanted(weights_sha, bundle.tree_sha, split, fold, aug, cfg))
        if why is None:
            out[(split, aug)] = csv
            continue
        if say:
            say(f"scoring {csv.name} here ({why})")
        df, side = score_one(bundle, Path(run), split, fold, aug, cfg, workers, overlap)
        out[(split, aug)] = score_file.write(df, side, csv)
        scored.append((csv.name, why, len(df)))
    return out, scored


def trainer_config(run: Path, device: str = "auto") -> scoring.ScoreConfig:
    """The scoring settings of record on the trainer's device and in its precision."""
    meta = run_dir.find_meta(run)
    if device == "auto":
        device = "cpu" if str(meta.get("device", "cpu")) == "cpu" else "cuda"
    bf16 = True
    conf = run_dir.config_path(run)
    if conf.is_file():
        bf16 = bool(json.loads(conf.read_text()).get("train", {}).get("bf16", True))
    precision = "bf16" if device.startswith("cuda") and bf16 else "fp32"
    return dataclasses.replace(scoring.ScoreConfig(), device=device, precision=precision)


def feeding_workers(device: str) -> int:
    """Feeding processes by default: on a GPU the model outruns one decoding core (box scoring
    measured 73% of its wall in decoding), so up to 8 cores feed it; on the CPU they would only
    take cores from the model."""
    import os

    return min(8, max((os.cpu_count() or 1) - 1, 0)) if device.startswith("cuda") else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay score-run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="run dir written by hearsay train")
    ap.add_argument("--bundle", type=Path, required=True, help="the bundle the run trained on")
    ap.add_argument("--out", type=Path, required=True, help="folder of the per-run files")
    ap.add_argument("--device", default="auto",
                    help="auto (default: the trainer's, from run_meta.json), cpu or cuda")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="processes that decode and prepare batches beside the model "
                         "(default: on cuda min(8, cores - 1), on cpu 0: in this process)")
    ap.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=False,
                    help="overlap the next batch's device copy with this batch's compute and "
                         "read the logits back once per few batches (default off; the same "
                         "logits either way, only the speed differs)")
    ap.add_argument("--parity-clips", type=int, default=0, metavar="N",
                    help="full run: also record the logits of N test clips for parity B")
    args = ap.parse_args(argv)
    from hearsay.util.hashing import sha256_file

    try:
        meta = run_dir.find_meta(args.run)
        key = key_of(meta)
        cfg = trainer_config(args.run, args.device)
        if (why := scoring.device_problem(cfg.device)) is not None:
            print(f"hearsay score-run: {why}", file=sys.stderr)
            return EXIT_USAGE
        bundle = scoring.load_bundle(args.bundle)
        weights = sha256_file(run_dir.weights_of(args.run))
        workers = args.workers if args.workers is not None else feeding_workers(cfg.device)
        _, scored = ensure_scores(bundle, args.run, key, weights, args.out, cfg,
                                  say=lambda m: print(f"hearsay score-run: {m}", file=sys.stderr),
                                  workers=workers, overlap=args.overlap)
        if args.parity_clips:
            if key != "full":
                raise scoring.ScoreError("--parity-clips is the full run's (parity B is of "
                                         "the exported full model)")
            from hearsay.evaluate import parity_record

            parity_record.record(bundle, args.run, args.out / PARITY_FILE, args.parity_clips, cfg)
    except scoring.ScoreRefused as err:
        print(f"hearsay score-run: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except (scoring.ScoreError, ValueError, OSError) as err:
        print(f"hearsay score-run: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"hearsay score-run: {key} on {cfg.device} {cfg.precision}: "
          f"{len(scored)} file(s) scored ({sum(n for *_, n in scored)} rows), "
          f"{len(jobs_of(key)) - len(scored)} kept -> {args.out}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
