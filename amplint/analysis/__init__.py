"""The analysis layer: facts about a file that several rules share, computed once.

Rules ask ``context.analysis`` (a :class:`FileAnalysis`) and nothing else. Each part is
built on first use, once per file, from the parts below it, so the dependencies form a
chain with no cycle::

    tree ─ names ─ bindings ─ values ─ compat ─ training ─ autocast ─ scalers ─ devices

``tree``: parents, ancestors, scopes, statements and the file index; ``names``: what a
name or attribute resolves to; ``bindings``: what a name is bound to; ``values``: the
static values of expressions (strings, dtypes); ``compat``: compatibility fallbacks;
``training``, ``autocast``, ``scalers``, ``devices``: the AMP facts. PyTorch's AMP API
itself is data, in ``torch_api``.
"""

from __future__ import annotations

import functools

from amplint.analysis.autocast import AutocastAnalysis
from amplint.analysis.bindings import Bindings
from amplint.analysis.compat import Compat
from amplint.analysis.devices import DeviceAnalysis
from amplint.analysis.names import NameResolver
from amplint.analysis.scalers import ScalerAnalysis
from amplint.analysis.training import TrainingAnalysis
from amplint.analysis.tree import Tree
from amplint.analysis.values import Values
from amplint.engine.context import SourceContext


class FileAnalysis:
    """Every shared fact about one file, each computed on first use."""

    def __init__(self, source: SourceContext) -> None:
        self.source = source

    @functools.cached_property
    def tree(self) -> Tree:
        return Tree(self.source)

    @functools.cached_property
    def names(self) -> NameResolver:
        return NameResolver(self.source, self.tree)

    @functools.cached_property
    def bindings(self) -> Bindings:
        return Bindings(self.source, self.tree)

    @functools.cached_property
    def values(self) -> Values:
        return Values(self.names, self.bindings)

    @functools.cached_property
    def compat(self) -> Compat:
        return Compat(self.tree, self.names)

    @functools.cached_property
    def training(self) -> TrainingAnalysis:
        return TrainingAnalysis(self.source, self.tree, self.names, self.bindings)

    @functools.cached_property
    def autocast(self) -> AutocastAnalysis:
        return AutocastAnalysis(self.tree, self.names, self.bindings, self.values)

    @functools.cached_property
    def scalers(self) -> ScalerAnalysis:
        return ScalerAnalysis(self.tree, self.names, self.bindings, self.training)

    @functools.cached_property
    def devices(self) -> DeviceAnalysis:
        return DeviceAnalysis(self.source, self.tree, self.names, self.bindings)
