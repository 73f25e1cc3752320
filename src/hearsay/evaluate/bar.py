"""`hearsay bar`: an earlier detector's score file + meta.json -> the bar folder the gate reads.

    hearsay bar --from models/ outputs/earlier/ --pick train=asvspoof2019-la --bundle BUNDLE \\
        --out models/<stamp>/bar1 [--pick2 name=seed-run --out2 models/<stamp>/bar2] \\
        [--probe itw_bonafide.csv]
    hearsay assemble ... --bar models/<stamp>/bar1 --bar2 models/<stamp>/bar2 --probe ...

A candidate is a folder as `hearsay.evaluate.gate.load_bar` reads it: meta.json (any JSON object)
and the
score CSV its "scores_csv" names (absolute, or relative to the folder), else scores.csv; columns
path + logit and/or score (high = synthetic). `--from DIR` takes DIR itself when it holds a
meta.json, else every folder directly under it that does.

The bar is chosen by a named field of its meta.json (`--pick FIELD=VALUE`, FIELD dotted for a
nested key: `train`, `runs.full.config_hash`), never by modification time, name order or
"latest": exactly one candidate must match, else the command refuses and lists what each
candidate's field says.

Its rows must be ours: the candidate's score file must score every holdout row and every inner
row of the bundle (the gate judges the two apart), and when it says which rows are its holdout
(a `split` column) they must be exactly ours, compared as a set sha (sha256 of the sorted paths,
`hearsay.evaluate.gate.probe_set_sha`); else the command refuses, naming the rows missing or extra.
With
--probe (our probe clips, e.g. In-the-Wild bona fide: a CSV with `path`), the candidate must
score those clips too, and the bar's own probe record is computed
(`hearsay.evaluate.gate.bar_record`:
its false-alarm rate at its own out-of-fold threshold); without --probe the candidate's own
"probe" block, if any, is carried over.

Written (BAR_DIR): scores.csv (path, fold, split, score and/or logit: our inner then holdout rows,
in manifest order) and meta.json {"name", "picked_by": {"field", "value"}, "<field>": value,
"source": {"dir", "scores_csv", "scores_sha256"}, "scores_csv": "scores.csv", "holdout" and
"inner": {"n", "set_sha256"}, "probe"}. A second bar (--pick2/--out2) is made the same way and
printed beside the first.

Exit codes: 0 written, 2 usage, 3 bad input (a missing folder, bundle or file; an --out that
cannot be written), 4 refused (no candidate or more than one matches, or the rows are not ours).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hearsay.contracts import score_file
from hearsay.contracts.protocol import split_rows
from hearsay.evaluate import gate
from hearsay.util.files import jsonable, write_atomic

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 2, 3, 4  # module docstring
SHOW = 5  # missing / extra paths named in a refusal


class BarRefused(Exception):
    """The candidates or their rows cannot make the bar; the message names the fix."""


def field_value(meta: dict, field: str):
    """meta["a"]["b"] for field "a.b"; None when any part is absent."""
    value = meta
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def candidates(roots: list[Path]) -> list[Path]:
    """Each root that holds a meta.json, else its sub-folders that do (sorted by name, only so
    that refusals read the same every time: the order never chooses)."""
    found = []
    for root in map(Path, roots):
        if not root.is_dir():
            raise FileNotFoundError(f"--from {root}: no such folder")
        found += [root] if (root / "meta.json").is_file() else sorted(
            d for d in root.iterdir() if (d / "meta.json").is_file())
    if not found:
        raise FileNotFoundError(f"--from {', '.join(map(str, roots))}: no folder with a meta.json")
    return found


def pick(roots: list[Path], field: str, value: str, skip: Path | None = None) -> Path:
    """The one candidate whose meta.json `field` is `value` (compared as text); `skip` (the
    folder being written, whose meta.json carries the field too) is never a candidate."""
    said = {d: field_value(json.loads((d / "meta.json").read_text()), field)
            for d in candidates(roots)
            if skip is None or d.resolve() != Path(skip).resolve()}
    hits = [d for d, v in said.items() if v is not None and str(v) == value]
    if len(hits) == 1:
        return hits[0]
    seen = "; ".join(f"{d}: {field}={v!r}" for d, v in said.items())
    if not hits:
        raise BarRefused(f"no candidate has {field}={value!r} ({seen}); pick one of these values")
    raise BarRefused(f"{len(hits)} candidates have {field}={value!r} "
                     f"({', '.join(map(str, hits))}); pick by a field that names one")


def _gap(what: str, missing: list, extra: list, ours_sha: str, theirs_sha: str | None) -> str:
    parts = [f"{what}: the bar's rows are not ours (set sha256 ours {ours_sha[:12]}…"
             + (f", the bar's {theirs_sha[:12]}…" if theirs_sha else "") + ")"]
    if missing:
        parts.append(f"{len(missing)} of ours missing from its score file, e.g. "
                     f"{', '.join(missing[:SHOW])}")
    if extra:
        parts.append(f"{len(extra)} in its {what} not in ours, e.g. {', '.join(extra[:SHOW])}")
    return "; ".join(parts) + " (score exactly our rows with that detector, then rerun)"


def check_rows(scores, ours, what: str) -> dict:
    """{"n", "set_sha256"} of our rows `ours` (a frame with path) when `scores` scores each of
    them (and, with a split column, names no other row as `what`); else BarRefused."""
    mine = set(ours["path"].astype(str))
    sha = gate.probe_set_sha(ours)
    scored = set(scores["path"].astype(str))
    missing = sorted(mine - scored)
    theirs, extra = None, []
    if what == "holdout" and "split" in scores.columns:
        labelled = scores[scores["split"].astype(str) == "holdout"]
        theirs = gate.probe_set_sha(labelled) if len(labelled) else None
        extra = sorted(set(labelled["path"].astype(str)) - mine)
    if missing or extra:
        raise BarRefused(_gap(what, missing, extra, sha, theirs))
    return {"n": len(mine), "set_sha256": sha}


def build(roots: list[Path], field: str, value: str, manifest, out: Path,
          probe: Path | None = None) -> dict:
    """Pick the candidate, check its rows, write the bar folder `out`; its meta.json."""
    from hearsay.evaluate.report import key_frame
    from hearsay.util.hashing import sha256_file

    chosen = gate.load_bar(pick(roots, field, value, skip=out))
    if chosen["scores"] is None:
        raise FileNotFoundError(chosen["why"])
    scores = chosen["scores"].drop_duplicates("path")
    have = [c for c in ("score", "logit") if c in scores.columns]
    if not have:
        raise BarRefused(f"{chosen['scores_csv']}: needs a `logit` or `score` column "
                         f"(it has {list(scores.columns)})")
    inner, hold = split_rows(manifest, "inner_oof"), split_rows(manifest, "holdout")
    sets = {"holdout": check_rows(scores, hold, "holdout"),
            "inner": check_rows(scores, inner, "inner")}
    ours = manifest.loc[list(inner.index) + list(hold.index), ["path", "fold"]].astype(str)
    ours["split"] = ["inner_oof"] * len(inner) + ["holdout"] * len(hold)
    rows = ours.merge(scores[["path", *have]].astype({"path": str}), on="path", how="left")
    key = key_frame(manifest)
    meta = chosen["meta"]
    if probe is not None:
        clips = score_file.read(probe)
        check_rows(scores, clips, "probe")
        theirs = scores[scores["path"].isin(set(clips["path"]))]
        own = gate.bar_record(chosen["name"], rows[rows["split"] == "inner_oof"], key, theirs,
                              probe)["probe"]
    else:
        own = meta.get("probe")
    record = {"name": chosen["name"], "picked_by": {"field": field, "value": value},
              field: field_value(meta, field),
              "source": {"dir": str(Path(chosen["dir"]).resolve()),
                         "scores_csv": str(Path(chosen["scores_csv"]).resolve()),
                         "scores_sha256": sha256_file(Path(chosen["scores_csv"]))},
              "scores_csv": "scores.csv", **sets, "probe": own}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    score_file.write_csv(rows, out / "scores.csv")
    write_atomic(out / "meta.json", json.dumps(jsonable(record), indent=2) + "\n")
    return record


def summary(bars: list[dict]) -> str:
    """The bars side by side, one column each (the first gates)."""
    def fa(b):
        p = b.get("probe") or {}
        return "-" if p.get("false_alarm_rate") is None else f"{p['false_alarm_rate']:.4f}"

    rows = [("", *(f"bar {i + 1}" + (" (gates)" if i == 0 else " (beside)")
                   for i in range(len(bars)))),
            ("name", *(b["name"] for b in bars)),
            ("picked by", *(f"{b['picked_by']['field']}={b['picked_by']['value']}" for b in bars)),
            ("holdout rows", *(str(b["holdout"]["n"]) for b in bars)),
            ("holdout set sha256", *(b["holdout"]["set_sha256"][:12] for b in bars)),
            ("inner rows", *(str(b["inner"]["n"]) for b in bars)),
            ("probe false alarms", *(fa(b) for b in bars))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def _field_eq(text: str) -> tuple[str, str]:
    field, eq, value = text.partition("=")
    if not eq or not field or not value:
        raise argparse.ArgumentTypeError(f"{text!r}: FIELD=VALUE, e.g. train=asvspoof2019-la")
    return field, value


def main(argv: list[str] | None = None) -> int:
    doc = __doc__.split("\n\n")
    p = argparse.ArgumentParser(prog="hearsay bar", description=doc[0],
                                epilog="\n\n".join(doc[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="roots", nargs="+", type=Path, required=True,
                   help="candidate folders (or folders of them)")
    p.add_argument("--pick", type=_field_eq, required=True, help="FIELD=VALUE of meta.json")
    p.add_argument("--out", type=Path, required=True, help="the bar folder to write")
    p.add_argument("--pick2", type=_field_eq, help="FIELD=VALUE of a second bar (beside)")
    p.add_argument("--out2", type=Path, help="the second bar's folder")
    p.add_argument("--bundle", type=Path, required=True, help="our bundle (its manifest's rows)")
    p.add_argument("--probe", type=Path, help="our probe clips (CSV with path)")
    a = p.parse_args(argv)
    if (a.pick2 is None) != (a.out2 is None):
        p.error("--pick2 and --out2 go together")
    from hearsay.contracts.bundle import BundleError, load_bundle

    try:
        manifest = load_bundle(a.bundle).manifest
        if a.probe is not None and not a.probe.is_file():
            raise FileNotFoundError(f"--probe {a.probe}: no such file")
        jobs = [(a.pick, a.out)] + ([(a.pick2, a.out2)] if a.pick2 else [])
        made = [build(a.roots, *fv, manifest, out, a.probe) for fv, out in jobs]
    except (FileNotFoundError, BundleError) as err:
        print(f"hearsay bar: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BarRefused as err:
        print(f"hearsay bar: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except OSError as err:  # the bar folder could not be written
        print(f"hearsay bar: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(summary(made))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
