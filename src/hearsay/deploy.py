"""`hearsay-score CLIPS_DIR [-o scores.csv] [--model DIR] [--strict]`: the torch-free CPU scorer.

    hearsay-score clips/ -o scores.csv --model demo_out/export
    podman run --rm -v "$PWD/clips:/clips:ro" hearsay-score /clips      # CSV on stdout

Walks CLIPS_DIR recursively in sorted order, scores every audio file (by extension; compressed
formats go through ffmpeg via hearsay.audio) with the exported ONNX model, and writes one CSV row
per file:

    path,duration_s,score,logit,model_sha256,error

`path` is relative to CLIPS_DIR ('/'-separated); `duration_s` is the decoded clip's length in
seconds (before trim/cap); `score` = sigmoid(logit), high = synthetic; a file that cannot be read
gets empty score/logit and its reason in `error`, and the batch goes on. Input is built by
hearsay.audio.prepare with the model folder's front_end.json, exactly as in training.

The model folder (docs/INTERFACES.md) is checked before anything is scored: every file listed in
SHA256SUMS must match, the chosen model file must be listed, and when $HEARSAY_MODEL_SHA256 is set
(the deploy image sets it at build) model.onnx's sha256 must equal it. Default folder:
$HEARSAY_MODEL_DIR, else /opt/hearsay/model.

Imports numpy, soundfile, onnxruntime and hearsay.audio only -- never torch (the deploy image has
none; tests/test_deploy.py proves it in a venv without torch).

Exit codes: 0 every file scored (or some failed without --strict), 1 some files failed (--strict),
2 usage (bad arguments, CLIPS_DIR missing), 3 model folder missing, incomplete or sha mismatch.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hearsay import windows
from hearsay.audio import SAMPLE_RATE, AudioError, load_audio, prepare, trim_silence
from hearsay.hashing import SumsError, parse_sums, sha256_file

DEFAULT_MODEL_DIR = "/opt/hearsay/model"
COLUMNS = ["path", "duration_s", "score", "logit", "model_sha256", "error",
           "windows", "covered_s", "mean_logit", "peak_start_s", "peak_end_s"]
WINDOW_COLUMNS = ["path", "start_s", "end_s", "logit", "score"]  # --windows-csv, one row a window
# Extensions scored (lower case). Other files (README, .DS_Store, …) are skipped and counted.
AUDIO_EXTS = frozenset({
    ".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a", ".aac", ".mp4", ".amr", ".webm",
    ".wma", ".aif", ".aiff", ".au", ".caf", ".3gp", ".mka", ".spx", ".ulaw", ".mulaw",
})
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MODEL = 0, 1, 2, 3
MIN_SAMPLES = 400  # one frame of the CNN front end (25 ms @ 16 kHz)


class ModelError(Exception):
    """The model folder is missing, incomplete or does not match its SHA256SUMS (exit 3)."""


@dataclass(frozen=True)
class ScoreConfig:
    batch_size: int = 8  # clips per onnxruntime call (sorted by length, so padding stays small)
    chunk: int = 256  # files decoded ahead of scoring; bounds memory on large folders
    variant: str = "fp32"  # "fp32" -> model.onnx, "int8" -> model.int8.onnx
    threads: int = 0  # onnxruntime intra-op threads; 0 = the CPUs this process may use
    first_window: bool = False  # True: only the first max_s of each trimmed file (campaign)
    hop_s: float = windows.HOP_S  # window hop (s); windows are max_s long (front_end.json)
    window_chunk: int = 32  # windows decoded ahead of scoring (32 x 8 s = 16 MB): bounds memory


# --------------------------------------------------------------------------- model folder


def read_sums(model_dir: Path) -> dict[str, str]:
    """The model folder's SHA256SUMS (sha256sum's format) -> {name: hex}; ModelError if bad."""
    sums_path = model_dir / "SHA256SUMS"
    if not sums_path.is_file():
        raise ModelError(f"{sums_path} not found (export the model with `hearsay export onnx`)")
    try:
        return parse_sums(sums_path.read_text(), source=str(sums_path))
    except SumsError as e:
        raise ModelError(f"{e}; re-export the model (`hearsay export onnx`)") from None


def verify_model_dir(model_dir: Path, variant: str = "fp32") -> tuple[Path, str, dict]:
    """Check every file in SHA256SUMS; return (model path, its sha256, front end).

    The front end dict holds prepare()'s kwargs (max_s, cutoff_hz, top_db) and min_s: clips
    shorter than that after trimming are refused, as the bundle drops them from training."""
    if not model_dir.is_dir():
        raise ModelError(f"model folder {model_dir} not found (pass --model DIR or set "
                         "HEARSAY_MODEL_DIR)")
    sums = read_sums(model_dir)
    name = {"fp32": "model.onnx", "int8": "model.int8.onnx"}[variant]
    for required in ("model.onnx", name, "front_end.json"):
        if required not in sums:
            raise ModelError(f"{model_dir}: {required} is not listed in SHA256SUMS (for int8: "
                             "it did not pass its parity gate; use --variant fp32)")
    for fname, want in sums.items():
        path = model_dir / fname
        if not path.is_file():
            raise ModelError(f"{path} listed in SHA256SUMS but missing")
        got = sha256_file(path)
        if got != want:
            raise ModelError(f"{path}: sha256 {got} does not match SHA256SUMS {want} "
                             "(re-export or re-download the model folder)")
    pinned = os.environ.get("HEARSAY_MODEL_SHA256")  # the deploy image bakes the expected sha
    if pinned and sums["model.onnx"] != pinned:  # pins the fp32 model (int8 derives from it)
        raise ModelError(f"{model_dir}/model.onnx: sha256 {sums['model.onnx']} is not the pinned "
                         f"HEARSAY_MODEL_SHA256 {pinned} (wrong model folder mounted or baked)")
    front = json.loads((model_dir / "front_end.json").read_text())
    if int(front.get("sample_rate", SAMPLE_RATE)) != SAMPLE_RATE:
        raise ModelError(f"front_end.json sample_rate {front['sample_rate']} != {SAMPLE_RATE}")
    kwargs = {"max_s": front["max_s"], "cutoff_hz": front["cutoff_hz"], "top_db": front["top_db"],
              "min_s": float(front.get("min_s", 0.0))}
    return model_dir / name, sums[name], kwargs


# --------------------------------------------------------------------------- onnxruntime


def allowed_cpus() -> int:
    """CPUs this process may use: affinity mask, capped by a cgroup v2/v1 CPU quota."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cgroup_quota()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPU quota in CPUs from cgroup v2 `cpu.max` ('max 100000' = none) or v1 cfs files."""
    try:
        v2 = root / "cpu.max"
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        q, p = root / "cpu" / "cpu.cfs_quota_us", root / "cpu" / "cpu.cfs_period_us"
        if q.is_file() and p.is_file():
            quota_us = int(q.read_text())
            return None if quota_us <= 0 else quota_us / int(p.read_text())
    except (OSError, ValueError):
        return None
    return None


def make_session(model_path: Path, threads: int = 0):
    """onnxruntime CPU session: all graph optimisations, intra-op threads = allowed CPUs."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads or allowed_cpus()
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])


def pad_batch(waves: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad with zeros -> input_values (B, T) float32, attention_mask (B, T) int64."""
    t = max(len(w) for w in waves)
    x = np.zeros((len(waves), t), dtype=np.float32)
    mask = np.zeros((len(waves), t), dtype=np.int64)
    for i, w in enumerate(waves):
        x[i, : len(w)] = w
        mask[i, : len(w)] = 1
    return x, mask


def run_logits(session, waves: list[np.ndarray], batch_size: int = 8) -> np.ndarray:
    """Logits (N,) for prepared waves, batched by length (sorted, so little padding)."""
    order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
    logits = np.empty(len(waves), dtype=np.float32)
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        x, mask = pad_batch([waves[i] for i in idx])
        out = session.run(["logits"], {"input_values": x, "attention_mask": mask})[0]
        logits[idx] = np.asarray(out, dtype=np.float32).reshape(-1)
    return logits


# --------------------------------------------------------------------------- scoring a folder


def find_audio(root: Path) -> tuple[list[Path], int]:
    """Audio files under `root`, recursively, sorted by relative path; also the skipped count."""
    found, skipped = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in filenames:
            path = Path(dirpath) / fname
            if fname.startswith(".") or path.suffix.lower() not in AUDIO_EXTS:
                skipped += 1
                continue
            found.append(path)
    found.sort(key=lambda p: p.relative_to(root).as_posix())
    return found, skipped


def score_folder(root: Path, model_dir: Path, cfg: ScoreConfig = ScoreConfig(),
                 on_windows: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """One row dict per audio file under `root` (COLUMNS); raises ModelError before scoring.

    Windowed unless cfg.first_window (see windowed_rows; `on_windows` gets each file's window
    rows); with cfg.first_window each file is its first max_s trimmed seconds, as before."""
    model_path, model_sha, front = verify_model_dir(model_dir, cfg.variant)
    # at least min_s, and never under one CNN frame (400 samples = 25 ms) or the model has no input
    min_samples = max(int(round(front.pop("min_s") * SAMPLE_RATE)), MIN_SAMPLES)
    session = make_session(model_path, cfg.threads)
    files, _ = find_audio(root)
    if not cfg.first_window:
        return list(windowed_rows(root, files, session, model_sha, front, min_samples, cfg,
                                  on_windows))
    rows: list[dict] = []
    for c in range(0, len(files), cfg.chunk):
        chunk_rows, waves, slots = [], [], []
        for path in files[c : c + cfg.chunk]:
            row = empty_row(root, path, model_sha)
            try:
                wave = load_audio(path)  # (N,) float32 @ 16 kHz
                row["duration_s"] = f"{len(wave) / SAMPLE_RATE:.3f}"
                x = prepare(wave, **front)
                if len(x) < min_samples:
                    raise AudioError(path, f"too short after trimming ({len(x) / SAMPLE_RATE:.3f} s"
                                     f" < {min_samples / SAMPLE_RATE:g} s)")
                first_window_span(row, wave, x, front["top_db"])
                waves.append(x)
                slots.append(len(chunk_rows))
            except AudioError as err:
                row["error"] = err.reason
            except Exception as err:  # noqa: BLE001 - any per-file failure is that file's error
                row["error"] = f"{type(err).__name__}: {err}"
            chunk_rows.append(row)
        if waves:
            logits = run_logits(session, waves, cfg.batch_size)
            for slot, logit in zip(slots, logits, strict=True):
                chunk_rows[slot]["logit"] = f"{float(logit):.6f}"
                chunk_rows[slot]["score"] = f"{1.0 / (1.0 + math.exp(-float(logit))):.6f}"
                chunk_rows[slot]["mean_logit"] = chunk_rows[slot]["logit"]  # one window
        rows.extend(chunk_rows)
    return rows


def empty_row(root: Path, path: Path, model_sha: str) -> dict:
    """A COLUMNS row for `path` with nothing measured yet (what a failed file keeps)."""
    return {**dict.fromkeys(COLUMNS, ""), "path": path.relative_to(root).as_posix(),
            "model_sha256": model_sha}


def first_window_span(row: dict, wave: np.ndarray, x: np.ndarray, top_db: float) -> None:
    """--first-window: the one window's place in file time (trim offset + its length)."""
    start = trim_silence(wave, top_db)[0] / SAMPLE_RATE
    row.update(windows="1", covered_s=f"{len(x) / SAMPLE_RATE:.3f}",
               peak_start_s=f"{start:.3f}", peak_end_s=f"{start + len(x) / SAMPLE_RATE:.3f}")


# --------------------------------------------------------------------------- windowed scoring


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@dataclass
class _FileWindows:
    """One file's windows while they wait for their logits."""

    row: dict
    spans: list = field(default_factory=list)  # (start, end) samples in file time, per window
    logits: list = field(default_factory=list)  # float per window; None until scored
    cut: bool = False  # every window of the file has been cut (or the file failed)


def windowed_rows(root: Path, files: list[Path], session, model_sha: str, front: dict,
                  min_samples: int, cfg: ScoreConfig,
                  on_windows: Callable[[list[dict]], None] | None = None) -> Iterator[dict]:
    """Yield one COLUMNS row per file, in `files` order, from all of its windows.

    Each file is streamed through hearsay.windows.file_windows (decoded in blocks, trimmed once,
    windows of front_end.json's max_s every cfg.hop_s, each band-limited and normalised alone).
    Windows of consecutive files share onnxruntime calls: at most cfg.window_chunk windows are
    held before they are scored (run_logits sorts them by length), so memory does not grow with
    the file. A row is yielded once its file's last window is scored; `on_windows` gets the
    file's WINDOW_COLUMNS rows just before. score/logit = the max window logit."""
    if front.get("max_s") is None:
        raise ModelError("front_end.json has no max_s: windows need the deploy length")
    waiting: deque[_FileWindows] = deque()
    pending: list[tuple[_FileWindows, int, np.ndarray]] = []  # (file, window index, wave)

    def score_pending() -> None:
        if pending:
            logits = run_logits(session, [w for _, _, w in pending], cfg.batch_size)
            for (fw, k, _), logit in zip(pending, logits, strict=True):
                fw.logits[k] = float(logit)
            pending.clear()

    def finished() -> Iterator[dict]:
        while waiting and waiting[0].cut and None not in waiting[0].logits:
            yield finish_file(waiting.popleft(), on_windows)

    for path in files:
        fw = _FileWindows(empty_row(root, path, model_sha))
        waiting.append(fw)
        try:
            n, span, wins = windows.file_windows(path, front["max_s"], cfg.hop_s,
                                                 top_db=front["top_db"],
                                                 cutoff_hz=front["cutoff_hz"])
            fw.row["duration_s"] = f"{n / SAMPLE_RATE:.3f}"
            kept_s = (span[1] - span[0]) / SAMPLE_RATE
            if span[1] - span[0] < min_samples:
                raise AudioError(path, f"too short after trimming ({kept_s:.3f} s < "
                                 f"{min_samples / SAMPLE_RATE:g} s)")
            for w in wins:
                fw.spans.append((w.start, w.end))
                fw.logits.append(None)
                pending.append((fw, len(fw.logits) - 1, w.wave))
                if len(pending) >= cfg.window_chunk:
                    score_pending()
        except Exception as err:  # noqa: BLE001 - any per-file failure is that file's error
            fw.row["error"] = err.reason if isinstance(err, AudioError) else \
                f"{type(err).__name__}: {err}"
            fw.spans.clear()
            fw.logits.clear()
            pending[:] = [p for p in pending if p[0] is not fw]
        fw.cut = True
        yield from finished()
    score_pending()
    yield from finished()


def finish_file(fw: _FileWindows, on_windows: Callable[[list[dict]], None] | None) -> dict:
    """Fill a file's row from its window logits: max (score, logit), mean, count, timestamps."""
    row = fw.row
    if row["error"] or not fw.logits:
        return row
    logits = np.asarray(fw.logits, dtype=np.float64)
    peak = int(np.argmax(logits))  # the first of equal maxima
    lo, hi = fw.spans[0][0], fw.spans[-1][1]
    row.update(logit=f"{logits[peak]:.6f}", score=f"{sigmoid(logits[peak]):.6f}",
               mean_logit=f"{logits.mean():.6f}", windows=str(len(logits)),
               covered_s=f"{(hi - lo) / SAMPLE_RATE:.3f}",
               peak_start_s=f"{fw.spans[peak][0] / SAMPLE_RATE:.3f}",
               peak_end_s=f"{fw.spans[peak][1] / SAMPLE_RATE:.3f}")
    if on_windows is not None:
        on_windows([{"path": row["path"], "start_s": f"{a / SAMPLE_RATE:.3f}",
                     "end_s": f"{b / SAMPLE_RATE:.3f}", "logit": f"{z:.6f}",
                     "score": f"{sigmoid(z):.6f}"} for (a, b), z in zip(fw.spans, logits,
                                                                          strict=True)])
    return row


def rows_to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync, then os.replace: never a half CSV."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def add_window_args(ap: argparse.ArgumentParser) -> None:
    """--windows (default) / --first-window, --hop-s, --windows-csv."""
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--windows", dest="first_window", action="store_false", default=False,
                      help="score every window of each file (the default; see WINDOWS above)")
    mode.add_argument("--first-window", action="store_true",
                      help="score only the first max_s trimmed seconds of each file, as the "
                      "campaign's exported scores were made")
    ap.add_argument("--hop-s", type=float, default=ScoreConfig.hop_s,
                    help=f"seconds between window starts (default {ScoreConfig.hop_s:g}; "
                    "at most the window length)")
    ap.add_argument("--windows-csv", type=Path, metavar="FILE",
                    help="also write one row per window (" + ",".join(WINDOW_COLUMNS) + ")")


def window_usage_error(args) -> str:
    """The message for a bad combination of window options, or ''."""
    if args.first_window and args.windows_csv:
        return "--windows-csv needs windowed scoring (drop --first-window)"
    if args.hop_s <= 0:
        return "--hop-s must be > 0 (and at most the model's max_s)"
    return ""


class WindowsCsv:
    """--windows-csv FILE: rows streamed into a temporary file beside FILE, renamed into place
    when scoring ends (never a half CSV); `write` is a no-op without FILE."""

    def __init__(self, path: Path | None):
        self.path, self.f, self.writer = path, None, None

    def __enter__(self) -> WindowsCsv:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
            self.f = open(self.tmp, "w", newline="")  # noqa: SIM115 - closed in __exit__
            self.writer = csv.DictWriter(self.f, fieldnames=WINDOW_COLUMNS, lineterminator="\n")
            self.writer.writeheader()
        return self

    def write(self, rows: list[dict]) -> None:
        if self.writer is not None:
            self.writer.writerows(rows)

    def __exit__(self, exc_type, *_) -> None:
        if self.f is None:
            return
        try:
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
            if exc_type is None:
                os.replace(self.tmp, self.path)
        finally:
            self.tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hearsay-score", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("clips", type=Path, help="folder of audio files (walked recursively)")
    ap.add_argument("-o", "--output", type=Path, help="CSV to write atomically (default: stdout)")
    ap.add_argument("--model", type=Path,
                    default=Path(os.environ.get("HEARSAY_MODEL_DIR") or DEFAULT_MODEL_DIR),
                    help="exported model folder (default: $HEARSAY_MODEL_DIR or "
                    f"{DEFAULT_MODEL_DIR})")
    ap.add_argument("--strict", action="store_true", help="exit 1 when any file failed")
    ap.add_argument("--variant", choices=["fp32", "int8"], default="fp32",
                    help="model.onnx (fp32) or model.int8.onnx (only present if it passed parity)")
    ap.add_argument("--batch-size", type=int, default=ScoreConfig.batch_size,
                    help="clips per onnxruntime call")
    ap.add_argument("--threads", type=int, default=0,
                    help="onnxruntime intra-op threads (0 = CPUs allowed by affinity/cgroup)")
    add_window_args(ap)
    args = ap.parse_args(argv)  # argparse exits 2 on usage errors
    if not args.clips.is_dir():
        print(f"hearsay-score: {args.clips} is not a folder (pass a folder of clips)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.batch_size < 1 or args.threads < 0:
        print("hearsay-score: --batch-size must be >= 1 and --threads >= 0", file=sys.stderr)
        return EXIT_USAGE
    usage = window_usage_error(args)
    if usage:
        print(f"hearsay-score: {usage}", file=sys.stderr)
        return EXIT_USAGE
    cfg = ScoreConfig(batch_size=args.batch_size, variant=args.variant, threads=args.threads,
                      first_window=args.first_window, hop_s=args.hop_s)
    try:
        with WindowsCsv(args.windows_csv) as win_csv:
            rows = score_folder(args.clips, args.model, cfg, win_csv.write)
    except ModelError as err:
        print(f"hearsay-score: {err}", file=sys.stderr)
        return EXIT_MODEL
    text = rows_to_csv(rows)
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    failed = sum(1 for r in rows if r["error"])
    print(f"hearsay-score: {len(rows) - failed}/{len(rows)} scored, {failed} failed",
          file=sys.stderr)
    return EXIT_FAILED if (failed and args.strict) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
