"""drop_extra_families (hearsay.bundle.select): the extra rows of a named generator family leave
the manifest before the fold check, in `hearsay splits` and `hearsay bundle`; core rows of that
family stay (the holdout keeps them); an extra row of a holdout family no rule drops is refused."""

import json

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from hearsay.bundle import build as bundle
from hearsay.bundle import splits
from hearsay.bundle.select import SelectionConfig, SelectionError, drop_extra_rows
from hearsay.contracts.bundle import load_bundle
from hearsay.sound import audio

SR = audio.SAMPLE_RATE
COLS = ["id", "path", "label", "generator", "source", "group", "fold", "train_scope"]


def _corpus(root, extra_generators=("phq-x", "voc-x")):
    """Real WAVs and a manifest (folds empty): 10 inner core rows (voc-a spoof), a core group
    holding phq-a (the holdout family), one extra spoof row per extra generator, one extra bona
    fide row."""
    (root / "a").mkdir(parents=True)
    rows = []

    def add(rid, label, gen, group, scope="core"):
        t = np.arange(int((1.0 + 0.05 * len(rows)) * SR)) / SR
        sf.write(root / "a" / f"{rid}.wav", (0.4 * np.sin(2 * np.pi * (200 + 10 * len(rows)) * t))
                 .astype(np.float32), SR, subtype="PCM_16")
        rows.append({"id": rid, "path": f"a/{rid}.wav", "label": label, "generator": gen,
                     "source": "s", "group": group, "fold": "", "train_scope": scope})

    for g in range(5):
        add(f"i{g}b", "bonafide", "bonafide", f"g{g}")
        add(f"i{g}s", "spoof", "voc-a", f"g{g}")
    add("h0", "spoof", "phq-a", "gh")
    add("h1", "bonafide", "bonafide", "gh")
    for k, gen in enumerate(extra_generators):
        add(f"x{k}", "spoof", gen, f"gx{k}", "extra")
    add("xb", "bonafide", "bonafide", "gxb", "extra")
    pd.DataFrame(rows, columns=COLS).to_csv(root / "manifest.csv", index=False)
    return root / "manifest.csv"


def _json(path, doc):
    path.write_text(json.dumps(doc))
    return path


def test_the_rule_drops_the_extra_rows_before_the_folds_and_the_bundle_counts_them(tmp_path,
                                                                                 capsys):
    manifest = _corpus(tmp_path / "corpus")
    splits_cfg = _json(tmp_path / "splits.json", {"holdout_families": ["phq"]})
    sel = _json(tmp_path / "sel.json", {"drop_extra_families": ["phq"]})
    make = ["make", str(manifest), "--out", str(tmp_path / "splits"), "--name", "t",
            "--config", str(splits_cfg)]
    # without the rule the existing refusal stands, and names the rule as the fix
    assert splits.main(make) == splits.EXIT_REJECTED
    err = capsys.readouterr().err
    assert "['x0'] come from holdout families ['phq']" in err and "drop_extra_families" in err
    assert splits.main([*make, "--selection", str(sel)]) == splits.EXIT_OK
    assert "1 extra row(s) dropped by drop_extra_families (phq=1)" in capsys.readouterr().out
    fold_file = tmp_path / "splits" / "t.folds.json"
    assigned = json.loads(fold_file.read_text())["folds"]
    assert "x0" not in assigned and assigned["h0"] == assigned["h1"] == "holdout"
    verify = ["verify", str(fold_file), "--manifest", str(manifest)]
    assert splits.main(verify) == splits.EXIT_REJECTED  # x0 is in the manifest, not the folds
    assert splits.main([*verify, "--selection", str(sel)]) == splits.EXIT_OK
    capsys.readouterr()
    out = tmp_path / "b"
    args = [str(manifest), str(out), "--folds", str(fold_file), "--codecs", "", "--workers", "1",
            "--no-progress"]
    # the bundle without the rule: the manifest's x0 is in no fold (the fold file lacks it)
    assert bundle.main(args) == bundle.EXIT_REJECTED
    assert "'x0' is not in" in capsys.readouterr().err
    assert bundle.main([*args, "--selection", str(sel)]) == bundle.EXIT_OK
    assert "1 rows dropped by drop_extra_families" in capsys.readouterr().out
    b = load_bundle(out)
    m = b.manifest.set_index("id")
    assert "x0" not in m.index and "x1" in m.index and "xb" in m.index
    # the core rows of the family are untouched: the holdout keeps them
    assert m.loc["h0", "fold"] == "holdout" and m.loc["h0", "generator"] == "phq-a"
    meta = json.loads((out / "bundle_meta.json").read_text())
    assert meta["counts"]["extra_family_dropped"] == 1 and meta["counts"]["rows"] == 15
    assert meta["counts"]["ok"] == 14  # every manifest row but x0
    outcome = meta["selection"]["outcome"]
    assert outcome["extra_families"] == {"phq": 1}
    assert outcome["by_rule"] == {"drop_extra_families": 1}
    assert [(d["id"], d["rule"], d["family"]) for d in outcome["dropped"]] == [
        ("x0", "drop_extra_families", "phq")]
    # in the hashed identity too: the rule decides which rows exist
    ident = json.loads((out / "selection.json").read_text())
    assert ident["selection"]["config"]["drop_extra_families"] == ["phq"]


def test_an_extra_row_of_a_holdout_family_no_rule_drops_is_still_refused(tmp_path, capsys):
    manifest = _corpus(tmp_path / "corpus", extra_generators=("phq-x", "smr-x"))
    splits_cfg = _json(tmp_path / "splits.json", {"holdout_families": ["phq", "smr"]})
    sel = _json(tmp_path / "sel.json", {"drop_extra_families": ["phq"]})
    code = splits.main(["make", str(manifest), "--out", str(tmp_path / "splits"), "--name", "t",
                       "--config", str(splits_cfg), "--selection", str(sel)])
    assert code == splits.EXIT_REJECTED
    assert "extra row(s) ['x1'] come from holdout families" in capsys.readouterr().err
    # and at bundle time, with folds filled in the manifest and no fold file
    df = pd.read_csv(manifest, dtype=str, keep_default_na=False)
    df["fold"] = ["0", "0", "1", "1", "2", "2", "3", "3", "4", "4", "holdout", "holdout",
                  "extra", "extra", "extra"]
    df.loc[df["id"] == "h0", "generator"] = "smr-a"  # smr is a holdout family here too
    df.to_csv(manifest, index=False)
    code = bundle.main([str(manifest), str(tmp_path / "b"), "--codecs", "", "--workers", "1",
                        "--no-progress", "--selection", str(sel)])
    assert code == bundle.EXIT_REJECTED
    assert "['x1'] come from holdout families ['smr']" in capsys.readouterr().err


def _rows(specs):
    return pd.DataFrame([{"id": f"r{i}", "source": "s", "generator": g, "train_scope": sc,
                          "label": "bonafide" if g == "bonafide" else "spoof"}
                         for i, (g, sc) in enumerate(specs)])


def test_the_rule_leaves_core_rows_of_the_family_and_other_extra_rows_alone():
    df = _rows([("phq-a", "core"), ("phq-b", "core"), ("phq-x", "extra"), ("phqz-x", "extra"),
                ("voc-x", "extra"), ("bonafide", "extra")])
    kept, dropped = drop_extra_rows(df, SelectionConfig.from_dict(
        {"drop_extra_families": ["phq"]}))
    assert list(kept["id"]) == ["r0", "r1", "r3", "r4", "r5"]  # phqz is another family
    assert [d["id"] for d in dropped] == ["r2"]
    same, none = drop_extra_rows(df, SelectionConfig())
    assert same is df and none == []


def test_a_family_with_core_rows_only_is_refused_by_name():
    df = _rows([("phq-a", "core"), ("voc-x", "extra")])
    with pytest.raises(SelectionError, match=r"drop_extra_families \['phq'\]: no extra row of the "
                       r"manifest has a generator of that family \(extra families: \['voc'\]\)"):
        drop_extra_rows(df, SelectionConfig.from_dict({"drop_extra_families": ["phq"]}))
