"""`hearsay corpus-probe`: is a corpus separable from its peers on handcrafted features alone?

    hearsay corpus-probe MANIFEST --corpus SOURCE [--label bonafide] [--json OUT]
    hearsay corpus-probe --drop-rule --fa-without 0.031 --fa-with 0.047

A corpus (a manifest `source`) that a few trivial features tell apart from the other sources of
the same class carries a recording shortcut: a model can learn "this corpus" instead of
"synthetic". The probe: per clip (the manifest's original file, decoded by hearsay.sound.audio, 16
kHz
mono, NOT trimmed: silence is one of the cues) the features of FEATURES; then scikit-learn's
HistGradientBoostingClassifier, "clip of corpus X" vs "clip of a peer", scored out-of-fold over
5 folds grouped by the manifest's `group` (a speaker never in both the training and the scored
part); the AUC of those out-of-fold probabilities (hearsay.metrics.auc). Only clips of one
`--label` (default bonafide) are used, so the class itself is no cue. `separable` is
max(AUC, 1 - AUC) >= --bound (default 0.85, the project's shortcut bound, hearsay.evaluate.gate).

The drop rule (`drop_rule`): an extra corpus is dropped when adding it to training raises the
probe set's (e.g. In-the-Wild bona fide) false-alarm rate by more than one percentage point
(DROP_RISE = 0.01): delta = P_FA(with) - P_FA(without) > +0.01, both read at each model's own
out-of-fold threshold (hearsay.evaluate.gate.probe_reading).

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

Exit codes: 0 written, 2 usage, 3 bad input (manifest, audio, too few clips of a side; a --json
that cannot be written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from hearsay import metrics
from hearsay.files import jsonable
from hearsay.shortcuts import SHORTCUT_BOUND as SEPARABLE_BOUND  # 0.85, the shortcut bound
from hearsay.shortcuts import strength
from hearsay.sound import audio

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT = 0, 2, 3  # module docstring
FEATURES = ("duration_s", "lead_silence_s", "trail_silence_s", "rms_dbfs", "peak_dbfs",
            "crest_db", "centroid_hz", "rolloff85_hz", "zcr")
DROP_RISE = 0.01  # probe false-alarm rise (absolute) above which an extra corpus is dropped
N_FOLDS = 5
MIN_PER_SIDE = 10  # clips of the corpus and of its peers, at least
FFT = 512  # samples per spectral frame (32 ms at 16 kHz)


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


def separability(table, is_corpus, groups=None, seed: int = 0) -> dict:
    """Out-of-fold AUC of a gradient-boosted "is corpus X" classifier on the feature table."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    X = np.asarray(table, np.float64)
    y = np.asarray(is_corpus, bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if min(n_pos, n_neg) < MIN_PER_SIDE:
        raise ProbeError(f"{n_pos} corpus clips vs {n_neg} peer clips: need {MIN_PER_SIDE} of "
                         "each")
    folds = min(N_FOLDS, n_pos, n_neg)
    if groups is not None and len(set(groups)) >= folds:
        split = StratifiedGroupKFold(folds, shuffle=True, random_state=seed).split(X, y, groups)
    else:
        split = StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y)
    from threadpoolctl import threadpool_limits

    prob = np.full(len(y), np.nan)
    with threadpool_limits(1):  # tiny tables: one OpenMP thread is faster than a crowded pool
        for train, test in split:
            # sklearn's default leaf of 20 clips leaves a table of a few dozen clips unsplit
            leaf = int(np.clip(len(train) // 10, 2, 20))
            clf = HistGradientBoostingClassifier(max_iter=100, min_samples_leaf=leaf,
                                                 random_state=seed)
            clf.fit(X[train], y[train])
            prob[test] = clf.predict_proba(X[test])[:, 1]
    a = metrics.auc(prob, y)
    return {"auc": a, "strength": strength(a), "n_corpus": n_pos, "n_peers": n_neg,
            "folds": folds, "grouped": groups is not None and len(set(groups)) >= folds}


def drop_rule(fa_without: float, fa_with: float, rise: float = DROP_RISE) -> dict:
    """Drop the extra corpus when it raises the probe false-alarm rate by more than `rise`."""
    delta = float(fa_with) - float(fa_without)
    # compared in points rounded to 1e-9: 0.040 - 0.030 is 0.0100000000000002 in floats
    return {"fa_without": fa_without, "fa_with": fa_with, "delta_points": 100 * delta,
            "rise_points": 100 * rise, "drop": bool(round(100 * delta, 9) > 100 * rise)}


def probe_manifest(manifest_path: Path, corpus: str, label: str = "bonafide",
                   bound: float = SEPARABLE_BOUND) -> dict:
    from hearsay.contracts.manifest import read_manifest, resolve_path

    df = read_manifest(manifest_path)
    df = df[df["label"] == label]
    if corpus not in set(df["source"]):
        raise ProbeError(f"no {label} clip of source {corpus!r} in {manifest_path} (sources: "
                         f"{sorted(set(df['source']))})")
    rows = []
    for rel in df["path"]:
        try:
            x = audio.load_audio(resolve_path(rel, Path(manifest_path).parent))
        except audio.AudioError as err:
            raise ProbeError(str(err)) from None
        f = features(x)
        rows.append([f[k] for k in FEATURES])
    out = separability(rows, (df["source"] == corpus).to_numpy(), df["group"].to_numpy())
    out.update(corpus=corpus, label=label, features=list(FEATURES), bound=bound,
               separable=bool(out["strength"] >= bound))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay corpus-probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("manifest", type=Path, nargs="?", help="manifest.csv (original clips)")
    ap.add_argument("--corpus", help="the source to probe against the other sources")
    ap.add_argument("--label", default="bonafide", choices=["bonafide", "spoof"])
    ap.add_argument("--bound", type=float, default=SEPARABLE_BOUND)
    ap.add_argument("--drop-rule", action="store_true", help="apply the drop rule only")
    ap.add_argument("--fa-without", type=float, help="probe false-alarm rate without the corpus")
    ap.add_argument("--fa-with", type=float, help="probe false-alarm rate with the corpus")
    ap.add_argument("--json", type=Path, default=None, help="write the result here (else stdout)")
    args = ap.parse_args(argv)
    try:
        if args.drop_rule:
            if args.fa_without is None or args.fa_with is None:
                ap.error("--drop-rule needs --fa-without and --fa-with")
            out = drop_rule(args.fa_without, args.fa_with)
        else:
            if args.manifest is None or not args.corpus:
                ap.error("give MANIFEST and --corpus SOURCE (or --drop-rule)")
            out = probe_manifest(args.manifest, args.corpus, args.label, args.bound)
    except (ProbeError, OSError, ValueError) as err:
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
