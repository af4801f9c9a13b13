"""Where a node lives: its function (or the module), its statement, its statement list.

Also the file index: one walk that collects the nodes several analyses look at (``with``
statements, calls, functions), so that no analysis walks the whole tree again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from amplint.analysis.context import RuleContext
from amplint.engine.context import SourceContext

Scope = cst.FunctionDef | cst.Module


@dataclass
class FileIndex:
    withs: list[cst.With] = field(default_factory=list)
    calls: list[cst.Call] = field(default_factory=list)
    functions: list[cst.FunctionDef] = field(default_factory=list)
    assigns: list[cst.Assign] = field(default_factory=list)


def build_index(context: SourceContext) -> FileIndex:
    index = FileIndex()
    wanted: dict[type[cst.CSTNode], list[cst.With] | list[cst.Call] | list[cst.FunctionDef] | list[cst.Assign]] = {
        cst.With: index.withs,
        cst.Call: index.calls,
        cst.FunctionDef: index.functions,
        cst.Assign: index.assigns,
    }
    # The parent map's keys are every node but the module, in visiting order.
    for node in context.parents:
        found = wanted.get(type(node))
        if found is not None:
            found.append(node)  # type: ignore[arg-type]
    return index


def index_of(context: RuleContext) -> FileIndex:
    return context.analysis.index


def _parent(context: RuleContext, node: cst.CSTNode) -> cst.CSTNode | None:
    from amplint.analysis.compat import parents

    return parents(context).get(node)


def enclosing_scope(context: RuleContext, node: cst.CSTNode) -> Scope:
    """The function whose body holds ``node`` (lambdas belong to their function), or the module."""
    current = _parent(context, node)
    while current is not None:
        if isinstance(current, cst.FunctionDef):
            return current
        current = _parent(context, current)
    return context.module


def enclosing_function(context: RuleContext, node: cst.CSTNode) -> cst.FunctionDef | None:
    scope = enclosing_scope(context, node)
    return scope if isinstance(scope, cst.FunctionDef) else None


def statement_of(context: RuleContext, node: cst.CSTNode) -> cst.BaseStatement | None:
    """The statement (a line, or a compound statement) directly containing ``node``."""
    current: cst.CSTNode | None = node
    while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        current = _parent(context, current)
    return current


def statement_list(context: RuleContext, statement: cst.BaseStatement) -> tuple[Sequence[cst.BaseStatement], int] | None:
    """The list of statements that holds ``statement`` (a block body or the module), and its index."""
    parent = _parent(context, statement)
    body: Sequence[cst.BaseStatement] | None = None
    if isinstance(parent, (cst.Module, cst.IndentedBlock)):
        body = parent.body
    if body is None:
        return None
    for index, candidate in enumerate(body):
        if candidate is statement:
            return body, index
    return None


def ancestors_until_scope(context: RuleContext, node: cst.CSTNode) -> list[cst.CSTNode]:
    """Ancestors of ``node`` up to (excluding) its function or the module."""
    chain: list[cst.CSTNode] = []
    current = _parent(context, node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        chain.append(current)
        current = _parent(context, current)
    return chain


def is_within(context: RuleContext, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    current: cst.CSTNode | None = node
    while current is not None:
        if current is container:
            return True
        current = _parent(context, current)
    return False
