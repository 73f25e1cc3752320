"""The probe set: bona fide clips from outside the training domain (e.g. In-the-Wild's), scored by
the full model where it trained, with the out-of-fold scores' own front end, for the gate's
false-alarm check.

    df, side = probe_set.score(bundle, FULL_RUN, cfg)     # hearsay score-run (the full box)
    frame = probe_set.read(csv)                          # the gate's probe, checked
    hearsay score-run --run RUN --bundle BUNDLE --out RUN/scores   # writes full_test_probe.csv

Which clips: every core row of the bundle's `test` split whose label is bonafide. Put the probe
corpus's bona fide rows in fold `test` of the manifest (`hearsay manifest-import in-the-wild ...`,
its bona fide rows with the fold cell "test"; `hearsay splits make` keeps a pre-filled test
fold): they reach the box in the bundle, under its tree-sha, and never train a model. The full
job scores them after training (runner/box/entry.sh, phase SCORING), beside holdout and test.

Front end: exactly the out-of-fold scores' (hearsay.evaluate.score.score_split: the bundle's
trimmed FLAC, its first max_s = 8 s, hearsay.sound.audio.prepare), on the trainer's device and
precision. The deploy scorer reproduces these scores with `hearsay-score --first-window` (its
default windowed mode takes the highest window of a clip longer than 8 s, which the campaign
never scored).

The file: models/<stamp>/scores/full_test_probe.csv (hearsay.contracts.score_file, suffix
"_probe"; columns path, fold, split, score, logit) and its sidecar, which adds to score-run's
"set_sha256" (hearsay.evaluate.gate.probe_set_sha: sha256 of the sorted paths, the identity the
bar's probe record must share) and "sources" ({source: clips}). A bundle whose test split holds
no bona fide clip gives an empty file: the gate then says the probe is not measured.
"""

from __future__ import annotations

from pathlib import Path

from hearsay.contracts import run_dir, score_file
from hearsay.evaluate import score as scoring
from hearsay.evaluate.gate import probe_set_sha

KEY, SPLIT, AUG = "full", "test", "probe"  # the file: full_test_probe.csv
LABEL = "bonafide"  # a probe set holds bona fide clips only: it measures false alarms


def score(bundle, run: Path, cfg: scoring.ScoreConfig, workers: int = 0):
    """(frame, sidecar) of the full model on the probe set (hearsay.contracts.score_file)."""
    meta_job = run_dir.find_meta(Path(run)).get("job")
    if meta_job != "full":
        raise scoring.ScoreRefused(f"a {meta_job!r} run: the probe set is scored by the full "
                                   "model only (the one the gate judges)")
    # the test split's bona fide core rows, in manifest order, through the out-of-fold front end
    df, side = scoring.score_split(bundle, run, SPLIT, None, cfg, False, workers, label=LABEL)
    source = bundle.manifest.drop_duplicates("path").set_index("path")["source"]
    sources = source.loc[df["path"]].astype(str).value_counts().sort_index()
    return df, {**side, "augmented": AUG, "set_sha256": probe_set_sha(df),
                "sources": {str(k): int(v) for k, v in sources.items()}}


def file_name() -> str:
    return score_file.file_name(KEY, SPLIT, AUG)


def read(csv: Path):
    """The probe file as a frame; ValueError naming the fix when its paths are not the set its
    sidecar names (a file edited or cut after scoring)."""
    csv = Path(csv)
    frame = score_file.read(csv)
    if not score_file.sidecar(csv).is_file():
        return frame  # a probe scored outside a campaign (an earlier detector's): as given
    side = score_file.read_sidecar(csv)
    if side.get("augmented") == AUG and side.get("set_sha256") != probe_set_sha(frame):
        raise ValueError(f"{csv}: its paths hash to {probe_set_sha(frame)}, its sidecar names "
                         f"the probe set {side.get('set_sha256')}: score it again (hearsay "
                         "score-run, or remove it and hearsay assemble scores it)")
    return frame
