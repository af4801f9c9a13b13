"""Resolve an expression to the one qualified name it denotes, or to nothing.

A name with several possible bindings (an import on one branch, another import or an
assignment on another) is deliberately unresolved: rules stay silent on it, and output
never depends on set iteration order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import libcst as cst
from libcst.metadata import (
    MetadataWrapper,
    QualifiedName,
    QualifiedNameProvider,
    QualifiedNameSource,
)

_EXTERNAL = (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN)


class NameResolver:
    def __init__(self, wrapper: MetadataWrapper) -> None:
        self._qualified: Mapping[cst.CSTNode, Any] = wrapper.resolve(QualifiedNameProvider)

    def qualified_names(self, node: cst.CSTNode) -> set[QualifiedName]:
        value = self._qualified.get(node)
        if value is None:
            return set()
        if callable(value):  # libcst computes qualified names lazily
            value = value()
        return set(value)

    def resolve(self, node: cst.CSTNode) -> str | None:
        """The imported or builtin name ``node`` denotes, when that is certain."""
        names = self.qualified_names(node)
        if len(names) != 1:
            return None
        (name,) = names
        if name.source not in _EXTERNAL:
            return None
        return (
            name.name.removeprefix("builtins.")
            if name.source is QualifiedNameSource.BUILTIN
            else name.name
        )

    def resolves_to(self, node: cst.CSTNode, *candidates: str) -> bool:
        return self.resolve(node) in candidates


def dotted_name(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None (calls, subscripts, ...)."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def last_name(node: cst.CSTNode) -> str | None:
    """The final identifier of a Name/Attribute (``self.scaler`` → ``scaler``)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None
