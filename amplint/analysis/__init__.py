"""The analysis layer: facts about a file that several rules share, computed once.

Rules ask ``context.analysis`` (a :class:`FileAnalysis`) instead of re-deriving facts.
Every attribute is computed lazily on first use and cached for the file.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from amplint.analysis.autocast import AutocastAnalysis
    from amplint.analysis.context import RuleContext
    from amplint.analysis.devices import DeviceAnalysis
    from amplint.analysis.names import NameResolver
    from amplint.analysis.scalers import ScalerAnalysis
    from amplint.analysis.scopes import FileIndex
    from amplint.analysis.training import TrainingAnalysis


class FileAnalysis:
    def __init__(self, context: RuleContext) -> None:
        self.context = context

    @functools.cached_property
    def names(self) -> NameResolver:
        from amplint.analysis.names import NameResolver

        return NameResolver(self.context.wrapper, lambda: self.context.parents)

    @functools.cached_property
    def index(self) -> FileIndex:
        from amplint.analysis.scopes import build_index

        return build_index(self.context)

    @functools.cached_property
    def autocast(self) -> AutocastAnalysis:
        from amplint.analysis.autocast import AutocastAnalysis

        return AutocastAnalysis(self.context)

    @functools.cached_property
    def training(self) -> TrainingAnalysis:
        from amplint.analysis.training import TrainingAnalysis

        return TrainingAnalysis(self.context)

    @functools.cached_property
    def scalers(self) -> ScalerAnalysis:
        from amplint.analysis.scalers import ScalerAnalysis

        return ScalerAnalysis(self.context)

    @functools.cached_property
    def devices(self) -> DeviceAnalysis:
        from amplint.analysis.devices import DeviceAnalysis

        return DeviceAnalysis(self.context)
