"""hearsay.bundle.manifest_import: fixtures written from each format's published description map the
generator and speaker into the manifest's generator and group; anything else is refused."""

import pandas as pd
import pytest

from hearsay.bundle import manifest_import as mi
from hearsay.contracts import protocol
from hearsay.contracts.folds import SplitsConfig, assign_folds, train_ids
from hearsay.contracts.manifest import read_manifest, scorable

# ASVspoof 2019 LA README: SPEAKER_ID AUDIO_FILE_NAME - SYSTEM_ID KEY
LA_LINES = ["LA_0079 LA_T_1138215 - - bonafide", "LA_0079 LA_T_1271820 - A01 spoof",
            "LA_0080 LA_T_1000137 - A04 spoof", "LA_0080 LA_T_1000406 - - bonafide",
            "LA_0081 LA_T_1000648 - A01 spoof", "LA_0081 LA_T_1000998 - - bonafide"]


def la_release(tmp_path, lines=LA_LINES, skip=()):
    """LA/ASVspoof2019_LA_cm_protocols/<train protocol> + LA/ASVspoof2019_LA_train/flac/*."""
    la = tmp_path / "LA"
    proto = la / "ASVspoof2019_LA_cm_protocols" / "ASVspoof2019.LA.cm.train.trn.txt"
    proto.parent.mkdir(parents=True)
    proto.write_text("\n".join(lines) + "\n")
    flac = la / "ASVspoof2019_LA_train" / "flac"
    flac.mkdir(parents=True)
    for line in lines:
        name = line.split()[1]
        if name not in skip:
            (flac / f"{name}.flac").write_bytes(b"")
    return proto


def test_asvspoof_la_maps_system_id_to_generator_and_speaker_to_group(tmp_path):
    proto = la_release(tmp_path)
    df = mi.asvspoof2019_la([proto], tmp_path)
    row = df.set_index("id").loc["LA_T_1271820"]
    assert (row["label"], row["generator"], row["group"], row["source"]) == (
        "spoof", "A01", "asvspoof2019_la:LA_0079", "asvspoof2019_la")
    bona = df.set_index("id").loc["LA_T_1138215"]
    assert (bona["label"], bona["generator"]) == ("bonafide", "bonafide")
    assert (tmp_path / row["path"]).is_file()
    assert set(df["fold"]) == {""} and set(df["train_scope"]) == {"core"}


def test_an_imported_speaker_never_spans_folds_and_an_attack_is_its_own_family(tmp_path):
    df = mi.asvspoof2019_la([la_release(tmp_path)], tmp_path, scope="extra")
    cfg = SplitsConfig(n_folds=3, family_exclusion={"0": ["A01"]})
    folds = assign_folds(df, cfg)
    df["fold"] = df["id"].map(folds)
    assert (df.groupby("group")["fold"].nunique() == 1).all()
    kept = set(train_ids(df, cfg, "0"))
    a01 = set(df.loc[df["generator"] == "A01", "id"])
    assert len(a01) == 2 and not kept & a01  # A01 excluded from model 0, A04 not
    assert set(df.loc[(df["generator"] == "A04") & (df["fold"] != "0"), "id"]) <= kept


@pytest.mark.parametrize("line, why", [
    ("LA_0079 LA_T_1 - A01", "4 columns"),
    ("LA_0079 LA_T_1 aaa AA spoof", "third column 'aaa'"),
    ("LA_0079 LA_T_1 - A20 spoof", "'A20' is not one of A01-A19"),
    ("LA_0079 LA_T_1 - A01 fake", "neither bonafide nor spoof"),
    ("LA_0079 LA_T_1 - A01 bonafide", "bona fide line names system 'A01'"),
    ("PA_0079 LA_T_1 - A01 spoof", r"not LA_ \+ 4 digits"),
])
def test_asvspoof_la_refuses_lines_outside_the_published_format(tmp_path, line, why):
    proto = la_release(tmp_path, LA_LINES[:2] + [line])
    with pytest.raises(mi.ImportRefused, match=f"line 3: .*{why}"):
        mi.asvspoof2019_la([proto], tmp_path)


def test_asvspoof_la_refuses_a_missing_clip_file_naming_it(tmp_path):
    proto = la_release(tmp_path, skip=("LA_T_1000137",))
    with pytest.raises(mi.ImportRefused, match=r"1 clip file\(s\) missing.*LA_T_1000137\.flac"):
        mi.asvspoof2019_la([proto], tmp_path)


def itw_release(tmp_path, rows, header="file,speaker,label"):
    rel = tmp_path / "release_in_the_wild"
    rel.mkdir(parents=True)
    (rel / "meta.csv").write_text("\n".join([header, *rows]) + "\n")
    for r in rows:
        (rel / r.split(",")[0]).write_bytes(b"")
    return rel / "meta.csv"


def test_in_the_wild_maps_labels_and_speakers(tmp_path):
    meta = itw_release(tmp_path, ["0.wav,Alec Guinness,spoof",
                                  "4.wav,Christopher Hitchens,bona-fide",
                                  "7.wav,Alec Guinness,bona-fide"])
    df = mi.in_the_wild(meta, tmp_path).set_index("id")
    assert list(df.index) == ["itw-0", "itw-4", "itw-7"]
    assert (df.loc["itw-0", "label"], df.loc["itw-0", "generator"]) == ("spoof", mi.ITW_GENERATOR)
    assert (df.loc["itw-4", "label"], df.loc["itw-4", "generator"]) == ("bonafide", "bonafide")
    assert df.loc["itw-0", "group"] == df.loc["itw-7", "group"] == "in_the_wild:Alec Guinness"


def test_in_the_wild_refuses_another_label_or_header(tmp_path):
    with pytest.raises(mi.ImportRefused, match="line 2: label 'fake'"):
        mi.in_the_wild(itw_release(tmp_path / "a", ["0.wav,A,fake"]), tmp_path)
    with pytest.raises(mi.ImportRefused, match="exactly file,speaker,label"):
        mi.in_the_wild(itw_release(tmp_path / "b", ["0.wav,A,spoof"], "path,speaker,label"),
                       tmp_path)


MLAAD_HEAD = ("path|original_file|language|is_original_language|duration|training_data|"
              "model_name|architecture|transcript")


def mlaad_release(tmp_path, model, rows, language="en", head=MLAAD_HEAD):
    folder = tmp_path / "MLAAD" / "fake" / language / model
    folder.mkdir(parents=True)
    (folder / "meta.csv").write_text("\n".join([head, *rows]) + "\n")
    for r in rows:
        clip = tmp_path / "MLAAD" / r.split("|")[0]
        clip.parent.mkdir(parents=True, exist_ok=True)
        clip.write_bytes(b"")
    return tmp_path / "MLAAD"


def mlaad_row(model, name, original, language="en"):
    return f"./fake/{language}/{model}/{name}.wav|{original}|{language}|True|3.2|x|{model}|vits|hi"


BARK = "tts_models_multilingual_multi-dataset_bark"


def test_mlaad_maps_the_model_folder_to_generator_and_the_mailabs_reader_to_group(tmp_path):
    root = mlaad_release(tmp_path, BARK, [
        mlaad_row(BARK, "a", "en_US/by_book/female/judy_bieber/dorothy/wavs/x_0001.wav"),
        mlaad_row(BARK, "b", "en_US/by_book/male/elliot_miller/pink/wavs/y_0002.wav")])
    df, dropped = mi.mlaad(root, tmp_path)
    assert dropped == 0 and set(df["label"]) == {"spoof"} and set(df["source"]) == {"mlaad"}
    assert set(df["generator"]) == {"tts_models_multilingual_multi_dataset_bark"}
    assert SplitsConfig().family(df["generator"].iloc[0]) == df["generator"].iloc[0]
    assert list(df["group"]) == ["mailabs:en_US/judy_bieber", "mailabs:en_US/elliot_miller"]
    assert all((tmp_path / p).is_file() for p in df["path"])


def test_mlaad_refuses_a_row_without_a_reader_unless_told_to_drop_it(tmp_path):
    root = mlaad_release(tmp_path, "m", [
        mlaad_row("m", "a", "en_US/by_book/female/judy_bieber/dorothy/wavs/x.wav"),
        mlaad_row("m", "b", "en_US/somewhere/y.wav")])
    with pytest.raises(mi.ImportRefused, match="1 row.*no M-AILABS.*somewhere"):
        mi.mlaad(root, tmp_path)
    df, dropped = mi.mlaad(root, tmp_path, skip_ungrouped=True)
    assert dropped == 1 and len(df) == 1


def test_mlaad_refuses_another_header_or_a_path_outside_its_folder(tmp_path):
    root = mlaad_release(tmp_path / "a", "m", [mlaad_row("m", "a", "x")], head="path|label")
    with pytest.raises(mi.ImportRefused, match=r"MLAAD's meta.csv starts path\|original_file"):
        mi.mlaad(root, tmp_path)
    row = mlaad_row("m", "a", "en_US/by_book/female/j/b/wavs/x.wav").replace("./fake/en/m/",
                                                                            "./fake/de/m/")
    root = mlaad_release(tmp_path / "b", "m", [row])
    with pytest.raises(mi.ImportRefused, match="not under fake/en/m/"):
        mi.mlaad(root, tmp_path)


def test_the_command_writes_a_manifest_that_reads_back_and_refuses_to_overwrite(tmp_path,
                                                                               capsys):
    proto = la_release(tmp_path)
    out = tmp_path / "corpora" / "la.csv"
    assert mi.main(["asvspoof2019-la", str(proto), "--out", str(out)]) == mi.EXIT_OK
    df = read_manifest(out)
    assert len(df) == 6 and (out.parent / df["path"].iloc[0]).is_file()
    assert "6 clips (3 bona fide, 3 spoof)" in capsys.readouterr().out
    assert mi.main(["asvspoof2019-la", str(proto), "--out", str(out)]) == mi.EXIT_EXISTS
    bad = tmp_path / "x" / "meta.csv"
    bad.parent.mkdir()
    bad.write_text("file,speaker,label\n0.wav,A,fake\n")
    assert mi.main(["in-the-wild", str(bad), "--out", str(tmp_path / "i.csv")]) == 3
    assert "refused: " in capsys.readouterr().err
    assert isinstance(pd.read_csv(out), pd.DataFrame)


def test_test_puts_every_imported_row_in_fold_test_and_the_folds_keep_it_there(tmp_path):
    meta = itw_release(tmp_path, ["0.wav,A,spoof", "1.wav,A,bona-fide", "2.wav,B,bona-fide"])
    la = tmp_path / "la.csv"
    assert mi.main(["asvspoof2019-la", str(la_release(tmp_path)), "--out", str(la)]) == 0
    assert set(read_manifest(la)["fold"]) == {""}  # without --test: assigned later
    out = tmp_path / "itw.csv"
    assert mi.main(["in-the-wild", str(meta), "--out", str(out), "--test"]) == mi.EXIT_OK
    itw = read_manifest(out)
    assert list(itw["fold"]) == ["test"] * 3
    both = pd.concat([read_manifest(la), itw], ignore_index=True)
    folds = assign_folds(both, SplitsConfig(n_folds=2))
    assert {folds[i] for i in itw["id"]} == {"test"}
    assert "test" not in {folds[i] for i in read_manifest(la)["id"]}


def test_probe_puts_in_the_wild_in_fold_probe_and_the_test_split_stays_the_sponsors(tmp_path):
    meta = itw_release(tmp_path, ["0.wav,A,spoof", "1.wav,A,bona-fide", "2.wav,B,bona-fide"])
    la = tmp_path / "la.csv"
    assert mi.main(["asvspoof2019-la", str(la_release(tmp_path)), "--out", str(la), "--test"]) == 0
    out = tmp_path / "itw.csv"
    assert mi.main(["in-the-wild", str(meta), "--out", str(out), "--probe"]) == mi.EXIT_OK
    itw, sponsor = read_manifest(out), read_manifest(la)
    assert list(itw["fold"]) == ["probe"] * 3
    both = pd.concat([sponsor, itw], ignore_index=True)
    folds = assign_folds(both, SplitsConfig(n_folds=2))
    assert {folds[i] for i in itw["id"]} == {"probe"}
    both["fold"] = both["id"].map(folds)
    # the test split is the sponsor's rows, in their order; the probe rows are its own split
    assert list(protocol.split_rows(both, "test")["id"]) == list(sponsor["id"])
    assert list(protocol.split_rows(both, "probe")["id"]) == list(itw["id"])
    assert not set(itw["id"]) & set(scorable(both)["id"])  # never in the exported file


def test_test_and_probe_together_are_a_usage_error(tmp_path, capsys):
    meta = itw_release(tmp_path, ["0.wav,A,spoof"])
    with pytest.raises(SystemExit) as err:
        mi.main(["in-the-wild", str(meta), "--out", str(tmp_path / "i.csv"), "--test", "--probe"])
    assert err.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
