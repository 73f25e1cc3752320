"""hearsay.contracts.manifest: schema errors name the row and column; extra rows can never be
scored."""

import pandas as pd
import pytest

from hearsay.contracts import manifest as mf

GOOD = {"id": "a1", "path": "audio/a1.wav", "label": "bonafide", "generator": "bonafide",
        "source": "studio", "group": "spk00", "fold": "", "train_scope": "core"}


def frame(*rows):
    return pd.DataFrame([{**GOOD, "id": f"r{i}", **r} for i, r in enumerate(rows)])


def test_valid_manifest_reads_every_cell_as_str(tmp_path):
    p = tmp_path / "m.csv"
    frame({}, {"label": "spoof", "generator": "voc-a", "fold": "3"}).to_csv(p, index=False)
    df = mf.read_manifest(p)
    assert df["fold"].tolist() == ["", "3"]
    assert all(isinstance(v, str) for v in df.to_numpy().ravel())


@pytest.mark.parametrize("row,column,words", [
    ({"label": "fake"}, "label", "not one of"),
    ({"id": "a b"}, "id", "not a valid id"),
    ({"generator": "voc-a"}, "generator", "bona fide row"),
    ({"label": "spoof"}, "generator", "needs its generator"),
    ({"group": ""}, "group", "group-disjoint"),
    ({"fold": "7"}, "fold", "not one of"),
    ({"fold": "extra"}, "fold", "core row cannot"),
    ({"train_scope": "both"}, "train_scope", "not one of"),
    ({"path": ""}, "path", "empty path"),
])
def test_schema_error_names_row_and_column(row, column, words):
    with pytest.raises(mf.ManifestError) as err:
        mf.validate(frame({}, row))
    assert err.value.row == 2 and err.value.column == column
    assert words in str(err.value) and "row 2" in str(err.value)


def test_duplicate_id_names_both_rows():
    df = frame({}, {})
    df["id"] = "same"
    with pytest.raises(mf.ManifestError, match="duplicate id 'same' \\(first at row 1\\)"):
        mf.validate(df)


def test_missing_column_is_named():
    with pytest.raises(mf.ManifestError, match="missing column.*'train_scope'"):
        mf.validate(frame({}).drop(columns=["train_scope"]))


def test_empty_fold_is_an_error_only_when_required():
    mf.validate(frame({}))
    with pytest.raises(mf.ManifestError, match="empty fold"):
        mf.validate(frame({}), require_fold=True)


def test_scorable_drops_every_extra_row_and_names_the_split():
    df = frame({"fold": "0"}, {"fold": "holdout"}, {"fold": "test"}, {"fold": "extra",
               "train_scope": "extra"}, {"fold": "2", "train_scope": "extra"})
    out = mf.scorable(df)
    assert out["split"].tolist() == ["inner_oof", "holdout", "test"]
    assert not (out["train_scope"] == "extra").any()


def test_assert_no_extra_refuses_a_score_table_with_an_extra_row():
    df = frame({"fold": "0"}, {"fold": "1", "train_scope": "extra", "path": "audio/x.wav"})
    good = pd.DataFrame({"path": ["audio/a1.wav"], "split": ["inner_oof"], "score": [0.5]})
    mf.assert_no_extra(good, df)
    leaked = pd.DataFrame({"path": ["audio/x.wav"], "split": ["inner_oof"], "score": [0.5]})
    with pytest.raises(mf.ExtraRowScored, match="audio/x.wav"):
        mf.assert_no_extra(leaked, df)
    by_split = pd.DataFrame({"path": ["elsewhere.wav"], "split": ["extra"], "score": [0.1]})
    with pytest.raises(mf.ExtraRowScored):
        mf.assert_no_extra(by_split, df)


def test_scorable_output_always_passes_assert_no_extra(demo_bundle):
    scores = mf.scorable(demo_bundle.manifest)[["path", "split"]]
    mf.assert_no_extra(scores, demo_bundle.manifest)
    assert len(scores) < len(demo_bundle.manifest)  # the fixture has extra rows to drop


def test_resolve_path_is_relative_to_the_manifest(tmp_path):
    assert mf.resolve_path("audio/x.wav", tmp_path) == tmp_path / "audio/x.wav"
    assert mf.resolve_path("/abs/x.wav", tmp_path).as_posix() == "/abs/x.wav"


def test_a_clip_in_both_fold_probe_and_fold_test_is_refused_naming_the_rows(tmp_path):
    df = frame({"fold": "test", "path": "itw/1.wav"}, {"fold": "1"},
               {"fold": "probe", "path": "itw/1.wav", "group": "itw:A"},
               {"fold": "probe", "path": "itw/2.wav", "group": "itw:A"})
    p = tmp_path / "m.csv"
    df.to_csv(p, index=False)
    with pytest.raises(mf.ManifestError) as err:
        mf.read_manifest(p)
    assert "1 clip(s) in both fold probe and fold test: row 1 (r0, fold test), row 3 (r2, fold " \
           "probe)" in str(err.value) and str(p) in str(err.value)
    df.loc[2, "path"] = "itw/3.wav"  # its own clip: a probe beside the test split is fine
    mf.validate(df)


def test_probe_rows_are_never_in_the_exported_splits():
    df = frame({"fold": "test"}, {"fold": "probe", "path": "itw/1.wav"}, {"fold": "holdout"})
    assert mf.scorable(df)["id"].tolist() == ["r0", "r2"]
    with pytest.raises(mf.ManifestError, match="never trained on: train_scope core"):
        mf.validate(frame({"fold": "probe", "train_scope": "extra"}))


def test_the_error_names_the_file_row_and_column_given_and_nothing_else():
    err = mf.ManifestError("bad", path="m.csv", row=2, column="label")
    assert str(err) == "m.csv, row 2, column 'label': bad"
    assert str(mf.ManifestError("bad", path="m.csv")) == "m.csv: bad"
    assert str(mf.ManifestError("bad", row=3)) == "row 3: bad"
    assert str(mf.ManifestError("bad")) == "bad"


@pytest.mark.parametrize("selector, selected", [
    ("label=spoof", ("label", "spoof")),
    ("generator=tts=v2", ("generator", "tts=v2")),  # the column ends at the first '='
    ("ITW", ("source", "ITW")),  # a bare name is a source
    ("group=", ("group", "")),
])
def test_a_selector_is_column_equals_value_or_a_bare_source_name(selector, selected):
    assert mf.parse_selector(selector) == selected
