"""What every format receives."""

from __future__ import annotations

from dataclasses import dataclass

from amplint.diagnostics import Diagnostic


@dataclass(frozen=True)
class Sourced:
    """A diagnostic with the text of its file (to show the offending line)."""

    diagnostic: Diagnostic
    text: str
