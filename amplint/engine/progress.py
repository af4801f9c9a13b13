"""A progress bar on stderr for long runs, shown only to a person at a terminal.

It draws nothing unless enabled, stderr is a terminal that understands ``\\r`` and
erase-line, and the run is still going after ``delay`` seconds (a quick run must not
flicker); it redraws at most ten times a second and erases itself when the run ends, so
nothing of it remains in the scrollback and nothing ever reaches stdout.

:class:`ProgressBar` is advanced once per finished file and ticked while the workers
run (``runner.run(..., tick=bar.tick)`` ticks ten times a second), so the bar appears
and its clock moves even while the first, largest files are still being analysed.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Generator, Iterable
from typing import TextIO, TypeVar

T = TypeVar("T")

_ERASE_LINE = "\r\x1b[2K"


def _interactive(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def _line(done: int, total: int, elapsed: float, width: int, label: str) -> str:
    counter = f" {done}/{total} files {elapsed:.0f}s"
    bar_width = max(0, min(40, width - len(label) - len(counter) - 4))
    filled = bar_width * done // total if total else bar_width
    bar = f" [{'#' * filled}{'-' * (bar_width - filled)}]" if bar_width >= 10 else ""
    return f"{label}{bar}{counter}"[: max(0, width - 1)]


class ProgressBar:
    """``done/total`` files and the elapsed time, redrawn on :meth:`advance` and :meth:`tick`."""

    def __init__(
        self,
        enabled: bool,
        *,
        total: int = 0,
        label: str = "Checking",
        stream: TextIO | None = None,
        delay: float = 0.5,
    ) -> None:
        self.out = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.label = label
        self.delay = delay
        self.drawn = False
        self._reset(total)

    def start(self, total: int) -> None:
        """Count ``total`` files from now (the clock starts here)."""
        self._reset(total)

    def _reset(self, total: int) -> None:
        self.total = total
        self.active = self.enabled and total >= 2 and _interactive(self.out)
        self.done = 0
        self.started = time.monotonic()
        self.last_draw = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        self.tick()

    def tick(self) -> None:
        if not self.active:
            return
        now = time.monotonic()
        if now - self.started >= self.delay and now - self.last_draw >= 0.1:
            width = shutil.get_terminal_size((80, 24)).columns
            self.out.write(_ERASE_LINE + _line(self.done, self.total, now - self.started, width, self.label))
            self.out.flush()
            self.drawn, self.last_draw = True, now

    def clear(self) -> None:
        """Erase the bar (before other output, and at the end); the next tick redraws it."""
        if self.drawn:
            self.out.write(_ERASE_LINE)
            self.out.flush()
            self.drawn = False
            self.last_draw = 0.0

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.clear()
        self.active = False


def progress(
    iterable: Iterable[T],
    total: int,
    enabled: bool,
    *,
    label: str = "Checking",
    stream: TextIO | None = None,
    delay: float = 0.5,
) -> Generator[T, None, None]:
    """Yield ``iterable``'s items, drawing ``done/total`` on stderr while it runs."""
    with ProgressBar(enabled, total=total, label=label, stream=stream, delay=delay) as bar:
        for item in iterable:
            bar.advance()
            yield item
