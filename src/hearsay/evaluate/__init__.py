"""The evaluation stage: from trained runs to the campaign's decision.

    score, score_run     a run scores bundle splits (on the laptop or on its box)
    readouts             the per-epoch validation readouts a run records
    pilot                the pilot's readouts -> the finals' epoch count
    compare              recipes ranked on their inner-fold runs (the ablation)
    bar                  an earlier detector's scores -> the gate's bar folder
    corpus_probe         is a corpus separable from its peers (or a named one) on trivial features
    corpus_decision      the drop rule read from two recipes' runs; keep / cap share / drop
    assemble             pinned runs -> the campaign's score file, meta.json and report
    gate                 the campaign gate (holdout, out-of-fold, probe, shortcuts, extra corpus)
    report*              the markdown + PNG report and its statistics
    metrics_cli          `hearsay metrics` on a score CSV
"""
