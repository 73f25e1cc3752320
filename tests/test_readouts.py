"""hearsay.evaluate.readouts: the codec readout uses only the holdout clips that hold a copy of
every codec,
in its rows (codec_panel_rows) and in its figures (codec_readout)."""

import hashlib

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


def test_class_counts_count_clips_not_rows_per_inner_fold_and_per_other_split():
    scores = pd.DataFrame({   # listed out of order; "a" twice, scored apart (two augmentations)
        "path": ["g", "a", "a", "b", "c", "d", "e", "f"],
        "fold": ["test", "0", "0", "0", "1", "holdout", "holdout", "holdout"],
        "split": ["test", "inner_oof", "inner_oof", "inner_oof", "inner_oof", "holdout", "holdout",
                  "holdout"],
        "logit": [0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0]})
    key = pd.DataFrame({"path": list("abcdef"),
                        "label": ["spoof", "bonafide", "spoof", "bonafide", "spoof", "spoof"]})
    counts = readouts.class_counts(scores, key)
    assert counts == {  # "a" twice is one clip; "g" has no label
        "fold 0": {"bonafide": 1, "spoof": 1, "unlabelled": 0},
        "fold 1": {"bonafide": 0, "spoof": 1, "unlabelled": 0},
        "holdout": {"bonafide": 1, "spoof": 2, "unlabelled": 0},
        "test": {"bonafide": 0, "spoof": 0, "unlabelled": 1}}
    assert list(counts) == sorted(counts)
    lines = readouts.counts_lines(counts)
    assert lines[:5] == ["", "## Clips per fold", "", "| fold / split | bona fide | synthetic |",
                         "|---|---|---|"]
    assert lines[5:] == ["| fold 0 | 1 | 1 |", "| fold 1 | 0 | 1 |", "| holdout | 1 | 2 |",
                         "| test | 0 | 0 |"]
    assert readouts.counts_lines({}) == []


def test_the_codec_gap_is_each_codec_min_dcf_less_the_clean_row_and_the_table_says_so(tmp_path):
    paths = [f"c{i}" for i in range(8)]
    key = pd.DataFrame({"path": paths, "label": ["bonafide", "spoof"] * 4})
    y = (key["label"] == "spoof").to_numpy()
    clean = scored(paths, np.where(y, 2.0, -2.0))            # perfectly ranked: minDCF 0
    mp3 = scored(paths, np.where(y, 1.0, -1.0), codec="mp3")
    mp3.loc[0, "logit"] = 9.0                                 # one bona fide clip above all
    out = readouts.codec_readout(clean, mp3, key)
    m = out["rows"]["mp3"]["min_dcf"]
    assert m > 0 and out["gap"] == {"mp3": pytest.approx(m - out["rows"]["clean"]["min_dcf"])}
    assert out["rows"]["clean"]["min_dcf"] == pytest.approx(0.0)
    want = hashlib.sha256("".join(f"{p}\n" for p in sorted(paths)).encode()).hexdigest()
    assert {r["paths_sha"] for r in out["rows"].values()} == {want}
    lines = readouts.codec_lines(out)
    assert lines[1] == ("## Codec readout (clean = unaugmented; every row on the same 8 holdout "
                        "clips)")
    assert lines[3:5] == ["| row | EER | minDCF 0.3 | gap to clean | AUC |",
                          "|---|---|---|---|---|"]
    r = out["rows"]
    assert lines[5] == (f"| clean | {r['clean']['eer']:.4f} | {r['clean']['min_dcf']:.4f} | - | "
                        f"{r['clean']['auc']:.4f} |")
    assert lines[6] == (f"| mp3 | {r['mp3']['eer']:.4f} | {m:.4f} | {out['gap']['mp3']:+.4f} | "
                        f"{r['mp3']['auc']:.4f} |")
    assert readouts.codec_lines(None) == [] and readouts.codec_lines({}) == []
    undefined = readouts.codec_readout(clean, scored([], [], codec=[]), key)
    assert readouts.codec_lines(undefined)[-1] == f"Undefined: {undefined['undefined']}."
    assert readouts.plot_codecs(undefined, tmp_path / "u.png") is None
    png = readouts.plot_codecs(out, tmp_path / "codecs.png")
    assert png == tmp_path / "codecs.png" and png.read_bytes()[:4] == b"\x89PNG"


def test_a_codec_row_without_a_min_dcf_has_no_gap():
    key = pd.DataFrame({"path": ["a", "b"], "label": ["bonafide", "spoof"]})
    clean = scored(["a", "b"], [0.0, 1.0])
    only_bona = scored(["a"], [0.5], codec="mp3")             # one class: minDCF undefined
    out = readouts.codec_readout(clean[clean["path"] == "a"], only_bona, key)
    assert out["n_clips"] == 1 and out["gap"] == {"mp3": None}


def test_test_length_crops_are_drawn_per_clip_from_the_test_durations_alike_every_call(tmp_path):
    import soundfile as sf

    rng = np.random.default_rng(0)
    (tmp_path / "audio").mkdir()
    rows = pd.DataFrame({"id": ["x", "y", "z"], "path": ["x.flac", "y.flac", "z.flac"]})
    for i in rows["id"]:
        sf.write(tmp_path / "audio" / f"{i}.flac", rng.uniform(-0.5, 0.5, 16000 * 3), 16000)
    durations = [0.5, 1.0, 2.0]
    a = readouts.test_length_inputs(tmp_path, rows, durations)
    b = readouts.test_length_inputs(tmp_path, rows, durations)
    assert [len(w) for w in a] == [len(w) for w in b]
    assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
    assert {len(w) for w in a} <= {8000, 16000, 32000}        # each a test duration, at 16 kHz
    other = readouts.test_length_inputs(tmp_path, rows, durations,
                                        seed=readouts.TEST_LENGTH_SEED + 1)
    assert any(len(u) != len(v) or not np.array_equal(u, v) for u, v in zip(a, other, strict=True))
    short = readouts.test_length_inputs(tmp_path, rows, [0.001])
    assert {len(w) for w in short} == {320}                   # never below 20 ms
    with pytest.raises(readouts.scoring.ScoreError, match="test split's durations"):
        readouts.test_length_inputs(tmp_path, rows, [])


def test_a_manifest_without_codec_copies_has_no_codec_readout_rows_nor_codecs():
    m = manifest(["mp3", "mp3"]).drop(columns="codec_ids")
    rows, codecs = readouts.codec_panel_rows(m)
    assert codecs == [] and rows.empty


def test_the_codec_readout_keeps_only_clips_the_clean_holdout_scored_too():
    paths = [f"c{i}" for i in range(8)]
    key = pd.DataFrame({"path": paths, "label": ["bonafide", "spoof"] * 4})
    y = (key["label"] == "spoof").to_numpy()
    clean = scored(paths[:6], np.where(y[:6], 1.0, -1.0))       # c6, c7 never scored clean
    clean.loc[0, "logit"] = 3.0                                  # clean minDCF above 0
    mp3 = scored(paths, np.where(y, 1.0, -1.0), codec="mp3")
    out = readouts.codec_readout(clean, mp3, key)
    assert out["n_clips"] == 6
    base = out["rows"]["clean"]["min_dcf"]
    assert base > 0 and out["gap"]["mp3"] == pytest.approx(out["rows"]["mp3"]["min_dcf"] - base)
    lines = readouts.codec_lines(out)
    assert lines[0] == "" and lines[2] == ""
    empty = readouts.codec_readout(clean, scored([], [], codec=[]), key)
    assert empty["gap"] == {} and empty["codecs"] == []
    assert empty["undefined"] == "no holdout clip has a copy of every codec"


def test_each_clip_s_test_length_is_drawn_by_its_own_generator_and_padding_stays_out(tmp_path):
    import soundfile as sf

    from hearsay.sound import bundle_inputs, example

    (tmp_path / "audio").mkdir()
    noise = np.random.default_rng(1).uniform(-0.5, 0.5, 16000 * 3)
    ids = [f"clip{i}" for i in range(8)]
    for k, i in enumerate(ids):   # the same audio in every clip: 3 s, or 0.4 s (below any crop)
        sf.write(tmp_path / "audio" / f"{i}.flac", noise if k % 2 else noise[:6400], 16000)
    rows = pd.DataFrame({"id": ids, "path": [f"{i}.flac" for i in ids]})
    durations = np.array([0.5, 1.0, 2.0])
    got = readouts.test_length_inputs(tmp_path, rows, durations, seed=7)
    lengths = set()
    for i, w in zip(ids, got, strict=True):
        rng = bundle_inputs.aug_rng(7, i)
        n = example.n_samples(float(rng.choice(durations)))
        x = np.asarray(sf.read(tmp_path / "audio" / f"{i}.flac", dtype="float32")[0])
        assert len(w) == min(n, len(x))                          # the valid part, no padding
        crop, n_valid = example.random_crop(x, n, rng)
        assert np.allclose(w, example.finish(crop, n_valid)[:n_valid])
        lengths.add(len(w))
    assert len(lengths) > 2                                      # the clips drew apart


def test_the_codec_plot_draws_each_row_s_eer_and_min_dcf_under_its_name(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    subplots, close = plt.subplots, plt.close
    monkeypatch.setattr(plt, "subplots", lambda *a, **k: made.append(subplots(*a, **k)) or made[-1])
    monkeypatch.setattr(plt, "close", lambda fig: None)           # keep the figure to read back
    codec = {"n_clips": 6, "codecs": ["mp3"], "gap": {"mp3": 0.1},
             "rows": {"clean": {"eer": 0.1, "min_dcf": 0.2}, "mp3": {"eer": 0.3, "min_dcf": None}}}
    assert readouts.plot_codecs(codec, tmp_path / "c.png") == tmp_path / "c.png"
    fig, ax = made[-1]
    heights = [round(p.get_height(), 6) for p in ax.patches]
    assert heights == [0.1, 0.3, 0.2, 0.0]                        # EER bars, then minDCF (None: 0)
    lefts = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    assert lefts[0] < lefts[2] < lefts[1] < lefts[3]   # each name's two bars side by side
    assert [t.get_text() for t in ax.get_xticklabels()] == ["clean", "mp3"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["EER", "minDCF 0.3"]
    assert ax.get_title() == "codec readout: each row on the same 6 holdout clips"
    assert ax.get_ylabel() == "lower is better"
    close("all")
