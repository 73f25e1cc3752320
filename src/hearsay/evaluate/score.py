"""`hearsay score`: score one bundle split with one trained run, through the training front end.

    hearsay score --bundle BUNDLE --run RUN_DIR --split inner_oof --fold 3 -o fold3_oof.csv
    hearsay score --bundle BUNDLE --run RUN_DIR --split holdout -o holdout.csv
    hearsay score --bundle BUNDLE --run RUN_DIR --split holdout --augmented -o holdout_aug.csv
    hearsay score --bundle BUNDLE --run RUN_DIR --split test --max-s 14 -o test_14s.csv  # diag.
    hearsay score --bundle BUNDLE --run RUN_DIR --split test --hop-s 4 -o test_win.csv  # windows

Per clip (the bundle's FLAC is already loaded, trimmed, capped at 15 s and peak-guarded):

    cap to max_s  ->  [augmented slice: one fixed augmentation]  ->  audio.prepare(trim=False)
                                                                     (cap, band-limit, normalise)

audio.prepare is the one front-end order hearsay-score also calls, so a clip scored here and by
the deploy image gets the same input sample for sample (also past the cap), and the model sees
exactly what training's `example.finish` produces for a crop of the same length.
Clips are sorted by length and batched (zero padding + attention mask), so a batch never mixes a
2 s clip with a 14 s one; the output keeps manifest order.

Rows: `inner_oof` = core rows of the inner folds, 0..n_folds-1 (with --fold K only fold K, and
the run must be the fold-K model: it is the one that never trained on them); `holdout`, `test` =
core rows of that fold. Rows with train_scope `extra` (or fold `extra`) are never scored.

The augmented slice: every selected clip gets exactly one augmentation, drawn from a generator
seeded by (aug_seed, crc32(clip id)) only, so the slice is identical for every model, every
batch size and every subset: a bundle codec copy (codec:<c>) or one of the wave-domain types of
`hearsay.sound.augment` (noise, bandlimit, reverb, gain_clip, rawboost; trim_jitter is
training-only).

Windowed readout (--hop-s S): each clip (up to the bundle's 15 s) is cut by hearsay.sound.windows
into windows of max_s every S seconds, exactly as hearsay-score cuts long files; logit = the
highest window logit (two more columns: windows, mean_logit). The augmented slice is drawn on
the whole clip before it is cut.

Output CSV (hearsay.contracts.score_file): path, fold, split, score, logit (+ augmentation,
codec with --augmented), manifest order; score = sigmoid(logit), logit high = synthetic. Beside it,
`<csv>.meta.json` records the run identity (job, fold, config hash, weights sha256), bundle
tree-sha, split, fold, max_s and aug_seed: `hearsay assemble` checks it before reusing the file.

Exit codes: 0 written, 2 usage (also a --device this machine lacks), 3 bad input (bundle, run or
clip unreadable), 4 refused (bundle tree-sha differs from the run's, inner_oof rows asked of a
model that trained on them, or an extra row reached the table).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hearsay.contracts import run_dir, score_file
from hearsay.contracts.protocol import N_FOLDS, SPLITS, split_rows
from hearsay.engines import feed
from hearsay.sound import audio
from hearsay.sound.bundle_inputs import aug_plan, clip_file, model_input, window_inputs
from hearsay.util.progress import Progress, track

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 2, 3, 4  # module docstring


class ScoreError(Exception):
    """Bad input (exit 3); the message names the fix."""


class ScoreRefused(ScoreError):
    """A protocol violation (exit 4): wrong bundle, or a model scoring rows it trained on."""


@dataclass(frozen=True)
class ScoreConfig:
    """How a split is scored. Everything that changes a score is recorded in the sidecar."""

    max_s: float = 8.0  # seconds of each trimmed clip the model sees (8 deploy, 14 diagnostic)
    batch_seconds: float = 96.0  # padded audio seconds per batch (memory bound)
    max_batch: int = 16  # clips per batch at most
    aug_seed: int = 20261130  # seed of the augmented slice: fixed, the same for every model
    device: str = "cpu"  # torch device for the model
    hop_s: float | None = None  # None: one input of max_s per clip; S: windows every S s (max)
    precision: str = "fp32"  # "bf16": CUDA bf16 autocast, the trainer's (hearsay score-run)

    def __post_init__(self):
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"precision={self.precision!r}: fp32 or bf16")
        if not 0 < self.max_s <= 15.0:
            raise ValueError(f"max_s={self.max_s}: must be in (0, 15] (the bundle caps at 15 s)")
        if self.hop_s is not None and not 0 < self.hop_s <= self.max_s:
            raise ValueError(f"hop_s={self.hop_s}: must be in (0, max_s={self.max_s}]")
        if self.max_batch < 1 or self.batch_seconds <= 0:
            raise ValueError("max_batch and batch_seconds must be positive")


# --------------------------------------------------------------------------- rows


def device_problem(device: str) -> str | None:
    """Why `device` cannot score on this machine (a usage error, exit 2), or None: not a torch
    device, not cpu/cuda, or CUDA asked where none is visible (or not that many GPUs)."""
    import torch

    try:
        d = torch.device(device)
    except (RuntimeError, TypeError) as err:
        return f"--device {device!r} is not a device ({err}); use cpu or cuda[:N]"
    if d.type == "cpu":
        return None
    if d.type != "cuda":
        return f"--device {device}: only cpu and cuda[:N] score here"
    if not torch.cuda.is_available():
        return (f"--device {device}: no CUDA device is visible on this machine "
                "(torch.cuda.is_available() is False); use --device cpu")
    if d.index is not None and d.index >= torch.cuda.device_count():
        return (f"--device {device}: this machine has {torch.cuda.device_count()} CUDA "
                f"device(s) (cuda:0..cuda:{torch.cuda.device_count() - 1})")
    return None


def check_protocol(meta: dict, bundle_sha: str, split: str, fold: int | None) -> None:
    """Refuse a run from another bundle, or inner rows scored by a model that trained on them."""
    if meta.get("bundle_tree_sha") != bundle_sha:
        raise ScoreRefused(f"run was trained on bundle {meta.get('bundle_tree_sha')!r}, this "
                           f"bundle is {bundle_sha!r} (score with the bundle the run used)")
    if split == "inner_oof":
        if meta.get("job") != "fold" or meta.get("fold") is None:
            raise ScoreRefused(f"a {meta.get('job')!r} run trained on every inner fold: inner_oof "
                               "rows are scored only by the fold model that left them out")
        if fold is None or int(meta["fold"]) != int(fold):
            raise ScoreRefused(f"this is the fold-{meta['fold']} model: it may score inner_oof "
                               f"--fold {meta['fold']} only (asked: --fold {fold})")


# --------------------------------------------------------------------------- batching


def length_batches(lengths: list[int], cfg: ScoreConfig) -> list[list[int]]:
    """Row indices grouped longest first so that padded samples stay under the budget."""
    budget = cfg.batch_seconds * audio.SAMPLE_RATE
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < cfg.max_batch and \
                lengths[out[-1][0]] * (len(out[-1]) + 1) <= budget:
            out[-1].append(i)  # the first index is the batch's longest clip
        else:
            out.append([i])
    return out


def run_model(det, waves: list[np.ndarray], device: str = "cpu",
              precision: str = "fp32") -> np.ndarray:
    """Logits (B,) float64 of one batch of waves, zero-padded (bf16: under autocast on the
    device, as training)."""
    return run_padded(det, *padded(waves), device, precision)


def padded(waves: list[np.ndarray]):
    """(input_values (B, T) float32, attention_mask (B, T) int64) torch tensors of a batch, T its
    longest wave. Tensors, not numpy, and padded in the worker: a feeding worker hands tensors to
    the model's process through shared memory, where numpy arrays are pickled through a pipe and
    the model's process, which the GPU waits on, unpickles them (docs/BENCHMARKS.md, Scoring
    throughput)."""
    import torch

    values, mask = audio.pad_batch(waves, [len(w) for w in waves])
    return torch.from_numpy(values), torch.from_numpy(mask)


def run_padded(det, values, mask, device: str = "cpu", precision: str = "fp32") -> np.ndarray:
    """Logits (B,) float64 of one padded batch (values, mask: `padded`'s tensors)."""
    import torch

    amp = torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=precision == "bf16")
    with torch.inference_mode(), amp:
        logits = det(values.to(device), mask.to(device))
    return logits.float().cpu().numpy().astype(np.float64).reshape(-1)


def score_rows(det, root: Path, rows, augs: list[str], cfg: ScoreConfig,
               workers: int = 0, overlap: bool = False) -> np.ndarray:
    """Logits of `rows` (manifest order), batched by capped length; `workers` feeding
    processes decode and prepare the batches ahead (0: in this process); `overlap`: the
    device copies overlapped with compute (hearsay.evaluate.overlap, the same logits)."""
    return run_fed(det, feed_rows(root, rows, augs, cfg, workers), cfg, overlap)


@dataclass(frozen=True)
class Fed:
    """A split's rows on their way to the model: batches (row indices, longest first) and
    their inputs, already being prepared by the feeding workers. Windowed scoring is not fed
    (batches and inputs None): score_windows cuts each row's windows as it goes."""

    root: Path
    recs: list[dict]
    augs: list[str]
    batches: list[list[int]] | None = None
    inputs: Iterator | None = None


def feed_rows(root: Path, rows, augs: list[str], cfg: ScoreConfig, workers: int = 0) -> Fed:
    """Start feeding `rows`: the length pass, the batches, and (workers > 0) the worker
    processes preparing the first batches, so that they run while the caller loads the model.
    Windowed scoring (cfg.hop_s) is not fed."""
    import soundfile as sf

    cap_n = int(round(cfg.max_s * audio.SAMPLE_RATE))
    recs = rows.to_dict("records")
    lengths = []
    for rec, aug in zip(recs, augs, strict=True):
        try:
            lengths.append(min(sf.info(str(clip_file(root, rec, aug))).frames, cap_n))
        except Exception as err:  # noqa: BLE001 - any unreadable file is named below
            raise ScoreError(f"{clip_file(root, rec, aug)}: unreadable ({err})") from None
    if cfg.hop_s is not None:
        return Fed(root, recs, augs)
    batches = length_batches(lengths, cfg)
    jobs = [(root, [recs[i] for i in b], [augs[i] for i in b], cfg) for b in batches]
    return Fed(root, recs, augs, batches, feed.prepared(batch_inputs, jobs, workers))


def run_fed(det, fed: Fed, cfg: ScoreConfig, overlap: bool = False):
    """The logits of what feed_rows started ((max, count, mean) per row when windowed).
    overlap: hearsay.evaluate.overlap's order (next copy during this compute, one read-back
    per several batches), else one batch at a time (run_padded)."""
    if fed.inputs is None:
        return score_windows(det, fed.root, fed.recs, fed.augs, cfg)
    logits = np.full(len(fed.recs), np.nan)
    if overlap:
        from hearsay.evaluate.overlap import overlapped_logits

        batch_logits = overlapped_logits(det, fed.inputs, cfg.device, cfg.precision)
    else:
        batch_logits = (run_padded(det, values, mask, cfg.device, cfg.precision)
                        for values, mask in fed.inputs)
    with Progress(len(fed.recs), desc="scoring", unit="clip") as bar:
        try:
            for batch, z in zip(fed.batches, batch_logits, strict=True):
                logits[batch] = z
                bar.update(len(batch))
        except audio.AudioError as err:
            raise ScoreError(f"bundle clip unreadable: {err} (rebuild the bundle)") from None
    return logits


def batch_inputs(root: Path, recs: list, augs: list[str], cfg: ScoreConfig):
    """The padded model inputs of one batch (decode + front end + padding: `padded`'s tensors):
    what a feeding worker computes."""
    return padded([model_input(root, rec, aug, cfg) for rec, aug in zip(recs, augs, strict=True)])


def score_windows(det, root: Path, recs: list, augs: list[str], cfg: ScoreConfig):
    """(max logit, window count, mean logit) per row, each (N,); windows batched by max_batch
    (windows of one clip are at most max_s long, so a batch stays under its budget)."""
    best, count, mean = (np.full(len(recs), np.nan) for _ in range(3))
    for i, (rec, aug) in enumerate(track(zip(recs, augs, strict=True), total=len(recs),
                                         desc="scoring (windows)", unit="clip")):
        try:
            waves = window_inputs(root, rec, aug, cfg)
        except audio.AudioError as err:
            raise ScoreError(f"bundle clip unreadable: {err} (rebuild the bundle)") from None
        z = np.concatenate([run_model(det, waves[s : s + cfg.max_batch], cfg.device,
                                      cfg.precision)
                            for s in range(0, len(waves), cfg.max_batch)])
        best[i], count[i], mean[i] = z.max(), len(z), z.mean()
    return best, count, mean


# --------------------------------------------------------------------------- one split


def score_split(bundle, run: Path, split: str, fold: int | None = None,
                cfg: ScoreConfig = ScoreConfig(), augmented: bool = False, workers: int = 0,
                label: str | None = None, overlap: bool = False):
    """(scores DataFrame, sidecar dict) of one split scored by one run; `workers` feeding
    processes (score_rows) and `overlap` (run_fed) change the speed, never a score, so no
    sidecar records them;
    `label` keeps that label's rows only (the probe set: hearsay.evaluate.probe_set)."""
    import pandas as pd

    from hearsay.detector.logits import expit
    from hearsay.detector.model import load_detector
    from hearsay.util.hashing import sha256_file

    run = Path(run)
    meta = run_dir.find_meta(run)  # RunDirError (an OSError: exit 3) names what is missing
    if split == "inner_oof" and fold is None and meta.get("job") == "fold":
        fold = meta.get("fold")
    check_protocol(meta, bundle.tree_sha, split, fold)
    try:
        rows = split_rows(bundle.manifest, split, fold)
    except ValueError as err:  # an unknown split, or --fold off inner_oof
        raise ScoreError(str(err)) from None
    if label is not None:
        rows = rows[rows["label"] == label]
    augs = aug_plan(rows, cfg.aug_seed) if augmented else ["none"] * len(rows)
    wfile = run_dir.weights_of(run)
    # the feeding workers start before the model loads (seconds on a GPU box), so the first
    # batches are ready when it is
    fed = feed_rows(Path(bundle.root), rows, augs, cfg, workers) if len(rows) else None
    det, _ = load_detector(wfile.parent, device=cfg.device)
    logits = run_fed(det, fed, cfg, overlap) if fed is not None else np.zeros(0)
    extra = {}
    if cfg.hop_s is not None:  # windowed readout: (max, count, mean) per row
        logits, n_win, mean = logits if len(rows) else (np.zeros(0),) * 3
        extra = {"windows": n_win.astype(int), "mean_logit": mean}
    out = pd.DataFrame({"path": rows["path"].astype(str).to_numpy(),
                        "fold": rows["fold"].astype(str).to_numpy(), "split": split,
                        "score": expit(logits), "logit": logits, **extra})
    if augmented:
        out["augmentation"] = [a.split(":", 1)[0] for a in augs]
        out["codec"] = [a.split(":", 1)[1] if a.startswith("codec:") else "" for a in augs]
    no_extra_rows(out, bundle.manifest)
    side = {"run": str(run), "job": meta.get("job"), "run_fold": meta.get("fold"),
            "config_hash": meta.get("config_hash"), "weights_sha256": sha256_file(wfile),
            "bundle_tree_sha": bundle.tree_sha, "split": split, "fold": fold,
            "augmented": augmented, "n_rows": len(out), "config": dataclasses.asdict(cfg)}
    return out, side


def no_extra_rows(scores, manifest) -> None:
    """hearsay.contracts.manifest's guard: no extra (train-only) row may reach a score table."""
    from hearsay.contracts.manifest import ExtraRowScored, assert_no_extra

    try:
        assert_no_extra(scores, manifest)
    except ExtraRowScored as err:
        raise ScoreRefused(str(err)) from None


def load_bundle(path: Path, verify: bool = False):
    """The bundle through its own reader (hearsay.bundle); `verify` re-hashes its tree."""
    from hearsay.contracts.bundle import BundleError
    from hearsay.contracts.bundle import load_bundle as _load

    try:
        return _load(path, verify=verify)
    except BundleError as err:
        raise ScoreError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay score", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, required=True, help="bundle folder (hearsay bundle)")
    ap.add_argument("--run", type=Path, required=True,
                    help="run dir (uses final/) or a checkpoint dir under it")
    ap.add_argument("--split", required=True, choices=list(SPLITS), help="rows to score")
    ap.add_argument("--fold", type=int, choices=range(N_FOLDS), default=None,
                    help="inner fold (inner_oof only; default: the fold run's own fold)")
    ap.add_argument("--max-s", type=float, default=ScoreConfig.max_s,
                    help="seconds of each clip the model sees (8 deploy default, 14 diagnostic)")
    ap.add_argument("--augmented", action="store_true",
                    help="score the fixed-seed augmented slice instead of the clean clips")
    ap.add_argument("--aug-seed", type=int, default=ScoreConfig.aug_seed,
                    help="seed of the augmented slice (keep the default to compare models)")
    ap.add_argument("--hop-s", type=float, default=None, metavar="S",
                    help="windowed readout: windows of --max-s every S s over each whole clip "
                    "(as hearsay-score), logit = the highest window logit")
    ap.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    ap.add_argument("-o", "--out", type=Path, required=True, help="output CSV")
    args = ap.parse_args(argv)
    if (why := device_problem(args.device)) is not None:
        print(f"hearsay score: {why}", file=sys.stderr)
        return EXIT_USAGE
    try:
        cfg = ScoreConfig(max_s=args.max_s, aug_seed=args.aug_seed, device=args.device,
                          hop_s=args.hop_s)
        bundle = load_bundle(args.bundle)
        df, side = score_split(bundle, args.run, args.split, args.fold, cfg, args.augmented)
        score_file.write(df, side, args.out)
    except ScoreRefused as err:
        print(f"hearsay score: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except (ScoreError, ValueError, OSError) as err:
        print(f"hearsay score: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"hearsay score: {len(df)} rows -> {args.out}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
