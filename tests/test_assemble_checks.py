"""hearsay.evaluate.assemble's rules at their boundaries, on hand-made frames and run folders (no
model, no scoring): each pinned identity of validate_run, the frame's order, and F1-F6 a step
either side of each bound. The whole job, scored through a model, is tests/test_assemble.py's."""

import json

import numpy as np
import pandas as pd
import pytest

from hearsay.contracts import run_dir, score_file
from hearsay.detector.logits import sigmoid
from hearsay.evaluate import assemble
from hearsay.util.hashing import sha256_file

SHA = "t" * 40


def manifest():
    """Two inner folds of two clips, two holdout and three test clips, one extra row."""
    rows = [("a0", "0"), ("a1", "1"), ("b0", "0"), ("b1", "1"), ("h0", "holdout"),
            ("h1", "holdout"), ("t0", "test"), ("t2", "test"), ("t1", "test")]
    m = pd.DataFrame(rows, columns=["path", "fold"]).assign(train_scope="core")
    extra = pd.DataFrame([("x0", "0", "extra")], columns=["path", "fold", "train_scope"])
    return pd.concat([m, extra], ignore_index=True)


def scored(paths, folds, split, logits=None):
    logits = np.arange(len(paths), dtype=float) / 10 if logits is None else np.asarray(logits)
    return pd.DataFrame({"path": paths, "fold": folds, "split": split,
                         "score": sigmoid(logits), "logit": logits})


def written():
    """What assemble writes for manifest(): inner rows in manifest order, then holdout, test."""
    m = manifest()
    core = m[m["train_scope"] != "extra"]
    inner = core[core["fold"].isin(["0", "1"])]
    logits = [0.1, -0.2, 0.3, -0.4]
    return pd.concat([scored(list(inner["path"]), list(inner["fold"]), "inner_oof", logits),
                      scored(["h0", "h1"], ["holdout"] * 2, "holdout"),
                      scored(["t0", "t2", "t1"], ["test"] * 3, "test")], ignore_index=True)


@pytest.fixture
def per_run(tmp_path):
    """Per-run files as the fold models and the full model wrote them, and their metas."""
    df = written()
    files = {}
    for key, fold in (("fold0", "0"), ("fold1", "1")):
        # reversed: a file's own order is not the manifest's
        rows = df[(df["split"] == "inner_oof") & (df["fold"] == fold)].iloc[::-1]
        files[key] = {("inner_oof", False): tmp_path / f"{key}_inner_oof.csv"}
        score_file.write_csv(rows, files[key][("inner_oof", False)])
    files["full"] = {}
    for split in ("holdout", "test"):
        files["full"][(split, False)] = tmp_path / f"full_{split}.csv"
        score_file.write_csv(df[df["split"] == split], files["full"][(split, False)])
    metas = {"fold0": {"fold": 0}, "fold1": {"fold": 1}, "full": {"fold": None}}
    return files, metas


# --------------------------------------------------------------------------- the frame


def test_the_frame_holds_inner_rows_in_manifest_order_then_holdout_then_test(per_run):
    files, _ = per_run
    got = assemble.assemble_frame(manifest(), files)
    assert list(got.columns) == score_file.COLUMNS
    assert list(got["path"]) == ["a0", "a1", "b0", "b1", "h0", "h1", "t0", "t2", "t1"]
    assert list(got.index) == list(range(9))
    assert list(got["logit"])[:4] == pytest.approx([0.1, -0.2, 0.3, -0.4])


def test_core_rows_leave_extra_rows_out():
    assert list(assemble.core_rows(manifest(), "inner_oof")["path"]) == ["a0", "a1", "b0", "b1"]


# --------------------------------------------------------------------------- F1-F6


def test_f1_to_f5_pass_on_what_assemble_writes(per_run):
    files, metas = per_run
    df = written()
    assemble.check_f1_counts(df, manifest())
    assemble.check_f2_inner_provenance(df, manifest(), files, metas)
    assemble.check_f3_unique(df)
    assemble.check_f4_test_order(df, manifest())
    assemble.check_f5_scores(df)


def test_f1_names_the_split_and_both_counts_when_a_row_is_missing():
    df = written().drop(index=5)
    want = r"^F1: holdout: 1 rows written, manifest has 2 core rows$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f1_counts(df, manifest())


def test_f1_refuses_rows_of_no_known_split():
    df = pd.concat([written(), scored(["z"], ["9"], "train")], ignore_index=True)
    want = r"^F1: 10 rows written: rows of no known split present$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f1_counts(df, manifest())


def test_f2_refuses_a_row_whose_fold_is_not_the_manifests(per_run):
    files, metas = per_run
    df = written()
    df.loc[1, "fold"] = "0"
    want = r"^F2: 1 inner row\(s\) carry a fold other than the manifest's, e.g. 'a1'$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f2_inner_provenance(df, manifest(), files, metas)


def test_f2_refuses_a_row_no_fold_model_scored_or_two_did(per_run, tmp_path):
    files, metas = per_run
    df = written()
    one = score_file.read(files["fold0"][("inner_oof", False)])
    score_file.write_csv(one[one["path"] != "a0"], files["fold0"][("inner_oof", False)])
    want = r"^F2: 'a0' scored by 0 fold models \(want exactly 1\)$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f2_inner_provenance(df, manifest(), files, metas)
    twice = pd.concat([one, one[one["path"] == "a0"]])
    score_file.write_csv(twice, files["fold0"][("inner_oof", False)])
    with pytest.raises(assemble.CheckFailed, match=r"^F2: 'a0' scored by 2 fold models"):
        assemble.check_f2_inner_provenance(df, manifest(), files, metas)


def test_f2_refuses_a_row_scored_by_the_model_that_trained_on_it(per_run):
    files, metas = per_run
    # each file scored by the other fold's model
    metas = {**metas, "fold0": {"fold": 1}, "fold1": {"fold": 0}}
    want = r"^F2: 'a0' \(fold 0\) scored by the fold-1 model, which trained on it$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f2_inner_provenance(written(), manifest(), files, metas)


@pytest.mark.parametrize("shift, ok", [(0.9e-6, True), (2e-6, False)])
def test_f2_holds_the_written_logit_to_the_fold_models_within_1e_6(per_run, shift, ok):
    files, metas = per_run
    df = written()
    df.loc[2, "logit"] += shift
    if ok:
        assemble.check_f2_inner_provenance(df, manifest(), files, metas)
    else:
        want = r"^F2: 'b0': written logit .* is not the fold model's 0.3$"
        with pytest.raises(assemble.CheckFailed, match=want):
            assemble.check_f2_inner_provenance(df, manifest(), files, metas)


def test_f3_counts_duplicate_paths_and_names_the_first():
    df = pd.concat([written(), written().iloc[[6, 4, 6]]], ignore_index=True)  # t0, h0, t0
    with pytest.raises(assemble.CheckFailed, match=r"^F3: 3 duplicate path\(s\), e.g. 't0'$"):
        assemble.check_f3_unique(df)


def test_f4_names_the_first_test_row_out_of_manifest_order():
    df = written()
    df.loc[[7, 8], "path"] = ["t1", "t2"]
    want = r"^F4: test rows leave manifest order at row 1$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f4_test_order(df, manifest())


def test_f4_names_where_a_shorter_test_slice_ends():
    df = written().drop(index=8)
    want = r"^F4: test rows leave manifest order at row 2$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f4_test_order(df, manifest())


@pytest.mark.parametrize("logit", [-800.0, 800.0])
def test_f5_takes_scores_of_exactly_0_and_1(logit):
    df = scored(["p"], ["0"], "inner_oof", [logit])
    assert df["score"].iloc[0] in (0.0, 1.0)
    assemble.check_f5_scores(df)


@pytest.mark.parametrize("row, value, match", [
    (0, np.nan, r"^F5: 1 non-finite score/logit value\(s\)$"),
    (0, -1e-9, r"^F5: scores outside \[0, 1\]: min -1e-09, max 0.6"),
    (1, 1 + 1e-9, r"^F5: scores outside \[0, 1\]: min 0.5, max 1.000000001$"),
])
def test_f5_refuses_a_score_not_finite_or_outside_0_1(row, value, match):
    df = scored(["p", "q"], ["0", "0"], "inner_oof", [0.0, 0.5])
    df.loc[row, "score"] = value
    with pytest.raises(assemble.CheckFailed, match=match):
        assemble.check_f5_scores(df)


def test_f5_counts_a_non_finite_logit_too():
    df = scored(["p", "q", "r"], ["0", "0", "0"], "inner_oof")
    df.loc[:, "logit"] = [np.inf, -np.inf, 0.0]               # the scores all finite
    with pytest.raises(assemble.CheckFailed, match=r"^F5: 2 non-finite"):
        assemble.check_f5_scores(df)


@pytest.mark.parametrize("shift, ok", [(0.9e-6, True), (1.1e-6, False)])
def test_f5_holds_score_to_sigmoid_of_logit_within_1e_6(shift, ok):
    df = scored(["p", "q"], ["0", "0"], "inner_oof", [0.0, 1.0])
    df.loc[1, "score"] -= shift
    if ok:
        assemble.check_f5_scores(df)
    else:
        want = r"^F5: score differs from sigmoid\(logit\) by up to 1.1e-06$"
        with pytest.raises(assemble.CheckFailed, match=want):
            assemble.check_f5_scores(df)


def test_f5_takes_a_score_exactly_1e_6_from_sigmoid_of_logit():
    df = scored(["p"], ["0"], "inner_oof", [-800.0])  # sigmoid(-800) is exactly 0.0
    df.loc[0, "score"] = 1e-6
    assemble.check_f5_scores(df)
    df.loc[0, "score"] = np.nextafter(1e-6, 1.0)
    with pytest.raises(assemble.CheckFailed, match="^F5: score differs"):
        assemble.check_f5_scores(df)


def test_f5_takes_an_empty_frame():
    assemble.check_f5_scores(scored([], [], "test"))


def pin_with(parity, full_sha="w" * 64):
    return {"parity": parity, "runs": {"full": {"weights_sha256": full_sha}}}


def record(tmp_path, **parts):
    path = tmp_path / "parity.json"
    path.write_text(json.dumps(parts))
    return path


def test_f6_without_parity_in_the_pin_is_none_and_a_waiver_is_recorded():
    assert assemble.check_f6_parity(pin_with(None)) is None
    waiver = {"waived": "collect --no-parity"}
    assert assemble.check_f6_parity(pin_with(waiver)) == waiver


def test_f6_refuses_a_missing_record(tmp_path):
    want = r"^F6: parity record .*nowhere.json missing \(run hearsay export / parity\)$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f6_parity(pin_with({"file": tmp_path / "nowhere.json"}))


@pytest.mark.parametrize("parts, require, missing", [
    ({"parity_b": {"passed": True}}, ["parity_b"], "parity_a"),           # A always, listed or not
    ({"parity_a": {"passed": True}}, ["parity_a", "parity_b"], "parity_b"),
    ({"parity_a": {"passed": "true"}}, None, "parity_a"),                  # exactly True
    ({"parity_a": True}, None, "parity_a"),                                # a part is an object
])
def test_f6_needs_parity_a_and_every_required_part_passed(tmp_path, parts, require, missing):
    path = record(tmp_path, **parts)
    want = rf"^F6: .*parity.json: {missing} absent or not passed$"
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f6_parity(pin_with({"file": path, "require": require}))


def test_f6_takes_the_pinned_full_weights_or_a_record_that_names_none(tmp_path):
    ok = {"parity_a": {"passed": True}, "parity_b": {"passed": True}}
    path = record(tmp_path, **ok, checkpoint_sha256="w" * 64)
    got = assemble.check_f6_parity(pin_with({"file": path, "require": ["parity_b"]}))
    assert got["checkpoint_sha256"] == "w" * 64
    path = record(tmp_path, **ok)
    assert "checkpoint_sha256" not in assemble.check_f6_parity(pin_with({"file": path}))
    path = record(tmp_path, **ok, checkpoint_sha256="v" * 64)
    want = (r"^F6: .*parity.json is the export of checkpoint v{64}, not the pinned full "
            r"run's w{64} \(export runs/full again\)$")
    with pytest.raises(assemble.CheckFailed, match=want):
        assemble.check_f6_parity(pin_with({"file": path}))


# --------------------------------------------------------------------------- validate_run


def make_run(tmp_path, key="fold1", **meta_over):
    """A run folder whose identity the pin below names: run_meta.json and final weights bytes."""
    run = tmp_path / key
    run_dir.final_dir(run).mkdir(parents=True)
    run_dir.weights(run).write_bytes(b"weights of " + key.encode())
    job, fold = ("full", None) if key == "full" else ("fold", int(key[4:]))
    meta = {"job": job, "fold": fold, "config_hash": "cfg", "bundle_tree_sha": SHA, "steps": 50,
            "complete": True, **meta_over}
    run_dir.write_meta(run, meta)
    spec = {"dir": run, "config_hash": "cfg", "weights_sha256": sha256_file(run_dir.weights(run))}
    return spec, {"bundle_tree_sha": SHA, "min_steps": 50}


def test_a_run_that_matches_every_pinned_identity_is_taken(tmp_path):
    spec, pin = make_run(tmp_path)
    assert assemble.validate_run("fold1", spec, pin)["steps"] == 50


@pytest.mark.parametrize("meta, problem", [
    ({"steps": 49}, "steps 49 < min_steps 50"),
    ({"steps": 50.0}, "steps 50.0 < min_steps 50"),                       # an int, never a float
    ({"steps": "50"}, "steps '50' < min_steps 50"),
    ({"complete": "true"}, "not complete"),
    ({"config_hash": "cfg2"}, "config_hash 'cfg2' (pinned 'cfg')"),
    ({"bundle_tree_sha": "u" * 40}, f"bundle_tree_sha '{'u' * 40}' (pinned '{SHA}')"),
    ({"fold": 2}, "fold 2 (want 1)"),
    ({"job": "full", "fold": None}, "job 'full' (want 'fold'); fold None (want 1)"),
])
def test_each_pinned_identity_is_checked(tmp_path, meta, problem):
    spec, pin = make_run(tmp_path, **meta)
    with pytest.raises(assemble.PinError) as err:
        assemble.validate_run("fold1", spec, pin)
    assert str(err.value) == f"fold1 ({spec['dir']}): {problem}"


def test_every_problem_of_a_run_is_named_at_once(tmp_path):
    spec, pin = make_run(tmp_path, steps=1, config_hash="x")
    want = r": config_hash 'x' \(pinned 'cfg'\); steps 1 < min_steps 50$"
    with pytest.raises(assemble.PinError, match=want):
        assemble.validate_run("fold1", spec, pin)


def test_the_weights_must_be_the_pinned_bytes(tmp_path):
    spec, pin = make_run(tmp_path)
    want = spec["weights_sha256"]
    run_dir.weights(spec["dir"]).write_bytes(b"other weights")
    got = sha256_file(run_dir.weights(spec["dir"]))
    with pytest.raises(assemble.PinError) as err:
        assemble.validate_run("fold1", spec, pin)
    assert str(err.value).endswith(f": final/model.safetensors sha256 {got} (pinned {want})")
    run_dir.weights(spec["dir"]).unlink()
    want = rf": final/model.safetensors sha256 missing \(pinned {want}\)$"
    with pytest.raises(assemble.PinError, match=want):
        assemble.validate_run("fold1", spec, pin)


def test_a_run_without_run_meta_is_refused_naming_the_file(tmp_path):
    spec, pin = make_run(tmp_path)
    run_dir.meta_path(spec["dir"]).unlink()
    want = r"^fold1: .*run_meta.json missing \(pin a completed hearsay train run\)$"
    with pytest.raises(assemble.PinError, match=want):
        assemble.validate_run("fold1", spec, pin)


def test_the_full_run_is_judged_as_the_full_job(tmp_path):
    spec, pin = make_run(tmp_path, key="full")
    assert assemble.validate_run("full", spec, pin)["job"] == "full"


def test_a_missing_pin_file_is_bad_input_and_a_bad_one_is_refused(tmp_path):
    with pytest.raises(assemble.AssembleError) as err:
        assemble.load_pin(tmp_path / "final_runs.json")
    assert type(err.value) is assemble.AssembleError
    (tmp_path / "final_runs.json").write_text("{")
    with pytest.raises(assemble.PinError, match="not JSON"):
        assemble.load_pin(tmp_path / "final_runs.json")
