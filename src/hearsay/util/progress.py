"""Progress of long counted work on stderr, one way for every stage: a tqdm bar on a terminal,
otherwise a plain line every `every_s` seconds with the count, rate and ETA (a log file never gets
a bar's `\\r` frames). Stdlib only; tqdm is imported only for a terminal (hearsay-score uses it).

    from hearsay.util import progress
    bar = progress.Progress(len(tasks), desc="hearsay bundle", unit="clip")
    for task in tasks: ...; bar.update()
    bar.close()                                    # off a terminal: the closing line
    for row in progress.track(rows, desc="hearsay score", unit="clip"): ...

    hearsay bundle: 1200/5000 clips (24%), 38.5 clips/s, eta 1m39s, 31 s [1520 audio s]

`every_s` 0 = silent (tests, --no-progress); the first line comes after `every_s`, not at once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator

EVERY_S = 30.0  # default seconds between lines off a terminal


class Progress:
    def __init__(self, total: int | None, *, desc: str, unit: str = "item",
                 every_s: float = EVERY_S, stream=None):
        self.total, self.desc, self.unit, self.every_s = total, desc, unit, every_s
        self.stream = sys.stderr if stream is None else stream
        self.done, self.note = 0, ""
        self.shown = -1  # self.done when the last count line was written (none yet)
        self.start = self.last = time.monotonic()
        self.bar = None
        if every_s > 0 and _isatty(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream)

    def update(self, n: int = 1, note: str | None = None) -> None:
        """`n` more done; `note` (e.g. "1520 audio s") replaces the text after the count."""
        self.done += n
        if note is not None:
            self.note = note
        if self.bar is not None:
            if note is not None:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(n)
        elif self.every_s > 0 and time.monotonic() - self.last >= self.every_s:
            self.last, self.shown = time.monotonic(), self.done
            self._say(self.line())

    def _say(self, text: str) -> None:
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):
            pass  # stderr gone (closed, a full disk): the progress is lost, never the work

    def line(self) -> str:
        """'DESC: 1200/5000 clips (24%), 38.5 clips/s, eta 1m39s, 31 s [NOTE]'."""
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        units = self.unit if self.unit.endswith("s") else self.unit + "s"
        if self.total:
            count = f"{self.done}/{self.total} {units} ({100 * self.done / self.total:.0f}%)"
        else:
            count = f"{self.done} {units}"
        parts = [f"{self.desc}: {count}", f"{rate:.1f} {units}/s"]
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"eta {duration((self.total - self.done) / rate)}")
        parts.append(f"{elapsed:.0f} s")
        return ", ".join(parts) + (f" [{self.note}]" if self.note else "")

    def stage(self, name: str) -> None:
        """A named stage starts (an export's exporter, parity, int8): its line at once off a
        terminal (stages are few and long), the bar's text on one; counts the previous one."""
        if self.note:
            self.done += 1
        self.note = name
        if self.bar is not None:
            self.bar.set_postfix_str(name, refresh=False)
            self.bar.update(self.done - self.bar.n)
        elif self.every_s > 0:
            self.last = time.monotonic()
            of = f"/{self.total}" if self.total else ""
            self._say(f"{self.desc}: stage {self.done + 1}{of}: {name}, "
                      f"{self.last - self.start:.0f} s")

    def close(self) -> None:
        """The bar closed; off a terminal a closing line when any line was due on the way."""
        if self.bar is not None:
            self.bar.close()
        elif self.every_s > 0 and (self.note and self.unit == "stage"):
            self._say(f"{self.desc}: {self.done + 1} stages done, "
                      f"{time.monotonic() - self.start:.0f} s")
        elif self.every_s > 0 and time.monotonic() - self.start >= self.every_s and \
                self.shown != self.done:  # the last line already says where it ended
            self._say(self.line())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(items: Iterable, *, desc: str, unit: str = "item", total: int | None = None,
          every_s: float = EVERY_S, stream=None) -> Iterator:
    """Each item of `items`, counted by a Progress (total: len(items) when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    with Progress(total, desc=desc, unit=unit, every_s=every_s, stream=stream) as bar:
        for item in items:
            yield item
            bar.update()


def duration(s: float) -> str:
    """3725 -> '1h02m', 75 -> '1m15s', 9 -> '9s'."""
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
