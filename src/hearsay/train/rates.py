"""What the training stream realised: augmentation rates per class and trivial-feature AUCs.

`RateLog` records the realised augmentation per source x class and `check_balanced` raises
AugmentRateError when the classes diverge (e.g. codec copies missing for one class).
`stream_shortcut_aucs` measures the trivial-feature AUCs (duration, peak, leading silence) on
the realised training stream. Both are JSON-able for the checkpoint and run_meta.json.

    from hearsay.train.rates import RateLog, stream_record, stream_shortcut_aucs
    rate_log.record(row.source, row.label, name)          # per clip, after choose
    rate_log.check_balanced()                             # per epoch; raises on divergence
    stream_shortcut_aucs([stream_record(src, lab, wave, n_valid), ...])
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from hearsay import metrics
from hearsay.contracts.manifest import LABELS
from hearsay.metrics.shortcuts import SHORTCUT_BOUND, single_class, strength
from hearsay.sound import audio
from hearsay.sound.augment import SAMPLE_RATE, TYPES, family

log = logging.getLogger("hearsay.augment")  # the stage's logger name, as before the split

SHORTCUT_GATE = SHORTCUT_BOUND  # hearsay.metrics.shortcuts: a trivial feature separating this well
STREAM_FEATURES = ("duration_s", "peak", "lead_silence_s")


class AugmentRateError(RuntimeError):
    """The realised augmentation rates of the two classes diverged."""


# --------------------------------------------------------------------------- realised rates


class RateLog:
    """Counts of realised augmentation per (source, label, name); JSON-able via `state()`."""

    def __init__(self, state: Mapping | None = None):
        # (source, label) -> Counter(name -> clips)
        self.counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for key, counter in (state or {}).items():
            source, label = key.split("|", 1)
            self.counts[(source, label)].update(counter)

    def record(self, source: str, label: str, name: str) -> None:
        if label not in LABELS:
            raise ValueError(f"RateLog.record: label {label!r} (one of {LABELS})")
        self.counts[(str(source), label)][name] += 1

    def state(self) -> dict:
        """{"source|label": {name: count}} (checkpoint / run_meta.json); RateLog(state) restores."""
        return {f"{s}|{lab}": dict(c) for (s, lab), c in sorted(self.counts.items())}

    def _pooled(self) -> dict[tuple[str, str], Counter]:
        pooled: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for (source, label), c in self.counts.items():
            pooled[(source, label)].update(c)
            pooled[("all", label)].update(c)
        return pooled

    def rates(self) -> dict:
        """{source: {label: {"n", "augmented", "types": {family: rate}, "names": {name: rate}}}}.

        "all" pools every source. Rates are fractions of that source x label's clips.
        """
        out: dict = {}
        for (source, label), c in sorted(self._pooled().items()):
            n = sum(c.values())
            fams = Counter()
            for name, k in c.items():
                fams[family(name)] += k
            out.setdefault(source, {})[label] = {
                "n": n,
                "augmented": (n - c["none"]) / n if n else None,
                "types": {t: fams[t] / n for t in TYPES} if n else {},
                "names": {k: v / n for k, v in sorted(c.items())} if n else {},
            }
        return out

    def check_balanced(self, tol: float = 0.02, z: float = 4.0, rel_tol: float = 0.25) -> dict:
        """Raise AugmentRateError when a rate differs between the classes of a source.

        Compared per source with both classes, and over all sources: the augmented rate, each
        type's rate and each codec's rate. Allowed gap = min(tol, rel_tol * pooled rate) + z *
        binomial standard error: absolute for common types, relative for rare ones (one codec
        missing for one class), and small early counts do not trip it. Returns {"status":
        "balanced" | "unknown" (nothing with both classes to compare), "compared": [...],
        "single_class": [...]}.
        """
        rates = self.rates()
        bad, compared, single = [], [], []
        for source, by_label in rates.items():
            if set(by_label) != set(LABELS):
                single.append(source)
                continue
            a, b = by_label["bonafide"], by_label["spoof"]
            compared.append(source)
            pairs = [("augmented", a["augmented"], b["augmented"])]
            pairs += [(t, a["types"][t], b["types"][t]) for t in TYPES]
            codecs = sorted({k for k in (*a["names"], *b["names"]) if family(k) == "codec"})
            pairs += [(c, a["names"].get(c, 0.0), b["names"].get(c, 0.0)) for c in codecs]
            for what, pa, pb in pairs:
                p = (pa * a["n"] + pb * b["n"]) / (a["n"] + b["n"])
                se = np.sqrt(p * (1 - p) * (1 / a["n"] + 1 / b["n"]))
                if abs(pa - pb) > min(tol, rel_tol * p) + z * se:
                    bad.append(f"{source}/{what}: bonafide {pa:.3f} (n={a['n']}) vs spoof "
                               f"{pb:.3f} (n={b['n']})")
        if bad:
            raise AugmentRateError(
                "augmentation rates diverge between classes: " + "; ".join(bad)
                + " (both classes must get the same augmentation: check that codec copies "
                "exist for both classes, or lower that type's weight)")
        return {"status": "balanced" if compared else "unknown", "compared": compared,
                "single_class": single}


# --------------------------------------------------------------------------- stream shortcuts


def stream_record(source: str, label: str, wave: np.ndarray, n_valid: int,
                  rate: int = SAMPLE_RATE) -> dict:
    """Trivial features of one realised model input (after crop, augmentation, finish).

    duration_s: valid samples / rate; peak: max |x| over valid samples (after normalisation:
    the crest factor); lead_silence_s: start of the span hearsay.sound.audio.trim_silence keeps.
    """
    valid = np.asarray(wave[:n_valid])
    start, _ = audio.trim_silence(valid)
    return {"source": str(source), "label": str(label), "duration_s": n_valid / rate,
            "peak": float(np.max(np.abs(valid))) if n_valid else 0.0,
            "lead_silence_s": start / rate}


def auc(scores_pos: Sequence[float], scores_neg: Sequence[float]) -> float:
    """P(pos > neg) + 0.5 P(tie): metrics.auc over the two groups (pos = the positive class)."""
    pos = np.asarray(scores_pos, np.float64)
    neg = np.asarray(scores_neg, np.float64)
    return metrics.auc(np.concatenate([pos, neg]),
                       np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)])


def stream_shortcut_aucs(records: Iterable[Mapping], gate: float = SHORTCUT_GATE,
                         min_per_class: int = 10) -> dict:
    """Trivial-feature AUCs (spoof = positive) per source and over all, against `gate`.

    A feature is flagged when max(AUC, 1 - AUC) >= gate (either direction is a shortcut); a
    flag logs a warning. A source with fewer than `min_per_class` clips of a class gets AUC None
    and status "unknown" for it, never "ok"; a source with no clip of one class at all is
    "single_class" (AUC None, not unknown: hearsay.metrics.shortcuts.single_class) unless it is
    the pooled "all" (a stream of one class has nothing measured). JSON-serialisable
    (run_meta.json).
    """
    groups: dict[str, dict[str, list[Mapping]]] = defaultdict(lambda: {lab: [] for lab in LABELS})
    for r in records:
        groups[str(r["source"])][r["label"]].append(r)
        groups["all"][r["label"]].append(r)
    per_source, warnings, unknown = {}, [], []
    for source in sorted(groups, key=lambda s: (s == "all", s)):
        bona, spoof = groups[source]["bonafide"], groups[source]["spoof"]
        one_class = single_class(len(bona), len(spoof))
        entry = {"n_bonafide": len(bona), "n_spoof": len(spoof), "auc": {}, "flagged": [],
                 "single_class": one_class}
        for feat in STREAM_FEATURES:
            if min(len(bona), len(spoof)) < min_per_class:
                entry["auc"][feat] = None
                continue
            a = auc([r[feat] for r in spoof], [r[feat] for r in bona])
            entry["auc"][feat] = round(a, 6)
            if strength(a) >= gate:
                entry["flagged"].append(feat)
                warnings.append(f"{source}: {feat} AUC {a:.3f} (gate {gate}): the realised "
                                "training stream carries a trivial shortcut")
        # a one-class source is exempt beside a pooled stream of both classes, never the pool
        if (source == "all" or not one_class) and any(v is None for v in entry["auc"].values()):
            unknown.append(source)
        per_source[source] = entry
    for w in warnings:
        log.warning(w)
    status = "warn" if warnings else ("unknown" if unknown or not per_source else "ok")
    return {"gate": gate, "features": list(STREAM_FEATURES), "per_source": per_source,
            "warnings": warnings, "unknown_sources": unknown, "status": status}
