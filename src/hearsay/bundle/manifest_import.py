"""`hearsay manifest-import`: public corpora's own metadata -> the project's manifest.csv.

    hearsay manifest-import asvspoof2019-la \\
        LA/ASVspoof2019_LA_cm_protocols/ASVspoof2019.LA.cm.train.trn.txt --out corpora/la.csv
    hearsay manifest-import in-the-wild release_in_the_wild/meta.csv --out corpora/itw.csv --probe
    hearsay manifest-import mlaad MLAAD_v5/ --out corpora/mlaad.csv [--skip-ungrouped]

Each importer fills the columns the fold assignment and the family exclusion read
(hearsay.contracts.manifest, docs/INTERFACES.md "Input manifest"): label, generator (bona fide rows
`bonafide`), source (the corpus), group (the speaker, so a speaker never spans folds; prefixed with
the corpus so two corpora's speaker names never merge), train_scope (`--scope`, default core) and an
empty fold (filled later from a fold file; `--test`: fold test, which the fold assignment
keeps; `--probe`: fold probe, the probe set, kept likewise and never in the test split, e.g.
In-the-Wild's release). Paths are written relative to the manifest's folder.
A generator's family is its name up to the first '-' (hearsay.contracts.folds.SplitsConfig.family):
'-' in a
generator name is written '_' so that each attack / TTS model is a family of its own.

The formats, as their publishers describe them (and where those descriptions were read):

ASVspoof 2019 LA: README.LA.txt of the LA release (Edinburgh DataShare, handle 10283/3336; a copy
  of its text is kept in public repositories). Protocols `ASVspoof2019.LA.cm.{train.trn,dev.trl,
  eval.trl}.txt`, one clip per line, five space-separated columns
  `SPEAKER_ID AUDIO_FILE_NAME - SYSTEM_ID KEY`: SPEAKER_ID `LA_` + 4 digits; the third column is
  always '-' in LA; SYSTEM_ID A01-A19, '-' for bona fide; KEY `bonafide` or `spoof`. Audio:
  LA/ASVspoof2019_LA_{train,dev,eval}/flac/<AUDIO_FILE_NAME>.flac (the protocols sit in
  LA/ASVspoof2019_LA_cm_protocols/). -> generator = SYSTEM_ID, group = the speaker.
In-the-Wild: the release (`release_in_the_wild/`, Hugging Face mueller91/In-The-Wild, paper
  arXiv:2203.16263) holds the clips and `meta.csv`, comma-separated with the header
  `file,speaker,label` (e.g. `0.wav,Alec Guinness,spoof`; label `bona-fide` or `spoof`), as
  quoted in public loaders (e.g. nii-yamagishilab/AntiDeepfake protocols/). The release names no
  generator: every spoof row gets the generator `in_the_wild_unknown` (one family).
  -> group = the speaker.
MLAAD: `fake/<language>/<model_name>/*.wav` with a `meta.csv` per model folder (Hugging Face
  mueller91/MLAAD; paper arXiv:2401.09512), pipe-separated, header starting
  `path|original_file|language|is_original_language|duration|training_data|model_name|
  architecture|transcript` (later releases append columns), `path` relative to the MLAAD root
  (`./fake/en/<model>/x.wav`), `original_file` the M-AILABS clip it re-synthesises, laid out
  `<lang>/by_book/<gender>/<speaker>/<book>/wavs/<file>.wav` (M-AILABS loaders' docs). MLAAD
  holds no bona fide audio. -> generator = the model folder's name, group = the M-AILABS
  speaker (`mailabs:<lang>/<speaker>`); a row whose original_file has no by_book/<gender>/<speaker>
  part is refused (or dropped and counted with --skip-ungrouped). A later column such as
  `reference_speaker` (the voice a cloning model was given) is not read: the group is the reader
  of the text source only.

Anything else (a line with another column count, an unknown label or system id, a missing column,
a clip whose file is missing) is refused, naming the file and line and the fix: these importers
read the published formats only.

Exit codes: 0 written, 2 usage (also an --out that cannot be written), 3 bad input (refused: the
message names file, line and why), 4 the output exists (pass --force to replace it).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from pathlib import Path

import pandas as pd

from hearsay.contracts.manifest import INPUT_COLUMNS, ManifestError, validate
from hearsay.util.files import write_atomic

EXIT_OK, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_EXISTS = 0, 2, 3, 4  # module docstring
SOURCES = {"asvspoof2019-la": "asvspoof2019_la", "in-the-wild": "in_the_wild",
           "mlaad": "mlaad"}  # default `source` of each importer
ITW_GENERATOR = "in_the_wild_unknown"  # the release names no generator (module docstring)
SHOW = 5  # rows named in a refusal

LA_PROTOCOL = re.compile(r"ASVspoof2019\.LA\.cm\.(train|dev|eval)\.(trn|trl)\.txt")
LA_SPEAKER = re.compile(r"LA_\d{4}")
LA_SYSTEM = re.compile(r"A(0[1-9]|1[0-9])")  # A01 - A19
ITW_LABELS = {"bona-fide": "bonafide", "spoof": "spoof"}
MLAAD_COLUMNS = ("path", "original_file", "language", "is_original_language", "duration",
                 "training_data", "model_name", "architecture", "transcript")
MAILABS_GENDERS = ("female", "male")


class OutputExists(FileExistsError):
    """--out is there and --force was not given (exit 4)."""


class ImportRefused(ValueError):
    """Input that is not the published format; the message names the file, line and fix."""


def _safe(text: str) -> str:
    """A manifest id / generator piece: [A-Za-z0-9._] only ('-' too would split a family)."""
    return re.sub(r"[^A-Za-z0-9._]+", "_", text.strip()).strip("_")


def _rows(records: list[dict], out_dir: Path, scope: str) -> pd.DataFrame:
    """Records {id, audio (Path), label, generator, source, group} -> a validated manifest."""
    missing = [str(r["audio"]) for r in records if not Path(r["audio"]).is_file()]
    if missing:
        raise ImportRefused(f"{len(missing)} clip file(s) missing, e.g. {missing[:SHOW]} "
                            "(point --audio at the release's audio folder, or unpack it whole)")
    df = pd.DataFrame([{"id": r["id"], "path": os.path.relpath(r["audio"], out_dir),
                        "label": r["label"], "generator": r["generator"], "source": r["source"],
                        "group": r["group"], "fold": "", "train_scope": scope}
                       for r in records], columns=list(INPUT_COLUMNS))
    if df.empty:
        raise ImportRefused("no clips found in the input")
    validate(df)
    return df


# --------------------------------------------------------------------------- ASVspoof 2019 LA


def asvspoof2019_la(protocols: list[Path], out_dir: Path, audio: Path | None = None,
                    source: str = SOURCES["asvspoof2019-la"], scope: str = "core") -> pd.DataFrame:
    """CM protocol file(s) -> manifest rows. `audio`: the flac folder (default: the release's
    LA/ASVspoof2019_LA_<part>/flac beside the protocols' folder, part from the file name)."""
    records = []
    for protocol in map(Path, protocols):
        m = LA_PROTOCOL.fullmatch(protocol.name)
        if audio is None and m is None:
            raise ImportRefused(f"{protocol}: not named ASVspoof2019.LA.cm.<train|dev|eval>."
                                "<trn|trl>.txt, so its audio folder is unknown: pass --audio DIR")
        flac = Path(audio) if audio is not None else \
            protocol.parent.parent / f"ASVspoof2019_LA_{m.group(1)}" / "flac"
        for n, line in enumerate(protocol.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            cols = line.split()
            where = f"{protocol}, line {n}"
            if len(cols) != 5:
                raise ImportRefused(f"{where}: {len(cols)} columns, the LA protocol has 5 "
                                    "(SPEAKER_ID AUDIO_FILE_NAME - SYSTEM_ID KEY)")
            speaker, name, unused, system, key = cols
            if not LA_SPEAKER.fullmatch(speaker):
                raise ImportRefused(f"{where}: speaker {speaker!r} is not LA_ + 4 digits")
            if unused != "-":
                raise ImportRefused(f"{where}: third column {unused!r}; LA protocols leave it "
                                    "'-' (a PA protocol? it is not imported here)")
            if key == "bonafide" and system != "-":
                raise ImportRefused(f"{where}: a bona fide line names system {system!r} "
                                    "(the LA protocol leaves it '-')")
            if key == "spoof" and not LA_SYSTEM.fullmatch(system):
                raise ImportRefused(f"{where}: system {system!r} is not one of A01-A19")
            if key not in ("bonafide", "spoof"):
                raise ImportRefused(f"{where}: key {key!r} is neither bonafide nor spoof")
            records.append({"id": _safe(name), "audio": flac / f"{name}.flac", "label": key,
                            "generator": "bonafide" if key == "bonafide" else system,
                            "source": source, "group": f"{source}:{speaker}"})
    return _rows(records, out_dir, scope)


# --------------------------------------------------------------------------- In-the-Wild


def in_the_wild(meta: Path, out_dir: Path, source: str = SOURCES["in-the-wild"],
                scope: str = "core") -> pd.DataFrame:
    """release_in_the_wild/meta.csv -> manifest rows (clips beside meta.csv)."""
    meta = Path(meta)
    with meta.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["file", "speaker", "label"]:
            raise ImportRefused(f"{meta}: header {reader.fieldnames}; the In-the-Wild "
                                "meta.csv has exactly file,speaker,label")
        records = []
        for n, row in enumerate(reader, start=2):
            label = ITW_LABELS.get(row["label"])
            if label is None:
                raise ImportRefused(f"{meta}, line {n}: label {row['label']!r}; the release "
                                    f"uses {sorted(ITW_LABELS)}")
            if not row["file"] or not row["speaker"]:
                raise ImportRefused(f"{meta}, line {n}: empty file or speaker")
            records.append({"id": f"itw-{_safe(Path(row['file']).stem)}",
                            "audio": meta.parent / row["file"], "label": label,
                            "generator": "bonafide" if label == "bonafide" else ITW_GENERATOR,
                            "source": source, "group": f"{source}:{row['speaker']}"})
    return _rows(records, out_dir, scope)


# --------------------------------------------------------------------------- MLAAD


def mailabs_speaker(original_file: str) -> str | None:
    """'en_US/by_book/female/judy_bieber/<book>/wavs/x.wav' -> 'en_US/judy_bieber'; None when
    the path has no <lang>/by_book/<female|male>/<speaker> part."""
    parts = [p for p in original_file.replace("\\", "/").split("/") if p not in ("", ".")]
    if "by_book" not in parts:
        return None
    i = parts.index("by_book")
    if i == 0 or len(parts) < i + 4 or parts[i + 1] not in MAILABS_GENDERS:
        return None
    return f"{parts[i - 1]}/{parts[i + 2]}"


def mlaad(root: Path, out_dir: Path, source: str = SOURCES["mlaad"], scope: str = "core",
          skip_ungrouped: bool = False) -> tuple[pd.DataFrame, int]:
    """MLAAD root (holding fake/) -> (manifest rows, rows dropped for want of a speaker)."""
    root = Path(root)
    metas = sorted((root / "fake").glob("*/*/meta.csv"))
    if not metas:
        raise ImportRefused(f"{root}: no fake/<language>/<model_name>/meta.csv (point at the "
                            "MLAAD folder that holds fake/)")
    records, ungrouped = [], []
    for meta in metas:
        language, model = meta.parent.parent.name, meta.parent.name
        with meta.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f, delimiter="|", quoting=csv.QUOTE_NONE)
            head = tuple(reader.fieldnames or ())
            if head[:len(MLAAD_COLUMNS)] != MLAAD_COLUMNS:
                raise ImportRefused(f"{meta}: header {list(head)}; MLAAD's meta.csv starts "
                                    f"{'|'.join(MLAAD_COLUMNS)}")
            for n, row in enumerate(reader, start=2):
                rel = Path(row["path"])
                if rel.is_absolute() or ".." in rel.parts \
                        or rel.parts[:3] != ("fake", language, model):
                    raise ImportRefused(f"{meta}, line {n}: path {row['path']!r} is not under "
                                        f"fake/{language}/{model}/")
                speaker = mailabs_speaker(row["original_file"] or "")
                if speaker is None:
                    ungrouped.append(f"{meta}, line {n}: {row['original_file']!r}")
                    continue
                records.append({"id": _safe(f"mlaad.{language}.{model}.{rel.stem}"),
                                "audio": root / rel, "label": "spoof",
                                "generator": _safe(model), "source": source,
                                "group": f"mailabs:{speaker}"})
    if ungrouped and not skip_ungrouped:
        raise ImportRefused(f"{len(ungrouped)} row(s) whose original_file names no M-AILABS "
                            f"<lang>/by_book/<female|male>/<speaker>, e.g. {ungrouped[:SHOW]}: "
                            "their speaker is unknown, so no fold can keep it apart "
                            "(--skip-ungrouped drops and counts them)")
    return _rows(records, out_dir, scope), len(ungrouped)


# --------------------------------------------------------------------------- CLI


def write(df: pd.DataFrame, out: Path, force: bool = False) -> Path:
    out = Path(out)
    if out.exists() and not force:
        raise OutputExists(f"{out} exists (pass --force to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, df.to_csv(index=False))
    return out


def main(argv: list[str] | None = None) -> int:
    doc = __doc__.split("\n\n")
    p = argparse.ArgumentParser(prog="hearsay manifest-import", description=doc[0],
                                epilog="\n\n".join(doc[1:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="corpus", required=True)
    la = sub.add_parser("asvspoof2019-la", help="CM protocol file(s) of ASVspoof 2019 LA")
    la.add_argument("protocols", nargs="+", type=Path)
    la.add_argument("--audio", type=Path, help="the flac folder (default: from the file name)")
    itw = sub.add_parser("in-the-wild", help="release_in_the_wild/meta.csv")
    itw.add_argument("meta", type=Path)
    ml = sub.add_parser("mlaad", help="the MLAAD folder that holds fake/")
    ml.add_argument("root", type=Path)
    ml.add_argument("--skip-ungrouped", action="store_true",
                    help="drop (and count) rows whose speaker is unknown instead of refusing")
    for s in (la, itw, ml):
        s.add_argument("--out", type=Path, required=True, help="the manifest CSV to write")
        s.add_argument("--source", default=SOURCES[s.prog.split()[-1]], help="`source` value")
        s.add_argument("--scope", choices=("core", "extra"), default="core",
                       help="train_scope of every row")
        s.add_argument("--force", action="store_true", help="replace an existing --out")
        fold = s.add_mutually_exclusive_group()
        fold.add_argument("--test", action="store_true",
                          help="every row in fold test (kept there by hearsay splits make): "
                               "a corpus of the sponsor's test set, which only the full model "
                               "scores and the exported file holds in this order")
        fold.add_argument("--probe", action="store_true",
                          help="every row in fold probe (kept there by hearsay splits make): "
                               "the probe set, e.g. In-the-Wild; its bona fide rows are scored "
                               "by every run and never exported (hearsay.evaluate.probe_set)")
    a = p.parse_args(argv)
    out_dir = a.out.resolve().parent
    dropped = 0
    try:
        if a.out.exists() and not a.force:
            raise OutputExists(f"{a.out} exists (pass --force to replace it)")
        if a.corpus == "asvspoof2019-la":
            df = asvspoof2019_la(a.protocols, out_dir, a.audio, a.source, a.scope)
        elif a.corpus == "in-the-wild":
            df = in_the_wild(a.meta, out_dir, a.source, a.scope)
        else:
            df, dropped = mlaad(a.root, out_dir, a.source, a.scope, a.skip_ungrouped)
        if a.test or a.probe:
            df["fold"] = "test" if a.test else "probe"
        write(df, a.out, a.force)
    except OutputExists as err:
        print(f"hearsay manifest-import: {err}", file=sys.stderr)
        return EXIT_EXISTS
    except (ImportRefused, ManifestError, FileNotFoundError) as err:
        print(f"hearsay manifest-import: refused: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:  # the manifest could not be written where --out points
        print(f"hearsay manifest-import: cannot write --out {a.out}: {err}", file=sys.stderr)
        return EXIT_USAGE
    counts = df["label"].value_counts().to_dict()
    print(f"hearsay manifest-import: {a.out}: {len(df)} clips ({counts.get('bonafide', 0)} bona "
          f"fide, {counts.get('spoof', 0)} spoof), {df['generator'].nunique()} generator(s), "
          f"{df['group'].nunique()} group(s)" + (f"; {dropped} row(s) without a speaker dropped"
                                                  if dropped else ""))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
