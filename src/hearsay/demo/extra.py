"""The demo's extra-corpus decision, made before the finals train (stage `extra` of `hearsay
demo`): the corpus probe, two fold-0 recipes, the drop rule read from their runs, the decision
file the finals' recipe cites.

    = hearsay corpus-probe corpus/manifest.csv --corpus train_scope=extra \\
          --against train_scope=core --label spoof --config corpus_probe.json --json probe.json
    + hearsay train --fold 0 (core only / core + extra), hearsay score (inner fold 0, probe)
    + hearsay corpus-probe --drop-rule --without ... --with ... --probe-result probe.json \\
          --decision models/demo/corpus_decision.json

The demo corpus's extra corpus is its train_scope extra rows (8 synthetic clips of voc-x /
smear-x, 4 bona fide of the audiobook source); its peer the core synthetic clips. The probe set is
the probe fold's bona fide clips, scored by each recipe's fold-0 model as its box would. Everything
lands under demo_out/extra/.
"""

from __future__ import annotations

import json
from pathlib import Path

# The demo's probe thresholds: the defaults, but 8 clips a side is enough (the demo corpus has 8
# extra synthetic clips; a real corpus has thousands and keeps the default 10).
DEMO_PROBE_CONFIG = {"min_per_side": 8}
RECIPES = {"core_only": {"rules": [{"action": "keep", "train_scope": ["core"]}]},
           "core_extra": {"rules": []}}


def _train(job: str, fold: int | None, preset: dict, bundle: Path, run_dir: Path) -> dict:
    """One demo training run in a worker process: its run_meta.json as a dict."""
    from hearsay import train
    from hearsay.train import config as train_config

    return train.run(train_config.resolve_config(job, fold, cpu_smoke=True, overrides=preset),
                     bundle, run_dir)


def stage_extra(out: Path, ctx: dict, preset: dict | None = None,
                probe_config: dict | None = None) -> None:
    """Probe, two fold-0 runs, drop rule, decision; ctx["corpus_decision"] (path) and
    ctx["corpus_decision_sha"] (what the finals' recipe cites). `preset` replaces the demo's
    training preset and `probe_config` DEMO_PROBE_CONFIG (tests)."""
    import shutil
    from concurrent.futures import ProcessPoolExecutor
    from dataclasses import asdict
    from multiprocessing import get_context

    from hearsay.contracts import score_file
    from hearsay.contracts.bundle import load_bundle
    from hearsay.evaluate import corpus_decision as cd
    from hearsay.evaluate import corpus_probe as cp
    from hearsay.evaluate import probe_set
    from hearsay.evaluate import score as scoring
    from hearsay.evaluate.report import key_frame
    from hearsay.sound.augment import AugmentConfig
    from hearsay.train import config as train_config
    from hearsay.util.files import jsonable

    root = out / "extra"
    root.mkdir(parents=True, exist_ok=True)
    preset = train_config.demo_overrides() if preset is None else preset
    (root / "corpus_probe.json").write_text(json.dumps(probe_config or DEMO_PROBE_CONFIG) + "\n")
    cfg = cp.load_config(root / "corpus_probe.json")
    probe = cp.probe_manifest(ctx["corpus"], "train_scope=extra", "spoof", cfg,
                              against="train_scope=core",
                              aug=AugmentConfig.from_dict(preset.get("augment") or {}))
    (root / "probe.json").write_text(json.dumps(jsonable(probe), indent=2) + "\n")
    landed = {s: round(r["share"], 2) for s, r in probe["landing"].items()}
    print(f"[demo] extra: probe extra vs core synthetic: AUC {probe['auc']:.3f} (separable "
          f"{probe['separable']}); bona fide share on its side per source {landed}")
    runs = {name: root / name / "fold0" for name in RECIPES}
    for d in runs.values():
        shutil.rmtree(d, ignore_errors=True)
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        futures = {n: pool.submit(_train, "fold", 0, {**preset, "selection": RECIPES[n]},
                                  ctx["bundle"], runs[n]) for n in RECIPES}
        for n, f in futures.items():
            print(f"[demo] extra: {n} fold 0: {f.result()['train_rows']} training rows")
    bundle = load_bundle(ctx["bundle"])
    sc = scoring.ScoreConfig(device="cpu")
    readings = {}
    for n, run in runs.items():  # the files a fold-0 box leaves: its inner fold and the probe
        df, side = scoring.score_split(bundle, run, "inner_oof", 0, sc)
        score_file.write(df, side, root / n / score_file.file_name("fold0", "inner_oof"))
        df, side = probe_set.score(bundle, run, sc)
        score_file.write(df, side, root / n / probe_set.file_name("fold0"))
        readings[n] = cd.recipe_probe(root / n, None, key_frame(bundle.manifest))
    drop = cd.drop_from_runs(readings["core_only"], readings["core_extra"], cfg.drop_rise)
    decision = cd.decide(probe, drop, asdict(cfg))
    path = out / "models" / "demo" / "corpus_decision.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    ctx["corpus_decision_sha"] = cd.write(path, decision)
    ctx["corpus_decision"] = path
    print(f"[demo] extra: probe false alarms {drop['fa_without']:.3f} without, "
          f"{drop['fa_with']:.3f} with ({drop['delta_points']:+.1f} points); decision "
          f"{decision['decision']}: {decision['why']}")
