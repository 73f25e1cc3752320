"""The artefact floor: one module per artefact that crosses a stage boundary (docs/INTERFACES.md),
each the only code that spells, reads, writes and judges its files.

    manifest     the input manifest (manifest.csv)
    folds        the fold files (splits/*.folds.json) and the leak rules
    protocol     which run trains on, validates on and scores which folds
    run_dir      a training run's directory (config.json, run_meta.json, checkpoints/, final/)
    score_file   the score CSVs and their sidecars
    model_dir    the exported model folder hearsay-score reads
    parity_b     the box's parity B logits (full_parity_logits.json)

Stages (bundle, train, evaluate, export, deploy, publish) import these, never each other.
"""
