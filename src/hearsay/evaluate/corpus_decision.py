"""An extra corpus's decision (keep / cap share / drop): the drop rule read from two recipes'
runs, the decision file a recipe cites, and its line in the gate.

    hearsay corpus-probe --drop-rule --without models/abl/core_only/ablation_runs.json \\
        --with models/abl/core_extra/ablation_runs.json --bundle BUNDLE \\
        --probe-result probe.json --decision models/abl/corpus_decision.json
        # each recipe's probe: its fold boxes' foldK_probe.csv (or --probe-without/--probe-with)

The drop rule: the extra corpus is dropped when adding it to training raises the probe set's
(bona fide only, e.g. In-the-Wild) false-alarm rate by more than `drop_rise` (config; 0.01 = one
point): P_FA(with) - P_FA(without) > drop_rise. Each P_FA is read from that recipe's own runs at
its own out-of-fold threshold (hearsay.evaluate.gate.probe_reading: minDCF threshold of record
on its pooled inner-fold scores; a probe clip at or above it is a false alarm). A recipe is
  * an assembled campaign folder (models/<stamp>/, no probe file given): its meta.json "probe"
    record, written by `hearsay assemble --probe`;
  * a recipe's inner-fold scores (what `hearsay compare` reads: a pin file, a scores folder, a
    score CSV) and its probe scores: by default the probe files its fold runs' boxes wrote
    beside their inner-fold files (foldK_probe.csv next to foldK_inner_oof.csv, brought back by
    runner/collect_ablation.sh; every box scores the probe set, hearsay.evaluate.probe_set),
    pooled over the folds at the recipe's one out-of-fold threshold; or `--probe-*` CSV, the
    probe clips scored by that recipe's model elsewhere. With --bundle, rows the bundle labels
    spoof are left out (the probe set is bona fide only) and counted.
Both readings must be of the same probe clips (set_sha256), else refused.

The decision (`decide`), thresholds from the probe's config (hearsay.evaluate.corpus_probe):
  drop       the drop rule says drop;
  cap share  else, the corpus is separable from its peer (probe "separable") or a bona fide
             source lands on its side (landing share >= landing_share): train it at no more
             than `cap_share` of its class (train.source_mix);
  keep       else.
The file (`write`): {"decision", "why", "corpus", "against", "label", "cap_share", "probe",
"drop_rule", "config"}; its sha256 is what a recipe cites (`selection.corpus_decision`, recorded
in run_meta "selection") and what `hearsay assemble --corpus-decision FILE` checks (`gate_check`).
"""

from __future__ import annotations

import json
from pathlib import Path

from hearsay.util.hashing import sha256_file

DECISIONS = ("keep", "cap share", "drop")
KEYS = {"decision", "why", "corpus", "against", "label", "cap_share", "probe", "drop_rule",
        "config"}


class DecisionError(ValueError):
    """Bad input (exit 3)."""


class DecisionRefused(DecisionError):
    """The two readings are not comparable (exit 4)."""


def runs_probe_files(inner: list[Path]) -> list[Path]:
    """The probe files the fold runs' boxes wrote beside their inner-fold files
    (foldK_inner_oof.csv -> foldK_probe.csv); DecisionError naming the missing ones."""
    from hearsay.contracts import score_file
    from hearsay.evaluate import probe_set

    found = [(f, run) for f in inner if (run := score_file.parse_name(Path(f).name))]
    files = [Path(f).with_name(probe_set.file_name(run.key)) for f, run in found]
    missing = [str(f) for f in files if not f.is_file()]
    if not files or missing:
        raise DecisionError(f"no probe file of the recipe's runs: "
                            f"{missing or list(map(str, inner))} (each fold box scores the "
                            "probe set: bring it back with runner/collect_ablation.sh, or give "
                            "--probe-with / --probe-without)")
    for (f, _), probe in zip(found, files, strict=True):  # the same model scored both
        ours, theirs = (score_file.read_sidecar(x).get("weights_sha256") for x in (f, probe))
        if ours != theirs:
            raise DecisionRefused(f"{probe}: scored by weights {theirs}, {Path(f).name} by "
                                  f"{ours}: collect the runs again (runner/collect_ablation.sh)")
    return files


def recipe_probe(source: Path, probe: Path | None, key) -> dict:
    """One recipe's probe reading at its own out-of-fold threshold (see the module docstring)."""
    import pandas as pd

    from hearsay.evaluate import compare, gate, probe_set

    source = Path(source)
    if probe is None and (source / "meta.json").is_file():
        meta = source / "meta.json"
        rec = json.loads(meta.read_text()).get("probe") or {}
        if rec.get("false_alarm_rate") is None:
            raise DecisionError(f"{meta}: no probe false-alarm rate (assemble it with --probe)")
        return {**rec, "from": "assembly", "source": str(source)}
    if key is None:
        raise DecisionError(f"{source}: its probe scores are read against the clips' labels: "
                            "give --bundle BUNDLE (or --key KEY.csv)")
    try:
        inner = compare.recipe_files(source)
        oof = compare.recipe_scores(source.name, inner)
        files = [Path(probe)] if probe is not None else runs_probe_files(inner)
        frame = pd.concat([probe_set.read(f) for f in files], ignore_index=True)
    except (compare.CompareError, OSError, ValueError) as err:
        if isinstance(err, DecisionError):
            raise
        raise DecisionError(str(err)) from None
    spoof = set(key.loc[key["label"] == "spoof", "path"].astype(str))
    left_out = frame["path"].astype(str).isin(spoof)
    frame = frame[~left_out]
    if not len(frame):
        raise DecisionError(f"{', '.join(map(str, files))}: no bona fide probe clip")
    rec = gate.probe_reading(oof, key, frame, files[0] if len(files) == 1 else None)
    return {**rec, "from": "runs", "source": str(source), "probe_files": [str(f) for f in files],
            "spoof_left_out": int(left_out.sum())}


def drop_rule(fa_without: float, fa_with: float, rise: float) -> dict:
    """Drop the extra corpus when it raises the probe false-alarm rate by more than `rise`."""
    delta = float(fa_with) - float(fa_without)
    # compared in points rounded to 1e-9: 0.040 - 0.030 is 0.0100000000000002 in floats
    return {"fa_without": fa_without, "fa_with": fa_with, "delta_points": 100 * delta,
            "rise_points": 100 * rise, "drop": bool(round(100 * delta, 9) > round(100 * rise, 9))}


def drop_from_runs(without: dict, with_: dict, rise: float) -> dict:
    """The drop rule on two recipe_probe readings (same probe clips, else DecisionRefused)."""
    if without.get("set_sha256") != with_.get("set_sha256"):
        raise DecisionRefused(f"the two recipes' probe readings are of other clips (set_sha256 "
                              f"{without.get('set_sha256')} vs {with_.get('set_sha256')}): score "
                              "the same probe set with both")
    if without.get("false_alarm_rate") is None or with_.get("false_alarm_rate") is None:
        raise DecisionError("a probe false-alarm rate is undefined (no out-of-fold threshold)")
    return {**drop_rule(without["false_alarm_rate"], with_["false_alarm_rate"], rise),
            "set_sha256": with_["set_sha256"], "without": without, "with": with_}


def decide(probe: dict, drop: dict, cfg: dict) -> dict:
    """The decision record from a probe result (corpus_probe.probe_manifest, with --against) and
    the drop rule (drop_from_runs); `cfg` the probe's config (its thresholds)."""
    landed = sorted(s for s, r in (probe.get("landing") or {}).items() if r["lands"])
    if "landing" not in probe:
        raise DecisionError("the probe result has no landing readout: run corpus-probe with "
                            "--against PEER")
    if drop["drop"]:
        decision = "drop"
        why = (f"the probe false-alarm rate rises {drop['delta_points']:+.2f} points with the "
               f"corpus (> {drop['rise_points']:.2f})")
    elif probe["separable"] or landed:
        decision = "cap share"
        why = (f"separable from {probe['against']} (max(AUC, 1-AUC) {probe['strength']:.3f}, "
               f"bound {probe['bound']})" if probe["separable"] else
               f"not separable from {probe['against']} ({probe['strength']:.3f})")
        why += (f"; bona fide sources landing on its side (share >= {cfg['landing_share']}): "
                f"{', '.join(landed)}" if landed else "")
        why += f"; cap it at {cfg['cap_share']} of its class"
    else:
        decision = "keep"
        why = (f"not separable from {probe['against']} ({probe['strength']:.3f} < "
               f"{probe['bound']}), no bona fide source lands on its side, false alarms "
               f"{drop['delta_points']:+.2f} points (<= {drop['rise_points']:.2f})")
    return {"decision": decision, "why": why, "corpus": probe["corpus"],
            "against": probe["against"], "label": probe["label"],
            "cap_share": cfg["cap_share"] if decision == "cap share" else None,
            "probe": probe, "drop_rule": drop, "config": cfg}


def write(path: Path, record: dict) -> str:
    """Write the decision file; returns its sha256 (what a recipe cites)."""
    from hearsay.util.files import jsonable

    Path(path).write_text(json.dumps(jsonable(record), indent=2, allow_nan=False) + "\n")
    return sha256_file(path)


def load(path: Path) -> dict:
    """A decision file `write` wrote, with "sha256" added; DecisionError naming the fix."""
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise DecisionError(f"{path}: {err}") from None
    missing = sorted(KEYS - set(d)) if isinstance(d, dict) else sorted(KEYS)
    if missing or d.get("decision") not in DECISIONS:
        raise DecisionError(f"{path}: not a corpus decision (missing {missing}): write it with "
                            "hearsay corpus-probe --drop-rule ... --decision FILE")
    return {**d, "sha256": sha256_file(path)}


def gate_check(path: Path | None, metas: dict) -> dict | None:
    """The gate's extra-corpus line: the decision file given to assemble against what the pinned
    runs cite (run_meta "selection" "corpus_decision"). None when neither exists.

    pass  every run cites this decision (trained under it), or it is "keep"; a "cap share" or
          "drop" is also applied by every run (`applied`: its training stream's record);
    fail  a run cites another decision, or it is "cap share"/"drop" and the runs do not cite it
          (they trained without applying it: retrain citing it), or cite it and do not apply it;
    not measured  the runs cite a decision and none is given (--corpus-decision FILE), or a run
          cannot show a cap or drop applied."""
    cited = {k: (m.get("selection") or {}).get("corpus_decision") or None
             for k, m in metas.items()}
    shas = sorted({s for s in cited.values() if s})
    if path is None:
        if not shas:
            return None
        return {"outcome": "not measured", "cited": cited,
                "why": f"extra corpus: the runs cite decision {shas[0][:12]}…; give it with "
                       "--corpus-decision FILE"}
    d = load(path)
    out = {"file": Path(path).name, "sha256": d["sha256"], "decision": d["decision"],
           "corpus": d["corpus"], "against": d["against"], "cited": cited,
           "delta_points": d["drop_rule"]["delta_points"], "decision_why": d["why"]}
    head = f"extra corpus {d['corpus']}: {d['decision']} ({d['why']})"
    other = sorted(k for k, s in cited.items() if s and s != d["sha256"])
    uncited = sorted(k for k, s in cited.items() if not s)
    if other:
        return {**out, "outcome": "fail",
                "why": f"{head}; runs {', '.join(other)} cite another decision"}
    if uncited and d["decision"] != "keep":
        return {**out, "outcome": "fail",
                "why": f"{head}; runs {', '.join(uncited)} were not trained under it (their "
                       "recipe does not cite it: selection.corpus_decision)"}
    if d["decision"] != "keep":   # cited: did each run apply it? (its stream_groups say)
        broken, unread = applied(d, metas)
        if broken:
            return {**out, "outcome": "fail", "why": f"{head}; " + "; ".join(broken)}
        if unread:
            return {**out, "outcome": "not measured",
                    "why": f"{head}; runs {', '.join(unread)} cite it but their run_meta.json "
                           "cannot show it applied (no stream_groups, from a trainer before "
                           "them: retrain; or the corpus is named by a column they do not break "
                           "down: name it by source, train_scope or corpus)"}
        return {**out, "outcome": "pass",
                "why": f"{head}; every run's recipe cites it and its training stream applies it"}
    return {**out, "outcome": "pass",
            "why": head + ("" if uncited else "; every run's recipe cites it")}


def applied(d: dict, metas: dict) -> tuple[list[str], list[str]]:
    """(how runs break decision `d`, runs that cannot show it): "drop" = no training row of the
    corpus; "cap share" = the corpus's planned share of its class's draws <= cap_share. Read
    from run_meta "stream_groups" (hearsay.train.selection.stream_groups: rows and planned share
    per label, source, train_scope, corpus); a corpus named by another column, or a run without
    that record, cannot be shown."""
    from hearsay.contracts.manifest import LABELS, parse_selector

    col, value = parse_selector(d["corpus"])
    labels = [d["label"]] if d["label"] in LABELS else list(LABELS)
    broken, unread = [], []
    for k, meta in sorted(metas.items()):
        groups = meta.get("stream_groups")
        if not isinstance(groups, list) or any(col not in g for g in groups):
            unread.append(k)
            continue
        ours = [g for g in groups if str(g[col]) == value and g["label"] in labels]
        rows = sum(int(g["rows"]) for g in ours)
        if d["decision"] == "drop" and rows:
            broken.append(f"run {k} trains {rows} row(s) of {d['corpus']}, which the decision "
                          "drops")
        for lab in labels if d["decision"] == "cap share" else ():
            share = sum(float(g["share"]) for g in ours if g["label"] == lab)
            if share > float(d["cap_share"]) + 1e-9:
                broken.append(f"run {k} draws {d['corpus']} at {share:.3f} of its {lab} clips, "
                              f"above the cap {d['cap_share']}")
    return broken, unread
