"""The bundle's shortcut diagnostics (diagnostics.json): how well trivial features separate the
classes per scope, clips PCM-identical across scopes, core clips identical to a test clip.

    diag = diagnostics(bundle_manifest, per_clip_results, auc_warn=0.85,
                       before=decoded_rows)   # hearsay.bundle.build; before: rows pre-selection
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hearsay import metrics
from hearsay.contracts.manifest import split_of
from hearsay.metrics.shortcuts import strength


def source_duration_auc(before: pd.DataFrame, after: pd.DataFrame, results: dict) -> dict:
    """{source: {n_before, n_after, before, after}}: the AUC of trimmed duration (spoof positive)
    per source, over the decoded rows (`before` selection) and the bundle's (`after`); None
    where a side holds one class only."""
    def auc(df: pd.DataFrame) -> float | None:
        y = (df["label"] == "spoof").to_numpy()
        if y.all() or not y.any():
            return None
        x = np.array([results[r]["trimmed_s"] for r in df["id"]], np.float64)
        return round(metrics.auc(x, y), 4)

    return {src: {"n_before": int((before["source"] == src).sum()),
                  "n_after": int((after["source"] == src).sum()),
                  "before": auc(before[before["source"] == src]),
                  "after": auc(after[after["source"] == src])}
            for src in sorted(set(before["source"]))}


def diagnostics(bdf: pd.DataFrame, results: dict, auc_warn: float,
                before: pd.DataFrame | None = None) -> dict:
    """Trivial-feature AUCs per scope, per-source duration AUC before/after selection, PCM
    duplicates across scopes, core-vs-test identities."""
    feats = pd.DataFrame({
        "id": bdf["id"], "y": (bdf["label"] == "spoof").astype(int),
        "train_scope": bdf["train_scope"],
        "split": [split_of(f) or "extra" for f in bdf["fold"]],
        "duration_s": [results[r]["trimmed_s"] for r in bdf["id"]],
        "peak": [results[r]["peak"] for r in bdf["id"]],
        "lead_silence_s": [results[r]["lead_s"] for r in bdf["id"]],
        "pcm_sha": [results[r]["pcm_sha"] for r in bdf["id"]]})
    feats.loc[feats["train_scope"] == "extra", "split"] = "extra"
    scopes = {"all": feats, "core": feats[feats["train_scope"] == "core"]}
    scopes |= {s: feats[feats["split"] == s] for s in ("inner_oof", "holdout", "test", "extra")}
    aucs, warnings = {}, []
    for name, sub in scopes.items():
        if sub["y"].nunique() < 2:
            aucs[name] = {"n": len(sub), "note": "one class only: AUC undefined"}
            continue
        aucs[name] = {"n": len(sub)}
        for f in ("duration_s", "peak", "lead_silence_s"):
            auc = metrics.auc(sub[f].to_numpy(np.float64), sub["y"].to_numpy() == 1)
            aucs[name][f] = round(auc, 4)
            if strength(auc) >= auc_warn:
                warnings.append(f"trivial feature {f} separates the classes in scope {name} "
                                f"(AUC {auc:.3f}; gate: max(AUC, 1-AUC) >= {auc_warn})")
    dups = []
    for sha, grp in feats.groupby("pcm_sha"):
        if len(grp) > 1 and grp["split"].nunique() > 1:
            dups.append({"pcm_sha": sha, "ids": grp["id"].tolist(),
                         "scopes": sorted(set(grp["split"]))})
    test_sha = set(feats.loc[feats["split"] == "test", "pcm_sha"])
    core = feats[(feats["train_scope"] == "core") & (feats["split"] != "test")]
    core_test = core.loc[core["pcm_sha"].isin(test_sha), "id"].tolist()
    if dups:
        warnings.append(f"{len(dups)} PCM-identical clip set(s) span scopes (see duplicates)")
    if core_test:
        warnings.append(f"{len(core_test)} core clip(s) identical to a test clip: {core_test[:5]}")
    by_source = source_duration_auc(bdf if before is None else before, bdf, results)
    for src, a in by_source.items():
        if a["after"] is not None and strength(a["after"]) >= auc_warn:
            warnings.append(f"trimmed duration separates the classes in source {src} "
                            f"(AUC {a['after']:.3f}): match it (selection match_duration)")
    return {"auc_gate": {"warn_at": auc_warn, "rule": "max(AUC, 1-AUC) >= warn_at",
                         "features": ["duration_s (post-trim, pre-cap)", "peak (pre-guard)",
                                      "lead_silence_s"], "positive": "spoof"},
            "trivial_feature_auc": aucs, "duration_auc_by_source": by_source,
            "duplicates_across_scopes": dups,
            "core_identical_to_test": core_test, "warnings": warnings}
