"""The analysis layer: facts about a file that several rules share, computed once.

Rules ask ``context.analysis`` (a :class:`FileAnalysis`) instead of re-deriving facts.
Every attribute is computed lazily on first use and cached for the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amplint.engine.context import FileContext


class FileAnalysis:
    def __init__(self, context: FileContext) -> None:
        self.context = context
