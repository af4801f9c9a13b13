"""A progress bar on stderr for long runs, shown only to a person at a terminal.

It draws nothing unless enabled, stderr is a terminal that understands ``\\r`` and
erase-line, and the run is still going after ``delay`` seconds (a quick run must not
flicker); it redraws at most ten times a second and erases itself when the run ends, so
nothing of it remains in the scrollback and nothing ever reaches stdout.

The CLI wraps the iteration over ``runner.run(...)``::

    for report in progress(run(files, job, ...), total=len(files), enabled=show):

with ``show`` false for machine-readable output formats and ``--quiet``.
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
    out = stream if stream is not None else sys.stderr
    if not enabled or total < 2 or not _interactive(out):
        yield from iterable
        return
    start = time.monotonic()
    last_draw = 0.0
    drawn = False
    done = 0
    try:
        for item in iterable:
            done += 1
            now = time.monotonic()
            if now - start >= delay and now - last_draw >= 0.1:
                width = shutil.get_terminal_size((80, 24)).columns
                out.write(_ERASE_LINE + _line(done, total, now - start, width, label))
                out.flush()
                drawn, last_draw = True, now
            yield item
    finally:
        if drawn:
            out.write(_ERASE_LINE)
            out.flush()
