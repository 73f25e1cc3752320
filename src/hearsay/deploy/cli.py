"""`hearsay-score CLIPS [-o scores.csv [--resume]] [--model DIR] [--strict]`: the CPU scorer.

    hearsay-score clips/ -o scores.csv --model demo_out/export
    hearsay-score call.m4a                       # one file: its row on stdout
    find calls -name '*.m4a' | hearsay-score --files-from - --format jsonl
    docker run --rm -v "$PWD:/data" hearsay-score clips/ > scores.csv     # the deploy image
    hearsay-score clips/ -o part$K.csv --shard $K/8        # one of 8 machines, K = 0..7
    hearsay-score merge -o scores.csv part*.csv             # the 8 parts -> one run's file

(The image's working directory is /data, so CLIPS and -o are paths under the folder you
mount there; it runs offline and read-only: --read-only --network none --cap-drop ALL work.)

CLIPS is a folder, walked recursively in sorted order (symlinked folders followed, each folder
once; dot-files and dot-folders are not scored, only counted; audio is chosen by extension), or
one file; or --files-from LIST gives the files, one path a line (- reads the list from stdin;
empty lines skipped, a path listed twice scored once; every listed file is scored whatever its
extension). Each file is decoded (soundfile, else ffmpeg, for the whole file) and scored with
the exported ONNX model, one row per file, in input order (CSV, or --format jsonl: one JSON
object a line with the same keys and values):

    path,duration_s,score,logit,model_sums_sha256,error,
    windows,covered_s,mean_logit,peak_start_s,peak_end_s,header_s,variant,decision,llr,
    audio_tracks
    (one line in the file)

Every field is quoted and a row is one line (RFC 4180, CRLF). `path` is relative to a folder
('/'-separated), or the path as given for a file or a list's line (a byte of a name that is not
UTF-8, a control character or a line separator (U+0085, U+2028, U+2029: its UTF-8 bytes),
written \\xNN, a backslash \\\\; a name starting with = + - @ or
' gets one leading ', so a spreadsheet does not run it as a formula); `duration_s` is the
decoded length in seconds (before trim/cap): only decoded samples are scored, and `header_s` is
the length the header declares when it differs by more than 50 ms (a cut download); `score` =
sigmoid(logit), high = synthetic, always finite; `model_sums_sha256` is the model folder's
identity, the sha256 of its SHA256SUMS, and `variant` (fp32 / int8) the model file that scored;
`audio_tracks` is the container's audio streams when it holds more than one (MP4, MKV, ...):
only the first is scored, and the summary line counts such files;
a file that cannot be read (or whose samples or logit are not finite) gets empty score/logit and
its reason in `error`, and the batch goes on.

A file's name only ever names that file: the decoder is chosen by its bytes (soundfile reads
the opened file; ffmpeg gets `file:` + its absolute path, file protocol only). FIFOs, devices
and sockets are refused as not regular files. Each file's decode is bounded, per pass:
--max-decode-s (default 600 s) of decoding and --max-decode-mb (default 1024 MiB) of ffmpeg
address space; a file over a bound fails with that reason. Every model input is built by
hearsay.sound.audio's front end with the model folder's front_end.json, exactly as in training.
`decision` is spoof (logit >= threshold) or bonafide, at --threshold NAME|LOGIT: a name in the
model folder's thresholds.json (default min_dcf, the out-of-fold minDCF threshold at pi 0.3;
eer; fa_rate); `llr` (with --llr) the calibrated log-likelihood ratio (deploy/engine.py).

WINDOWS (the default, for every file): each file is decoded in blocks, never whole in memory,
and twice (pass 1 keeps only frame energies to find the trim span, pass 2 cuts the windows), so
it is trimmed once, over the whole file, and cut into windows of front_end.json's max_s (8 s)
every --hop-s (4 s) inside the trimmed span; the last window may be shorter (zero-padded with an
attention mask, never tiled). Each window is band-limited and normalised over its own samples,
as a training crop. `score`/`logit` = the HIGHEST window logit: the synthetic part of a call or
voice message may be a few seconds anywhere, and a mean would dilute it (`mean_logit` is there
too; a max over many windows also rises a little with length, so judge long files on thresholds
set on long files). `windows` = how many, `covered_s` = the trimmed seconds they cover,
`peak_start_s`/`peak_end_s` = the highest window in the ORIGINAL file's seconds (trim offset
added back). A file no longer than max_s after trimming is one window, the same input (and
score) as --first-window; the first window of any file is the --first-window input. Why windows
by default: scoring only the opening seconds of a long file gives a confident score for audio
nobody looked at.
--windows-csv FILE writes one row per window: path,start_s,end_s,logit,score, after every
onnxruntime pass (a long file's windows are on disk before its row).
--first-window scores the first max_s trimmed seconds only (windows = 1), as the campaign's
scores were made: it is the mode that reproduces them (the out-of-fold, holdout, test and probe
files of `hearsay score-run` / `hearsay assemble`; within 1e-3 logit on the demo model, ONNX fp32
here against torch fp32 there; docs/RUNBOOK.md, "The probe set"). The windowed default does not
reproduce a file longer than max_s after trimming: its score is the highest window's.

Rows stream in input order: windowed, file by file; with --first-window every 4 batches (4 x
--batch-size files) they are written and flushed. With -o FILE they go to FILE.partial, renamed
to FILE when the run completes (FILE is never half written); an interrupted run (Ctrl-C, SIGTERM
/ docker stop, SIGHUP) keeps FILE.partial with every finished row and exits 130. On stdout the
finished rows are already out. --resume keeps FILE.partial's complete rows and scores the rest
only when FILE.partial.json (the run record: clips folder and its device:inode, or the
listed files' absolute paths; options that change a score, the format, engine, model identity
and variant) matches this run (jsonl too); otherwise it refuses
(exit 2) naming what differs. Each row is bound to its file's identity (device, inode, size,
mtime_ns; FILE.partial.ids, beside the record): --resume scores again a file replaced or
rewritten since its row was written, and a file whose identity changes between the scorer
taking it and its row gets an error row ("changed while scored"), never a score. A partial
file cut anywhere (inside a character, a quote, a JSON line) loses only its last, cut line.
One run per output: FILE.lock (pid, host, start) is held while FILE.partial, its record and
FILE are written; a second run on the same -o exits 6 naming the holder, and a FILE.lock
whose run is gone is taken over, so said. -o and --windows-csv are checked before anything
is scored: they must be writable regular files (a symlink, FIFO or device is refused: leave -o
out and redirect stdout instead) and not the same file. Progress goes to
stderr (a bar on a terminal, else a line every --progress seconds; windowed runs add the audio
seconds scored, inside a long file too), then one summary line: scored, failed, skipped (by kind:
hidden, not audio, symlink loop, unreadable), files whose header disagrees, seconds.

--shard K/N scores only the inputs whose row path hashes to part K of N (0 <= K < N; needs -o
FILE, and writes FILE.shard.json once FILE is complete); `hearsay-score merge -o OUT PART...`
checks that the parts agree on model, options and front end and hold every input exactly once,
and writes the rows one run would have (deploy/shard.py; a folder named merge: pass ./merge).

The model folder (docs/INTERFACES.md) is checked before anything is scored: every file listed in
SHA256SUMS must match, the chosen model file must be listed, and when $HEARSAY_MODEL_SUMS_SHA256
is set (the deploy image bakes it at build) the sha256 of SHA256SUMS itself must equal it, which
pins every file of the folder (set but empty is refused: an empty value never unpins).
Default folder: $HEARSAY_MODEL_DIR, else /opt/hearsay/model.

The same rows from Python: hearsay.deploy.Scorer (api.py; docs/INTERFACES.md). Torch-free:
numpy, soundfile, onnxruntime and hearsay's sound, cpu_engine and contracts modules only.

Exit codes: 0 every file scored (or some failed without --strict), 1 some files failed (--strict),
2 usage (bad arguments, a numeric option out of its range or not finite: --threshold nan,
--hop-s inf; CLIPS missing, '-' as CLIPS (use --files-from -), CLIPS and --files-from both or
neither, LIST unreadable, --resume on another run's partial file or one that is not this
hearsay-score's (not UTF-8, not its columns), -o and --windows-csv the same file), 3 model
folder missing, incomplete, sha mismatch, not loadable by onnxruntime, a front_end.json or
thresholds.json that is not valid (each named: not JSON, a key missing, a value not finite or
out of range), a front_end.json other than the one the graph carries in its metadata_props, or
$HEARSAY_MODEL_SUMS_SHA256 set but empty or malformed, or without the --threshold name or the
--llr calibration, 4 no audio file under CLIPS (often a mistyped mount) or no path in LIST, 5
-o / --windows-csv not writable or not a regular file (FILE.lock too), or stdout failing (a
full disk) (in a container: --user "$(id -u)" or a writable mount), 6 -o / --windows-csv held
by another hearsay-score run (the message names its pid, host and start; wait for it, or pass
another -o), 130 interrupted (Ctrl-C, SIGTERM, SIGHUP; finished rows kept), 141 stdout closed
by its reader (`| head`). A closed stderr loses only the messages.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np

from hearsay.contracts.model_dir import FRONT_END, INT8, ONNX, PORTABLE, ModelError
from hearsay.deploy import inputs, io, jsonl, lock, shard, windowed
from hearsay.deploy.engine import (
    ScoreConfig,
    add_decision_args,
    load_decider,
    load_engine,
    rows_of,
)
from hearsay.deploy.io import OutputError, Progress, ResumeError, RowSink, say

DEFAULT_MODEL_DIR = "/opt/hearsay/model"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MODEL, EXIT_NO_AUDIO, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_OUTPUT = 5  # -o / --windows-csv not writable (checked before anything is scored)
EXIT_LOCKED = 6  # -o / --windows-csv held by another run (lock.py)
EXIT_CLOSED = 141  # stdout closed by its reader (`| head`): 128 + SIGPIPE, as a shell reports it
FORMATS = {"csv": RowSink, "jsonl": jsonl.JsonlSink}  # --format: the sink that writes the rows


def run(args, cfg: ScoreConfig) -> int:
    """Score the inputs into args.output (or stdout), streaming rows; the exit code."""
    scorer = load_engine(args.model, cfg)  # ModelError before any output is created
    decider = load_decider(args.model, args.threshold, args.llr)
    src = inputs.resolve(args.clips, args.files_from)
    files, skipped = src.files, src.skipped
    if not files:
        say(f"hearsay-score: no audio files {src.where} ({sum(skipped.values())} other "
            "files skipped). In a container, mount the folder that holds the clips: "
            'docker run --rm -v "$PWD:/data" hearsay-score clips/')
        return EXIT_NO_AUDIO
    src, positions, everything = shard.split(src, shard.parse(args.shard))  # --shard K/N
    files = src.files
    if not cfg.first_window and not 0 < cfg.hop_s <= scorer.front["max_s"]:
        say(f"hearsay-score: --hop-s {cfg.hop_s:g} must be in (0, {scorer.front['max_s']:g}] "
            f"(the window length, {FRONT_END} max_s)")
        return EXIT_USAGE
    record = inputs.run_record(args, cfg, scorer.model_sha, src.source)
    if args.shard:
        record["shard"] = args.shard  # --resume goes on with the same part only
    kept, kept_windows, kept_ids = [], [], {}
    if args.resume:  # a kept row's file must be an input, as it was when scored (file_id)
        now = {io.csv_path(src.root, f): inputs.file_id(f) for f in files}
        kept, kept_windows, kept_ids = inputs.resume_rows(args, record, windowed.WINDOW_COLUMNS,
                                                          now)
    todo = [f for f in files if io.csv_path(src.root, f) not in kept_ids]
    progress, sink, win_sink, ids = Progress(len(files), args.progress), None, None, None
    bound = {}  # row path -> its file's identity, for the chunk being written

    def on_file(path, identity) -> None:
        bound[io.csv_path(src.root, path)] = identity

    try:
        inputs.write_record(args.output, record)  # before the first row of FILE.partial
        sink = FORMATS[args.format](args.output, keep=decider.apply(kept))
        ids = inputs.IdLog(args.output, kept_ids)  # after the rows they bind
        win_sink = windowed.WindowSink(args.windows_csv, keep=kept_windows)
        if kept:
            progress.update(kept)
        chunks = rows_of(src.root, todo, scorer, cfg, win_sink.write, progress.audio, on_file)
        with np.errstate(all="ignore"):  # overflow is checked (isfinite), not warned about
            for rows in chunks:
                sink.write(decider.apply(rows))
                ids.write(bound)
                bound.clear()
                progress.update(rows)
                if io.stop_requested():
                    raise KeyboardInterrupt  # a signal whose own raise was swallowed
        win_sink.commit()
        sink.commit()
        if positions is not None:  # FILE.shard.json: what `hearsay-score merge` checks
            shard.write_record(args, record, scorer.front, positions, everything)
    except (KeyboardInterrupt, BrokenPipeError, OutputError) as err:
        for s in (sink, win_sink):
            if s is not None:
                s.abandon()
        if ids is not None:
            ids.close()
        progress.close()
        kept = f"; finished rows kept in {sink.partial}" if sink and sink.partial else ""
        if isinstance(err, BrokenPipeError):
            io.stdout_gone()  # `| head`: no traceback, nothing more flushed at exit
            return EXIT_CLOSED
        if isinstance(err, OutputError):
            say(f"hearsay-score: {err}{kept}")
            return EXIT_OUTPUT
        say(f"hearsay-score: interrupted after {progress.done}/{len(files)} files{kept} "
            "(--resume goes on from there)")
        return EXIT_INTERRUPTED
    ids.close()
    inputs.drop_record(args.output)
    progress.close()
    say(progress.summary(skipped))
    return EXIT_FAILED if (progress.failed and args.strict) else EXIT_OK


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hearsay-score", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("clips", type=Path, nargs="?", metavar="CLIPS",
                    help="a folder of audio files (walked recursively) or one file")
    ap.add_argument("--files-from", metavar="LIST",
                    help="score the files LIST names, one path a line (- : stdin), instead of "
                    "CLIPS")
    ap.add_argument("-o", "--output", type=Path,
                    help="file to write (default: stdout); rows go to OUTPUT.partial as they "
                    "finish, renamed to OUTPUT at the end (an interrupted run leaves .partial)")
    ap.add_argument("--format", choices=sorted(FORMATS), default="csv",
                    help="csv (default; RFC 4180) or jsonl: one JSON object a line, the same "
                    "keys and values (--windows-csv stays CSV)")
    ap.add_argument("--model", type=Path,
                    default=Path(os.environ.get("HEARSAY_MODEL_DIR") or DEFAULT_MODEL_DIR),
                    help="exported model folder (default: $HEARSAY_MODEL_DIR or "
                    f"{DEFAULT_MODEL_DIR})")
    ap.add_argument("--strict", action="store_true", help="exit 1 when any file failed")
    ap.add_argument("--variant", choices=["fp32", "int8", "portable"], default="fp32",
                    help=f"{ONNX} (fp32), {INT8} (only present if it passed parity) or "
                    f"{PORTABLE} (the unfused graph, shipped beside a fused {ONNX})")
    ap.add_argument("--batch-size", type=int, default=ScoreConfig.batch_size,
                    help="clips per onnxruntime call (rows are written every 4 batches)")
    ap.add_argument("--threads", type=int, default=0,
                    help="onnxruntime intra-op threads (0 = CPUs allowed by affinity/cgroup)")
    ap.add_argument("--progress", type=float, default=30.0, metavar="SECONDS",
                    help="stderr not a terminal: a progress line every SECONDS (default 30); "
                    "a terminal gets a bar; 0 = no progress")
    ap.add_argument("--resume", action="store_true",
                    help="with -o: keep the complete rows of OUTPUT.partial and score only the "
                    "files not in it; refused (exit 2) unless OUTPUT.partial.json shows the same "
                    "inputs, options, format, engine and model")
    windowed.add_window_args(ap, ScoreConfig.hop_s)
    shard.add_args(ap)
    ap.add_argument("--max-decode-s", type=float, default=ScoreConfig.max_decode_s,
                    metavar="SECONDS", help="per-file decode time bound, each decode pass "
                    f"(default {ScoreConfig.max_decode_s:g}): a file over it fails, so named")
    ap.add_argument("--max-decode-mb", type=int, default=ScoreConfig.max_decode_mb, metavar="MIB",
                    help="memory bound of ffmpeg's decode (its address space, default "
                    f"{ScoreConfig.max_decode_mb}): a file that needs more fails with that reason")
    add_decision_args(ap)
    return ap


# Every numeric option: (its flag, lowest, highest) allowed, and POSITIVE ones above 0 too; a
# value outside, or not finite (nan, inf), is a usage error (exit 2) before any work. --hop-s
# is also at most the model's max_s (checked once the model folder is read).
NUMBERS = {"batch_size": ("--batch-size", 1, 4096), "threads": ("--threads", 0, 1024),
           "progress": ("--progress", 0.0, 86_400.0), "hop_s": ("--hop-s", 0.0, 3600.0),
           "max_decode_s": ("--max-decode-s", 0.0, 604_800.0),  # a week
           "max_decode_mb": ("--max-decode-mb", 16, 1 << 20)}  # 16 MiB .. 1 TiB
POSITIVE = {"hop_s", "max_decode_s"}


def number_error(args) -> str:
    """The message for the first numeric option out of NUMBERS' range (or a --threshold number
    that is not finite), or ''."""
    for key, (flag, lo, hi) in NUMBERS.items():
        value = getattr(args, key)
        if not (math.isfinite(value) and lo <= value <= hi) or (key in POSITIVE and
                                                                value <= 0):
            above = " (above 0)" if key in POSITIVE else ""
            return f"{flag} {value!r} is not a number in {lo:g}..{hi:g}{above}"
    try:
        value = float(args.threshold) if args.threshold is not None else 0.0
    except ValueError:  # a name: the model folder's thresholds.json judges it
        value = 0.0
    if not math.isfinite(value):
        return (f"--threshold {args.threshold} is not a finite logit: pass a number such as "
                "0.5, or a name in the model folder's thresholds.json (min_dcf, eer, fa_rate)")
    return ""


def main(argv: list[str] | None = None) -> int:
    io.std_open()
    code = _main(argv)
    return io.std_flushed(code, failed_codes=(EXIT_OK, EXIT_FAILED), exit_output=EXIT_OUTPUT)


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:  # hearsay-score merge -o OUT PART... (a folder named merge: ./merge)
        return shard.merge_main(argv[1:])
    args = _parser().parse_args(argv)  # argparse exits 2 on usage errors
    usage = number_error(args) or inputs.usage_error(args.clips, args.files_from) or \
        windowed.window_usage_error(args) or (
        "--resume needs -o FILE (it goes on from FILE.partial)"
        if args.resume and args.output is None else "") or (
        "-o and --windows-csv name the same file: give the windows their own file"
        if io.same_file(args.output, args.windows_csv) else "") or shard.usage_error(args)
    if usage:
        say(f"hearsay-score: {usage}")
        return EXIT_USAGE
    cfg = ScoreConfig.batched(args.batch_size, variant=args.variant, threads=args.threads,
                              first_window=args.first_window, hop_s=args.hop_s,
                              max_decode_s=args.max_decode_s, max_decode_mb=args.max_decode_mb)
    try:  # before any work: a run must not score for an hour and then fail to write
        io.check_writable(args.output)
        io.check_writable(args.windows_csv)
    except OutputError as err:
        say(f"hearsay-score: {err}")
        return EXIT_OUTPUT
    old = io.stop_on_signals()
    try:
        with lock.hold([args.output, args.windows_csv]):  # one run per output
            return run(args, cfg)
    except lock.LockedError as err:
        say(f"hearsay-score: {err}")
        return EXIT_LOCKED
    except OutputError as err:  # FILE.lock cannot be created
        say(f"hearsay-score: {err}")
        return EXIT_OUTPUT
    except ModelError as err:
        say(f"hearsay-score: {err}")
        return EXIT_MODEL
    except (ResumeError, inputs.InputError) as err:
        say(f"hearsay-score: {err}")
        return EXIT_USAGE
    finally:
        io.restore_signals(old)
