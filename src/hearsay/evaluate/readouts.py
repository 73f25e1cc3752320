"""Readouts beside the metrics of record: clips per class per fold, and the codec readout.

    counts = readouts.class_counts(assembled_scores, key)    # {"fold 0": {"bonafide", "spoof"}}
    panel, side = readouts.score_codec_panel(bundle, FULL_RUN, cfg)   # hearsay assemble
    codec = readouts.codec_readout(clean_holdout, panel, key)

The codec readout answers "how much does each codec cost": its clean row is the unaugmented
holdout scores (no noise, reverb or RawBoost mixed in) and every codec is scored on exactly the
same clips (the holdout rows holding a copy of every codec), so the gap between a codec row and
the clean row is that codec's effect and nothing else. The augmented holdout (one random
augmentation per clip) stays in the metrics as "holdout augmented", not as a codec readout.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np

from hearsay import metrics
from hearsay.contracts import protocol, run_dir, score_file
from hearsay.evaluate import score as scoring
from hearsay.metrics import PI_OF_RECORD
from hearsay.sound import bundle_inputs as inputs
from hearsay.util.progress import Progress


def class_counts(df, key) -> dict:
    """Clips per class (bona fide / synthetic, not rows) per inner fold and per other split."""
    j = df.merge(key[["path", "label"]], on="path", how="left")
    j["group"] = np.where(j["split"] == "inner_oof", "fold " + j["fold"].astype(str),
                          j["split"].astype(str))
    out = {}
    for group, sub in j.groupby("group", sort=True):
        labels = sub.drop_duplicates("path")["label"]
        out[str(group)] = {"bonafide": int((labels == "bonafide").sum()),
                           "spoof": int((labels == "spoof").sum()),
                           "unlabelled": int(labels.isna().sum())}
    return out


def codec_panel_rows(manifest):
    """(holdout core rows holding a copy of every codec, those codecs): the codec readout's rows.

    The codecs are every codec any holdout row has a copy of; a row lacking one is left out, so
    each codec (and the clean reference) is scored on exactly the same clips."""
    rows = protocol.split_rows(manifest, "holdout")
    ids = [set(filter(None, str(c).split(";"))) if isinstance(c, str) else set()
           for c in (rows["codec_ids"] if "codec_ids" in rows.columns else [""] * len(rows))]
    codecs = sorted(set().union(*ids)) if ids else []
    keep = [set(codecs) <= i for i in ids] if codecs else [False] * len(rows)
    return rows[keep], codecs


def score_codec_panel(bundle, run: Path, cfg: scoring.ScoreConfig | None = None,
                      overlap: bool = False):
    """(frame, sidecar): the full model on every codec copy of the codec readout's rows, with no
    other augmentation. Columns path, fold, split, score, logit, codec; a row per (clip, codec).
    `overlap`: hearsay.evaluate.overlap's order (the same logits)."""
    import pandas as pd

    from hearsay.detector.logits import expit
    from hearsay.detector.model import load_detector
    from hearsay.util.hashing import sha256_file

    cfg = cfg or scoring.ScoreConfig()
    run = Path(run)
    meta = run_dir.find_meta(run)
    scoring.check_protocol(meta, bundle.tree_sha, "holdout", None)
    rows, codecs = codec_panel_rows(bundle.manifest)
    wfile = run_dir.weights_of(run)
    det, _ = load_detector(wfile.parent, device=cfg.device)
    parts = []
    for c in codecs:
        logits = scoring.score_rows(det, Path(bundle.root), rows, [f"codec:{c}"] * len(rows), cfg,
                                    overlap=overlap)
        parts.append(pd.DataFrame({"path": rows["path"].astype(str).to_numpy(),
                                   "fold": rows["fold"].astype(str).to_numpy(),
                                   "split": "holdout", "score": expit(logits), "logit": logits,
                                   "codec": c}))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=[*score_file.COLUMNS, "codec"])
    scoring.no_extra_rows(out, bundle.manifest)
    side = {"run": str(run), "job": meta.get("job"), "run_fold": meta.get("fold"),
            "config_hash": meta.get("config_hash"), "weights_sha256": sha256_file(wfile),
            "bundle_tree_sha": bundle.tree_sha, "split": "holdout", "fold": None,
            "augmented": "codecs", "codecs": codecs, "n_rows": len(out),
            "config": dataclasses.asdict(cfg)}
    return out, side


TEST_LENGTH_SEED = 20261202  # seed of the holdout's test-length crops: fixed, every model alike
WHOLE_MAX_S = 14.0  # "whole clips": the holdout scored up to 14 s (the bundle caps at 15 s)


def test_length_inputs(root: Path, rows, test_durations, seed: int = TEST_LENGTH_SEED):
    """One crop per holdout row, its length drawn from the test split's durations and its
    offset drawn too, by a generator seeded by (seed, crc32(clip id)) only: the same crops for
    every model. Each crop goes through example.finish (band-limit, normalise), as in training."""
    from hearsay.sound import audio, example

    if not len(test_durations):
        raise scoring.ScoreError("no test rows: the test-length readout needs the test "
                                 "split's durations")
    waves = []
    for rec in rows.to_dict("records"):
        rng = inputs.aug_rng(seed, rec["id"])
        length = float(rng.choice(np.asarray(test_durations, np.float64)))
        x = audio.load_audio(inputs.clip_file(root, rec, "none"))
        wave, n_valid = example.random_crop(x, max(example.n_samples(length), 320), rng)
        waves.append(example.finish(wave, n_valid)[:n_valid])
    return waves


def score_holdout_variant(bundle, run: Path, variant: str, cfg=None, overlap: bool = False):
    """(frame, sidecar) of the full model on the holdout as `variant`: "test_length" (the
    fixed-seed test-length crops) or "whole" (each clip up to WHOLE_MAX_S); `overlap`: the
    whole clips in hearsay.evaluate.overlap's order (the crops, made in memory, run plainly)."""
    from hearsay.detector.logits import expit
    from hearsay.detector.model import load_detector
    from hearsay.util.hashing import sha256_file

    cfg = cfg or scoring.ScoreConfig()
    if variant == "whole":
        df, side = scoring.score_split(bundle, run, "holdout", None,
                                       dataclasses.replace(cfg, max_s=WHOLE_MAX_S),
                                       overlap=overlap)
        return df, {**side, "augmented": variant}
    if variant != "test_length":
        raise ValueError(f"holdout variant {variant!r}: test_length or whole")
    meta = run_dir.find_meta(Path(run))
    scoring.check_protocol(meta, bundle.tree_sha, "holdout", None)
    rows = protocol.split_rows(bundle.manifest, "holdout")
    test = protocol.split_rows(bundle.manifest, "test")["duration"].astype(float).to_numpy()
    waves = test_length_inputs(Path(bundle.root), rows, test)
    wfile = run_dir.weights_of(Path(run))
    det, _ = load_detector(wfile.parent, device=cfg.device)
    logits = np.full(len(waves), np.nan)
    with Progress(len(waves), desc="scoring (test lengths)", unit="clip") as bar:
        for batch in scoring.length_batches([len(w) for w in waves], cfg):
            logits[batch] = scoring.run_model(det, [waves[i] for i in batch], cfg.device,
                                               cfg.precision)
            bar.update(len(batch))
    import pandas as pd

    out = pd.DataFrame({"path": rows["path"].astype(str).to_numpy(),
                        "fold": rows["fold"].astype(str).to_numpy(), "split": "holdout",
                        "score": expit(logits), "logit": logits})
    side = {"run": str(run), "weights_sha256": sha256_file(wfile),
            "bundle_tree_sha": bundle.tree_sha, "split": "holdout", "fold": None,
            "augmented": variant, "seed": TEST_LENGTH_SEED, "n_rows": len(out),
            "config": dataclasses.asdict(cfg)}
    return out, side


def codec_readout(clean_holdout, panel, key) -> dict:
    """{"n_clips", "codecs", "rows": {"clean": metrics, <codec>: metrics}, "gap"}: each row on the
    same clips (those the clean holdout and every codec of the panel scored); gap = codec minDCF
    - clean minDCF (pi 0.3)."""
    codecs = sorted(panel["codec"].astype(str).unique())
    paths = set(clean_holdout["path"]) if codecs else set()
    for c in codecs:  # a clip some codec did not score would make that row's clips differ
        paths &= set(panel.loc[panel["codec"].astype(str) == c, "path"])
    out = {"n_clips": len(paths), "codecs": codecs, "rows": {}, "gap": {}}
    if not paths:
        out["undefined"] = "no holdout clip has a copy of every codec"
        return out
    clean = clean_holdout[clean_holdout["path"].isin(paths)]
    rows = {"clean": clean, **{c: panel[(panel["codec"].astype(str) == c)
                                        & panel["path"].isin(paths)] for c in codecs}}
    for name, frame in rows.items():
        j = metrics.join(frame, key)
        m = metrics.compute(j["rank"].to_numpy(), j["is_spoof"].to_numpy(), None, PI_OF_RECORD)
        # sha256 of the sorted paths, one a line: the same clips in every row, and the same
        # figure in every run (Python's hash() of strings changes per process)
        m["paths_sha"] = hashlib.sha256("".join(f"{p}\n" for p in sorted(frame["path"]))
                                        .encode()).hexdigest()
        out["rows"][name] = m
    base = out["rows"]["clean"]["min_dcf"]
    out["gap"] = {c: (None if base is None or out["rows"][c]["min_dcf"] is None
                      else out["rows"][c]["min_dcf"] - base) for c in out["codecs"]}
    return out


def counts_lines(counts: dict) -> list[str]:
    if not counts:
        return []
    lines = ["", "## Clips per fold", "", "| fold / split | bona fide | synthetic |",
             "|---|---|---|"]
    lines += [f"| {g} | {c['bonafide']} | {c['spoof']} |" for g, c in counts.items()]
    return lines


def codec_lines(codec: dict | None) -> list[str]:
    if not codec:
        return []
    lines = ["", "## Codec readout (clean = unaugmented; every row on the same "
             f"{codec['n_clips']} holdout clips)", ""]
    if codec.get("undefined"):
        return lines + [f"Undefined: {codec['undefined']}."]
    lines += ["| row | EER | minDCF 0.3 | gap to clean | AUC |", "|---|---|---|---|---|"]
    for name, m in codec["rows"].items():
        gap = codec["gap"].get(name)
        cells = [m.get("eer"), m.get("min_dcf"), gap, m.get("auc")]
        lines.append(f"| {name} | " + " | ".join("-" if v is None else f"{v:+.4f}"
                                                 if v is gap else f"{v:.4f}" for v in cells)
                     + " |")
    return lines


def plot_codecs(codec: dict, path: Path) -> Path | None:
    """Bars of EER and minDCF (pi 0.3) per codec row beside the clean row (same clips)."""
    if not codec or codec.get("undefined"):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(codec["rows"])
    fig, ax = plt.subplots(figsize=(6.5, 3.2), dpi=110)
    x = np.arange(len(names))
    for i, (k, label) in enumerate((("eer", "EER"), ("min_dcf", "minDCF 0.3"))):
        vals = [codec["rows"][n].get(k) or 0.0 for n in names]
        ax.bar(x + (i - 0.5) * 0.38, vals, 0.38, label=label)
    ax.set_xticks(x, names)
    ax.set_ylabel("lower is better")
    ax.set_title(f"codec readout: each row on the same {codec['n_clips']} holdout clips")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.grid(True, axis="y", lw=0.3)
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight")  # the legend sits right of the bars, in the PNG
    plt.close(fig)
    return path
