"""What the runs recorded, as the campaign report states it (read from run_meta.json and each
run's config.json; nothing here is typed in by hand).

    rec = report_record.training_record(done["pin"], done["metas"])   # -> meta.json "training"
    lines = report_record.markdown(rec, ablation, spend)               # the report's section

Per run: whether the backbone was frozen (config model.train_top: 0 = every backbone parameter
frozen) and how many parameters trained (run_meta, when the trainer recorded it, else "not
recorded"); the configured source mix (config train.source_mix) beside the realised shares of
the last epoch (run_meta "source_mix"); the realised augmentation rate per source x class
(run_meta "rates"); the AUC-direction tripwire (run_meta "tripwire") with every validation
readout of the history against its bound; the learned layer weights when recorded.

Beside them: the recipe-selection caveat (a recipe chosen on the inner folds is then reported on
the same inner folds: the out-of-fold numbers of the chosen recipe are optimistic), what the
augmentation does not cover (physical replay; reverb is simulated), and the spend per job.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hearsay.contracts import run_dir as run_dirs

# run_meta keys the trainer records (older runs lack them: "not recorded", never a guess):
# the backbone's trainable parameter count, and {"weights": [softmax weight per kept hidden
# state h_0 … h_L], "verdict": the "concentrated at the top" rule's words, ...}
TRAINABLE_KEY = "trainable_backbone_params"
LAYER_WEIGHTS_KEY = "layer_weights"
NOT_RECORDED = "not recorded"


def _config(spec: dict) -> dict:
    try:
        return json.loads(run_dirs.config_path(Path(spec.get("dir") or ".")).read_text())
    except (OSError, ValueError):
        return {}


def _tripwire(meta: dict, bound: float | None) -> dict:
    """The run's tripwire setting and each validation readout's AUC against its bound."""
    val = [v for v in ((meta.get("history") or {}).get("val") or []) if v.get("auc") is not None]
    rows = [{"step": v.get("step"), "auc": v["auc"],
             "tripped": None if bound is None else bool(v["auc"] <= bound)} for v in val]
    return {"setting": meta.get("tripwire") or NOT_RECORDED, "bound": bound, "readouts": rows}


def _layer_weights(meta: dict):
    """(softmax weights of the weighted layer sum as floats, the rule's verdict) or Nones."""
    rec = meta.get(LAYER_WEIGHTS_KEY)
    w = rec.get("weights") if isinstance(rec, dict) else None
    if isinstance(w, list) and w and all(isinstance(x, (int, float)) for x in w):
        return [float(x) for x in w], rec.get("verdict")
    return None, None


def training_record(pin: dict, metas: dict) -> dict:
    """{run: {...}} per pinned run, from its run_meta (`metas`) and its config.json."""
    out = {}
    for key, meta in metas.items():
        cfg = _config(pin["runs"].get(key) or {})
        mc, tc = cfg.get("model") or {}, cfg.get("train") or {}
        top, keep = mc.get("train_top"), mc.get("keep_layers")
        frozen = (NOT_RECORDED if top is None else "whole backbone frozen" if top == 0
                  else f"top {top} of {keep} transformer layers trained (CNN frozen)")
        trainable = meta.get(TRAINABLE_KEY)
        weights, verdict = _layer_weights(meta)
        mix = meta.get("source_mix") or {}
        bound = tc.get("tripwire_auc")
        out[key] = {"backbone": frozen, "train_top": top, "keep_layers": keep,
                    "trainable_params": trainable if trainable is not None else NOT_RECORDED,
                    "source_mix_configured": tc.get("source_mix", mix.get("mix", NOT_RECORDED)),
                    "source_mix_realised": mix.get("realised") or NOT_RECORDED,
                    "source_mix_status": mix.get("status"),
                    "augmentation_rates": meta.get("rates") or NOT_RECORDED,
                    "p_aug": (cfg.get("augment") or {}).get("p_aug"),
                    "tripwire": _tripwire(meta, bound),
                    "layer_weights": weights or NOT_RECORDED,
                    "layer_weights_verdict": verdict}
    return out


def _pct(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"


def _mix_cells(mix) -> str:
    if isinstance(mix, str):
        return mix
    return "; ".join(f"{lab}: " + ", ".join(f"{s} {_pct(v)}" for s, v in sorted(by.items()))
                     for lab, by in sorted(mix.items()))


def pooled_rates(record: dict) -> dict:
    """{source: {label: {"n", "augmented", "types"}}} over every run that recorded rates: each
    rate weighted by its run's clip count (clips trained on, summed over runs)."""
    acc: dict = {}
    for r in record.values():
        rates = r["augmentation_rates"]
        for source, by in (rates if isinstance(rates, dict) else {}).items():
            for label, x in by.items():
                n = x.get("n") or 0
                a = acc.setdefault(source, {}).setdefault(label, {"n": 0, "aug": 0.0, "t": {}})
                a["n"] += n
                a["aug"] += n * (x.get("augmented") or 0.0)
                for t, v in (x.get("types") or {}).items():
                    a["t"][t] = a["t"].get(t, 0.0) + n * v
    return {s: {lab: {"n": a["n"], "augmented": a["aug"] / a["n"] if a["n"] else None,
                      "types": {t: v / a["n"] for t, v in a["t"].items()} if a["n"] else {}}
                for lab, a in sorted(by.items())} for s, by in acc.items()}


def _rates_table(rates: dict) -> list[str]:
    from hearsay.sound.augment import TYPES

    lines = ["| source | class | clips | augmented | " + " | ".join(TYPES) + " |",
             "|---|---|---|---|" + "---|" * len(TYPES)]
    for source, by in sorted(rates.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        for label, r in by.items():
            lines.append(f"| {source} | {label} | {r['n']} | {_pct(r['augmented'])} | "
                         + " | ".join(_pct(r["types"].get(t)) for t in TYPES) + " |")
    return lines


def _reverb_rate(record: dict) -> float | None:
    """The realised reverb rate over every run's clips (both classes), None when unrecorded."""
    pooled = pooled_rates(record).get("all") or {}
    n = sum(x["n"] for x in pooled.values())
    return sum(x["n"] * x["types"].get("reverb", 0.0) for x in pooled.values()) / n if n else None


def markdown(record: dict) -> list[str]:
    """The report's "How the runs trained" section."""
    lines = ["## How the runs trained", "",
             "| run | backbone | backbone parameters trained | source mix configured | realised "
             "(last epoch) |", "|---|---|---|---|---|"]
    for k, r in record.items():
        n = r["trainable_params"]
        lines.append(f"| {k} | {r['backbone']} | {n if isinstance(n, str) else f'{n:,}'} | "
                     f"{_mix_cells(r['source_mix_configured'])} | "
                     f"{_mix_cells(r['source_mix_realised'])}"
                     f"{' (' + r['source_mix_status'] + ')' if r['source_mix_status'] else ''} |")
    lines += ["", "### Direction tripwire (validation AUC at or below the bound aborts a run)", ""]
    for k, r in record.items():
        t = r["tripwire"]
        reads = ", ".join(f"step {x['step']}: AUC {x['auc']:.3f}"
                          + (" TRIPPED" if x["tripped"] else "") for x in t["readouts"])
        lines.append(f"- {k}: {t['setting']}; readouts: {reads or 'none recorded'}")
    pooled = pooled_rates(record)
    without = [k for k, r in record.items() if not isinstance(r["augmentation_rates"], dict)]
    p_aug = sorted({str(r["p_aug"]) for r in record.values()})
    lines += ["", "### Realised augmentation per source x class", "",
              f"Fraction of the clips trained on, pooled over the runs' clips (p_aug configured "
              f"{'/'.join(p_aug)}; rates {NOT_RECORDED} by: {', '.join(without) or 'none'}).", ""]
    lines += (_rates_table(pooled) if pooled else [f"Rates: {NOT_RECORDED}."]) + [""]
    weights = {k: r["layer_weights"] for k, r in record.items()}
    if all(isinstance(w, str) for w in weights.values()):
        lines += [f"Learned layer weights: {NOT_RECORDED} in run_meta.", ""]
    else:
        lines += ["Learned layer weights (plot below): " + "; ".join(
            f"{k}: {r['layer_weights_verdict'] or 'no verdict recorded'}"
            if isinstance(r["layer_weights"], list) else f"{k}: {NOT_RECORDED}"
            for k, r in record.items()) + ".", ""]
    return lines


def caveat_lines(record: dict, ablation: dict | None) -> list[str]:
    """Recipe-selection bias, and what the augmentation does not cover."""
    lines = ["## Caveats", ""]
    if ablation and ablation.get("chosen"):
        lines.append(f"- Recipe-selection bias: the recipe \"{ablation['chosen']}\" was chosen on "
                     f"the pooled inner-fold scores of {ablation.get('n_clips')} clips, the same "
                     "inner folds whose out-of-fold numbers this report gives: those numbers "
                     "are optimistic for it; the holdout (never used for selection) is not.")
    else:
        lines.append("- Recipe selection: no recipe comparison was recorded with this assembly "
                     "(--ablation); if one chose this recipe on the inner folds, the out-of-fold "
                     "numbers are optimistic for it.")
    rev = _reverb_rate(record)
    lines.append("- Physical replay is not covered (no clip was played through a loudspeaker "
                 "and re-recorded); reverb is simulated (exponential-decay impulse responses"
                 + (f", realised on {_pct(rev)} of the clips trained on" if rev is not None
                    else "") + ").")
    return lines + [""]


def spend_lines(spend: dict) -> list[str]:
    """The total (hearsay.evaluate.report.spend) and the closed rentals' cost per job."""
    lines = ["## Spend", ""]
    total = "unknown" if spend["total_usd"] is None else f"${spend['total_usd']:.2f}"
    lines.append(f"{total} ({spend['status']}; {spend['note']}; from the ledger "
                 f"{Path(str(spend['source'])).name})")
    if spend.get("by_job"):
        lines += ["", "| job | closed rentals, USD |", "|---|---|"]
        lines += [f"| {j} | {c:.2f} |" for j, c in sorted(spend["by_job"].items())]
    return lines + [""]
