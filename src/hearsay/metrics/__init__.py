"""Detection metrics of a score file: EER, minDCF, actDCF, AUC, Cllr, minCllr (+ breakdowns).

    hearsay metrics SCORES.csv --key KEY.csv [--pi 0.3] [--fa-rate X] [--json]

(the command line: hearsay.evaluate.metrics_cli; this docstring is its --help)

Conventions (stated here, in --help and in every report):
  * score high = synthetic. The positive class is `spoof` (synthetic), the negative `bonafide`.
  * pi is the prior of the synthetic class. C_miss = C_fa = 1.
  * A decision "synthetic" is taken when the ranking value is AT OR ABOVE the threshold.
    A miss is a synthetic clip below the threshold; a false alarm a bona fide clip at or above it.
  * minDCF(pi) = min over every threshold t (each distinct value, plus +inf) of
    pi * P_miss(t) + (1 - pi) * P_fa(t), divided by min(pi, 1 - pi); 1.0 = no better than always
    answering the likelier class. pi = 0.3 is the metric of record; pi = 0.5 is reported beside it.
  * actDCF(pi): the same cost at the Bayes threshold logit >= -log(pi / (1 - pi)), taking the
    logit AS IS as a log-likelihood ratio (no calibration is fitted: training batches are
    label-balanced, so the logit is an LLR only as far as the model is calibrated; actDCF >>
    minDCF says it is not).
  * EER: the operating points are joined by straight lines (P_fa, P_miss) in threshold order; the
    EER is where that line crosses P_miss = P_fa.
  * AUC counts a tie between a synthetic and a bona fide clip as one half.
  * Cllr uses the logit as LLR; minCllr is Cllr after the optimal monotone recalibration
    (pool-adjacent-violators on the ranking value, tied values pooled, posteriors converted to
    LLRs at the empirical prior).
  * Ranking uses the `logit` column when present (sigmoid saturates at float precision, the logit
    does not), else `score`; a file with only `score` has its logit taken as log(s / (1 - s)).
  * A group holding only one class has every metric undefined (null, with the reason), never 0 or 1.
  * "opposite" re-reads the same scores as if high meant bona fide; `flips` names every decision
    (better than chance, minDCF < 1, actDCF < 1) whose answer differs between the two readings,
    and `suspect_inverted` is true when the opposite reading ranks better (AUC < 0.5).

Breakdowns (columns of the key or of the score file; absent columns are skipped):
  generator      each synthetic generator against ALL bona fide clips
  source         each bona fide source against ALL synthetic clips
  length         duration buckets <= 4 s, 4-6 s, > 6 s (both classes of the bucket)
  augmentation   each augmentation type (both classes)
  codec          each codec (both classes); `transcoded`: clean (no codec and no other
                 augmentation), other augmentation (noise, reverb, ...: no codec), transcoded.
                 Codecs of the augmented holdout are drawn on different clips: the codec readout
                 of hearsay.evaluate.readouts compares them on the same clips

Scorer CSVs (hearsay-score -o): rows with an `error` (a file that could not be scored) are
skipped and counted, never read as a score. --fa-rate X prints the lowest threshold whose
false-alarm rate is <= X on these scores and its confusion counts (hearsay.metrics.calibration).

Exit codes: 0 metrics written, 2 usage, 3 bad input (missing column, unknown label, a scored path
missing from the key, non-finite values in a row without an error).
"""

from __future__ import annotations

import math

import numpy as np

from hearsay.contracts.manifest import LABELS

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT = 0, 2, 3  # module docstring

PI_OF_RECORD = 0.3  # prior of the synthetic class for the metric of record
PI_BESIDE = 0.5  # reported beside it
LENGTH_BUCKETS = ("<=4s", "4-6s", ">6s")  # upper edges inclusive, seconds
CLEAN_CODECS = ("", "none", "clean")


class MetricsError(Exception):
    """Bad metrics input; the message names the fix."""


# --------------------------------------------------------------------------- operating points


def operating_points(rank: np.ndarray, is_spoof: np.ndarray):
    """(thresholds, p_miss, p_fa), thresholds ascending: every distinct value, then +inf.

    At threshold t a clip is called synthetic when rank >= t. Both classes must be present.
    """
    order = np.argsort(rank, kind="mergesort")
    s, y = rank[order], is_spoof[order]
    uniq, first = np.unique(s, return_index=True)  # first: clips strictly below each value
    n_s, n_b = int(y.sum()), int((~y).sum())
    spoof_below = np.concatenate([[0], np.cumsum(y)])[first]
    bona_below = np.concatenate([[0], np.cumsum(~y)])[first]
    thresholds = np.append(uniq, np.inf)
    p_miss = np.append(spoof_below, n_s) / n_s
    p_fa = 1.0 - np.append(bona_below, n_b) / n_b
    return thresholds, p_miss, p_fa


def eer_from_points(p_miss: np.ndarray, p_fa: np.ndarray) -> float:
    """EER where the polyline through (p_fa, p_miss) in threshold order crosses p_miss = p_fa."""
    d = p_miss - p_fa  # rises from -1 (lowest threshold) to +1 (+inf)
    i = int(np.argmax(d >= 0))
    if d[i] == 0 or i == 0:
        return float(p_miss[i])
    m0, m1, f0, f1 = p_miss[i - 1], p_miss[i], p_fa[i - 1], p_fa[i]
    a = (f0 - m0) / ((m1 - m0) - (f1 - f0))
    return float(m0 + a * (m1 - m0))


def min_dcf(p_miss, p_fa, thresholds, pi: float) -> tuple[float, float]:
    """(normalised minDCF, the lowest threshold reaching it)."""
    dcf = pi * p_miss + (1 - pi) * p_fa
    i = int(np.argmin(dcf))
    return float(dcf[i] / min(pi, 1 - pi)), float(thresholds[i])


# The four readings of a protocol decision: pi 0.3 (of record) and 0.5, each in both cost
# directions. "as stated" weighs misses by pi, false alarms by 1 - pi (the convention above);
# "swapped" exchanges the two weights (the C_miss/C_fa swap: effective prior 1 - pi). At pi 0.5
# both coincide (reported anyway, so the table is always complete).
DIRECTIONS = ("as stated", "swapped")
READINGS = tuple((pi, d) for pi in (PI_OF_RECORD, PI_BESIDE) for d in DIRECTIONS)
READING_OF_RECORD = READINGS[0]
reading_name = "pi {:g}, {}".format  # reading_name(0.3, "as stated") -> "pi 0.3, as stated"


def effective_pi(pi: float, direction: str) -> float:  # the prior of an ordinary minDCF
    if direction not in DIRECTIONS:
        raise MetricsError(f"cost direction {direction!r}: one of {DIRECTIONS}")
    return pi if direction == "as stated" else 1.0 - pi


def min_dcf_reading(rank, is_spoof, pi: float, direction: str = "as stated"):
    """(normalised minDCF, its threshold) of one reading; (None, None) with one class only."""
    rank, is_spoof = np.asarray(rank, np.float64), np.asarray(is_spoof, bool)
    if is_spoof.all() or not is_spoof.any():
        return None, None
    thr, p_miss, p_fa = operating_points(rank, is_spoof)
    return min_dcf(p_miss, p_fa, thr, effective_pi(pi, direction))


def bayes_threshold(pi: float) -> float:
    """Logit threshold of the Bayes decision at prior pi with C_miss = C_fa = 1."""
    return -math.log(pi / (1 - pi))


def act_dcf(llr: np.ndarray, is_spoof: np.ndarray, pi: float) -> float:
    """Normalised DCF of the decisions llr >= -log(pi / (1 - pi)) (llr taken as calibrated)."""
    called = llr >= bayes_threshold(pi)
    p_miss = float(np.mean(~called[is_spoof]))
    p_fa = float(np.mean(called[~is_spoof]))
    return (pi * p_miss + (1 - pi) * p_fa) / min(pi, 1 - pi)


def auc(rank: np.ndarray, is_spoof: np.ndarray) -> float:
    """P(synthetic ranked above bona fide) + P(tie) / 2, from mid-ranks (Mann-Whitney U).
    The one AUC of the project: scores, the bundle's shortcut features and the realised
    augmentation's stream features all go through it (numpy only)."""
    rank = np.asarray(rank, np.float64)
    is_spoof = np.asarray(is_spoof, bool)
    order = np.argsort(rank, kind="mergesort")
    ranks = np.empty(len(rank))
    ranks[order] = np.arange(1, len(rank) + 1)
    _, inv, counts = np.unique(rank, return_inverse=True, return_counts=True)
    ranks = (np.bincount(inv, weights=ranks) / counts)[inv]  # average rank of tied values
    n_s, n_b = int(is_spoof.sum()), int((~is_spoof).sum())
    u = ranks[is_spoof].sum() - n_s * (n_s + 1) / 2
    return float(u / (n_s * n_b))


def cllr(llr: np.ndarray, is_spoof: np.ndarray) -> float:
    """Cllr in bits: the mean of the two classes' log-loss at prior 0.5, llr taken as LLR."""
    c_s = np.mean(np.logaddexp(0.0, -llr[is_spoof]))
    c_b = np.mean(np.logaddexp(0.0, llr[~is_spoof]))
    return float((c_s + c_b) / 2 / math.log(2))


def pav(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted isotonic (non-decreasing) fit of block means y (sorted inputs) by PAV."""
    vals, wts, sizes = [], [], []
    for yi, wi in zip(y.tolist(), w.tolist(), strict=True):
        vals.append(yi)
        wts.append(wi)
        sizes.append(1)
        while len(vals) > 1 and vals[-2] >= vals[-1]:  # pool adjacent violators
            wsum = wts[-2] + wts[-1]
            vals[-2] = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / wsum
            wts[-2] = wsum
            sizes[-2] += sizes[-1]
            del vals[-1], wts[-1], sizes[-1]
    return np.repeat(np.array(vals), sizes)


def min_cllr(rank: np.ndarray, is_spoof: np.ndarray) -> float:
    """Cllr after the optimal monotone map (PAV; tied values pooled first)."""
    uniq, inverse, counts = np.unique(rank, return_inverse=True, return_counts=True)
    spoof_per = np.bincount(inverse, weights=is_spoof.astype(float), minlength=len(uniq))
    p = pav(spoof_per / counts, counts.astype(float))[inverse]  # posterior per clip
    prior = is_spoof.mean()
    with np.errstate(divide="ignore"):
        llr = np.log(p) - np.log1p(-p) - math.log(prior / (1 - prior))  # +-inf at pure blocks
    return cllr(llr, is_spoof)


# --------------------------------------------------------------------------- one group


def compute(rank, is_spoof, llr=None, pi: float = PI_OF_RECORD) -> dict:
    """Every metric of one group. `rank` orders clips (high = synthetic), `llr` defaults to rank.

    A group with one class only (or none) gets every metric None and `undefined` saying why.
    """
    rank = np.asarray(rank, dtype=np.float64)
    is_spoof = np.asarray(is_spoof, dtype=bool)
    llr = rank if llr is None else np.asarray(llr, dtype=np.float64)
    n_s, n_b = int(is_spoof.sum()), int((~is_spoof).sum())
    out: dict = {"n_bonafide": n_b, "n_spoof": n_s, "pi": pi}
    names = ("eer", "min_dcf", "min_dcf_threshold", "act_dcf", "min_dcf_pi05", "act_dcf_pi05",
             "auc", "cllr", "min_cllr")
    if n_s == 0 or n_b == 0:
        missing = "" if n_s == n_b == 0 else "synthetic (spoof) " if n_s == 0 else "bona fide "
        out.update(dict.fromkeys(names))
        out["undefined"] = f"no {missing}clips in this group (n_bonafide={n_b}, n_spoof={n_s})"
        return out
    if not (np.isfinite(rank).all() and np.isfinite(llr).all()):
        raise MetricsError("non-finite score or logit (fix the scorer; metrics refuse NaN/inf)")
    thr, p_miss, p_fa = operating_points(rank, is_spoof)
    out["eer"] = eer_from_points(p_miss, p_fa)
    out["min_dcf"], out["min_dcf_threshold"] = min_dcf(p_miss, p_fa, thr, pi)
    out["act_dcf"] = act_dcf(llr, is_spoof, pi)
    out["min_dcf_pi05"] = min_dcf(p_miss, p_fa, thr, PI_BESIDE)[0]
    out["act_dcf_pi05"] = act_dcf(llr, is_spoof, PI_BESIDE)
    out["auc"] = auc(rank, is_spoof)
    out["cllr"] = cllr(llr, is_spoof)
    out["min_cllr"] = min_cllr(rank, is_spoof)
    return out


def decisions(m: dict) -> dict:
    """The yes/no readings a reader takes from a metrics dict (None when undefined)."""
    if m.get("auc") is None:
        return {"better_than_chance": None, "min_dcf_below_1": None, "act_dcf_below_1": None}
    return {"better_than_chance": m["auc"] > 0.5, "min_dcf_below_1": m["min_dcf"] < 1.0,
            "act_dcf_below_1": m["act_dcf"] < 1.0}


def with_opposite(rank, is_spoof, llr=None, pi: float = PI_OF_RECORD) -> dict:
    """compute() plus the reading under the opposite convention and the decisions that flip."""
    rank = np.asarray(rank, dtype=np.float64)
    llr = rank if llr is None else np.asarray(llr, dtype=np.float64)
    out = compute(rank, is_spoof, llr, pi)
    opp = compute(-rank, is_spoof, -llr, pi)
    mine, theirs = decisions(out), decisions(opp)
    out["opposite"] = {k: opp[k] for k in ("eer", "min_dcf", "act_dcf", "auc", "cllr",
                                           "min_cllr")}
    out["flips"] = sorted(k for k in mine if mine[k] is not None and mine[k] != theirs[k])
    out["suspect_inverted"] = None if out["auc"] is None else bool(out["auc"] < 0.5)
    return out


# --------------------------------------------------------------------------- tables


def join(scores, key):
    """Scores joined to the key on `path`: one frame with label, rank, llr + breakdown columns."""
    import pandas as pd

    for name, frame, need in (("scores", scores, ("path",)), ("key", key, ("path", "label"))):
        missing = [c for c in need if c not in frame.columns]
        if missing:
            raise MetricsError(f"{name} file lacks column(s) {missing}; "
                               f"it has {list(frame.columns)}")
    if "logit" not in scores.columns and "score" not in scores.columns:
        raise MetricsError("scores file needs a `logit` or a `score` column")
    bad = sorted(set(key["label"]) - set(LABELS))
    if bad:
        raise MetricsError(f"key labels must be bonafide/spoof; found {bad[:5]}")
    dup = key["path"][key["path"].duplicated()]
    if len(dup):
        raise MetricsError(f"key has duplicate paths, e.g. {dup.iloc[0]!r} (one row per clip)")
    df = scores.merge(key, on="path", how="left", suffixes=("", "_key"), validate="many_to_one")
    unmatched = df["label"].isna()
    if unmatched.any():
        raise MetricsError(f"{int(unmatched.sum())} scored path(s) are not in the key, e.g. "
                           f"{df.loc[unmatched, 'path'].iloc[0]!r} (the key must label every row)")
    df["rank"] = rank_values(df)
    df["is_spoof"] = df["label"] == "spoof"
    return pd.DataFrame(df)


def rank_values(frame) -> np.ndarray:
    """The ranking value of each row: `logit`, else log(s / (1 - s)) of `score`."""
    if "logit" in frame.columns:
        return frame["logit"].to_numpy(float)
    s = frame["score"].to_numpy(float).clip(1e-15, 1 - 1e-15)
    return np.log(s) - np.log1p(-s)


def length_bucket(seconds: float) -> str:
    """'<=4s', '4-6s' or '>6s' (upper edges inclusive)."""
    if not math.isfinite(seconds) or seconds < 0:
        raise MetricsError(f"bad duration {seconds!r} (the key's `duration` must be seconds)")
    return "<=4s" if seconds <= 4.0 else "4-6s" if seconds <= 6.0 else ">6s"


def _group(df, mask, pi) -> dict:
    sub = df[mask]
    return compute(sub["rank"].to_numpy(), sub["is_spoof"].to_numpy(), None, pi)


def breakdowns(df, pi: float = PI_OF_RECORD) -> dict:
    """Metrics per generator, source, length bucket, augmentation, codec, clean vs transcoded."""
    import pandas as pd

    out: dict = {}
    spoof, bona = df["is_spoof"], ~df["is_spoof"]
    if "generator" in df.columns:
        gens = sorted(df.loc[spoof, "generator"].astype(str).unique())
        out["generator"] = {g: _group(df, bona | (spoof & (df["generator"].astype(str) == g)), pi)
                            for g in gens}
    if "source" in df.columns:
        srcs = sorted(df.loc[bona, "source"].astype(str).unique())
        out["source"] = {s: _group(df, spoof | (bona & (df["source"].astype(str) == s)), pi)
                         for s in srcs}
    if "duration" in df.columns:
        buckets = df["duration"].astype(float).map(length_bucket)
        out["length"] = {b: _group(df, buckets == b, pi) for b in LENGTH_BUCKETS}
    if "augmentation" in df.columns:
        aug = df["augmentation"].fillna("none").astype(str)
        out["augmentation"] = {a: _group(df, aug == a, pi) for a in sorted(aug.unique())}
    if "codec" in df.columns:
        codec = df["codec"].fillna("").astype(str)
        named = codec.where(codec != "", "none")   # no codec, written "" or "none": one group
        out["codec"] = {c: _group(df, named == c, pi) for c in sorted(named.unique())}
        clean = codec.isin(CLEAN_CODECS)
        aug = df["augmentation"].fillna("none").astype(str) if "augmentation" in df.columns \
            else pd.Series("none", index=df.index)
        plain = aug.isin(("none", ""))  # "clean" = no codec AND no other augmentation
        out["transcoded"] = {"clean": _group(df, clean & plain, pi),
                             "other augmentation": _group(df, clean & ~plain, pi),
                             "transcoded": _group(df, ~clean, pi)}
    return out


def evaluate(scores, key, pi: float = PI_OF_RECORD) -> dict:
    """The full metrics document of a score frame against a key frame."""
    df = join(scores, key)
    llr = df["logit"].to_numpy(float) if "logit" in df.columns else df["rank"].to_numpy()
    out = with_opposite(df["rank"].to_numpy(), df["is_spoof"].to_numpy(), llr, pi)
    out["convention"] = CONVENTION
    out["breakdowns"] = breakdowns(df, pi)
    return out


CONVENTION = ("score high = synthetic; pi = prior of synthetic; miss = synthetic below threshold; "
              "false alarm = bona fide at or above; minDCF normalised by min(pi, 1-pi); "
              "C_miss = C_fa = 1; actDCF at logit >= -log(pi/(1-pi)), logit taken as LLR as is")


def _fmt(v) -> str:
    return "undefined" if v is None else f"{v:.4f}"


def summary_lines(m: dict) -> list[str]:
    lines = [f"n_bonafide={m['n_bonafide']} n_spoof={m['n_spoof']} pi={m['pi']}"]
    if m.get("undefined"):
        return lines + [f"undefined: {m['undefined']}"]
    lines.append("  ".join(f"{k}={_fmt(m[k])}" for k in ("eer", "min_dcf", "act_dcf",
                                                         "min_dcf_pi05", "auc", "cllr",
                                                         "min_cllr")))
    if m.get("flips"):
        lines.append(f"opposite convention flips: {', '.join(m['flips'])}")
    if m.get("suspect_inverted"):
        lines.append("WARNING: AUC < 0.5, the scores look inverted (high = bona fide?)")
    for kind, groups in m.get("breakdowns", {}).items():
        for name, g in groups.items():
            val = g.get("undefined") or f"eer={_fmt(g['eer'])} min_dcf={_fmt(g['min_dcf'])}"
            lines.append(f"  {kind}/{name}: n_b={g['n_bonafide']} n_s={g['n_spoof']} {val}")
    return lines
