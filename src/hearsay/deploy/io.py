"""hearsay-score's output as it runs: CSV rows streamed per chunk (and --resume's partial rows),
the output's checks, stop signals, progress and the summary line.

    sink, progress = RowSink(Path("scores.csv")), Progress(total=len(files))
    for rows in chunks:  sink.write(rows); progress.update(rows)
    sink.commit(); print(progress.summary(skipped), file=sys.stderr)

numpy-free, torch-free (the deploy image imports it); tqdm only when stderr is a terminal.
"""

from __future__ import annotations

import csv
import os
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path

from hearsay.util import progress

COLUMNS = ["path", "duration_s", "score", "logit", "model_sums_sha256", "error",
           "windows", "covered_s", "mean_logit", "peak_start_s", "peak_end_s", "header_s",
           "variant", "decision", "llr", "audio_tracks"]
# variant: fp32 / int8, the model file that scored (with the folder sha: the model's identity;
# the folder's SHA256SUMS lists both files); decision, llr: hearsay.deploy.engine's Decider;
# audio_tracks: the container's audio streams when more than one (only the first is scored).
# A name that starts with one of these is written with a leading ' (a spreadsheet would run it
# as a formula); a name that starts with ' gets one more, so one leading ' is always removable.
FORMULA_START = ("=", "+", "-", "@", "'")
# The signals that end a run with its finished rows kept: Ctrl-C, SIGTERM (docker stop), SIGHUP.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_stops: list[int] = []  # the stop signals this run received


def stop_on_signals() -> dict:
    """Install the stop handler for STOP_SIGNALS; the handlers it replaced (to restore)."""
    _stops.clear()
    return {sig: signal.signal(sig, _on_stop) for sig in STOP_SIGNALS}


def restore_signals(old: dict) -> None:
    """The replaced handlers back and this run's stops forgotten (a later scoring in-process)."""
    _stops.clear()
    for sig, handler in old.items():
        signal.signal(sig, handler)


def stop_requested() -> bool:
    """A stop signal arrived: checked between chunks, because the KeyboardInterrupt the handler
    raises can land inside a C callback that swallows it (soundfile reading an opened file)."""
    return bool(_stops)


def _on_stop(signum, frame):
    _stops.append(signum)
    raise KeyboardInterrupt


# A header that declares more (or less) audio than decodes by more than this is reported in the
# row's header_s (a cut download, a damaged copy): 50 ms is far above resampling's one sample.
HEADER_TOLERANCE_S = 0.05


def csv_path(root: Path | None, path: Path) -> str:
    """`path` relative to `root` ('/'-separated; `root` None: the path as given, a file or a
    list's line, or an array's label), written losslessly as UTF-8 text: a byte that is
    not UTF-8 (a name made on another system) or a control character becomes \\xNN and a
    backslash \\\\; a name starting with = + - @ or ' gets a leading ' (FORMULA_START). So
    `codecs.escape_decode(value.removeprefix("'").encode())[0]` gives the name's bytes back."""
    raw = os.fsencode(str(path) if root is None else path.relative_to(root).as_posix())
    text = _controls(raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace"))
    return "'" + text if text.startswith(FORMULA_START) else text


# Characters that end a line for some reader (Python's str.splitlines, JavaScript, Unicode):
# written as their UTF-8 bytes, \\xNN each, like the control characters, so a row stays one line
# for every reader and the name's bytes still come back (csv_path).
LINE_BREAKS = frozenset("\x85\u2028\u2029")


def _controls(text: str) -> str:
    """Control characters (CR, LF, TAB, ...) and LINE_BREAKS as \\xNN: a row is always one
    line."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else
                   "".join(f"\\x{b:02x}" for b in c.encode()) if c in LINE_BREAKS else c
                   for c in text)


def new_row(root: Path, path: Path, model_id: str, variant: str = "fp32") -> dict:
    """The CSV row of one file before it is scored: empty but path and model (the model folder's
    identity, the sha256 of its SHA256SUMS, and the variant that scores)."""
    return {"path": csv_path(root, path), "duration_s": "", "score": "", "logit": "",
            "model_sums_sha256": model_id, "error": "", "header_s": "", "variant": variant,
            "audio_tracks": ""}


def note_decode(row: dict, decoded: int, info, rate: int = 16_000) -> None:
    """What the decode learned, into the row. duration_s = the decoded seconds; header_s = what
    the header declared, only when the two differ by more than HEADER_TOLERANCE_S (empty: they
    agree, or the file declares none); audio_tracks = the container's audio streams, only when
    more than one (the first was scored; empty: one, or not counted). `info`: the decode's
    hearsay.sound.decoder.DecodeInfo."""
    row["duration_s"] = f"{decoded / rate:.3f}"
    header_s = info.header_s
    if header_s is not None and abs(header_s - decoded / rate) > HEADER_TOLERANCE_S:
        row["header_s"] = f"{header_s:.3f}"
    if (info.audio_streams or 0) > 1:
        row["audio_tracks"] = str(info.audio_streams)


class OutputError(Exception):
    """-o / --windows-csv cannot be written, or is not a regular file (exit 5)."""


def say(message: str) -> None:
    """One line on stderr; a stderr that is closed or gone (a hung-up terminal) loses the line,
    never the run."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


def _kind(path: Path) -> str:
    """'' for a regular file or nothing there; else what `path` is (never followed)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # nothing there (or its folder cannot be: the write check says why)
        return ""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISREG(mode):
        return ""
    return {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
            stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}.get(stat.S_IFMT(mode), "special")


def check_writable(output: Path | None) -> None:
    """OutputError unless `output` and FILE.partial are regular files (or absent) and
    FILE.partial can be created beside `output` (before any work). A symlink, FIFO or device
    is refused: the temp file + rename would replace it, not write through it."""
    if output is None:
        return
    for path in (output, partial_of(output)):
        kind = _kind(path)
        if kind:
            raise OutputError(f"{path} is {kind}: -o and --windows-csv write a regular file "
                              "through FILE.partial and a rename, which would replace it; pass "
                              "a plain file path, or leave -o out and redirect stdout "
                              "(> FILE, | program)")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=output.parent, prefix=f".{output.name}."):
            pass
    except OSError as err:
        why = err.strerror or str(err)
        raise OutputError(f"cannot write {output} ({why}): pass a writable path; in a container "
                          "the mounted folder must be writable by the image's user: "
                          'docker run --user "$(id -u)" -v "$PWD:/data" ...') from None


def partial_of(output: Path) -> Path:
    """FILE.partial: where -o FILE's rows go until the run completes."""
    return output.with_name(output.name + ".partial")


def same_file(a: Path | None, b: Path | None) -> bool:
    """Do -o and --windows-csv name one file (or one's .partial the other)?"""
    if a is None or b is None:
        return False
    real = {os.path.realpath(p) for p in (a, partial_of(a))}
    return bool(real & {os.path.realpath(p) for p in (b, partial_of(b))})


class ResumeError(Exception):
    """--resume cannot use the partial file (other columns, another model): usage, exit 2."""


def whole_lines(partial: Path) -> list[str]:
    """The complete lines of an interrupted run's FILE.partial ([] if there is none), without
    their line ends: whatever follows the last LF is a line the interrupt cut (anywhere: inside
    a character, a quote, a JSON object) and is dropped. ResumeError when a complete line is not
    UTF-8 (not written by hearsay-score). Lines are split at LF only: a row is always one line
    (csv_path), and no other character ends one here."""
    try:
        data = partial.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        raise ResumeError(f"cannot read {partial} ({err.strerror or err}): make it readable, "
                          "or run without --resume") from None
    try:
        text = data[: data.rfind(b"\n") + 1].decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ResumeError(f"{partial} line {line} is not UTF-8 (not written by hearsay-score: "
                          "remove it, or run without --resume)") from None
    return [line.removesuffix("\r") for line in text.split("\n")[:-1]]


def read_partial(partial: Path, columns: list[str]) -> list[dict]:
    """The complete rows of an interrupted run's FILE.partial ([] if there is none; whole_lines);
    ResumeError for a header or row that is not `columns`' (another version, an edited file)."""
    lines = whole_lines(partial)
    if not lines:
        return []
    fix = "(not written by this hearsay-score: remove it, or run without --resume)"
    try:
        header, *rows = list(csv.reader(lines))
    except csv.Error as err:
        raise ResumeError(f"{partial} is not CSV ({err}) {fix}") from None
    if header != columns:
        raise ResumeError(f"{partial} has columns {header}, not {columns} {fix}")
    for n, row in enumerate(rows, 2):
        if len(row) != len(columns):
            raise ResumeError(f"{partial} line {n} has {len(row)} fields, not {len(columns)} "
                              f"{fix}")
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _text(value) -> str:
    """A value as one line of UTF-8-safe text: a name's undecodable bytes (in an error message)
    and control characters as \\xNN."""
    text = str(value).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _controls(text)


class RowSink:
    """CSV rows as they finish: stdout, or `-o FILE` through FILE.partial (flushed per chunk).

    Every field is quoted (RFC 4180). `commit()` fsyncs and renames FILE.partial to FILE
    (atomic: FILE is never half written). Without commit (an interrupted run) FILE.partial
    stays with every finished row. `keep`: rows written first (--resume: the partial file's
    complete rows, rewritten whole)."""

    def __init__(self, output: Path | None, columns: list[str] = COLUMNS,
                 keep: list[dict] | None = None):
        self.output = output
        self.partial = None if output is None else partial_of(output)
        try:
            if self.partial is not None:
                self.partial.parent.mkdir(parents=True, exist_ok=True)
                # O_NOFOLLOW: a symlink planted at FILE.partial is refused, not written through
                fd = os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                             0o666)
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise OSError(0, "not a regular file")
                self.stream = open(fd, "w", newline="", encoding="utf-8")  # noqa: SIM115
            else:
                self.stream = sys.stdout
        except OSError as err:
            raise OutputError(f"cannot write {self.partial}: {err.strerror or err}") from None
        self.columns = columns
        self._io(self._start)
        self.write(keep or [])

    def _start(self) -> None:
        """The header (a subclass writing another format overrides _start and _put)."""
        self.writer = csv.DictWriter(self.stream, fieldnames=self.columns, lineterminator="\r\n",
                                     quoting=csv.QUOTE_ALL)
        self.writer.writeheader()

    def _put(self, rows: list[dict]) -> None:
        self.writer.writerows(rows)

    def _io(self, step, *args) -> None:
        try:
            step(*args)
            self.stream.flush()
        except BrokenPipeError:
            raise  # stdout's reader went away: hearsay-score ends quietly (exit 141)
        except OSError as err:  # a full disk, a mount gone read-only
            raise OutputError(f"writing {self.partial or 'stdout'} failed: "
                              f"{err.strerror or err}") from None

    def write(self, rows: list[dict]) -> None:
        """One chunk's rows, whole: Ctrl-C, SIGTERM (docker stop) and SIGHUP wait until they are
        written and flushed, so a stopped run keeps whole chunks, in order."""
        text = [{k: _text(v) for k, v in r.items()} for r in rows]
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            self._io(self._put, text)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a held signal arrives here

    def commit(self) -> None:
        if self.partial is not None:
            try:
                os.fsync(self.stream.fileno())
                self.stream.close()
                os.replace(self.partial, self.output)
            except OSError as err:
                raise OutputError(f"finishing {self.output} failed: {err.strerror or err}; "
                                  f"the rows are in {self.partial}") from None

    def abandon(self) -> None:
        if self.partial is not None:
            try:
                self.stream.close()
            except OSError:
                pass


def failure_reason(err: Exception) -> str:
    """A row's error: an AudioError's reason, else a sentence (never a Python type name). A stop
    signal that arrived meanwhile is raised instead: its KeyboardInterrupt, raised inside a C
    callback (soundfile reading), is swallowed there and surfaces as the decoder's own error, so
    the run was stopped and the file did not fail (a failed row would also be kept by --resume)."""
    if stop_requested():
        raise KeyboardInterrupt from err
    reason = getattr(err, "reason", None)  # hearsay.sound.audio.AudioError (io imports no numpy)
    return reason if isinstance(reason, str) else f"could not be decoded ({err or 'no detail'})"


def stdout_gone() -> None:
    """stdout's reader closed it: point fd 1 at /dev/null so nothing more is flushed at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def std_open() -> None:
    """fds 0-2 open (on /dev/null if closed: no CSV opened later may become fd 2) and sys.stderr
    a real stream (Python sets it to None when fd 2 was closed, and print would then go to
    stdout, inside the CSV)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(os.open(os.devnull, os.O_RDWR), fd)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


def std_flushed(code: int, failed_codes: tuple[int, ...], exit_output: int) -> int:
    """Flush stdout and stderr now; one that cannot take its bytes (a full disk, a closed pipe)
    is pointed at /dev/null so the interpreter's exit adds no "Exception ignored" and no
    exit 120. stdout failing turns a code in `failed_codes` into `exit_output` (rows lost)."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError) as err:
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
            if fd == 1 and code in failed_codes:
                say(f"hearsay-score: writing stdout failed ({err.strerror or err}): rows lost; "
                    "pass -o FILE on a disk with room")
                code = exit_output
    return code


class Progress:
    """Files done on stderr (hearsay.util.progress: a tqdm bar on a terminal, else a line every
    `every_s` s with rate and ETA), the failed count and audio seconds as its note."""

    def __init__(self, total: int, every_s: float = 30.0, stream=None):
        self.total, self.every_s, self.done, self.failed = total, every_s, 0, 0
        self.short = 0  # rows whose header declares another length than decoded (header_s)
        self.tracks = 0  # rows of files with more than one audio track (audio_tracks)
        self.audio_s = 0.0  # trimmed audio seconds scored so far (windowed runs report it)
        self.stream = sys.stderr if stream is None else stream
        self.start = time.monotonic()
        self.bar = progress.Progress(total, desc="hearsay-score", unit="file", every_s=every_s,
                                     stream=self.stream)

    def _note(self) -> str:
        audio = f", {self.audio_s:.0f} audio s" if self.audio_s else ""
        return f"{self.failed} failed{audio}"

    def update(self, rows: list[dict]) -> None:
        self.done += len(rows)
        self.failed += sum(1 for r in rows if r["error"])
        self.short += sum(1 for r in rows if r.get("header_s"))
        self.tracks += sum(1 for r in rows if r.get("audio_tracks"))
        self.bar.update(len(rows), note=self._note())

    def audio(self, seconds: float) -> None:
        """More audio scored (inside a long file, before its row is done)."""
        self.audio_s += seconds
        self.bar.update(0, note=self._note())

    def close(self) -> None:
        self.bar.close()

    def summary(self, skipped: dict[str, int]) -> str:
        """'S/N scored, F failed, K skipped (k1 not audio, k2 hidden, ...)[, H header_s]
        [, M audio_tracks], T s'."""
        why = ", ".join(f"{n} {k}" for k, n in sorted(skipped.items()) if n) or "none"
        short = (f", {self.short} with header_s (decoded length is not the header's)"
                 if self.short else "")
        tracks = (f", {self.tracks} with more than one audio track (the first scored: "
                  "audio_tracks)" if self.tracks else "")
        return (f"hearsay-score: {self.done - self.failed}/{self.done} scored, {self.failed} "
                f"failed, {sum(skipped.values())} skipped ({why}){short}{tracks}, "
                f"{time.monotonic() - self.start:.1f} s")
