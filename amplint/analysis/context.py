"""The context rules work with: the engine's view of a file plus the shared analysis."""

from __future__ import annotations

import functools

from amplint.analysis import FileAnalysis
from amplint.engine.context import SourceContext


class RuleContext(SourceContext):
    """A :class:`SourceContext` whose ``analysis`` answers the AMP questions rules share.

    ``analysis`` is the one way to shared facts (names, bindings, autocast blocks,
    scalers, training code, devices): each is computed on first use and once per file.
    """

    @functools.cached_property
    def analysis(self) -> FileAnalysis:
        return FileAnalysis(self)
