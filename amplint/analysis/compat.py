"""Compatibility fallbacks: deliberate support for old PyTorch that rules leave alone.

Code in an ``except`` clause whose ``try`` body uses the modern replacement, or in an
``if``/``else`` branch (or conditional-expression branch) whose sibling uses it, exists
to run on versions where the replacement is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import libcst as cst

from amplint.analysis.context import RuleContext
from amplint.engine.walk import ReadOnlyVisitor


def parents(context: RuleContext) -> Mapping[cst.CSTNode, cst.CSTNode]:
    return context.parents


def ancestors(context: RuleContext, node: cst.CSTNode) -> list[cst.CSTNode]:
    parent_of = parents(context)
    chain: list[cst.CSTNode] = []
    current = parent_of.get(node)
    while current is not None:
        chain.append(current)
        current = parent_of.get(current)
    return chain


class _NameCollector(ReadOnlyVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.nodes.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.nodes.append(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.nodes.append(node)


def subtree_uses(
    context: RuleContext, tree: cst.CSTNode, is_replacement: Callable[[str], bool]
) -> bool:
    """Does ``tree`` reference (or import from) anything ``is_replacement`` accepts?"""
    collector = _NameCollector()
    tree.visit(collector)
    for node in collector.nodes:
        if isinstance(node, cst.ImportFrom):
            module = cst.helpers.get_full_name_for_node(node.module) if node.module else None
            if (
                module
                and not isinstance(node.names, cst.ImportStar)
                and any(
                    is_replacement(f"{module}.{cst.helpers.get_full_name_for_node(alias.name)}")
                    for alias in node.names
                )
            ):
                return True
            continue
        for qualified in context.analysis.names.qualified_names(node):
            if is_replacement(qualified.name):
                return True
    return False


def in_compat_fallback(
    context: RuleContext, node: cst.CSTNode, is_replacement: Callable[[str], bool]
) -> bool:
    child = node
    for ancestor in ancestors(context, node):
        if (
            isinstance(ancestor, cst.Try)
            and child in ancestor.handlers
            and subtree_uses(context, ancestor.body, is_replacement)
        ):
            return True
        elif isinstance(ancestor, (cst.If, cst.IfExp)):
            sibling: cst.CSTNode | None = None
            if child is ancestor.body:
                sibling = ancestor.orelse
            elif child is ancestor.orelse:
                sibling = ancestor.body
            if sibling is not None and subtree_uses(context, sibling, is_replacement):
                return True
        child = ancestor
    return False
