"""hearsay assemble --ablation: the recipe decision of `hearsay compare` recorded in meta.json
and in the report."""

import json
import os

import pytest
from fakes.fake_runs import TREE_SHA, make_bundle, make_run

from hearsay.evaluate import assemble, score
from hearsay.util.hashing import sha256_file

DECISION = {"reading": "pi 0.3, as stated", "readings": ["pi 0.3, as stated", "pi 0.3, swapped",
                                                         "pi 0.5, as stated", "pi 0.5, swapped"],
            "n_clips": 10, "n_bonafide": 5, "n_spoof": 5,
            "recipes": {n: {"source": f"{n}.json", "files": [], "eer": e, "auc": a,
                            "min_dcf": {r: d for r in ("pi 0.3, as stated", "pi 0.3, swapped",
                                                       "pi 0.5, as stated", "pi 0.5, swapped")}}
                        for n, d, e, a in (("core_only", 0.4, 0.2, 0.8),
                                           ("core_extra", 0.3, 0.1, 0.9))},
            "ranking": ["core_extra", "core_only"], "chosen": "core_extra", "flips": []}


@pytest.fixture(scope="module")
def pin(tmp_path_factory):
    root = tmp_path_factory.mktemp("abl")
    bundle = make_bundle(root / "bundle", n_per_fold=2, n_holdout=4, n_test=4)
    runs = {f"fold{k}": make_run(root / "runs" / f"fold{k}", fold=k, seed=k) for k in range(5)}
    runs["full"] = make_run(root / "runs" / "full", job="full", seed=9)
    stamp = root / "models" / "s1"
    stamp.mkdir(parents=True)
    path = stamp / "final_runs.json"
    path.write_text(json.dumps({
        "name": "camp", "bundle_tree_sha": TREE_SHA, "min_steps": 50, "parity": None,
        "runs": {k: {"dir": os.path.relpath(d, stamp), "config_hash": "cfg0",
                     "weights_sha256": sha256_file(d / "final" / "model.safetensors")}
                 for k, d in runs.items()}}))
    return path, bundle


def test_the_ablation_decision_goes_into_meta_and_the_report(pin, tmp_path, monkeypatch, capsys):
    path, bundle = pin
    monkeypatch.setattr(score, "load_bundle", lambda _p, verify: bundle)
    (tmp_path / "decision.json").write_text(json.dumps(DECISION))
    common = ["--pinned", str(path), "--bundle", str(bundle.root), "--outputs",
              str(tmp_path / "o"), "--reports", str(tmp_path / "r")]
    assert assemble.main([*common, "--ablation", str(tmp_path / "decision.json")]) == 0, \
        capsys.readouterr().err
    meta = json.loads((path.parent / "meta.json").read_text())
    assert meta["ablation"] == DECISION
    report = (tmp_path / "r" / "s1.md").read_text()
    assert "## Recipe comparison: **core_extra**" in report
    assert "| core_only | 0.4000 | 0.4000 | 0.4000 | 0.4000 | 0.2000 | 0.8000 |" in report
    # the chosen recipe's out-of-fold numbers are read on the folds that chose it: said so
    assert 'Recipe-selection bias: the recipe "core_extra" was chosen on the pooled inner-fold ' \
           "scores of 10 clips" in report
    (tmp_path / "bad.json").write_text(json.dumps({"chosen": "x"}))
    assert assemble.main([*common, "--ablation", str(tmp_path / "bad.json")]) == 3
    assert "not a hearsay compare decision" in capsys.readouterr().err


def test_the_corpus_decision_is_judged_in_the_gate_against_what_the_runs_cite(pin, tmp_path,
                                                                             monkeypatch, capsys):
    from hearsay.evaluate import corpus_decision as cd

    path, bundle = pin
    monkeypatch.setattr(score, "load_bundle", lambda _p, verify: bundle)
    probe = {"corpus": "mlaad", "against": "diffssd", "label": "spoof", "strength": 0.9,
             "bound": 0.85, "separable": True, "landing": {}}
    rec = cd.decide(probe, cd.drop_rule(0.03, 0.03, 0.01), {"cap_share": 0.1,
                                                             "landing_share": 0.5})
    cd.write(tmp_path / "corpus_decision.json", rec)
    common = ["--pinned", str(path), "--bundle", str(bundle.root), "--outputs",
              str(tmp_path / "o"), "--reports", str(tmp_path / "r")]
    assert assemble.main([*common, "--corpus-decision",
                          str(tmp_path / "corpus_decision.json")]) == 0, capsys.readouterr().err
    extra = json.loads((path.parent / "meta.json").read_text())["gate"]["extra_corpus"]
    assert extra["decision"] == "cap share" and extra["outcome"] == "fail"  # runs cite none
    assert "Extra corpus: fail: extra corpus mlaad: cap share" in (tmp_path / "r" / "s1.md"
                                                                  ).read_text()
    (tmp_path / "bad.json").write_text("{}")
    assert assemble.main([*common, "--corpus-decision", str(tmp_path / "bad.json")]) == 3
    assert "not a corpus decision" in capsys.readouterr().err
