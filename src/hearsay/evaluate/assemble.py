"""`hearsay assemble`: the pinned fold + full runs -> one score file, meta.json and the report.

    hearsay assemble --pinned models/<stamp>/final_runs.json --bundle BUNDLE \\
        [--bar BAR_DIR [--bar2 BAR_DIR]] [--probe PROBE.csv] [--ledger docs/ledger.csv] \\
        [--ablation decision.json] [--corpus-decision corpus_decision.json] \\
        [--runner-log RUNNER_STATE/runner.log] [--cap-usd USD] \\
        [--outputs outputs] [--reports docs/reports]

Runs are taken ONLY from the pin file; nothing is ever chosen by modification time, name order or
"latest". The pin file (hearsay.contracts.pin, read strictly: unknown keys are errors; relative
paths are relative to its folder; fold0..fold<n-1> with n the bundle's fold file's n_folds):

    {"name": "<stamp>",                      # -> outputs/detector_scores/<name>.csv
     "bundle_tree_sha": "<sha>",             # every run and the bundle must carry this
     "min_steps": 2000,                      # training budget: a shorter run is refused
     "parity": null | {"waived": "<why>"} |
               {"file": "export/parity.json", "require": ["parity_a", "parity_b"], ...},
     "runs": {"fold0": {"dir": "...", "config_hash": "...", "weights_sha256": "..."},
              ... "fold4": {...},
              "full":  {"dir": "...", "config_hash": "...", "weights_sha256": "..."}}}

Each run is validated: run_meta.json job/fold match its key, complete, config hash, bundle
tree-sha, steps >= min_steps, sha256 of final/model.safetensors = the pinned one. Then each fold
model scores its own inner fold, the full model holdout, test, the augmented holdout and the
holdout readouts (hearsay.evaluate.readouts: every codec on the same clean rows, fixed-seed
test-length crops, whole clips up to 14 s), and every run the probe fold. Per-run files go under
models/<stamp>/scores/, where runner/collect.sh puts the files each box scored after training
(`hearsay score-run`, GPU bf16); a file is reused only when its sidecar names the pinned weights
sha256, this bundle, the split, fold and settings (device and precision are recorded, not
compared: parity B bounds that gap). What is missing or refused is scored here, each file named
with why; --rescore scores all here. meta.json "rescored_here" = rows scored on this machine (0
when every box scored its own). The assembled file (inner_oof, holdout, test rows) is written,
read back from disk, and checked:

  F1 row counts per split equal the manifest's core rows
  F2 every inner row is scored once, by the fold model that did not train on it
  F3 every path appears once
  F4 test rows are in manifest order
  F5 scores are finite, in [0, 1] and equal sigmoid(logit)
  F6 the export parity record is present, passed (parity_a and parity_b) and of the pinned full
     weights, when the pin requires one (collect's default: export and parity run BEFORE
     assemble); a pin whose parity says {"waived": ...} (collect --no-parity) records the waiver

Then models/<stamp>/meta.json and <reports>/<stamp>.md (+ PNG plots) are written (report).

The gate (hearsay.evaluate.gate): --bar DIR names the earlier detector to beat: DIR is its
campaign's models/<stamp>/ (meta.json + the score CSV meta.json names), or a folder with scores.csv
and a meta.json holding its own probe record. A pass needs ours below the bar's minDCF (pi 0.3) on
the holdout AND on the pooled out-of-fold clips, judged apart; the probe (bona fide clips only,
e.g. In-the-Wild: by default the full run's full_probe.csv, the probe fold scored on its box:
hearsay.evaluate.probe_set; --probe FILE for another, path + logit/score): our false-alarm rate at
our out-of-fold threshold no worse than the bar's own rate from its meta.json (same probe clips, by
set_sha256); and no stream shortcut AUC of a pinned run at 0.85 or beyond. --bar2 DIR is judged
the same way and reported beside, never gating. Every decision is read at pi 0.3 and 0.5 in both
cost directions, and a reading that flips it is named. This campaign's own probe record goes into
its meta.json, so its models/<stamp>/ can be the next campaign's --bar.

--ablation FILE: the ablation's decision (`hearsay compare --json`) goes into meta.json
"ablation" and the report's recipe-comparison section, as the record of why this recipe.
--corpus-decision FILE: the extra corpus's decision (`hearsay corpus-probe --drop-rule ...
--decision FILE`) is judged in the gate against the sha256 the pinned runs' recipes cite
(hearsay.evaluate.corpus_decision.gate_check); without it, runs that cite one make the gate "not
measured".

Exit codes: 0 assembled (a failed gate is a valid, recorded outcome: see meta.json "gate"),
2 usage (also a --device this machine lacks), 3 bad input (missing bundle/run/file), 4 the pin
file or a pinned run was refused, 5 a check F1-F6 failed on the written files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from hearsay.contracts import ledger as ledgers
from hearsay.contracts import pin as pins
from hearsay.contracts import run_dir, score_file
from hearsay.contracts.protocol import EXPORTED, run_keys, split_rows
from hearsay.evaluate import probe_set, score_run
from hearsay.evaluate import score as scoring

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_REFUSED, EXIT_CHECK = 0, 2, 3, 4, 5  # module docstring

SCORE_TOL = 1e-6  # |score - sigmoid(logit)| allowed in the written CSV (it keeps 9 digits)


class AssembleError(Exception):
    """Bad input (exit 3)."""


class PinError(AssembleError):
    """The pin file or a pinned run is refused (exit 4)."""


class CheckFailed(AssembleError):
    """One of F1-F6 failed on the written files (exit 5); the message starts with its name."""

    def __init__(self, check: str, msg: str):
        super().__init__(f"{check}: {msg}")


# --------------------------------------------------------------------------- pin file


def load_pin(path: Path) -> dict:
    """The pin file read strictly (hearsay.contracts.pin.read); run dirs resolved."""
    try:
        return pins.read(path, strict=True)
    except FileNotFoundError as err:
        raise AssembleError(str(err)) from None
    except pins.PinError as err:
        raise PinError(str(err)) from None


def validate_run(key: str, spec: dict, pin: dict) -> dict:
    """The run's run_meta.json after every pinned identity has been checked."""
    from hearsay.util.hashing import sha256_file

    run = Path(spec["dir"])
    meta_file = run_dir.meta_path(run)
    if not meta_file.is_file():
        raise PinError(f"{key}: {meta_file} missing (pin a completed hearsay train run)")
    meta = run_dir.read_meta(run)
    problems = run_dir.identity_problems(meta, key, None)
    if not run_dir.meta_says_complete(meta):
        problems.append("not complete")
    if meta.get("config_hash") != spec["config_hash"]:
        problems.append(f"config_hash {meta.get('config_hash')!r} (pinned {spec['config_hash']!r})")
    if meta.get("bundle_tree_sha") != pin["bundle_tree_sha"]:
        problems.append(f"bundle_tree_sha {meta.get('bundle_tree_sha')!r} "
                        f"(pinned {pin['bundle_tree_sha']!r})")
    if not isinstance(meta.get("steps"), int) or meta["steps"] < int(pin["min_steps"]):
        problems.append(f"steps {meta.get('steps')!r} < min_steps {pin['min_steps']}")
    weights = run_dir.weights(run)
    got = sha256_file(weights) if weights.is_file() else "missing"
    if got != spec["weights_sha256"]:
        problems.append(f"{weights.relative_to(run)} sha256 {got} "
                        f"(pinned {spec['weights_sha256']})")
    if problems:
        raise PinError(f"{key} ({run}): " + "; ".join(problems))
    return meta


# --------------------------------------------------------------------------- per-run scores


jobs_of = score_run.jobs_of  # (split, fold, augmented) each pinned run scores


def run_scores(bundle, pin: dict, key: str, cfg: scoring.ScoreConfig, force: bool = False,
               scored: list | None = None) -> dict:
    """{(split, augmented): csv path} for one pinned run: each file under models/<stamp>/scores/
    reused when its sidecar (from a box's `hearsay score-run` or an earlier assemble) names the
    pinned weights, this bundle, the split, fold and settings; else scored here, said on stderr
    and appended to `scored` as (file, why, rows)."""
    files, here = score_run.ensure_scores(
        bundle, pin["runs"][key]["dir"], key, pin["runs"][key]["weights_sha256"],
        score_file.per_run_dir(pin["stamp_dir"]), cfg, force,
        say=lambda m: print(f"hearsay assemble: {key}: {m}", file=sys.stderr))
    if scored is not None:
        scored.extend(here)
    return files


def core_rows(manifest, split: str):
    return split_rows(manifest, split)


def assemble_frame(manifest, files: dict):
    """inner_oof (manifest order) + holdout + test rows from the per-run files."""
    import pandas as pd

    inner = pd.concat([score_file.read(files[key][("inner_oof", False)])
                       for key in files if key != "full"])
    order = {p: i for i, p in enumerate(core_rows(manifest, "inner_oof")["path"])}
    inner = inner.assign(_o=inner["path"].map(order)).sort_values("_o", kind="stable")
    parts = [inner.drop(columns="_o")]
    for split in ("holdout", "test"):
        parts.append(score_file.read(files["full"][(split, False)]))
    return pd.concat(parts, ignore_index=True)[score_file.COLUMNS]


# --------------------------------------------------------------------------- F1-F6


def check_f1_counts(df, manifest) -> None:
    for split in EXPORTED:
        want, got = len(core_rows(manifest, split)), int((df["split"] == split).sum())
        if want != got:
            raise CheckFailed("F1", f"{split}: {got} rows written, manifest has {want} core rows")
    if len(df) != sum(len(core_rows(manifest, s)) for s in EXPORTED):
        raise CheckFailed("F1", f"{len(df)} rows written: rows of no known split present")


def check_f2_inner_provenance(df, manifest, files: dict, metas: dict) -> None:
    """Each inner row: its fold is the manifest's, and exactly one fold-model file scored it,
    that of the model whose fold is the row's fold, with the same score."""
    inner = df[df["split"] == "inner_oof"]
    fold_of = dict(zip(manifest["path"].astype(str), manifest["fold"].astype(str), strict=True))
    bad = [p for p, f in zip(inner["path"], inner["fold"], strict=True) if fold_of.get(p) != str(f)]
    if bad:
        raise CheckFailed("F2", f"{len(bad)} inner row(s) carry a fold other than the "
                          f"manifest's, e.g. {bad[0]!r}")
    seen: dict[str, list] = {}
    for key in (k for k in files if k != "full"):
        per = score_file.read(files[key][("inner_oof", False)])
        for p, logit in zip(per["path"], per["logit"], strict=True):
            seen.setdefault(p, []).append((metas[key]["fold"], logit))
    for p, f, logit in zip(inner["path"], inner["fold"], inner["logit"], strict=True):
        by = seen.get(p, [])
        if len(by) != 1:
            raise CheckFailed("F2", f"{p!r} scored by {len(by)} fold models (want exactly 1)")
        if str(by[0][0]) != str(f):
            raise CheckFailed("F2", f"{p!r} (fold {f}) scored by the fold-{by[0][0]} model, "
                              "which trained on it")
        if not np.isclose(by[0][1], logit, rtol=0, atol=1e-6):
            raise CheckFailed("F2", f"{p!r}: written logit {logit} is not the fold model's "
                              f"{by[0][1]}")


def check_f3_unique(df) -> None:
    dup = df["path"][df["path"].duplicated()]
    if len(dup):
        raise CheckFailed("F3", f"{len(dup)} duplicate path(s), e.g. {dup.iloc[0]!r}")


def check_f4_test_order(df, manifest) -> None:
    got = list(df.loc[df["split"] == "test", "path"])
    want = list(core_rows(manifest, "test")["path"].astype(str))
    if got != want:
        i = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                 min(len(got), len(want)))
        raise CheckFailed("F4", f"test rows leave manifest order at row {i}")


def check_f5_scores(df) -> None:
    from hearsay.detector.logits import sigmoid

    s, lg = df["score"].to_numpy(float), df["logit"].to_numpy(float)
    if not (np.isfinite(s).all() and np.isfinite(lg).all()):
        raise CheckFailed("F5", f"{int((~np.isfinite(s) | ~np.isfinite(lg)).sum())} non-finite "
                          "score/logit value(s)")
    if len(s) and (s.min() < 0 or s.max() > 1):
        raise CheckFailed("F5", f"scores outside [0, 1]: min {s.min()}, max {s.max()}")
    worst = float(np.max(np.abs(sigmoid(lg) - s))) if len(s) else 0.0
    if worst > SCORE_TOL:
        raise CheckFailed("F5", f"score differs from sigmoid(logit) by up to {worst:.3g}")


def check_f6_parity(pin: dict) -> dict | None:
    """The parity record when the pin requires one (None when it does not)."""
    spec = pin["parity"]
    if spec is None:
        return None
    if spec.get("waived"):  # the operator's explicit choice at collect (--no-parity), recorded
        return {"waived": spec["waived"]}
    path = Path(spec["file"])
    if not path.is_file():
        raise CheckFailed("F6", f"parity record {path} missing (run hearsay export / parity)")
    record = json.loads(path.read_text())
    # parity A (the export is correct) always; "require" adds parts (collect's: parity_b)
    for part in ["parity_a", *[p for p in spec.get("require") or [] if p != "parity_a"]]:
        got = record.get(part)
        if not isinstance(got, dict) or got.get("passed") is not True:
            raise CheckFailed("F6", f"{path}: {part} absent or not passed")
    want = pin["runs"]["full"]["weights_sha256"]
    if record.get("checkpoint_sha256") not in (None, want):
        raise CheckFailed("F6", f"{path} is the export of checkpoint {record['checkpoint_sha256']}"
                          f", not the pinned full run's {want} (export runs/full again)")
    return record


def check_written(out_csv: Path, manifest, files: dict, metas: dict, pin: dict):
    """Read the written score file back and run F1-F6 on it; returns (frame, parity record)."""
    df = score_file.read(out_csv)
    check_f1_counts(df, manifest)
    check_f2_inner_provenance(df, manifest, files, metas)
    check_f3_unique(df)
    check_f4_test_order(df, manifest)
    check_f5_scores(df)
    return df, check_f6_parity(pin)


# --------------------------------------------------------------------------- the whole job


def assemble(pin_path: Path, bundle, outputs: Path, cfg: scoring.ScoreConfig | None = None,
             rescore: bool = False) -> dict:
    """Validate, score, write and check. Returns what the report needs (paths, frames, metas)."""
    cfg = cfg or scoring.ScoreConfig()
    pin = load_pin(pin_path)
    if bundle.tree_sha != pin["bundle_tree_sha"]:
        raise PinError(f"bundle tree-sha {bundle.tree_sha} differs from the pinned "
                       f"{pin['bundle_tree_sha']} (assemble with the bundle the runs used)")
    keys = run_keys(bundle.n_folds)  # the fold file's n_folds, as the bundle recorded it
    if set(pin["runs"]) != set(keys):
        raise PinError(f"the pin's runs {sorted(pin['runs'])} are not this bundle's "
                       f"{list(keys)} (its fold file has n_folds {bundle.n_folds})")
    metas = {key: validate_run(key, pin["runs"][key], pin) for key in keys}
    scored: list = []
    files = {key: run_scores(bundle, pin, key, cfg, rescore, scored) for key in keys}
    n_files = sum(len(jobs_of(k)) for k in keys)
    scoring_record = {"rescored_here": sum(n for *_, n in scored),  # rows scored on this machine
                      "files_scored_here": {f: why for f, why, _ in scored},
                      "files_reused": n_files - len(scored), "device": cfg.device,
                      "reuse_rule": score_file.REUSE_RULE}
    out_csv = score_file.assembled_path(outputs, pin["name"])
    frame = assemble_frame(bundle.manifest, files)
    scoring.no_extra_rows(frame, bundle.manifest)
    score_file.write_csv(frame, out_csv)
    df, parity = check_written(out_csv, bundle.manifest, files, metas, pin)
    return {"pin": pin, "metas": metas, "files": files, "scores_csv": out_csv, "scores": df,
            "parity": parity, "score_config": cfg, "scoring": scoring_record}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay assemble", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pinned", type=Path, required=True,
                    help=f"the pin file, models/<stamp>/{pins.FINAL}")
    ap.add_argument("--bundle", type=Path, required=True, help="the bundle the runs trained on")
    ap.add_argument("--bar", type=Path, default=None, metavar="DIR",
                    help="folder of the detector to beat (its meta.json + score CSV): the gate")
    ap.add_argument("--bar2", type=Path, default=None, metavar="DIR",
                    help="a second bar, judged the same way and reported beside (not gating)")
    ap.add_argument("--probe", type=Path, default=None,
                    help="bona fide probe scores (path + logit/score), read at the OOF minDCF "
                         "threshold and held against the bar's own rate (default: the full "
                         "run's scores/full_probe.csv, scored on its box)")
    ap.add_argument("--ledger", type=Path, default=Path("docs") / ledgers.FILE,
                    help="expense ledger for the spend line (absent: spend 'unknown')")
    ap.add_argument("--runner-log", type=Path, default=None, metavar="RUNNER_LOG",
                    help="RUNNER_STATE/runner.log: reaper reasons, refusals, sweeps (G2, G3, G5)")
    ap.add_argument("--cap-usd", type=float, default=None, metavar="USD",
                    help="the campaign's spending cap, held against the ledger's spend (G3; "
                         "without it: not measured)")
    ap.add_argument("--outputs", type=Path, default=Path("outputs"),
                    help="folder receiving detector_scores/<name>.csv")
    ap.add_argument("--reports", type=Path, default=Path("docs/reports"),
                    help="folder receiving <stamp>.md and <stamp>/ plots")
    ap.add_argument("--ablation", type=Path, default=None, metavar="DECISION_JSON",
                    help="the ablation's decision (hearsay compare --json): into meta + report")
    ap.add_argument("--corpus-decision", type=Path, default=None, metavar="FILE",
                    help="the extra corpus's decision file (hearsay corpus-probe --decision): "
                    "judged in the gate against what the runs cite")
    ap.add_argument("--fa-rate", type=float, default=0.01, metavar="RATE",
                    help="false-alarm rate of the third out-of-fold threshold in meta.json "
                    "\"decision\" (beside minDCF and EER), shipped by `hearsay export --meta`")
    ap.add_argument("--device", default="cpu", help="torch device for what is scored here")
    ap.add_argument("--rescore", action="store_true",
                    help="score every per-run file here, reusing none (the boxes' included)")
    ap.add_argument("--no-verify-bundle", action="store_true",
                    help="skip re-hashing the bundle tree (default: verify it matches its sha)")
    args = ap.parse_args(argv)
    if args.bar2 is not None and args.bar is None:
        ap.error("--bar2 needs --bar (the first bar is the one that gates)")
    bars = [b for b in (args.bar, args.bar2) if b is not None]
    if not 0 <= args.fa_rate < 1:
        ap.error("--fa-rate must lie in [0, 1)")
    if (why := scoring.device_problem(args.device)) is not None:
        print(f"hearsay assemble: {why}", file=sys.stderr)
        return EXIT_USAGE
    from hearsay.evaluate import compare, corpus_decision, report

    try:
        ablation = None if args.ablation is None else compare.load_decision(args.ablation)
        bundle = scoring.load_bundle(args.bundle, verify=not args.no_verify_bundle)
        done = assemble(args.pinned, bundle, args.outputs,
                        scoring.ScoreConfig(device=args.device), rescore=args.rescore)
        extra = corpus_decision.gate_check(args.corpus_decision, done["metas"])
        probe = args.probe or done["files"]["full"].get((probe_set.SPLIT, False))
        meta = report.write_all(done, bundle, bars=bars, probe=probe, ledger=args.ledger,
                                reports=args.reports, ablation=ablation,
                                ablation_md=ablation and compare.markdown(ablation),
                                fa_rate=args.fa_rate, extra_corpus=extra,
                                runner_log=args.runner_log, cap_usd=args.cap_usd)
    except CheckFailed as err:
        print(f"hearsay assemble: check failed: {err}", file=sys.stderr)
        return EXIT_CHECK
    except (PinError, scoring.ScoreRefused) as err:
        print(f"hearsay assemble: refused: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except (AssembleError, scoring.ScoreError, report.metrics.MetricsError, OSError,
            ValueError) as err:
        print(f"hearsay assemble: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sc = done["scoring"]
    print(f"hearsay assemble: rescored_here {sc['rescored_here']} rows in "
          f"{len(sc['files_scored_here'])} file(s); {sc['files_reused']} file(s) reused")
    print(f"hearsay assemble: {done['scores_csv']} ({len(done['scores'])} rows, F1-F6 passed); "
          f"gate: {meta['gate']['outcome']}; report {meta['report']}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
