"""hearsay.demo.extra: the demo's extra-corpus decision is made from two recipes' runs before its
finals train, and the finals' recipe cites it (the cpu-smoke preset: a few steps per run)."""

import json

from hearsay.evaluate import corpus_decision as cd
from hearsay.util.hashing import sha256_file


def test_the_decision_comes_from_two_fold0_runs_and_the_gate_reads_it_when_cited(
        demo_corpus, demo_bundle, tmp_path):
    from hearsay.demo import extra

    ctx = {"corpus": demo_corpus, "bundle": demo_bundle.root}
    extra.stage_extra(tmp_path, ctx, preset={}, probe_config={"min_per_side": 2, "folds": 2})
    path = ctx["corpus_decision"]
    assert ctx["corpus_decision_sha"] == sha256_file(path)
    d = cd.load(path)
    assert d["decision"] in cd.DECISIONS and d["config"]["min_per_side"] == 2
    readings = d["drop_rule"]["without"], d["drop_rule"]["with"]
    assert [r["from"] for r in readings] == ["runs", "runs"]
    assert [r["source"].split("/")[-1] for r in readings] == ["core_only", "core_extra"]
    # each recipe's probe: the file its fold-0 model wrote as a box does, read from the run's folder
    assert [r["probe_files"][0].split("/")[-2:] for r in readings] == [
        ["core_only", "fold0_probe.csv"], ["core_extra", "fold0_probe.csv"]]
    assert readings[0]["set_sha256"] == readings[1]["set_sha256"]  # the same probe clips
    rows = {n: json.loads((tmp_path / "extra" / n / "fold0" / "run_meta.json").read_text())[
        "train_rows"] for n in ("core_only", "core_extra")}
    assert rows["core_only"] < rows["core_extra"]  # without the extra rows vs with them
    cited = {k: {"selection": {"corpus_decision": ctx["corpus_decision_sha"]}}
             for k in ("fold0", "full")}
    # a cited keep passes; a cited drop or cap must also show it applied (run_meta stream_groups),
    # which these metas lack: not measured, never a pass
    want = "pass" if d["decision"] == "keep" else "not measured"
    assert cd.gate_check(path, cited)["outcome"] == want
