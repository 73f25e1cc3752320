"""`hearsay compare`: rank two or more recipes on their inner-fold runs (the ablation).

    hearsay compare --recipe core=models/abl-core/final_runs.json \\
                    --recipe core+extra=models/abl-extra/scores \\
                    --bundle BUNDLE [--json decision.json] [--markdown decision.md]

Each recipe is NAME=SOURCE, SOURCE one of:
  * a pin file (`*.json`, as `hearsay assemble` reads): the per-run files
    `<its folder>/scores/fold<k>_inner_oof.csv` of every pinned fold run, each checked against its
    sidecar (`.meta.json`: the pinned weights sha256, split inner_oof, fold k);
  * a folder: every `fold<k>_inner_oof.csv` in it or in its `scores/` (assemble's per-run files);
  * a score CSV of inner rows (path + logit/score; a `split` column must say inner_oof).
The labels come from `--key KEY.csv` (path,label) or `--bundle` (its manifest).

Rules: only inner-fold rows may choose a recipe (a holdout or test row is refused: the holdout
is never used for selection); every recipe must score exactly the same clips (else refused: a
ranking on different clips says nothing); a path scored twice within a recipe is refused.
The decision is the lowest pooled inner-fold minDCF at pi 0.3 (cost direction as stated, the
reading of record); pi 0.5 and both cost directions (hearsay.metrics.READINGS) are reported
beside, and a reading under which another recipe would be chosen is named in "flips". An exact
tie at the reading of record chooses none ("chosen": null).

Output: JSON (`--json`, default stdout) {"reading", "readings", "n_clips", "n_bonafide",
"n_spoof", "recipes": {name: {"source", "files", "min_dcf": {reading: value}, "eer", "auc"}},
"ranking", "chosen", "flips": [{"reading", "best"}]} and, with `--markdown`, a section for the
campaign report.

Exit codes: 0 decision written, 2 usage, 3 bad input (missing file or column, unlabelled path;
or a --json / --markdown that cannot be written), 4 refused (holdout/test rows, recipes on
different clips, a duplicate path, a per-run file that is not the pinned run's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hearsay import metrics
from hearsay.contracts import pin as pins
from hearsay.contracts import score_file
from hearsay.contracts.protocol import FOLD_KEYS, run_job
from hearsay.metrics import READING_OF_RECORD, READINGS, reading_name
from hearsay.util.files import jsonable

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_REFUSED = 0, 2, 3, 4  # module docstring
RECORD = reading_name(*READING_OF_RECORD)


class CompareError(Exception):
    """Bad input (exit 3)."""


class CompareRefused(CompareError):
    """The comparison would break the protocol (exit 4)."""


def read_csv(path: Path):
    """A score CSV or the key CSV, read as score files are (hearsay.contracts.score_file.read)."""
    if not Path(path).is_file():
        raise CompareError(f"{path}: not found")
    return score_file.read(path)


def is_inner_file(name: str) -> bool:
    """fold<k>_inner_oof.csv: a fold run's per-run file of its inner rows."""
    f = score_file.parse_name(name)
    return f is not None and f.key in FOLD_KEYS and f.split == "inner_oof" and f.aug is False


def _pin_files(pin_file: Path) -> list[Path]:
    try:
        pin = pins.read(pin_file, strict=False)  # a campaign's or an ablation recipe's pin
    except pins.PinError as err:
        raise CompareError(str(err)) from None
    files = []
    for key, run in sorted((pin.get("runs") or {}).items()):
        if key not in FOLD_KEYS:
            continue
        csv = score_file.per_run_dir(pin_file.parent) / score_file.file_name(key, "inner_oof")
        if not score_file.sidecar(csv).is_file():
            raise CompareRefused(f"{csv}: no sidecar (score the pinned run with hearsay assemble)")
        have, fold = score_file.read_sidecar(csv), str(run_job(key)[1])
        if (have.get("weights_sha256") != run.get("weights_sha256")
                or have.get("split") != "inner_oof" or str(have.get("fold")) != fold):
            raise CompareRefused(f"{csv}: its sidecar names weights {have.get('weights_sha256')}"
                                 f", split {have.get('split')}, fold {have.get('fold')}; the pin "
                                 f"names {run.get('weights_sha256')} for {key}")
        files.append(csv)
    if not files:
        raise CompareError(f"{pin_file}: pins no fold run")
    return files


def recipe_files(source: Path) -> list[Path]:
    """The score CSVs of one recipe's inner-fold runs (see the module docstring)."""
    source = Path(source)
    if source.is_file() and source.suffix == ".json":
        return _pin_files(source)
    if source.is_file():
        return [source]
    for folder in (source, source / "scores"):
        found = sorted(p for p in folder.glob("*.csv") if is_inner_file(p.name))
        if found:
            return found
    raise CompareError(f"{source}: no pin file, score CSV or fold<k>_inner_oof.csv files")


def recipe_scores(name: str, files: list[Path]):
    import pandas as pd

    df = pd.concat([read_csv(f) for f in files], ignore_index=True)
    if "path" not in df.columns:
        raise CompareError(f"{name}: score files lack a `path` column")
    if "split" in df.columns:
        other = df[df["split"].astype(str) != "inner_oof"]
        if len(other):
            raise CompareRefused(f"{name}: {len(other)} row(s) of split "
                                 f"{sorted(set(other['split'].astype(str)))}: only inner-fold "
                                 "rows choose a recipe (the holdout is never used for selection)")
    dup = df["path"][df["path"].duplicated()]
    if len(dup):
        raise CompareRefused(f"{name}: {len(dup)} path(s) scored twice, e.g. {dup.iloc[0]!r}")
    return df


def compare(recipes: dict, key) -> dict:
    """{name: scores frame} -> the decision document (see the module docstring)."""
    if len(recipes) < 2:
        raise CompareError("compare needs at least two recipes")
    names = list(recipes)
    base = set(recipes[names[0]]["path"])
    for n in names[1:]:
        diff = base ^ set(recipes[n]["path"])
        if diff:
            raise CompareRefused(f"{names[0]} and {n} score different clips ({len(diff)} not in "
                                 f"both, e.g. {sorted(diff)[0]!r}): rank recipes on the same "
                                 "inner folds")
    out: dict = {"reading": RECORD, "readings": [reading_name(*r) for r in READINGS],
                 "recipes": {}}
    for n, frame in recipes.items():
        try:
            j = metrics.join(frame, key)
        except metrics.MetricsError as err:
            raise CompareError(f"{n}: {err}") from None
        rank, y = j["rank"].to_numpy(), j["is_spoof"].to_numpy()
        full = metrics.compute(rank, y)
        out["recipes"][n] = {
            "min_dcf": {reading_name(*r): metrics.min_dcf_reading(rank, y, *r)[0]
                        for r in READINGS},
            "eer": full["eer"], "auc": full["auc"]}
        out["n_clips"], out["n_bonafide"], out["n_spoof"] = len(j), int((~y).sum()), int(y.sum())
    if any(v is None for r in out["recipes"].values() for v in r["min_dcf"].values()):
        raise CompareError("minDCF undefined: the inner rows hold one class only")

    def best(reading):
        vals = {n: r["min_dcf"][reading] for n, r in out["recipes"].items()}
        low = min(vals.values())
        winners = [n for n, v in vals.items() if v == low]
        return winners[0] if len(winners) == 1 else None

    out["ranking"] = sorted(names, key=lambda n: (out["recipes"][n]["min_dcf"][RECORD], n))
    out["chosen"] = best(RECORD)
    out["flips"] = [{"reading": r, "best": best(r)} for r in out["readings"][1:]
                    if best(r) != out["chosen"]]
    return out


def markdown(d: dict) -> str:
    lines = [f"## Recipe comparison: **{d['chosen'] or 'tie: none chosen'}**", "",
             f"Pooled inner-fold scores of {d['n_clips']} clips ({d['n_bonafide']} bona fide + "
             f"{d['n_spoof']} synthetic), the same clips for every recipe; chosen on minDCF at "
             f"{d['reading']} (lower is better). Ranking: {', '.join(d['ranking'])}.", "",
             "| recipe | " + " | ".join(f"minDCF {r}" for r in d["readings"]) + " | EER | AUC |",
             "|---|" + "---|" * (len(d["readings"]) + 2)]
    for n, r in d["recipes"].items():
        lines.append(f"| {n} | " + " | ".join(f"{r['min_dcf'][x]:.4f}" for x in d["readings"])
                     + f" | {r['eer']:.4f} | {r['auc']:.4f} |")
    lines.append("")
    if d["flips"]:
        lines.append("**The decision flips** under: " + "; ".join(
            f"{f['reading']} (best: {f['best'] or 'a tie'})" for f in d["flips"]) + ".")
    else:
        lines.append("The same recipe is best under every reading.")
    return "\n".join(lines) + "\n"


DECISION_KEYS = {"reading", "readings", "recipes", "ranking", "chosen", "flips"}


def load_decision(path: Path) -> dict:
    """A decision JSON this command wrote (what `hearsay assemble --ablation` records);
    ValueError naming the fix when it is not one."""
    d = json.loads(Path(path).read_text())
    missing = sorted(DECISION_KEYS - set(d)) if isinstance(d, dict) else sorted(DECISION_KEYS)
    if missing:
        raise ValueError(f"{path}: not a hearsay compare decision (no {missing}): write it with "
                         "hearsay compare --json")
    return d


def parse_recipe(text: str) -> tuple[str, Path]:
    name, sep, source = text.partition("=")
    if not sep or not name or not source:
        raise argparse.ArgumentTypeError(f"{text!r}: want NAME=SOURCE")
    return name, Path(source)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", type=parse_recipe, action="append", required=True,
                    metavar="NAME=SOURCE", help="a recipe's pin file, scores folder or CSV")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--key", type=Path, help="key CSV: path,label")
    where.add_argument("--bundle", type=Path, help="the bundle the runs trained on (labels)")
    ap.add_argument("--json", type=Path, default=None, help="decision JSON (default: stdout)")
    ap.add_argument("--markdown", type=Path, default=None, help="decision as a report section")
    args = ap.parse_args(argv)
    names = [n for n, _ in args.recipe]
    if len(set(names)) != len(names) or len(names) < 2:
        ap.error("give two or more --recipe NAME=SOURCE with distinct names")
    try:
        if args.bundle is not None:
            from hearsay.evaluate.report import key_frame
            from hearsay.evaluate.score import load_bundle

            key = key_frame(load_bundle(args.bundle).manifest)
        else:
            key = read_csv(args.key)
        frames, files = {}, {}
        for name, source in args.recipe:
            files[name] = recipe_files(source)
            frames[name] = recipe_scores(name, files[name])
        d = compare(frames, key)
    except CompareRefused as err:
        print(f"hearsay compare: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except (CompareError, metrics.MetricsError, OSError, ValueError) as err:
        print(f"hearsay compare: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for name, source in args.recipe:
        d["recipes"][name].update(source=str(source), files=[str(f) for f in files[name]])
    text = json.dumps(jsonable(d), indent=2, allow_nan=False) + "\n"
    try:
        if args.json is None:
            sys.stdout.write(text)
        else:
            args.json.write_text(text)
        if args.markdown is not None:
            args.markdown.write_text(markdown(d))
    except BrokenPipeError:
        raise  # stdout closed by its reader: hearsay.cli ends quietly
    except OSError as err:
        print(f"hearsay compare: cannot write the decision: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"hearsay compare: chosen {d['chosen']} on {RECORD}"
          + (f"; flips under {', '.join(f['reading'] for f in d['flips'])}" if d["flips"] else ""),
          file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
