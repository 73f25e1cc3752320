"""hearsay.evaluate.report: spend from the ledger, the gate, meta.json and the markdown + PNG
report."""

import json
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from hearsay.evaluate import report
from hearsay.evaluate.score import ScoreConfig

LEDGER_HEAD = "id,job,generation,offer,dph,created,destroyed_confirmed,hours,cost\n"


def test_spend_is_unknown_without_a_ledger_never_zero(tmp_path):
    s = report.spend(tmp_path / "ledger.csv")
    assert s["status"] == "unknown" and s["total_usd"] is None
    (tmp_path / "bad.csv").write_text("id,job\n1,fold\n")
    assert report.spend(tmp_path / "bad.csv")["status"] == "unknown"


def test_spend_sums_closed_rentals_and_flags_open_ones(tmp_path):
    p = tmp_path / "ledger.csv"
    p.write_text(LEDGER_HEAD +
                 "11,fold,1,o1,1.5,2026-11-30T01:00:00Z,2026-11-30T03:00:00Z,2.0000,3.0000\n"
                 "12,full,1,o2,2.0,2026-11-30T01:00:00Z,2026-11-30T01:30:00Z,0.5000,1.0000\n")
    s = report.spend(p)
    assert s["status"] == "complete" and s["total_usd"] == pytest.approx(4.0)
    assert s["by_job"] == {"fold": 3.0, "full": 1.0}
    with p.open("a") as f:
        f.write("13,pilot,2,o3,1.0,2026-11-30T02:00:00Z,,,\n")
    s = report.spend(p)
    assert s["status"] == "incomplete" and s["open_rows"] == 1 and "lower bound" in s["note"]


def test_spend_counts_a_rental_once_across_its_creation_and_closing_rows(tmp_path):
    # the runner's append-only ledger: creation row, later the closing row of the same id
    p = tmp_path / "ledger.csv"
    p.write_text(LEDGER_HEAD +
                 "21,fold,1,o1,1.5,2026-11-30T01:00:00Z,,,\n"
                 "22,full,1,o2,2.0,2026-11-30T01:00:00Z,,,\n"
                 "21,fold,1,o1,1.5,2026-11-30T01:00:00Z,2026-11-30T03:00:00Z,2.0000,3.0000\n")
    s = report.spend(p)
    assert s["status"] == "incomplete" and s["open_rows"] == 1 and s["rows"] == 2
    assert s["total_usd"] == pytest.approx(3.0) and s["by_job"] == {"fold": 3.0}
    with p.open("a") as f:
        f.write("22,full,1,o2,2.0,2026-11-30T01:00:00Z,2026-11-30T01:30:00Z,0.5000,1.0000\n")
    s = report.spend(p)
    assert s["status"] == "complete" and s["open_rows"] == 0
    assert s["total_usd"] == pytest.approx(4.0) and s["by_job"] == {"fold": 3.0, "full": 1.0}


def test_spend_reads_a_nine_column_ledger_with_thirteen_field_rows_appended(tmp_path):
    # a ledger begun before the offer and reason columns keeps its header; later rows have 13 fields
    p = tmp_path / "ledger.csv"
    p.write_text(LEDGER_HEAD +
                 "21,fold,1,o1,1.5,2026-11-30T01:00:00Z,,,\n"
                 "21,fold,1,o1,1.5,2026-11-30T01:00:00Z,2026-11-30T03:00:00Z,2.0000,3.0000\n"
                 "22,full,1,o2,2.0,2026-11-30T01:00:00Z,,,,A100 SXM4,32.0,13.0,\n"
                 "22,full,1,o2,2.0,2026-11-30T01:00:00Z,2026-11-30T01:30:00Z,0.5000,1.0000,"
                 "A100 SXM4,32.0,13.0,CAMPAIGN_DEADLINE\n")
    s = report.spend(p)
    assert s["status"] == "complete" and s["rows"] == 2
    assert s["total_usd"] == pytest.approx(4.0) and s["by_job"] == {"fold": 3.0, "full": 1.0}
    new = tmp_path / "new.csv"  # a ledger begun with all 13 columns
    new.write_text(LEDGER_HEAD.strip() + ",gpu_name,cpu_cores,driver_cuda,reason\n" +
                   "22,full,1,o2,2.0,2026-11-30T01:00:00Z,,,,A100 SXM4,32.0,13.0,\n")
    s = report.spend(new)
    assert s["status"] == "incomplete" and s["open_rows"] == 1


def synthetic(n=200, seed=0, sep=1.5):
    """(scores frame, key frame): logits separate the classes by `sep`."""
    rng = np.random.default_rng(seed)
    label = np.where(np.arange(n) % 2, "spoof", "bonafide")
    logit = rng.normal(size=n) + sep * (label == "spoof")
    key = pd.DataFrame({"path": [f"p{i}" for i in range(n)], "label": label,
                        "generator": np.where(label == "spoof", "g1", "bonafide"),
                        "source": "s", "duration": rng.uniform(1, 8, n)})
    scores = pd.DataFrame({"path": key["path"], "fold": "0", "split": "inner_oof",
                           "score": 1 / (1 + np.exp(-logit)), "logit": logit})
    return scores, key


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    oof, key = synthetic(120, seed=2)
    hold, hkey = synthetic(60, seed=3)
    hold["path"] = "h" + hold["path"]
    hold["split"], hold["fold"] = "holdout", "holdout"
    hkey["path"] = "h" + hkey["path"]
    manifest = pd.concat([key, hkey], ignore_index=True)
    aug = hold.copy()
    aug["logit"] = aug["logit"] * 0.5
    aug["score"] = 1 / (1 + np.exp(-aug["logit"]))
    aug["augmentation"] = np.where(np.arange(60) % 3 == 0, "codec", "noise")
    aug["codec"] = np.where(aug["augmentation"] == "codec", "mp3", "")
    stamp = root / "models" / "s9"
    stamp.mkdir(parents=True)
    aug.to_csv(stamp / "aug.csv", index=False)
    panel = pd.concat([hold.iloc[:40].assign(codec=c, logit=hold["logit"].iloc[:40] * f)
                       for c, f in (("mp3", 0.9), ("opus", -1.0))], ignore_index=True)
    panel.to_csv(stamp / "codecs.csv", index=False)
    run_meta = {"config_hash": "c", "base_weights_sha": "b", "git_sha": "g", "steps": 40,
                "fold": 0, "tripwire": "not applicable: the full model has no validation split",
                "history": {"loss": list(np.linspace(0.7, 0.3, 40) + 0.02 * np.sin(np.arange(40))),
                            "val": []},
                "layer_weights": {"states": ["h_0", "h_1", "h_2"], "weights": [0.2, 0.3, 0.5],
                                  "verdict": "not applicable: top_k 3 covers all 3 states"}}
    (root / "full").mkdir()
    (root / "full" / "config.json").write_text(json.dumps(
        {"model": {"train_top": 0, "keep_layers": 2}, "train": {"source_mix": "proportional"},
         "augment": {"p_aug": 0.65}}))
    done = {"pin": {"name": "s9", "stamp_dir": stamp, "parity": None,
                    "runs": {"full": {"dir": root / "full", "weights_sha256": "w"}}},
            "files": {"full": {("holdout", True): stamp / "aug.csv",
                               ("holdout", "codecs"): stamp / "codecs.csv",
                               ("holdout", "whole"): stamp / "aug.csv"}},
            "scores": pd.concat([oof, hold], ignore_index=True),
            "scores_csv": Path("x.csv"), "metas": {"full": run_meta}, "parity": None,
            "score_config": ScoreConfig()}
    bundle = types.SimpleNamespace(manifest=manifest, tree_sha="t")
    weak, _ = synthetic(180, seed=4, sep=0.2)
    weak["path"] = list(key["path"]) + list(hkey["path"])
    (root / "bar").mkdir()
    weak.to_csv(root / "bar" / "scores.csv", index=False)
    (root / "bar" / "meta.json").write_text(json.dumps({"name": "weak bar"}))
    probe = hold[hkey["label"] == "bonafide"].assign(path=lambda f: "probe-" + f["path"])
    probe.to_csv(root / "probe.csv", index=False)
    meta = report.write_all(done, bundle, bars=[root / "bar", root / "gone"],
                            ledger=root / "none.csv",
                            reports=root / "reports", probe=root / "probe.csv")
    return root, meta


def test_meta_json_is_strict_json_with_every_section(written):
    root, meta = written
    text = (root / "models" / "s9" / "meta.json").read_text()

    def no_nan(c):
        raise AssertionError(f"non-JSON constant {c}")

    doc = json.loads(text, parse_constant=no_nan)
    assert set(doc["metrics"]) == {"out-of-fold", "holdout clean", "holdout augmented",
                                   "holdout whole clips <= 14 s"}
    bd = doc["metrics"]["holdout augmented"]["breakdowns"]
    assert {"codec", "augmentation", "transcoded"} <= set(bd)
    # every augmented clip got one augmentation: no clip of it is "clean", the noise ones are not
    assert bd["transcoded"]["clean"]["undefined"]
    assert bd["transcoded"]["other augmentation"]["n_bonafide"] == 20  # the 40 noise clips
    assert {"generator", "source", "length"} <= set(doc["metrics"]["out-of-fold"]["breakdowns"])
    assert doc["gate"]["outcome"] == "not measured"  # no probe set, no stream shortcuts
    stages = doc["gate"]["bars"][0]["stages"]
    assert stages["holdout"]["outcome"] == stages["out-of-fold"]["outcome"] == "pass"
    assert doc["counts"]["fold 0"] == {"bonafide": 60, "spoof": 60, "unlabelled": 0}
    assert doc["counts"]["holdout"] == {"bonafide": 30, "spoof": 30, "unlabelled": 0}
    assert Path(doc["scores_csv"]).is_absolute()  # a later campaign's --bar finds it
    assert doc["spend"]["status"] == "unknown" and doc["identity"]["bundle_tree_sha"] == "t"


def test_report_markdown_links_readable_plots(written):
    root, meta = written
    md = Path(meta["report"]).read_text()
    for words in ("## Gate", "## Metrics", "## Breakdowns", "## Spend", "score high = synthetic",
                  "unknown", "## Clips per fold", "| fold 0 | 60 | 60 |", "## Codec readout",
                  "same 40 holdout clips", "### Bar 1 (gate): weak bar"):
        assert words in md
    links = [line.split("(")[1].rstrip(")") for line in md.splitlines() if line.startswith("![")]
    assert [Path(rel).name for rel in links] == ["det.png", "hist.png", "codecs.png",
                                                  "training.png", "reliability.png",
                                                  "layer_weights.png"]
    for rel in links:
        img = imread(root / "reports" / rel)
        assert img.shape[0] > 300 and img.shape[1] > 300 and img.std() > 0.05  # not blank


def test_the_opening_says_what_was_run_and_the_gate_names_a_bar_any_model_passes(tmp_path):
    from safetensors.numpy import save_file

    run = tmp_path / "full"
    (run / "final").mkdir(parents=True)
    save_file({"a": np.zeros((4, 8), np.float32), "b": np.zeros(3, np.float32)},
              str(run / "final" / "model.safetensors"))  # 35 values
    (run / "config.json").write_text(json.dumps(
        {"model": {"init": "random", "keep_layers": 2, "hidden_size": 32, "conv_dim": [16] * 7},
         "train": {"batch_size": 8, "grad_accum": 1, "max_crop_s": 2.0}}))
    done = {"pin": {"runs": {"full": {"dir": str(run)}}},
            "metas": {"fold0": {"steps": 128}, "full": {"steps": 128}}}
    m = {"n_bonafide": 45, "n_spoof": 45, "auc": 0.93}
    about = {"corpus": "the SYNTHETIC demo corpus", "bar": "a length scorer: any model passes it"}
    for hold_auc, verdict in ((0.42, "does not generalise"), (0.95, "carries over")):
        results = {"out-of-fold": m, "holdout clean": {**m, "n_bonafide": 9, "auc": hold_auc}}
        text = "\n".join(report.what_was_run(done, types.SimpleNamespace(meta=None), results,
                                             about))
        assert text.startswith("## What was run")
        for words in ("the SYNTHETIC demo corpus", "45 bona fide + 45 synthetic", "(35 parameters)",
                      "2 transformer layers of width 32", "7 layers x 16 channels",
                      "2 runs (fold0, full), 128 optimiser steps each of 8 clips",
                      "crops <= 2.0 s", "Metric of record: minDCF at pi = 0.3",
                      f"AUC {hold_auc:.3f} against 0.930 out-of-fold", verdict):
            assert words in text, (words, text)
    g = {"outcome": "pass", "why": "minDCF(0.3) ours 0.5 vs bar 1.0", "bars": [],
         "reading": "pi 0.3, as stated", "readings": [], "probe": None,
         "shortcuts": {"bound": 0.85, "outcome": "pass", "why": "ok"}}
    md = report.markdown({"name": "demo", "gate": g, "bar_note": about["bar"],
                          "opening": report.what_was_run(done, None, results, about),
                          "metrics": {}, "identity": {"bundle_tree_sha": "t",
                                                      "base_weights_sha": [], "run_git_sha": [],
                                                      "assemble_git_sha": "g", "runs": {}},
                          "spend": {"total_usd": None, "status": "unknown", "note": "n",
                                    "source": "s"}}, {})
    assert md.index("## What was run") < md.index("## Gate: **pass**") < md.index("## Metrics")
    assert "The bar: a length scorer: any model passes it. It is the bar because" in md


def test_codec_readout_scores_every_codec_on_the_clean_rows_and_reports_the_gap(written):
    root, meta = written
    c = meta["codec_readout"]
    assert c["n_clips"] == 40 and c["codecs"] == ["mp3", "opus"]
    assert [c["rows"][k]["n_bonafide"] + c["rows"][k]["n_spoof"] for k in c["rows"]] == [40] * 3
    clean = meta["metrics"]["holdout clean"]
    assert c["rows"]["clean"]["n_bonafide"] + c["rows"]["clean"]["n_spoof"] < \
        clean["n_bonafide"] + clean["n_spoof"]  # the clean row is the codec rows' clips only
    assert c["gap"]["mp3"] == pytest.approx(0.0, abs=1e-12)  # a rescaled logit ranks alike
    assert c["gap"]["opus"] > 0.5  # inverted scores: a large codec gap
    # the rows name their clips by a sha256 of the sorted paths: one figure for every row, and
    # the same in every process (Python's hash() of a str is salted per process)
    shas = {c["rows"][k]["paths_sha"] for k in c["rows"]}
    assert len(shas) == 1 and all(len(s) == 64 and int(s, 16) >= 0 for s in shas)


def test_class_counts_are_clips_per_class_not_rows():
    df = pd.DataFrame({"path": ["a", "b", "c", "c", "d"], "fold": ["0", "0", "1", "1", "x"],
                       "split": ["inner_oof"] * 4 + ["holdout"]})
    key = pd.DataFrame({"path": list("abcd"), "label": ["bonafide", "spoof", "spoof", "spoof"]})
    got = report.readouts.class_counts(df, key)
    assert got == {"fold 0": {"bonafide": 1, "spoof": 1, "unlabelled": 0},
                   "fold 1": {"bonafide": 0, "spoof": 1, "unlabelled": 0},
                   "holdout": {"bonafide": 0, "spoof": 1, "unlabelled": 0}}


def test_the_threshold_on_holdout_and_test_is_the_out_of_fold_one(written):
    root, meta = written
    op = meta["operating_point"]
    oof_thr = meta["metrics"]["out-of-fold"]["min_dcf_threshold"]
    assert op["threshold"] == oof_thr
    assert oof_thr != meta["metrics"]["holdout clean"]["min_dcf_threshold"]  # not the oracle
    # the holdout's counts are those of ITS clips at the OUT-OF-FOLD threshold
    hold = metrics_join(root, meta)
    called = hold["rank"] >= oof_thr
    c = op["sets"]["holdout clean"]
    assert c["threshold"] == oof_thr
    assert c["synthetic_called_synthetic"] == int((called & hold["is_spoof"]).sum())
    assert c["bonafide_false_alarm"] == int((called & ~hold["is_spoof"]).sum())
    assert c["synthetic_missed"] + c["synthetic_called_synthetic"] == 30
    assert {"out-of-fold", "holdout clean", "holdout augmented"} <= set(op["sets"])
    md = Path(meta["report"]).read_text()
    assert f"logit >= {oof_thr:.4f}: the out-of-fold minDCF threshold" in md


def metrics_join(root, meta):
    """The clean holdout rows of the fixture joined to their labels."""
    from hearsay import metrics

    hold, hkey = synthetic(60, seed=3)
    hold["path"] = hkey["path"] = "h" + hold["path"]
    return metrics.join(hold, hkey)


def test_the_report_names_no_absolute_path(written):
    root, meta = written
    md = Path(meta["report"]).read_text()
    assert str(root) not in md and "/work/" not in md and "/tmp" not in md
    assert "from the ledger none.csv" in md  # the spend line names the ledger by its name
    assert "Probe (probe.csv, n=30)" in md  # and the probe line its probe file
    assert "gone/meta.json missing" in md  # a missing second bar, by its folder's name


def test_the_report_gives_per_fold_spread_and_seeded_intervals(written):
    _, meta = written
    u = meta["uncertainty"]
    assert list(u["per_fold"]["folds"]) == ["fold 0"]
    assert u["per_fold"]["spread"]["min_dcf"]["std"] is None  # one fold: no spread, never 0
    for name in ("out-of-fold", "holdout clean"):
        b = u["bootstrap"][name]
        lo, hi = b["min_dcf"]
        assert lo <= b["value_min_dcf"] <= hi and b["seed"] == report.report_stats.BOOTSTRAP_SEED
    md = Path(meta["report"]).read_text()
    assert "## Uncertainty" in md and "numpy Generator seed 20261204" in md
    assert "± sd undefined" in md  # one fold has no spread


def test_the_report_states_what_the_runs_recorded_and_what_they_did_not(written):
    _, meta = written
    r = meta["training"]["full"]
    assert r["backbone"] == "whole backbone frozen"
    assert r["trainable_params"] == "not recorded"  # the trainer did not record it: no guess
    assert r["layer_weights"] == [0.2, 0.3, 0.5]
    md = Path(meta["report"]).read_text()
    for words in ("| full | whole backbone frozen | not recorded | proportional | not recorded",
                  "not applicable: the full model has no validation split",
                  "Physical replay is not covered", "reverb is simulated",
                  "Recipe selection: no recipe comparison was recorded"):
        assert words in md, words


def test_breakdown_rows_below_the_minimum_are_folded_and_said_so():
    row = {"eer": 0.1, "min_dcf": 0.2, "min_dcf_pi05": 0.2, "act_dcf": 0.3, "auc": 0.9,
           "cllr": 0.5, "min_cllr": 0.4}
    n = report.MIN_GROUP_CLIPS
    groups = {"big": {**row, "n_bonafide": n, "n_spoof": n},
              "small": {**row, "n_bonafide": n, "n_spoof": n - 1},
              "none": {**dict.fromkeys(row), "n_bonafide": 0, "n_spoof": 5,
                       "undefined": "no bona fide clips"}}
    lines = "\n".join(report.breakdown_lines("holdout", {"generator": groups}))
    assert f"| big | {n} | {n} |" in lines and "| small |" not in lines
    assert f"Folded: 2 row(s) with fewer than {n} clips" in lines
    assert f"small ({n}+{n - 1}), none (0+5)" in lines
    only_small = "\n".join(report.breakdown_lines("holdout", {"generator": {
        "small": groups["small"]}, "length": {"none": groups["none"]}}))
    assert "###" not in only_small  # no table at all: one line says so
    assert f"all 2 rows (generator, length) have fewer than {n}" in only_small


def test_meta_json_carries_the_out_of_fold_thresholds_and_calibration_the_export_ships(written):
    root, meta = written
    doc = json.loads((root / "models" / "s9" / "meta.json").read_text())
    dec = doc["decision"]
    oof = meta["metrics"]["out-of-fold"]
    assert dec["set"] == {"name": "out-of-fold", "n_bonafide": oof["n_bonafide"],
                          "n_spoof": oof["n_spoof"]}
    assert dec["thresholds"]["min_dcf"]["value"] == oof["min_dcf_threshold"]
    assert dec["thresholds"]["fa_rate"]["target_fa_rate"] == 0.01
    assert dec["calibration"]["cllr_before"] == pytest.approx(oof["cllr"])
    assert dec["calibration"]["cllr_after"] <= dec["calibration"]["cllr_before"]
    md = Path(meta["report"]).read_text()
    assert "## Thresholds and calibration shipped with the model" in md
    assert (f"Cllr {dec['calibration']['cllr_before']:.4f} bits with the logit taken as LLR, "
            f"{dec['calibration']['cllr_after']:.4f} after") in md
