"""`hearsay corpus-probe`: is a corpus separable from its peers on handcrafted features alone?

    hearsay corpus-probe MANIFEST --corpus SOURCE [--label bonafide] [--json OUT]
    hearsay corpus-probe MANIFEST --corpus mlaad --against diffssd --label spoof \\
        [--recipe train.json] [--config probe.json] --json probe.json
    hearsay corpus-probe --drop-rule --without RECIPE --with RECIPE [--probe-without CSV \\
        --probe-with CSV] --bundle BUNDLE|--key KEY.csv [--probe-result probe.json \\
        --decision decision.json]

A corpus that a few trivial features tell apart from its peers carries a recording shortcut: a
model can learn "this corpus" instead of "synthetic". The probe: per clip (the manifest's
original file, decoded by hearsay.sound.audio, 16 kHz mono, NOT trimmed: silence is one of the
cues) the features of FEATURES; then scikit-learn's HistGradientBoostingClassifier, "clip of
corpus X" vs "clip of a peer", scored out-of-fold over `folds` folds grouped by the manifest's
`group` (a speaker never in both the training and the scored part); the AUC of those out-of-fold
probabilities (hearsay.metrics.auc). `separable` is max(AUC, 1 - AUC) >= `bound`.

Who the corpus and its peers are: `--corpus SEL` names the corpus, SEL a source name or
COLUMN=VALUE of the manifest (`train_scope=extra`, `generator=voc-x`). Without `--against` the
peers are every other clip; `--against SEL` names one peer (e.g. the extra spoof corpus MLAAD
against the spoof corpus DiffSSD). Only clips of `--label` (bonafide, spoof, or any) take part.

Augmented features (the default): each clip first gets the training recipe's augmentation
(hearsay.sound.augment.choose with the recipe's `augment` section, `--recipe FILE` = a `hearsay
train` config, else the AugmentConfig defaults; codec copies made on the fly by
hearsay.sound.codecs.roundtrip; one generator per clip seeded by (seed, row number)), so a
codec or channel difference the training recipe washes out is not mistaken for the corpus.
`--no-augment` reads the clips as they are.

The landing readout (with `--against`): a classifier fitted on every clip of the two sides is
applied to the bona fide clips of each manifest source (those not among the probe's own clips):
"share" = the fraction scored on the corpus's side (probability >= 0.5). A source whose share is
>= `landing_share` lands on the corpus's side: its bona fide clips look like the corpus to these
features, so training on the corpus risks false alarms on that source.

Thresholds come from `--config FILE` (CorpusProbeConfig, JSON; unknown keys are errors), not from
the code: `bound`, `landing_share`, `cap_share`, `drop_rise`, `min_per_side`, `folds`, `seed`. The
resolved config is recorded in every output.

The drop rule and the decision file (`--drop-rule`, hearsay.evaluate.corpus_decision): both
recipes' probe false-alarm rates are read from their runs, each at its own out-of-fold threshold
(the probe scores: the fold boxes' foldK_probe.csv beside the pin's foldK_inner_oof.csv, unless
--probe-without / --probe-with name other files);
with `--probe-result` the decision (keep / cap share / drop) is written to `--decision`, a file a
training recipe cites by its sha256 (`selection.corpus_decision`) and `hearsay assemble
--corpus-decision` reports in the gate.

Features (FEATURES; seconds, dB re full scale, Hz):
  duration_s          samples / 16000
  lead_silence_s      start of the span hearsay.sound.audio.trim_silence keeps (40 dB below the
  peak)
  trail_silence_s     what it cuts at the end
  rms_dbfs            20 log10 RMS of the kept span
  peak_dbfs           20 log10 max |x|
  crest_db            peak_dbfs - rms_dbfs
  centroid_hz         spectral centroid of the kept span's mean power spectrum (512-point frames)
  rolloff85_hz        frequency below which 85 % of that power lies
  zcr                 zero crossings per sample of the kept span

A clip that does not decode is left out and named in "unreadable" (path: why).

Exit codes: 0 written, 2 usage (also a bad --config), 3 bad input (manifest, too few clips of a
side, a run's scores or probe file; a --json that cannot be written), 4 refused (the two
recipes' probe files hold other clips).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from annotated_types import Ge, Gt, Le

from hearsay import metrics
from hearsay.metrics.shortcuts import SHORTCUT_BOUND as SEPARABLE_BOUND  # 0.85, the shortcut bound
from hearsay.metrics.shortcuts import strength
from hearsay.sound import audio
from hearsay.util import config
from hearsay.util.files import jsonable

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 2, 3, 4  # module docstring
FEATURES = ("duration_s", "lead_silence_s", "trail_silence_s", "rms_dbfs", "peak_dbfs",
            "crest_db", "centroid_hz", "rolloff85_hz", "zcr")
FFT = 512  # samples per spectral frame (32 ms at 16 kHz)


@dataclass(frozen=True)
class CorpusProbeConfig:
    """The probe's and the decision's thresholds (`--config FILE`, JSON)."""

    RANGES: ClassVar[dict] = {"bound": (Ge(0.5), Le(1)), "landing_share": (Gt(0), Le(1)),
                              "cap_share": (Gt(0), Le(1)), "drop_rise": (Ge(0), Le(1)),
                              "min_per_side": (Ge(2),), "folds": (Ge(2),), "seed": (Ge(0),)}

    bound: float = SEPARABLE_BOUND  # max(AUC, 1 - AUC) at or above: separable (shortcut bound)
    # landing_share and cap_share are chosen settings (no measured basis yet): set them per campaign
    landing_share: float = 0.5  # a bona fide source with this share on the corpus's side lands
    cap_share: float = 0.1  # share of its class the corpus is capped at ("cap share")
    drop_rise: float = 0.01  # probe false-alarm rise (absolute, 0.01 = 1 point): drop above it
    min_per_side: int = 10  # clips of the corpus and of its peers, at least
    folds: int = 5  # out-of-fold folds, grouped by speaker group
    seed: int = 0  # folds, classifier and augmentation draws


def load_config(path: Path | None) -> CorpusProbeConfig:
    """The config file (None: the defaults); ValueError naming the key."""
    if path is None:
        return CorpusProbeConfig()
    return config.from_dict(CorpusProbeConfig, json.loads(Path(path).read_text()),
                            what="corpus-probe config")


class ProbeError(Exception):
    """Bad input (exit 3)."""


def features(x: np.ndarray, rate: int = audio.SAMPLE_RATE) -> dict:
    """The FEATURES of one decoded clip (float32, mono, `rate` Hz)."""
    x = np.asarray(x, np.float64)
    n = len(x)
    start, end = audio.trim_silence(x.astype(np.float32))
    kept = x[start:end] if end > start else x
    eps = 1e-12
    rms = float(np.sqrt(np.mean(kept ** 2))) if len(kept) else 0.0
    peak = float(np.max(np.abs(x))) if n else 0.0
    frames = [kept[i : i + FFT] for i in range(0, max(len(kept) - FFT + 1, 1), FFT // 2)]
    power = np.mean([np.abs(np.fft.rfft(f, FFT)) ** 2 for f in frames], axis=0)
    freqs = np.fft.rfftfreq(FFT, 1 / rate)
    total = power.sum() + eps
    cum = np.cumsum(power) / total
    return {"duration_s": n / rate, "lead_silence_s": start / rate,
            "trail_silence_s": (n - end) / rate,
            "rms_dbfs": 20 * np.log10(rms + eps), "peak_dbfs": 20 * np.log10(peak + eps),
            "crest_db": 20 * np.log10((peak + eps) / (rms + eps)),
            "centroid_hz": float((freqs * power).sum() / total),
            "rolloff85_hz": float(freqs[min(int(np.searchsorted(cum, 0.85)), len(freqs) - 1)]),
            "zcr": float(np.mean(np.abs(np.diff(np.signbit(kept).astype(np.int8))))) if
            len(kept) > 1 else 0.0}


def _classifier(n_train: int, seed: int):
    from sklearn.ensemble import HistGradientBoostingClassifier

    # sklearn's default leaf of 20 clips leaves a table of a few dozen clips unsplit
    leaf = int(np.clip(n_train // 10, 2, 20))
    return HistGradientBoostingClassifier(max_iter=100, min_samples_leaf=leaf, random_state=seed)


def separability(table, is_corpus, groups=None, cfg: CorpusProbeConfig = CorpusProbeConfig()
                 ) -> dict:
    """Out-of-fold AUC of a gradient-boosted "is corpus X" classifier on the feature table."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    seed = cfg.seed
    X = np.asarray(table, np.float64)
    y = np.asarray(is_corpus, bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if min(n_pos, n_neg) < cfg.min_per_side:
        raise ProbeError(f"{n_pos} corpus clips vs {n_neg} peer clips: need {cfg.min_per_side} "
                         "of each (min_per_side)")
    folds = min(cfg.folds, n_pos, n_neg)
    if groups is not None and len(set(groups)) >= folds:
        split = StratifiedGroupKFold(folds, shuffle=True, random_state=seed).split(X, y, groups)
    else:
        split = StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y)
    from threadpoolctl import threadpool_limits

    prob = np.full(len(y), np.nan)
    with threadpool_limits(1):  # tiny tables: one OpenMP thread is faster than a crowded pool
        for train, test in split:
            clf = _classifier(len(train), seed)
            clf.fit(X[train], y[train])
            prob[test] = clf.predict_proba(X[test])[:, 1]
    a = metrics.auc(prob, y)
    return {"auc": a, "strength": strength(a), "n_corpus": n_pos, "n_peers": n_neg,
            "folds": folds, "grouped": groups is not None and len(set(groups)) >= folds}


def select(df, sel: str):
    """Boolean mask of the rows SEL names: a source name, or COLUMN=VALUE."""
    from hearsay.contracts.manifest import parse_selector

    col, value = parse_selector(sel)
    if col not in df.columns:
        raise ProbeError(f"{sel!r}: the manifest has no column {col!r} (columns: "
                         f"{sorted(df.columns)})")
    mask = (df[col].astype(str) == value).to_numpy()
    if not mask.any():
        raise ProbeError(f"no clip with {col} {value!r} among the clips probed (its values: "
                         f"{sorted(set(df[col].astype(str)))})")
    return mask


def augmented(x: np.ndarray, rng: np.random.Generator, aug, codecs_here: list[str],
              tmp: Path) -> tuple[np.ndarray, str]:
    """One clip through the recipe's augmentation (the whole clip: no crop, no normalising)."""
    from hearsay.sound import codecs
    from hearsay.sound.augment import apply, choose

    name = choose(rng, aug, codecs_here)
    if name.startswith("codec:"):
        return codecs.roundtrip(x, [name.split(":", 1)[1]], tmp)[name.split(":", 1)[1]], name
    return apply(name, x, rng, aug), name


def feature_table(paths, root: Path, aug=None, seed: int = 0) -> tuple[list, dict, dict]:
    """(rows of FEATURES per readable clip, {augmentation name: clips}, {unreadable path: why});
    `aug` an AugmentConfig or None. A clip that does not decode is left out and named."""
    import tempfile

    from hearsay.contracts.manifest import resolve_path
    from hearsay.sound import codecs

    here = [] if aug is None else list(codecs.available(aug.codecs)[0])
    table, drawn, unreadable = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, rel in enumerate(paths):
            try:
                x = audio.load_audio(resolve_path(rel, root))
                name = "none"
                if aug is not None:
                    x, name = augmented(x, np.random.default_rng([seed, i]), aug, here, Path(tmp))
            except audio.AudioError as err:
                unreadable[str(rel)] = str(err).split(": ", 1)[-1][:120]
                continue
            drawn[name] = drawn.get(name, 0) + 1
            f = features(x)
            table.append([f[k] for k in FEATURES])
    return table, drawn, unreadable


def recipe_augment(recipe: Path | None):
    """The AugmentConfig of a `hearsay train` config file's `augment` section (none: defaults)."""
    from hearsay.sound.augment import AugmentConfig

    if recipe is None:
        return AugmentConfig()
    return AugmentConfig.from_dict(json.loads(Path(recipe).read_text()).get("augment") or {})


def landing(table, is_corpus, others, other_sources, cfg: CorpusProbeConfig) -> dict:
    """Per source of bona fide clips outside the probe: the share scored on the corpus's side."""
    clf = _classifier(len(table), cfg.seed)
    clf.fit(np.asarray(table, np.float64), np.asarray(is_corpus, bool))
    on_corpus = clf.predict_proba(np.asarray(others, np.float64))[:, 1] >= 0.5 if len(
        others) else np.zeros(0, bool)
    out = {}
    for source in sorted(set(other_sources)):
        mine = np.asarray(other_sources) == source
        share = float(on_corpus[mine].mean())
        out[source] = {"n": int(mine.sum()), "share": share,
                       "lands": bool(share >= cfg.landing_share)}
    return out


def probe_manifest(manifest_path: Path, corpus: str, label: str = "bonafide",
                   cfg: CorpusProbeConfig = CorpusProbeConfig(), against: str | None = None,
                   aug=None) -> dict:
    """The probe's record: separability of `corpus` from its peers (`against`: one named peer)
    on the features of each clip after `aug` (an AugmentConfig; None: the clips as they are),
    and with `against` the per-source landing of the bona fide clips outside the probe."""
    from hearsay.contracts.manifest import read_manifest
    from hearsay.util.hashing import sha256_file

    every = read_manifest(manifest_path)
    df = every if label == "any" else every[every["label"] == label]
    if not len(df):
        raise ProbeError(f"no {label} clip in {manifest_path}")
    is_corpus = select(df, corpus)
    side = is_corpus | select(df, against) if against else np.ones(len(df), bool)
    if against and (is_corpus & select(df, against)).any():
        raise ProbeError(f"{corpus!r} and {against!r} name the same clips: name two corpora")
    probed = df[side]
    root = Path(manifest_path).parent
    table, drawn, unreadable = feature_table(probed["path"], root, aug, cfg.seed)
    ok = ~probed["path"].astype(str).isin(set(unreadable)).to_numpy()
    out = separability(table, is_corpus[side][ok], probed["group"].to_numpy()[ok], cfg)
    out.update(corpus=corpus, against=against, label=label, features=list(FEATURES),
               bound=cfg.bound, separable=bool(out["strength"] >= cfg.bound),
               manifest_sha256=sha256_file(manifest_path), config=asdict(cfg),
               augment=None if aug is None else {"config": asdict(aug), "drawn": drawn},
               unreadable=unreadable)
    if against:
        rest = every[(every["label"] == "bonafide") & ~every["path"].isin(set(probed["path"]))]
        others, _, bad = feature_table(rest["path"], root, aug, cfg.seed + 1)
        rest = rest[~rest["path"].astype(str).isin(set(bad))]
        out["unreadable"].update(bad)
        out["landing_share"] = cfg.landing_share
        out["landing"] = landing(table, is_corpus[side][ok], others, rest["source"].to_numpy(),
                                 cfg)
    return out


def _drop_rule(args, cfg: CorpusProbeConfig) -> dict:
    """--drop-rule: both recipes' probe readings from their runs -> the drop rule (and with
    --probe-result, the decision file)."""
    from hearsay.evaluate import corpus_decision as cd

    key = None
    if args.bundle is not None:
        from hearsay.evaluate.report import key_frame
        from hearsay.evaluate.score import load_bundle

        key = key_frame(load_bundle(args.bundle).manifest)
    elif args.key is not None:
        from hearsay.contracts import score_file

        key = score_file.read(args.key)
    without = cd.recipe_probe(args.without, args.probe_without, key)
    with_ = cd.recipe_probe(args.with_, args.probe_with, key)
    out = cd.drop_from_runs(without, with_, cfg.drop_rise)
    if args.probe_result is not None:
        probe = json.loads(args.probe_result.read_text())
        out = cd.decide(probe, out, asdict(cfg))
        sha = cd.write(args.decision, out)
        print(f"hearsay corpus-probe: {out['decision']} ({out['why']}); {args.decision} sha256 "
              f"{sha} (cite it in the recipe: selection.corpus_decision)", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay corpus-probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest", type=Path, nargs="?", help="manifest.csv (original clips)")
    ap.add_argument("--corpus", help="the corpus: a source name or COLUMN=VALUE")
    ap.add_argument("--against", default=None, metavar="SEL",
                    help="one named peer (a source or COLUMN=VALUE); + the landing readout")
    ap.add_argument("--label", default="bonafide", choices=["bonafide", "spoof", "any"])
    ap.add_argument("--config", type=Path, default=None,
                    help="thresholds (JSON, CorpusProbeConfig fields; default: their defaults)")
    ap.add_argument("--recipe", type=Path, default=None,
                    help="the training config whose augment section is applied first")
    ap.add_argument("--no-augment", action="store_true", help="read the clips as they are")
    ap.add_argument("--drop-rule", action="store_true",
                    help="the drop rule from two recipes' runs (see the docstring)")
    ap.add_argument("--without", type=Path, metavar="RECIPE",
                    help="the recipe without the extra corpus")
    ap.add_argument("--with", dest="with_", type=Path, metavar="RECIPE",
                    help="the recipe with the extra corpus")
    ap.add_argument("--probe-without", type=Path,
                    help="probe scores of the recipe without (default: its runs' probe files)")
    ap.add_argument("--probe-with", type=Path,
                    help="probe scores of the recipe with (default: its runs' probe files)")
    ap.add_argument("--bundle", type=Path, help="the bundle (labels of the scored clips)")
    ap.add_argument("--key", type=Path, help="or a key CSV (path,label) of the scored clips")
    ap.add_argument("--probe-result", type=Path, help="corpus-probe --against JSON: decide")
    ap.add_argument("--decision", type=Path, help="where the decision file goes")
    ap.add_argument("--json", type=Path, default=None, help="write the result here (else stdout)")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except (OSError, ValueError) as err:
        ap.error(f"--config: {err}")
    from hearsay.evaluate.corpus_decision import DecisionError, DecisionRefused

    try:
        if args.drop_rule:
            if args.without is None or args.with_ is None:
                ap.error("--drop-rule needs --without RECIPE and --with RECIPE")
            if (args.probe_result is None) != (args.decision is None):
                ap.error("--probe-result and --decision go together")
            out = _drop_rule(args, cfg)
        else:
            if args.manifest is None or not args.corpus:
                ap.error("give MANIFEST and --corpus SOURCE (or --drop-rule)")
            aug = None if args.no_augment else recipe_augment(args.recipe)
            out = probe_manifest(args.manifest, args.corpus, args.label, cfg, args.against, aug)
    except DecisionRefused as err:
        print(f"hearsay corpus-probe: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except (ProbeError, DecisionError, metrics.MetricsError, OSError, ValueError) as err:
        print(f"hearsay corpus-probe: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = json.dumps(jsonable(out), indent=2) + "\n"
    if args.json is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        args.json.write_text(text)
    except OSError as err:
        print(f"hearsay corpus-probe: cannot write --json {args.json}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
