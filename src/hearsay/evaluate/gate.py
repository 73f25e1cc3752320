"""The gate: is this campaign better than a named earlier detector (the bar)?

    bar = gate.load_bar(Path("models/<earlier stamp>"))      # its meta.json + its score CSV
    g = gate.judge(oof, holdout, key, [bar, bar2], probe_frame, probe_file, shortcuts)

A campaign passes against the bar only when ALL of these hold (each judged at the reading of
record: minDCF at pi 0.3, cost direction as stated; hearsay.metrics.READINGS):

  holdout      our minDCF on the outer holdout < the bar's, on the same holdout clips;
  out-of-fold  our pooled out-of-fold minDCF < the bar's, on the same inner clips
               (judged apart from the holdout: a win on one never makes up for a loss on the
               other);
  probe        the probe set's (bona fide only, e.g. In-the-Wild) false-alarm rate at OUR
               out-of-fold minDCF threshold <= the bar's OWN rate at ITS out-of-fold threshold,
               read from the bar's meta.json ("probe"); both must be read on the same probe
               clips ("set_sha256": sha256 of the sorted paths), else "not measured";
  shortcuts    every realised-stream shortcut AUC of every pinned run (run_meta.json
               "stream_shortcuts", per source and over all) has max(AUC, 1 - AUC) < 0.85
               (SHORTCUT_BOUND); an unmeasured source or run is "not measured", a source of one
               class only (no AUC can exist within it) is named apart;
  extra corpus when a decision file is given or the runs cite one: the runs were trained under
               the extra corpus's decision (keep / cap share / drop), judged by its owner
               hearsay.evaluate.corpus_decision.gate_check (passed in as `extra`).

The bar folder (`hearsay assemble --bar DIR`): DIR/meta.json as `hearsay assemble` writes it
(models/<stamp>/meta.json) and the score CSV it names under "scores_csv" (absolute, or relative
to DIR), else DIR/scores.csv. A detector that never went through assembly gets a folder with its
scores.csv (path + logit/score for our inner and holdout clips) and a meta.json holding
{"name": …, "probe": {"false_alarm_rate": …, "set_sha256": …}} (`bar_record`
computes that block). The bar must score every clip it is judged on, else "not measured".

The first bar gates; a second (`--bar2`) is judged the same way and reported beside it. Every
reading (pi 0.3 / 0.5 x both cost directions) is computed for holdout and out-of-fold, and a
reading whose decision differs from the reading of record is named in "flips". Outcome: "fail"
when a measured check fails, else "not measured" when one could not be measured, else "pass".
A failed gate is a valid outcome: it is recorded, never raised.

Each stage's margin is read against its noise, beside the outcome (never changing it): a paired
bootstrap interval of minDCF(ours) - minDCF(bar) at the reading of record on the same clips
(hearsay.evaluate.report_stats.paired_margin_ci), and on the holdout the band HOLDOUT_NOISE_BAND:
a holdout gap |ours - bar| under 0.15 minDCF is within noise (the run spec's consult: few
holdout clips, one unseen family). A stage is "within noise" when its interval holds 0 or, on
the holdout, its gap is inside the band; else "beyond noise". The gate's "noise" says "within
noise" when a stage of the gating bar is, so a pass (or fail) by a margin the clips cannot
resolve is read as such in meta.json and the report.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from hearsay import metrics
from hearsay.contracts.score_file import read as read_scores  # a bar's CSV is read as ours are
from hearsay.metrics import READING_OF_RECORD, READINGS, reading_name
from hearsay.metrics.shortcuts import SHORTCUT_BOUND, single_class
from hearsay.metrics.shortcuts import strength as shortcut_strength

RECORD = reading_name(*READING_OF_RECORD)
HOLDOUT_NOISE_BAND = 0.15  # minDCF: a holdout gap under this is within noise (module docstring)


def combine(outcomes) -> str:
    outcomes = list(outcomes)
    if "fail" in outcomes:
        return "fail"
    return "not measured" if "not measured" in outcomes else "pass"


# --------------------------------------------------------------------------- the bar


def load_bar(folder: Path) -> dict:
    """{"dir", "name", "meta", "scores" (frame or None), "why" (None when readable)}."""
    folder = Path(folder)
    out = {"dir": str(folder), "name": folder.name, "meta": {}, "scores": None, "why": None}
    meta_file = folder / "meta.json"
    if not meta_file.is_file():
        out["why"] = (f"{folder.name}/meta.json missing (the bar folder is models/<stamp>/ of "
                      "its campaign)")  # names no absolute path: it goes into the report
        return out
    meta = json.loads(meta_file.read_text())
    out["meta"], out["name"] = meta, str(meta.get("name") or folder.name)
    named = meta.get("scores_csv")
    csv = Path(named) if named and Path(named).is_absolute() else folder / (named or "scores.csv")
    if not csv.is_file() and (folder / "scores.csv").is_file():
        csv = folder / "scores.csv"
    if not csv.is_file():
        out["why"] = f"the bar's score file {csv.name} is missing"
        return out
    out["scores_csv"], out["scores"] = str(csv), read_scores(csv)
    return out


def probe_set_sha(probe_frame) -> str:
    """Identity of a probe set: sha256 of its sorted unique paths, one per line (two detectors'
    score files of the same clips share it; their scores differ, their clips do not)."""
    paths = sorted(set(probe_frame["path"].astype(str)))
    return hashlib.sha256("\n".join(paths).encode()).hexdigest()


def probe_reading(scores, key, probe_frame, probe_file: Path | None) -> dict:
    """A detector's own probe record: false-alarm rate of the bona fide probe clips at its
    out-of-fold minDCF threshold of record (a clip at or above it is called synthetic)."""
    j = metrics.join(scores, key)
    _, thr = metrics.min_dcf_reading(j["rank"], j["is_spoof"], *READING_OF_RECORD)
    rank = metrics.rank_values(probe_frame)
    fa = float(np.mean(rank >= thr)) if len(rank) and thr is not None else None
    return {"file": None if probe_file is None else str(probe_file),
            "set_sha256": probe_set_sha(probe_frame),
            "n": int(len(rank)), "threshold": thr, "reading": RECORD, "false_alarm_rate": fa}


def bar_record(name: str, oof_scores, key, probe_frame, probe_file: Path) -> dict:
    """The meta.json of a bar folder for a detector scored outside assembly."""
    return {"name": name, "scores_csv": "scores.csv",
            "probe": probe_reading(oof_scores, key, probe_frame, probe_file)}


# --------------------------------------------------------------------------- one comparison


def _both(ours, theirs, key) -> dict:
    """Per reading: ours vs the bar's minDCF on the same clips; beats = ours strictly lower."""
    a, b = metrics.join(ours, key), metrics.join(theirs, key)
    out = {}
    for pi, d in READINGS:
        mine = metrics.min_dcf_reading(a["rank"], a["is_spoof"], pi, d)[0]
        bar = metrics.min_dcf_reading(b["rank"], b["is_spoof"], pi, d)[0]
        ok = None if mine is None or bar is None else bool(mine < bar)
        out[reading_name(pi, d)] = {"ours": mine, "bar": bar,
                                    "margin": None if ok is None else bar - mine, "beats": ok}
    return out


def _stage(ours, bar_scores, key, what: str) -> dict:
    """One stage (holdout or out-of-fold) against the bar, on exactly our clips."""
    j = metrics.join(ours, key)
    stage = {"n_bonafide": int((~j["is_spoof"]).sum()), "n_spoof": int(j["is_spoof"].sum())}
    missing = sorted(set(ours["path"]) - set(bar_scores["path"]))
    if missing:
        return {**stage, "outcome": "not measured",
                "why": f"{what}: the bar scores {len(missing)} of our clips not at all, "
                       f"e.g. {missing[0]!r}"}
    theirs = bar_scores[bar_scores["path"].isin(set(ours["path"]))].drop_duplicates("path")
    stage["readings"] = _both(ours, theirs, key)
    rec = stage["readings"][RECORD]
    if rec["beats"] is None:
        return {**stage, "outcome": "not measured", "why": f"{what}: minDCF undefined "
                "(one class only)"}
    stage["outcome"] = "pass" if rec["beats"] else "fail"
    stage["why"] = (f"{what}: minDCF ours {rec['ours']:.4f} vs bar {rec['bar']:.4f} "
                    f"(margin {rec['margin']:+.4f}, {stage['n_bonafide']} bona fide + "
                    f"{stage['n_spoof']} synthetic)")
    ranks = metrics.join(theirs, key).set_index("path")["rank"]
    stage["noise"] = noise(j["rank"].to_numpy(float), ranks.loc[j["path"]].to_numpy(float),
                           j["is_spoof"].to_numpy(bool), what,
                           HOLDOUT_NOISE_BAND if what == "holdout" else None)
    return stage


def noise(ours, bar, is_spoof, what: str, band: float | None) -> dict:
    """One stage's margin against its noise: the paired interval of (ours - bar) and, with a
    `band`, the gap |ours - bar| against it; "verdict" within noise / beyond noise / not
    measured (module docstring)."""
    from hearsay.evaluate.report_stats import paired_margin_ci

    pi, direction = READING_OF_RECORD
    ci = paired_margin_ci(ours, bar, is_spoof, pi=pi, direction=direction)
    out = {**ci, "band": band}
    if ci["interval"] is None:
        return {**out, "verdict": "not measured", "why": f"{what}: one class only"}
    d, (lo, hi) = ci["ours_minus_bar"], ci["interval"]
    said = f"{what}: ours - bar {d:+.4f}, {ci['level']:.0%} paired interval [{lo:+.4f}, {hi:+.4f}]"
    if lo <= 0 <= hi:
        return {**out, "verdict": "within noise", "why": f"{said} holds 0"}
    if band is not None and abs(d) < band:
        return {**out, "verdict": "within noise",
                "why": f"{said}; the gap {abs(d):.4f} is under the {band} band"}
    return {**out, "verdict": "beyond noise",
            "why": f"{said} excludes 0" + (f"; the gap {abs(d):.4f} is at or over the {band} "
                                           "band" if band is not None else "")}


def noise_verdict(judged: dict) -> dict:
    """The gating bar's stages read against their noise: "within noise" when one of them is,
    "beyond noise" when all are, else "not measured"."""
    stages = [s.get("noise") for s in (judged.get("stages") or {}).values()]
    verdicts = [s["verdict"] if s else "not measured" for s in stages]
    verdict = ("within noise" if "within noise" in verdicts else
               "beyond noise" if verdicts and set(verdicts) == {"beyond noise"} else
               "not measured")
    return {"verdict": verdict, "band": HOLDOUT_NOISE_BAND,
            "why": "; ".join(s["why"] for s in stages if s) or judged.get("why", "")}


def _probe_check(ours_probe: dict | None, bar_meta: dict) -> dict:
    if ours_probe is None:
        return {"outcome": "not measured", "why": "probe: no probe set given (--probe)"}
    theirs = bar_meta.get("probe") or {}  # meta.json written before "probe" existed: none
    fa, bar_fa = ours_probe.get("false_alarm_rate"), theirs.get("false_alarm_rate")
    out = {"ours": fa, "bar": bar_fa, "bar_set_sha256": theirs.get("set_sha256"),
           "set_sha256": ours_probe.get("set_sha256")}
    if bar_fa is None:
        return {**out, "outcome": "not measured",
                "why": "probe: the bar's meta.json holds no probe false-alarm rate"}
    if not theirs.get("set_sha256"):
        return {**out, "outcome": "not measured",
                "why": "probe: the bar's probe record names no probe set (set_sha256)"}
    if theirs.get("set_sha256") != ours_probe.get("set_sha256"):
        return {**out, "outcome": "not measured",
                "why": "probe: the bar's rate was read on other probe clips (set_sha256 differs)"}
    if fa is None:
        return {**out, "outcome": "not measured", "why": "probe: our false-alarm rate is unknown"}
    ok = fa <= bar_fa
    return {**out, "outcome": "pass" if ok else "fail",
            "why": f"probe false alarms ours {fa:.4f} vs the bar's own {bar_fa:.4f} "
                   f"({'no worse' if ok else 'WORSE'})"}


def flips(stages: dict) -> list[str]:
    """Readings whose decision (ours beats the bar on holdout AND out-of-fold) is not the
    decision of record."""
    def decision(name):
        got = [s["readings"][name]["beats"] for s in stages.values() if "readings" in s]
        return None if len(got) < len(stages) or None in got else all(got)

    rec = decision(RECORD)
    return [reading_name(*r) for r in READINGS[1:]
            if rec is not None and decision(reading_name(*r)) not in (None, rec)]


def judge_bar(oof, holdout, key, bar: dict, ours_probe: dict | None) -> dict:
    out = {"name": bar["name"], "dir": bar["dir"]}
    if bar["scores"] is None:
        return {**out, "outcome": "not measured", "why": bar["why"]}
    stages = {"holdout": _stage(holdout, bar["scores"], key, "holdout"),
              "out-of-fold": _stage(oof, bar["scores"], key, "out-of-fold")}
    probe = _probe_check(ours_probe, bar["meta"])
    out.update(stages=stages, probe=probe, flips=flips(stages))
    out["outcome"] = combine([stages["holdout"]["outcome"], stages["out-of-fold"]["outcome"],
                              probe["outcome"]])
    out["why"] = "; ".join([stages["holdout"]["why"], stages["out-of-fold"]["why"],
                            probe["why"]])
    return out


# --------------------------------------------------------------------------- shortcuts


def shortcut_check(metas: dict) -> dict:
    """The realised training streams' shortcut AUCs (run_meta "stream_shortcuts") of every run,
    re-read against SHORTCUT_BOUND (not the run's own flag). A source that held clips of one
    class only (its counts say so: hearsay.metrics.shortcuts.single_class) has no AUC to read and is
    listed apart, never as unmeasured."""
    runs, flagged, unmeasured, one_class = {}, [], [], []
    for key, meta in metas.items():
        st = meta.get("stream_shortcuts")
        if not isinstance(st, dict) or not st.get("per_source"):
            unmeasured.append(f"{key}: no stream_shortcuts in run_meta.json")
            continue
        worst = {}
        for source, entry in st["per_source"].items():
            n_b, n_s = entry.get("n_bonafide"), entry.get("n_spoof")
            if isinstance(n_b, int) and isinstance(n_s, int) and single_class(n_b, n_s):
                one_class.append(f"{key}/{source}")
                continue
            for feat, a in (entry.get("auc") or {}).items():
                if a is None:
                    unmeasured.append(f"{key}/{source}/{feat}: too few clips per class")
                    continue
                strength = shortcut_strength(a)
                worst[f"{source}/{feat}"] = strength
                if strength >= SHORTCUT_BOUND:
                    flagged.append(f"{key}/{source}/{feat} AUC {a:.3f}")
        if not worst:  # sources listed but no AUC in them: nothing was measured
            unmeasured.append(f"{key}: stream_shortcuts in run_meta.json holds no AUC")
        runs[key] = {"max_strength": max(worst.values(), default=None), "per_feature": worst}
    outcome = "fail" if flagged else "not measured" if unmeasured or not runs else "pass"
    why = (f"stream shortcuts: {len(flagged)} at max(AUC, 1-AUC) >= {SHORTCUT_BOUND}: "
           f"{', '.join(flagged[:4])}" if flagged else
           f"stream shortcuts: {len(unmeasured)} AUC(s) unmeasured, e.g. {unmeasured[0]}"
           if unmeasured else
           f"stream shortcuts: every AUC within (1-{SHORTCUT_BOUND}, {SHORTCUT_BOUND})")
    if one_class and not flagged:
        sources = sorted({s.split("/", 1)[1] for s in one_class})
        why += (f" ({', '.join(sources)}: one class only in the training stream, no AUC within "
                "it; read in the pooled one)")
    return {"bound": SHORTCUT_BOUND, "outcome": outcome, "why": why, "flagged": flagged,
            "unmeasured": unmeasured, "single_class": one_class, "runs": runs}


# --------------------------------------------------------------------------- the whole gate


def judge(oof, holdout, key, bars: list[dict], probe_frame=None, probe_file: Path | None = None,
          metas: dict | None = None, extra: dict | None = None) -> dict:
    """The gate of record against bars[0]; bars[1:] are judged the same way, reported beside."""
    ours_probe = (None if probe_frame is None else
                  probe_reading(oof, key, probe_frame, probe_file))
    shortcuts = shortcut_check(metas or {})
    judged = [judge_bar(oof, holdout, key, b, ours_probe) for b in bars]
    out = {"reading": RECORD, "metric": "min_dcf", "readings": [reading_name(*r) for r in READINGS],
           "bars": judged, "probe": ours_probe, "shortcuts": shortcuts, "extra_corpus": extra}
    if not judged:
        out["outcome"], out["why"] = "not measured", "no bar given (--bar DIR)"
        return out
    checks = [judged[0]["outcome"], shortcuts["outcome"]] + ([extra["outcome"]] if extra else [])
    out["outcome"] = combine(checks)
    out["why"] = (f"against {judged[0]['name']}: {judged[0]['why']}; {shortcuts['why']}"
                  + (f"; {extra['why']}" if extra else ""))
    out["flips"] = judged[0].get("flips", [])
    out["noise"] = noise_verdict(judged[0])
    return out


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4f}"


def markdown(g: dict, bar_note: str | None = None) -> list[str]:
    """The report's gate section (headline, one table per bar, probe, shortcuts)."""
    lines = [f"## Gate: **{g['outcome']}** (minDCF at {RECORD}; holdout and out-of-fold each "
             "below the bar's, probe false alarms no worse than the bar's own, no stream "
             "shortcut)", ""]
    first = g["bars"][0]["name"] if g["bars"] else None
    lines += [f"The bar: {bar_note or first or 'none given'}. It is the bar because a campaign "
              "is worth shipping only if it beats the detector it would replace, on exactly the "
              "same clips.", "", g.get("why", ""), ""]
    if g.get("noise"):
        lines += [f"**Margin against noise: {g['noise']['verdict']}** (paired bootstrap of "
                  f"ours - bar on the same clips; a holdout gap under {g['noise']['band']} "
                  "minDCF is within noise).", ""]
    for i, b in enumerate(g["bars"]):
        role = "gate" if i == 0 else "beside (not gating)"
        lines += [f"### Bar {i + 1} ({role}): {b['name']}: {b['outcome']}", ""]
        if "stages" not in b:
            lines += [b["why"], ""]
            continue
        lines += ["| reading | holdout ours | holdout bar | beats | OOF ours | OOF bar | beats |",
                  "|---|---|---|---|---|---|---|"]
        h, o = b["stages"]["holdout"], b["stages"]["out-of-fold"]
        for name in g["readings"]:
            hr, orr = (h.get("readings") or {}).get(name, {}), (o.get("readings") or {}).get(
                name, {})
            lines.append(f"| {name}{' (of record)' if name == g['reading'] else ''} | "
                         f"{_fmt(hr.get('ours'))} | {_fmt(hr.get('bar'))} | {hr.get('beats')} | "
                         f"{_fmt(orr.get('ours'))} | {_fmt(orr.get('bar'))} | "
                         f"{orr.get('beats')} |")
        lines += ["", f"- {b['probe']['why']}"]
        for st in (h, o):
            if st.get("noise"):
                lines.append(f"- Margin against noise: {st['noise']['verdict']}: "
                             f"{st['noise']['why']}.")
        if b["flips"]:
            lines.append(f"- **The decision flips** under: {', '.join(b['flips'])}.")
        else:
            lines.append("- The decision is the same under every reading.")
        lines.append("")
    if g.get("probe"):
        p = g["probe"]
        lines += [f"Probe ({Path(p['file']).name if p['file'] else 'in memory'}, n={p['n']}): "
                  "our false-alarm rate "
                  f"{_fmt(p['false_alarm_rate'])} at the out-of-fold minDCF threshold "
                  f"{_fmt(p['threshold'])}.", ""]
    s = g["shortcuts"]
    lines += [f"Stream shortcuts (bound {s['bound']}): {s['outcome']}: {s['why']}.", ""]
    x = g.get("extra_corpus")
    if x:
        lines += [f"Extra corpus: {x['outcome']}: {x['why']}"
                  + (f" (decision file {x['file']}, sha256 `{x['sha256']}`)." if x.get("file")
                     else "."), ""]
    return lines
