"""The artefact floor: one module per artefact that crosses a stage boundary (docs/INTERFACES.md),
each the only code that spells, reads, writes and judges its files.

    manifest     the input manifest (manifest.csv)
    folds        the fold files (splits/*.folds.json), the leak rule, what a model trains on
    protocol     which run trains on, validates on and scores which folds; the campaign's run keys
    bundle       the bundle folder (bundle_meta.json, selection.json, the tree-sha, load_bundle)
    run_dir      a training run's directory (config.json, run_meta.json, checkpoints/, final/),
                 whether it is complete and which run it is (`hearsay run check`)
    score_file   the score CSVs and their sidecars
    pin          the pin files (final_runs.json, ablation_runs.json; `hearsay pin`)
    model_dir    the exported model folder hearsay-score reads
    parity_b     the box's parity B logits (full_parity_logits.json)
    ledger       the rental ledger (docs/ledger.csv; `hearsay ledger sum`)
    status       a job's STATUS line in the store (written and read by the runner's bash)

Stages (bundle, train, evaluate, export, deploy, publish) import these, never each other.
"""
