"""Source shares per class: what a `source_mix` table asks for, what the batches realise.

    from hearsay.train import shares
    shares.check_planned(train, 64, table, sampler.quotas, 0.02, data.quotas)  # exit 11
    shares.check_realised(tc, rate_log, run_meta)  # each epoch end: run_meta["source_mix"]

A table {"bonafide": {source: share}, "spoof": {...}} (TrainConfig.source_mix) fixes each
class's per-batch quotas by largest remainder (hearsay.train.data.quotas), so a half-batch of h
clips can only realise shares in steps of 1/h. `check_planned` refuses quotas further than
`share_tol` from the table before anything trains, naming the smallest batch_size that fits;
`check_realised` counts the clips the run actually trained on in each epoch (from the RateLog's
per source x class counts, which a resume restores) and stops the run when a class's realised
shares drift beyond share_tol (a broken sampler or pool). Both raise ShareDrift (exit 11).
Proportional and equal mixes are logged the same way and never checked.
"""

from __future__ import annotations

import logging

from hearsay.contracts.manifest import LABELS
from hearsay.train.errors import ShareDrift
from hearsay.train.rates import RateLog

log = logging.getLogger("hearsay.train")

MAX_SUGGESTED_BATCH = 4096  # clips; the search for a batch size that realises the table stops here


def _shares(counts: dict[str, int]) -> dict[str, float]:
    n = sum(counts.values())
    return {s: c / n for s, c in sorted(counts.items())} if n else {}


def drift(table: dict, realised: dict) -> dict[str, dict[str, float]]:
    """{label: {source: realised - table}} over every source either names."""
    out: dict = {}
    for label in LABELS:
        want, got = table.get(label, {}), realised.get(label, {})
        out[label] = {s: got.get(s, 0.0) - float(want.get(s, 0.0))
                      for s in sorted(set(want) | set(got))}
    return out


def _worst(d: dict) -> tuple[float, str]:
    gaps = [(abs(v), f"{lab}/{s}") for lab, by in d.items() for s, v in by.items()]
    return max(gaps, default=(0.0, ""))


def quota_shares(quotas: dict[tuple[str, str], int]) -> dict[str, dict[str, float]]:
    """{label: {source: share}} of one batch under `quotas` {(label, source): clips}."""
    return {label: _shares({s: q for (lab, s), q in quotas.items() if lab == label})
            for label in LABELS}


def check_planned(train, batch_size: int, table: dict, quotas: dict, tol: float,
                  make_quotas) -> None:
    """ShareDrift when the per-batch quotas miss the table by more than `tol`; the message names
    the smallest batch size whose `make_quotas(train, batch_size, table)` (hearsay.train.data's
    quotas, passed in so this module stays a leaf) fits."""
    gap, where = _worst(drift(table, quota_shares(quotas)))
    if gap <= tol:
        return
    fits = next((b for b in range(batch_size + 2, MAX_SUGGESTED_BATCH + 1, 2)
                 if _worst(drift(table, quota_shares(make_quotas(train, b, table))))[0] <= tol),
                None)
    fix = (f"use batch_size >= {fits}" if fits else "no batch size up to "
           f"{MAX_SUGGESTED_BATCH} fits") + f" or raise share_tol above {gap:.3f}"
    raise ShareDrift(f"source_mix table cannot be realised: batch_size {batch_size} gives "
                     f"{batch_size // 2} clips per class, and {where} misses its share by "
                     f"{gap:.3f} > share_tol {tol} (quotas {sorted(quotas.items())}); {fix}")


def realised(rate_state: dict) -> dict[str, dict[str, int]]:
    """{label: {source: clips trained on}} from a RateLog state {"source|label": {name: n}}."""
    out: dict = {label: {} for label in LABELS}
    for key, names in rate_state.items():
        source, label = key.split("|", 1)
        out[label][source] = out[label].get(source, 0) + sum(names.values())
    return out


def check_realised(tc, rate_log: RateLog, meta: dict) -> dict:
    """meta["source_mix"] (run_meta): the realised shares per class of this epoch's clips
    (this rank's: the run's counts now minus those of the previous entry; after a resume, of the
    whole run so far) beside the mix, and "run_counts"; then ShareDrift when a table share
    drifts beyond tc.share_tol (the entry is in `meta` first: the aborted run_meta shows it)."""
    counts = realised(rate_log.state())
    before = (meta.get("source_mix") or {}).get("run_counts", {})
    epoch = {lab: {s: n - before.get(lab, {}).get(s, 0) for s, n in by.items()}
             for lab, by in counts.items()}
    got = {label: _shares(by) for label, by in epoch.items()}
    entry = {"mix": tc.source_mix, "clips": {lab: sum(by.values()) for lab, by in epoch.items()},
             "realised": got, "run_counts": counts}
    gap, where = _worst(drift(tc.source_mix, got)) if isinstance(tc.source_mix, dict) else (0, "")
    if isinstance(tc.source_mix, dict):
        entry.update(share_tol=tc.share_tol, max_drift=round(gap, 6),
                     status="within" if gap <= tc.share_tol else "drifted")
    meta["source_mix"] = entry
    log.info("realised source mix: %s", got)
    if gap > tc.share_tol:
        raise ShareDrift(f"realised source shares drifted from the source_mix table: {where} is "
                         f"off by {gap:.3f} > share_tol {tc.share_tol} over {entry['clips']} "
                         f"clips this epoch (realised {got}); the sampler or its pools are "
                         "broken: check run_meta quotas and sources_without_quota")
    return entry
