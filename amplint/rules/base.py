"""What every amplint rule shares beyond the engine's contract: the analysis context."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import libcst as cst

from amplint.analysis.context import RuleContext
from amplint.engine.catalog import FixAvailability
from amplint.engine.context import SourceContext
from amplint.engine.rule import Invalid, Rule

__all__ = ["AnalysisRule", "FixAvailability", "Invalid"]


class AnalysisRule(Rule[RuleContext]):
    """A rule that reads the shared analysis through ``self.context.analysis``."""

    abstract = True
    context_type: ClassVar[type[SourceContext]] = RuleContext

    def callback(self, prefix: str, node_type: type[cst.CSTNode]) -> Callable[[cst.CSTNode], None] | None:
        if self.context.analysis.another_framework:
            return None  # PaddlePaddle's or MindSpore's code: torch's AMP rules do not apply
        return super().callback(prefix, node_type)

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """The imported or builtin name ``node`` denotes, when that is certain."""
        return self.context.analysis.names.resolve(node)

    def code_predates(self, release: tuple[int, int]) -> bool:
        """Does this file's code run only on a torch older than ``release``: it, or a
        project module it imports, imports a module torch dropped by then (``torch._six``,
        gone in 2.0)?"""
        ceiling = self.context.analysis.project.torch_ceiling
        return ceiling is not None and ceiling <= release
