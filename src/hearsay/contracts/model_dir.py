"""The exported model folder `hearsay export onnx CHECKPOINT --out MODEL_DIR` writes and
`hearsay-score --model MODEL_DIR` reads (docs/INTERFACES.md, "Exported model folder"), spelled
once: export, parity and the scorer go through these names.

    MODEL_DIR/
      model.onnx         fp32: input_values (B, T), attention_mask (B, T) -> logits (B,)   ONNX
      model.int8.onnx    only when it passed its gate against fp32                          INT8
      model.portable.onnx  the plain export (standard ONNX operators only), beside    PORTABLE
                         a model.onnx with onnxruntime's fused attention; both held to parity A
      front_end.json     sound.audio.prepare's arguments + sample_rate, min_s        write_front_end
      thresholds.json    out-of-fold decision thresholds + logit -> LLR            read_thresholds
                         calibration (from the campaign's meta.json; optional)
      format.json        names the format: inputs, outputs, graphs, score rule     CONFIG
      README.md          the model card (data, recipe, metrics, gate, limits)      CARD
      SHA256SUMS         sha256 of the files above (the ones that make a score     write_sums
                         or a decision, and what describes them);
                         its own sha256 is the folder's identity, what
                         $HEARSAY_MODEL_SUMS_SHA256 pins and every score row names
      parity.json        the folder's record (parity A, fusion, int8, parity B),   update_parity
                         beside SHA256SUMS, not in it: adding to it keeps the identity

    from hearsay.contracts import model_dir
    path, identity, front = model_dir.verify(folder, "int8")   # ModelError names what is wrong
    x = prepare(wave, **model_dir.prepare_args(front))         # the front end, as in training
    model_dir.update_parity(folder, {"parity_b": report})      # atomic (hearsay.util.files)

Stdlib only (plus hearsay.util.hashing and hearsay.util.files): the deploy image imports it,
torch-free.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from hearsay.util.files import write_atomic
from hearsay.util.hashing import SUMS, SumsError, format_sums, read_sums, sha256_file

ONNX = "model.onnx"
INT8 = "model.int8.onnx"
PORTABLE = "model.portable.onnx"  # the unfused graph, when model.onnx holds fused operators
THRESHOLDS = "thresholds.json"
CONFIG = "format.json"  # names the format (not config.json: a checkpoint's config)
CARD = "README.md"
FRONT_END = "front_end.json"
FRONT_END_GRAPH = "front_end.onnx"  # the front end's arithmetic for other runtimes (raw_graph)
PARITY = "parity.json"
VARIANTS = {"fp32": ONNX, "int8": INT8, "portable": PORTABLE}  # --variant -> the model file
PIN = "HEARSAY_MODEL_SUMS_SHA256"  # the identity a deploy image bakes in (environment variable)
SAMPLE_RATE = 16_000  # Hz: the one rate a front_end.json may name (hearsay.sound.audio.SAMPLE_RATE)


class ModelError(Exception):
    """The model folder is missing, incomplete or does not match its SHA256SUMS (hearsay-score
    exits 3); the message names the file and the fix."""


# --------------------------------------------------------------------------- front_end.json


def front_end(max_s: float, cutoff_hz: float, top_db: float, min_s: float) -> dict:
    """front_end.json's content, in its key order (its bytes are part of the identity)."""
    return {"sample_rate": SAMPLE_RATE, "max_s": max_s, "cutoff_hz": cutoff_hz,
            "top_db": top_db, "min_s": min_s}


def prepare_args(front: dict) -> dict:
    """hearsay.sound.audio.prepare's keyword arguments from a front end: max_s, cutoff_hz,
    top_db."""
    return {"max_s": front["max_s"], "cutoff_hz": front["cutoff_hz"], "top_db": front["top_db"]}


def write_front_end(folder: Path, front: dict) -> None:
    write_atomic(Path(folder) / FRONT_END, json.dumps(front, indent=2) + "\n")


# front_end.json's keys: (required, what a value may be). max_s must be a window length, min_s
# at most max_s; cutoff_hz None = no band-limit; sample_rate is SAMPLE_RATE whenever present.
FRONT_KEYS = {"sample_rate": False, "max_s": True, "cutoff_hz": True, "top_db": True,
              "min_s": False}
MAX_WINDOW_S = 3600.0  # a max_s at or above an hour is no window length


def read_json(path: Path) -> object:
    """Strict JSON of a model folder file (no NaN/Infinity literals); ModelError naming the file
    when it cannot be read or parsed."""

    def no_constant(name: str):
        raise ValueError(f"{name} is not strict JSON")

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"), parse_constant=no_constant)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        why = getattr(err, "strerror", None) or str(err)
        raise ModelError(f"{path} cannot be read as JSON ({why}): re-export the model folder "
                         "(`hearsay export onnx`)") from None


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value)


def check_front_end(front, where: str) -> dict:
    """`front` as a valid front end (FRONT_KEYS, finite numbers in range), else ModelError naming
    `where` (the file, or the graph's metadata) and the key."""
    if not isinstance(front, dict):
        raise ModelError(f"{where} is not a JSON object: re-export the model folder")
    problems = [f"unknown key {k!r}" for k in front if k not in FRONT_KEYS]
    problems += [f"no {k}" for k, required in FRONT_KEYS.items() if required and k not in front]
    for key in FRONT_KEYS:
        if key not in front or (key == "cutoff_hz" and front[key] is None):
            continue
        if not _number(front[key]):
            problems.append(f"{key} {front[key]!r} is not a finite number")
    if not problems:
        max_s, min_s = front["max_s"], front.get("min_s", 0.0)
        checks = [(front.get("sample_rate", SAMPLE_RATE) == SAMPLE_RATE,
                   f"sample_rate {front.get('sample_rate')!r} != {SAMPLE_RATE}"),
                  (0 < max_s < MAX_WINDOW_S, f"max_s {max_s!r} is not a window length in "
                   f"seconds (0 < max_s < {MAX_WINDOW_S:g})"),
                  (0 <= min_s <= max_s, f"min_s {min_s!r} is not in 0..max_s"),
                  (front["top_db"] > 0, f"top_db {front['top_db']!r} is not > 0"),
                  (front["cutoff_hz"] is None or 0 < front["cutoff_hz"] <= SAMPLE_RATE / 2,
                   f"cutoff_hz {front['cutoff_hz']!r} is not in (0, {SAMPLE_RATE // 2}]")]
        problems = [why for ok, why in checks if not ok]
    if problems:
        raise ModelError(f"{where}: {'; '.join(problems)}: re-export the model folder "
                         "(`hearsay export onnx`)")
    return front


def read_front_end(folder: Path) -> dict:
    """front_end.json as written; ModelError naming the file unless it is a valid front end
    (check_front_end)."""
    path = Path(folder) / FRONT_END
    return check_front_end(read_json(path), str(path))


GRAPH_FRONT_END = "hearsay.front_end"  # the metadata_props key the export stamps (onnx_meta)


def check_graph_front_end(folder: Path, model_path: Path, metadata: dict) -> None:
    """ModelError unless the graph's own metadata_props (`metadata`: onnxruntime's
    custom_metadata_map) carry the front end front_end.json holds: an edited front_end.json
    with a remade SHA256SUMS would prepare inputs the model was not exported for."""
    stamped = metadata.get(GRAPH_FRONT_END)
    if stamped is None:
        raise ModelError(f"{model_path} carries no {GRAPH_FRONT_END} in its metadata_props, so "
                         f"{Path(folder) / FRONT_END} cannot be checked against it: re-export "
                         "the model folder (`hearsay export onnx` stamps it)")
    front = read_front_end(folder)
    try:
        graph = check_front_end(json.loads(stamped), f"{model_path} {GRAPH_FRONT_END}")
    except ValueError:
        raise ModelError(f"{model_path} {GRAPH_FRONT_END} is not JSON: re-export the model "
                         "folder") from None
    if graph != front:
        differ = sorted(k for k in {*graph, *front} if graph.get(k) != front.get(k))
        raise ModelError(f"{Path(folder) / FRONT_END} differs from the front end {model_path} "
                         f"was exported with (its metadata_props: {differ}): the model folder "
                         "was edited; re-export or re-download it")


# --------------------------------------------------------------------------- SHA256SUMS


def write_sums(folder: Path, names: list[str]) -> None:
    """SHA256SUMS over `names` in sha256sum's format ('<hex>  <name>'), names sorted."""
    folder = Path(folder)
    write_atomic(folder / SUMS, format_sums({n: sha256_file(folder / n) for n in names}))


def model_sums(folder: Path) -> dict[str, str]:
    """The folder's SHA256SUMS -> {name: hex}; ModelError if it is missing or malformed."""
    path = Path(folder) / SUMS
    if not path.is_file():
        raise ModelError(f"{path} not found (export the model with `hearsay export onnx`)")
    try:
        return read_sums(path)
    except SumsError as e:
        raise ModelError(f"{e}; re-export the model (`hearsay export onnx`)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelError(f"{path} cannot be read ({getattr(e, 'strerror', None) or e}): "
                         "re-export or re-download the model folder") from None


def refresh_sum(folder: Path, name: str) -> bool:
    """Rewrite `name`'s line in SHA256SUMS from the file as it is now, if it is listed there
    (the identity then changes); False, and nothing written, if it is not listed."""
    folder = Path(folder)
    sums = model_sums(folder)
    if name not in sums:
        return False
    sums[name] = sha256_file(folder / name)
    write_atomic(folder / SUMS, format_sums(sums))
    return True


def verify(folder: Path, variant: str = "fp32") -> tuple[Path, str, dict]:
    """Check every file in SHA256SUMS; return (model path, the folder's identity, front end).

    The identity is the sha256 of SHA256SUMS itself (which lists every file that makes a score:
    the model files and front_end.json): what $HEARSAY_MODEL_SUMS_SHA256 pins, when it is set,
    and every row's model_sums_sha256 names.

    The front end dict holds prepare()'s kwargs (max_s, cutoff_hz, top_db) and min_s: clips
    shorter than that after trimming are refused, as the bundle drops them from training."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelError(f"model folder {folder} not found (pass --model DIR or set "
                         "HEARSAY_MODEL_DIR)")
    sums = model_sums(folder)
    name = VARIANTS[variant]
    for required in (ONNX, name, FRONT_END):
        if required not in sums:
            raise ModelError(f"{folder}: {required} is not listed in {SUMS} (for int8: "
                             "it did not pass its parity gate; use --variant fp32)")
    for fname, want in sums.items():
        path = folder / fname
        if not path.is_file():
            raise ModelError(f"{path} listed in {SUMS} but missing")
        try:
            got = sha256_file(path)
        except OSError as e:
            raise ModelError(f"{path} listed in {SUMS} cannot be read ({e.strerror or e}): "
                             "make the model folder readable, or re-download it") from None
        if got != want:
            raise ModelError(f"{path}: sha256 {got} does not match {SUMS} {want} "
                             "(re-export or re-download the model folder)")
    identity = sha256_file(folder / SUMS)  # read just above
    pinned = os.environ.get(PIN)  # the deploy image bakes it
    if pinned is not None and not re.fullmatch(r"[0-9a-f]{64}", pinned):
        raise ModelError(f"{PIN} is set to {pinned!r}, not a sha256 (64 lower-case hex): set "
                         "it to the model folder's SHA256SUMS sha, or unset it (an empty value "
                         "never switches the pin off)")
    if pinned is not None and identity != pinned:  # SUMS lists every file: it pins the folder
        raise ModelError(f"{folder}/{SUMS}: sha256 {identity} is not the pinned {PIN} {pinned} "
                         "(wrong model folder mounted or baked)")
    front = read_front_end(folder)
    return folder / name, identity, {**prepare_args(front),
                                     "min_s": float(front.get("min_s", 0.0))}


# --------------------------------------------------------------------------- the whole folder


def clear(folder: Path) -> None:
    """Remove what an export writes, SHA256SUMS first: a folder cleared halfway is refused."""
    for stale in (SUMS, ONNX, INT8, PORTABLE, THRESHOLDS, CONFIG, CARD, PARITY):
        (Path(folder) / stale).unlink(missing_ok=True)


def read_parity(folder: Path) -> dict:
    return json.loads((Path(folder) / PARITY).read_text())


def write_parity(folder: Path, report: dict) -> None:
    write_atomic(Path(folder) / PARITY, json.dumps(report, indent=2) + "\n")


def update_parity(folder: Path, entries: dict) -> None:
    """parity.json with `entries` set (parity_b, parity_b_cpu_check), the rest as it was."""
    write_parity(folder, {**read_parity(folder), **entries})


# --------------------------------------------------------------------------- thresholds.json


def write_thresholds(folder: Path, content: dict) -> None:
    write_atomic(Path(folder) / THRESHOLDS, json.dumps(content, indent=2) + "\n")


def read_thresholds(folder: Path) -> dict | None:
    """thresholds.json when SHA256SUMS lists it (None when the folder ships none); ModelError
    when it is there but not listed (a decision must come from the folder's identity), or when
    what the scorer reads of it is malformed (check_thresholds), naming the file."""
    folder = Path(folder)
    if THRESHOLDS not in model_sums(folder):
        if (folder / THRESHOLDS).exists():
            raise ModelError(f"{folder / THRESHOLDS} is not listed in {SUMS} (re-export the "
                             "model folder with `hearsay export onnx --meta`)")
        return None
    path = folder / THRESHOLDS
    return check_thresholds(read_json(path), str(path))


def _logit(value) -> float | None:
    """A threshold's value as a logit: a finite number, or strict JSON's "inf" / "-inf" (a
    threshold no logit reaches); None for anything else (NaN decides nothing)."""
    if _number(value):
        return float(value)
    return float(value) if value in ("inf", "-inf") else None


def check_thresholds(doc, where: str) -> dict:
    """`doc` when its thresholds ({name: {"value": logit}}) and calibration ({"a", "b"} finite,
    or absent/null) are usable; ModelError naming `where` and the entry otherwise."""
    if not isinstance(doc, dict):
        raise ModelError(f"{where} is not a JSON object: re-export the model folder with "
                         "`hearsay export onnx --meta`")
    named, cal, problems = doc.get("thresholds", {}), doc.get("calibration"), []
    if not isinstance(named, dict):
        problems.append(f"thresholds {named!r} is not an object")
    else:
        problems += [f"thresholds.{k} {v!r} has no value that is a logit" for k, v in
                     named.items() if not (isinstance(v, dict) and _logit(v.get("value"))
                                           is not None)]
    if cal is not None and not (isinstance(cal, dict) and _number(cal.get("a")) and
                                _number(cal.get("b"))):
        problems.append(f"calibration {cal!r} is not {{\"a\": number, \"b\": number}}")
    if problems:
        raise ModelError(f"{where}: {'; '.join(problems)}: re-export the model folder with "
                         "`hearsay export onnx --meta`")
    return doc


def threshold(thresholds: dict | None, spec: str) -> tuple[str, float]:
    """(name, logit threshold) of `spec`: a name in thresholds.json ("min_dcf", "eer",
    "fa_rate") or a number; ModelError naming the choices otherwise, ValueError for a number
    that is not finite (nan decides nothing, inf everything)."""
    named = (thresholds or {}).get("thresholds", {})
    if spec in named:
        return spec, _logit(named[spec]["value"])  # "inf" (strict JSON's spelling) too
    try:
        value = float(spec)
    except ValueError:
        value = None
    if value is not None and not math.isfinite(value):
        raise ValueError(f"threshold {spec!r} is not a finite logit: pass a number such as "
                         f"0.5, or a name in {THRESHOLDS}")
    if value is not None:
        return "value", value
    have = f"it has {sorted(named)}" if named else f"this model folder has no {THRESHOLDS}"
    raise ModelError(f"threshold {spec!r}: pass a number (a logit) or a name; {have} "
                     "(export with `hearsay export onnx --meta models/<stamp>/meta.json`)")
