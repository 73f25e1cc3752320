"""hearsay.evaluate.readouts: the codec readout uses only the holdout clips that hold a copy of
every codec,
in its rows (codec_panel_rows) and in its figures (codec_readout)."""

import numpy as np
import pandas as pd
import pytest

from hearsay.evaluate import readouts


def manifest(codec_ids):
    """Holdout core rows with the given codec_ids, plus an inner row and an extra holdout row
    that hold every codec (neither belongs to the readout)."""
    n = len(codec_ids)
    rows = pd.DataFrame({"id": [f"h{i}" for i in range(n)],
                         "path": [f"h{i}.flac" for i in range(n)], "fold": "holdout",
                         "train_scope": "core", "codec_ids": codec_ids})
    more = pd.DataFrame({"id": ["i0", "x0"], "path": ["i0.flac", "x0.flac"],
                         "fold": ["0", "holdout"], "train_scope": ["core", "extra"],
                         "codec_ids": ["mp3;opus", "mp3;opus"]})
    return pd.concat([rows, more], ignore_index=True)


def test_the_codec_readout_rows_are_the_holdout_clips_that_have_every_codec():
    m = manifest(["mp3;opus", "opus;mp3", "mp3", "opus", "", np.nan, "mp3;;opus"])
    rows, codecs = readouts.codec_panel_rows(m)
    assert codecs == ["mp3", "opus"]
    assert list(rows["id"]) == ["h0", "h1", "h6"]


def test_a_holdout_without_codec_copies_has_no_codec_readout_rows():
    rows, codecs = readouts.codec_panel_rows(manifest(["", np.nan]))
    assert codecs == [] and rows.empty
    rows, codecs = readouts.codec_panel_rows(manifest(["mp3", "mp3"]))
    assert codecs == ["mp3"] and list(rows["id"]) == ["h0", "h1"]


def scored(paths, logits, **cols):
    return pd.DataFrame({"path": paths, "fold": "holdout", "split": "holdout",
                         "logit": logits, **cols})


def test_the_codec_readout_figures_use_only_clips_that_every_codec_scored():
    paths = [f"c{i}" for i in range(8)]
    key = pd.DataFrame({"path": paths, "label": ["bonafide", "spoof"] * 4})
    y = (key["label"] == "spoof").to_numpy()
    clean = scored(paths, np.where(y, 2.0, -2.0))
    mp3 = scored(paths, np.where(y, 1.0, -1.0), codec="mp3")
    opus = scored(paths[:6], np.where(y[:6], 1.0, -1.0), codec="opus")  # c6, c7 not scored
    # c6 (bona fide) and c7 (synthetic) ranked wrong in mp3: counted only if they slipped in
    mp3.loc[6:, "logit"] = [5.0, -5.0]
    out = readouts.codec_readout(clean, pd.concat([mp3, opus], ignore_index=True), key)
    assert out["n_clips"] == 6 and out["codecs"] == ["mp3", "opus"]
    shas = {r["paths_sha"] for r in out["rows"].values()}
    assert len(shas) == 1  # clean, mp3 and opus on the same six clips
    assert out["rows"]["mp3"]["min_dcf"] == pytest.approx(0.0)
    assert out["rows"]["clean"]["n_bonafide"] + out["rows"]["clean"]["n_spoof"] == 6


def test_a_codec_readout_without_codec_rows_is_undefined_not_the_clean_row_alone():
    key = pd.DataFrame({"path": ["a", "b"], "label": ["bonafide", "spoof"]})
    empty = scored([], [], codec=[])
    out = readouts.codec_readout(scored(["a", "b"], [0.0, 1.0]), empty, key)
    assert out["n_clips"] == 0 and out["rows"] == {} and "every codec" in out["undefined"]
