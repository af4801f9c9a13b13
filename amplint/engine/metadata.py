"""libcst's scope analysis, run without rebuilding the tree.

libcst's ``ScopeProvider`` (and the ``ExpressionContextProvider`` it depends on) are
visitors, and every libcst visit rebuilds each node it passes; so does the batched pass
the ``MetadataWrapper`` makes over the whole module just to start them. Here the same
visitors run on a read-only descent (``children`` in libcst's visiting order) and are
started directly, so they compute exactly libcst's metadata, several times faster.
``tests/test_walk.py`` compares the results with libcst's, node by node.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any

import libcst as cst
from libcst.metadata import (
    ExpressionContext,
    ExpressionContextProvider,
    MetadataWrapper,
    ScopeProvider,
    expression_context_provider,
)
from libcst.metadata.base_provider import ProviderT
from libcst.metadata.expression_context_provider import ExpressionContextVisitor
from libcst.metadata.scope_provider import _ASSIGNMENT_LIKE_NODES, ScopeVisitor

from amplint.engine.walk import ReadOnlyVisitor


class _ExpressionContextVisitor(ReadOnlyVisitor, ExpressionContextVisitor):
    pass


class _ScopeVisitor(ReadOnlyVisitor, ScopeVisitor):
    def on_leave(self, original_node: cst.CSTNode) -> None:
        # ScopeVisitor.on_leave, with its isinstance test against a tuple of abstract
        # node classes (the costliest line of the whole analysis) answered per type.
        self.provider._computed[original_node] = self.scope
        node_type = type(original_node)
        assignment_like = _ASSIGNMENT_LIKE.get(node_type)
        if assignment_like is None:
            assignment_like = _ASSIGNMENT_LIKE[node_type] = issubclass(node_type, _ASSIGNMENT_LIKE_NODES)
        if assignment_like:
            self.scope._assignment_count += 1
        cst.CSTVisitor.on_leave(self, original_node)


_ASSIGNMENT_LIKE: dict[type, bool] = {}


class _ExpressionContextProvider(ExpressionContextProvider):
    def visit_Module(self, node: cst.Module) -> bool | None:
        # libcst's visitor starts a new ExpressionContextVisitor for every assignment
        # target, subscript and call argument, naming the class through its module. For
        # the duration, that name is the read-only variant; it computes the same
        # contexts (tests/test_walk.py), so anyone else using the module meanwhile gets
        # the same results too.
        saved = expression_context_provider.ExpressionContextVisitor
        expression_context_provider.ExpressionContextVisitor = _ExpressionContextVisitor  # type: ignore[misc]
        try:
            node.visit(_ExpressionContextVisitor(self, ExpressionContext.LOAD))
        finally:
            expression_context_provider.ExpressionContextVisitor = saved  # type: ignore[misc]
        return False


class _ScopeProvider(ScopeProvider):
    def visit_Module(self, node: cst.Module) -> bool | None:
        visitor = _ScopeVisitor(self)
        node.visit(visitor)
        visitor.infer_accesses()
        return False


_FAST: dict[Any, type[Any]] = {
    ExpressionContextProvider: _ExpressionContextProvider,
    ScopeProvider: _ScopeProvider,
}


class FastMetadataWrapper(MetadataWrapper):
    """A ``MetadataWrapper`` that computes scopes and expression contexts read-only."""

    def resolve(self, provider: ProviderT) -> Mapping[cst.CSTNode, Any]:
        fast = _FAST.get(provider)
        if fast is not None and provider not in self._metadata:
            self._metadata[provider] = self._compute(provider, fast)
        return super().resolve(provider)

    def resolve_many(self, providers: Collection[ProviderT]) -> Mapping[ProviderT, Mapping[cst.CSTNode, Any]]:
        for provider in providers:
            if provider in _FAST:
                self.resolve(provider)
        return super().resolve_many(providers)

    def _compute(self, provider: ProviderT, fast: type[Any]) -> Mapping[cst.CSTNode, Any]:
        instance = fast()
        instance.metadata = {dependency: self.resolve(dependency) for dependency in instance.get_inherited_dependencies()}
        try:
            instance.visit_Module(self.module)
        finally:
            instance.metadata = {}
        return MappingProxyType(dict(instance._computed))
