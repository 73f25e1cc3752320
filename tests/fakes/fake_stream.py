"""A run's training stream as the corpus decision reads it (hearsay.evaluate.corpus_decision):
`stream_groups` the groups a recipe selected, `run_metas` what assembly reads of each run."""

from __future__ import annotations


def stream_groups(share: float = 0.05, rows: int = 4, label: str = "spoof") -> list[dict]:
    """Bona fide from ls, spoof from diffssd and `rows` rows of `label` from the extra corpus
    mlaad at `share` of its label's stream (source = corpus; no mlaad group when rows is 0)."""
    g = [{"label": "bonafide", "source": "ls", "train_scope": "core", "corpus": "ls", "rows": 50,
          "share": 1.0},
         {"label": "spoof", "source": "diffssd", "train_scope": "core", "corpus": "diffssd",
          "rows": 40, "share": round(1.0 - share, 6)}]
    return g + ([{"label": label, "source": "mlaad", "train_scope": "extra", "corpus": "mlaad",
                  "rows": rows, "share": share}] if rows else [])


def run_metas(*cited: str | None, stream: list[dict] | None = None) -> dict:
    """{"fold0": ..., "fold1": ...}: one run per `cited` (the corpus decision its recipe
    cites: a sha256, "" or None), each trained on `stream` (default stream_groups())."""
    return {f"fold{i}": {"selection": {"corpus_decision": c},
                         "stream_groups": stream_groups() if stream is None else stream}
            for i, c in enumerate(cited)}
