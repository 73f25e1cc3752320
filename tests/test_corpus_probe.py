"""hearsay.evaluate.corpus_probe: handcrafted features, the gradient-boosted corpus probe, a named
peer, augmented features, the per-source landing, thresholds from config."""

import json

import numpy as np
import pytest
import soundfile as sf

from hearsay.evaluate import corpus_probe as cp

SR = 16000


def tone(seconds, lead=0.0, trail=0.0, f=220.0, level=0.3, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    x = level * np.sin(2 * np.pi * f * t) + 0.01 * rng.normal(size=len(t))
    return np.r_[np.zeros(int(lead * SR)), x, np.zeros(int(trail * SR))].astype(np.float32)


def test_features_measure_silence_level_and_spectrum():
    f = cp.features(tone(1.0, lead=0.5, trail=0.25, f=1000.0))
    assert f["duration_s"] == pytest.approx(1.75)
    assert f["lead_silence_s"] == pytest.approx(0.5, abs=0.03)
    assert f["trail_silence_s"] == pytest.approx(0.25, abs=0.03)
    assert f["rms_dbfs"] == pytest.approx(20 * np.log10(0.3 / np.sqrt(2)), abs=0.5)
    assert f["centroid_hz"] == pytest.approx(1000.0, rel=0.1)
    assert f["rolloff85_hz"] == pytest.approx(1000.0, rel=0.1)
    assert set(f) == set(cp.FEATURES)


def test_a_corpus_with_its_own_silence_is_separable_and_a_like_one_is_not(tmp_path):
    rows = ["id,path,label,generator,source,group,fold,train_scope"]
    for i in range(36):
        src = ("x", "a", "b")[i % 3]
        lead = 0.6 if src == "x" else 0.0  # corpus x: long leading silence, nothing else
        x = tone(np.random.default_rng(i).uniform(0.8, 1.6), lead=lead,
                 f=np.random.default_rng(100 + i).uniform(150, 300), seed=i)
        sf.write(tmp_path / f"c{i}.wav", x, SR)
        rows.append(f"c{i},c{i}.wav,bonafide,bonafide,{src},g{i},0,core")
    (tmp_path / "manifest.csv").write_text("\n".join(rows) + "\n")
    out = cp.probe_manifest(tmp_path / "manifest.csv", "x")
    assert out["auc"] > 0.95 and out["separable"] and out["n_corpus"] == 12
    assert out["grouped"] and out["bound"] == 0.85
    rc = cp.main([str(tmp_path / "manifest.csv"), "--corpus", "a", "--json",
                  str(tmp_path / "a.json")])
    assert rc == 0 and json.loads((tmp_path / "a.json").read_text())["corpus"] == "a"
    assert cp.main([str(tmp_path / "manifest.csv"), "--corpus", "nope"]) == cp.EXIT_BAD_INPUT


def test_features_drawn_alike_are_not_separable():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(200, len(cp.FEATURES)))
    out = cp.separability(table, np.arange(200) % 4 == 0)
    assert out["strength"] < 0.65 and out["n_corpus"] == 50
    with pytest.raises(cp.ProbeError, match="need 10"):
        cp.separability(table[:20], np.arange(20) % 4 == 0)
    # the minimum is the config's, not the code's
    assert cp.separability(table[:20], np.arange(20) % 4 == 0,
                           cfg=cp.CorpusProbeConfig(min_per_side=5))["n_corpus"] == 5


def corpus(tmp_path, rows):
    """rows: (source, label, lead silence s, f0 Hz); writes clips + manifest, returns its path."""
    lines = ["id,path,label,generator,source,group,fold,train_scope"]
    for i, (src, label, lead, f) in enumerate(rows):
        x = tone(np.random.default_rng(i).uniform(0.8, 1.6), lead=lead, f=f, seed=i)
        sf.write(tmp_path / f"c{i}.wav", x, SR)
        scope = "extra" if src == "x" else "core"
        gen = "bonafide" if label == "bonafide" else "g-" + src
        lines.append(f"c{i},c{i}.wav,{label},{gen},{src},g{i % 9},0,{scope}")
    (tmp_path / "manifest.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "manifest.csv"


@pytest.fixture
def spoof_corpora(tmp_path):
    """Synthetic clips of three corpora: x and a open with 0.6 s of silence, b does not;
    bona fide clips of source `quiet` open with silence too, those of `loud` do not."""
    rows = []
    for i in range(14):
        f = 150 + 10 * i
        rows += [("x", "spoof", 0.6, f), ("a", "spoof", 0.6, f + 5), ("b", "spoof", 0.0, f),
                 ("quiet", "bonafide", 0.6, f), ("loud", "bonafide", 0.0, f)]
    return corpus(tmp_path, rows)


def test_a_named_peer_is_probed_alone_and_any_label_can_be_probed(spoof_corpora):
    like = cp.probe_manifest(spoof_corpora, "x", "spoof", against="a")
    unlike = cp.probe_manifest(spoof_corpora, "x", "spoof", against="b")
    assert like["against"] == "a" and like["n_corpus"] == like["n_peers"] == 14
    assert not like["separable"] and unlike["separable"] and unlike["strength"] > 0.9
    # a selector may name any manifest column: train_scope=extra is corpus x here
    assert cp.probe_manifest(spoof_corpora, "train_scope=extra", "spoof",
                             against="source=b")["separable"]
    with pytest.raises(cp.ProbeError, match="no clip with source 'c'"):
        cp.probe_manifest(spoof_corpora, "x", "spoof", against="c")


def test_the_landing_readout_names_the_bona_fide_sources_on_the_corpus_side(spoof_corpora):
    out = cp.probe_manifest(spoof_corpora, "x", "spoof", against="b")
    assert out["landing"]["quiet"]["lands"] and out["landing"]["quiet"]["share"] > 0.9
    assert not out["landing"]["loud"]["lands"] and out["landing"]["loud"]["share"] < 0.1
    assert out["landing"]["quiet"]["n"] == 14 and out["landing_share"] == 0.5
    # the share at which a source lands is the config's
    high = cp.probe_manifest(spoof_corpora, "x", "spoof", against="b",
                             cfg=cp.CorpusProbeConfig(landing_share=1.0))
    assert high["landing"]["quiet"]["lands"] is (high["landing"]["quiet"]["share"] >= 1.0)


def test_the_recipe_augmentation_is_applied_to_every_clip_before_the_features(spoof_corpora):
    from hearsay.sound.augment import AugmentConfig

    every = AugmentConfig(p_aug=1.0, w_codec=0.0, w_trim_jitter=0.0)
    out = cp.probe_manifest(spoof_corpora, "x", "spoof", against="b", aug=every)
    assert "none" not in out["augment"]["drawn"]
    assert sum(out["augment"]["drawn"].values()) == 28
    again = cp.probe_manifest(spoof_corpora, "x", "spoof", against="b", aug=every)
    assert again["auc"] == out["auc"]  # one seeded generator per clip: the same draws
    raw = cp.probe_manifest(spoof_corpora, "x", "spoof", against="b")
    assert raw["augment"] is None


def test_the_cli_reads_the_recipe_and_the_thresholds_from_files(spoof_corpora, tmp_path, capsys):
    recipe = tmp_path / "train.json"
    recipe.write_text(json.dumps({"augment": {"p_aug": 0.0}}))
    conf = tmp_path / "probe.json"
    conf.write_text(json.dumps({"bound": 0.999, "min_per_side": 12}))
    rc = cp.main([str(spoof_corpora), "--corpus", "x", "--against", "b", "--label", "spoof",
                  "--recipe", str(recipe), "--config", str(conf), "--json",
                  str(tmp_path / "out.json")])
    out = json.loads((tmp_path / "out.json").read_text())
    assert rc == 0 and out["augment"]["drawn"] == {"none": 28}
    assert out["bound"] == 0.999 and out["config"]["min_per_side"] == 12
    assert out["separable"] is (out["strength"] >= 0.999)
    conf.write_text(json.dumps({"bownd": 0.9}))
    with pytest.raises(SystemExit) as err:
        cp.main([str(spoof_corpora), "--corpus", "x", "--config", str(conf)])
    assert err.value.code == cp.EXIT_USAGE and "did you mean 'bound'" in capsys.readouterr().err


@pytest.mark.parametrize("landing_share,lands", [(0.4, True), (0.5, True), (0.6, False)])
def test_a_source_lands_at_the_configured_share_and_not_below_it(landing_share, lands):
    rng = np.random.default_rng(0)
    table = np.r_[rng.normal(1, 0.01, (20, 3)), rng.normal(0, 0.01, (20, 3))]
    is_corpus = np.arange(40) < 20
    others = np.r_[rng.normal(1, 0.01, (5, 3)), rng.normal(0, 0.01, (5, 3)),
                   rng.normal(0, 0.01, (4, 3))]  # source m: half corpus-like; source n: none
    out = cp.landing(table, is_corpus, others, ["m"] * 10 + ["n"] * 4,
                     cp.CorpusProbeConfig(landing_share=landing_share))
    assert out["m"] == {"n": 10, "share": 0.5, "lands": lands}
    assert out["n"] == {"n": 4, "share": 0.0, "lands": False}


def test_label_any_probes_a_spoof_corpus_against_a_bona_fide_one(tmp_path, capsys):
    """The spec's probe A: MLAAD (synthetic only) against LibriSpeech (bona fide only) is a
    probe across the labels, `--label any`; with one label the other corpus has no clip."""
    rows = []
    for i in range(14):
        f = 150 + 10 * i
        rows += [("mlaad", "spoof", 0.6, f), ("librispeech", "bonafide", 0.0, f + 5),
                 ("studio", "bonafide", 0.6, f)]
    manifest = corpus(tmp_path, rows)
    out_json = tmp_path / "probe_a.json"
    rc = cp.main([str(manifest), "--corpus", "mlaad", "--against", "librispeech", "--label", "any",
                  "--json", str(out_json)])
    assert rc == 0, capsys.readouterr().err
    out = json.loads(out_json.read_text())
    assert out["label"] == "any" and out["n_corpus"] == out["n_peers"] == 14
    assert out["separable"] and out["strength"] > 0.9  # MLAAD's silence tells it apart
    # the bona fide clips outside the two corpora land on MLAAD's side: they share its silence
    assert list(out["landing"]) == ["studio"] and out["landing"]["studio"]["lands"]
    with pytest.raises(cp.ProbeError, match="no clip with source 'librispeech'"):
        cp.probe_manifest(manifest, "mlaad", "spoof", against="librispeech")
