"""The probe set: bona fide clips from outside the training domain (e.g. In-the-Wild's), scored by
every run where it trained, with the out-of-fold scores' own front end: the full model's file is
the gate's false-alarm check, each recipe's fold model's the drop rule's probe
(hearsay corpus-probe --drop-rule).

    df, side = probe_set.score(bundle, RUN, cfg)         # hearsay score-run (every box)
    frame = probe_set.read(csv)                          # the gate's probe, checked
    hearsay score-run --run RUN --bundle BUNDLE --out RUN/scores   # writes <key>_probe.csv

Which clips: every core row of the manifest's fold `probe` whose label is bonafide (`hearsay
manifest-import in-the-wild --probe` fills that fold; `hearsay splits make` keeps it, like
`test`). The probe is its own fold, not part of the test split: the exported test split stays
exactly the sponsor's test set in its order, and a clip in both is refused
(hearsay.contracts.manifest). The probe rows reach the box in the bundle, under its tree-sha, and
never train a model. Each fold and full job scores them after training (runner/box/job.sh,
phase SCORING).

Front end: exactly the out-of-fold scores' (hearsay.evaluate.score.score_split: the bundle's
trimmed FLAC, its first max_s = 8 s, hearsay.sound.audio.prepare), on the trainer's device and
precision. The deploy scorer reproduces these scores with `hearsay-score --first-window` (its
default windowed mode takes the highest window of a clip longer than 8 s, which the campaign
never scored).

The file: RUN/scores/<key>_probe.csv (key fold0-4 or full; hearsay.contracts.score_file, split
"probe"; columns path, fold, split, score, logit) and its sidecar, which adds to score-run's
"set_sha256" (hearsay.evaluate.gate.probe_set_sha: sha256 of the sorted paths, the identity the
bar's probe record must share) and "sources" ({source: clips}). A bundle with no bona fide probe
clip gives an empty file: the gate then says the probe is not measured.
"""

from __future__ import annotations

from pathlib import Path

from hearsay.contracts import score_file
from hearsay.evaluate import score as scoring
from hearsay.evaluate.gate import probe_set_sha

SPLIT = "probe"  # the manifest fold and the score split: RUN/scores/<key>_probe.csv
LABEL = "bonafide"  # a probe set holds bona fide clips only: it measures false alarms


def score(bundle, run: Path, cfg: scoring.ScoreConfig, workers: int = 0, overlap: bool = False):
    """(frame, sidecar) of one run's model on the probe set (hearsay.contracts.score_file);
    `overlap`: hearsay.evaluate.overlap's order (the same logits)."""
    # fold probe's bona fide core rows, in manifest order, through the out-of-fold front end
    df, side = scoring.score_split(bundle, run, SPLIT, None, cfg, False, workers, label=LABEL,
                                   overlap=overlap)
    source = bundle.manifest.drop_duplicates("path").set_index("path")["source"]
    sources = source.loc[df["path"]].astype(str).value_counts().sort_index()
    return df, {**side, "set_sha256": probe_set_sha(df),
                "sources": {str(k): int(v) for k, v in sources.items()}}


def file_name(key: str = "full") -> str:
    """The probe file of run `key` (fold0-4 or full): "full" -> "full_probe.csv"."""
    return score_file.file_name(key, SPLIT, False)


def read(csv: Path):
    """The probe file as a frame; ValueError naming the fix when its paths are not the set its
    sidecar names (a file edited or cut after scoring)."""
    csv = Path(csv)
    frame = score_file.read(csv)
    if not score_file.sidecar(csv).is_file():
        return frame  # a probe scored outside a campaign (an earlier detector's): as given
    side = score_file.read_sidecar(csv)
    if side.get("split") == SPLIT and side.get("set_sha256") != probe_set_sha(frame):
        raise ValueError(f"{csv}: its paths hash to {probe_set_sha(frame)}, its sidecar names "
                         f"the probe set {side.get('set_sha256')}: score it again (hearsay "
                         "score-run, or remove it and hearsay assemble scores it)")
    return frame
