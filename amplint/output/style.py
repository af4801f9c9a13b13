"""Terminal colours, Ruff's palette; off unless the stream is a terminal.

``NO_COLOR`` (https://no-color.org) turns colour off and ``FORCE_COLOR`` /
``CLICOLOR_FORCE`` turn it on, in that order of precedence.
"""

from __future__ import annotations

import os
from typing import IO, Any

import click


def use_color(stream: IO[Any] | None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR") or os.environ.get("CLICOLOR_FORCE", "0") != "0":
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def _apply(self, text: str, **styles: Any) -> str:
        return click.style(text, **styles) if self.color and text else text

    def path(self, text: str) -> str:
        return self._apply(text, bold=True)

    def punct(self, text: str) -> str:
        return self._apply(text, fg="cyan")

    def code(self, text: str) -> str:
        return self._apply(text, fg="red", bold=True)

    def fixable(self, text: str) -> str:
        return self._apply(text, fg="cyan")

    def gutter(self, text: str) -> str:
        return self._apply(text, fg="blue", bold=True)

    def marker(self, text: str) -> str:
        return self._apply(text, fg="red", bold=True)

    def help(self, text: str) -> str:
        return self._apply(text, fg="cyan", bold=True)

    def bold(self, text: str) -> str:
        return self._apply(text, bold=True)


PLAIN = Style(False)
