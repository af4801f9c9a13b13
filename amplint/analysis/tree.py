"""Where a node lives: its parent and ancestors, its scope, its statement and block.

Also the file index: one pass over the parent map that collects the nodes several
analyses look at (``with`` statements, calls, functions, assignments), so that no
analysis walks the whole tree again.

A *scope* here is the code a function body or the module runs: a ``FunctionDef`` or
the ``Module``. Lambdas and comprehensions belong to the function around them; a
function's decorators, parameter defaults and annotations run in the enclosing scope.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from amplint.engine.context import SourceContext
from amplint.engine.walk import ReadOnlyVisitor

ScopeNode = cst.FunctionDef | cst.Module


@dataclass
class FileIndex:
    withs: list[cst.With] = field(default_factory=list)
    calls: list[cst.Call] = field(default_factory=list)
    functions: list[cst.FunctionDef] = field(default_factory=list)
    classes: list[cst.ClassDef] = field(default_factory=list)
    assigns: list[cst.Assign] = field(default_factory=list)
    annotated: list[cst.AnnAssign] = field(default_factory=list)
    augmented: list[cst.AugAssign] = field(default_factory=list)
    returns: list[cst.Return] = field(default_factory=list)
    yields: list[cst.Yield] = field(default_factory=list)
    imports: list[cst.Import | cst.ImportFrom] = field(default_factory=list)


def build_index(parents: Mapping[cst.CSTNode, cst.CSTNode]) -> FileIndex:
    """The index of a file from its parent map, whose keys are every node but the module
    in visiting order."""
    index = FileIndex()
    wanted: dict[type[cst.CSTNode], list[Any]] = {
        cst.With: index.withs,
        cst.Call: index.calls,
        cst.FunctionDef: index.functions,
        cst.ClassDef: index.classes,
        cst.Assign: index.assigns,
        cst.AnnAssign: index.annotated,
        cst.AugAssign: index.augmented,
        cst.Return: index.returns,
        cst.Yield: index.yields,
        cst.Import: index.imports,
        cst.ImportFrom: index.imports,
    }
    for node in parents:
        found = wanted.get(type(node))
        if found is not None:
            found.append(node)
    return index


class _Statements(ReadOnlyVisitor):
    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.found: list[cst.BaseStatement] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and node is not self.root:
            self.found.append(node)
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                return False
            return not isinstance(node, cst.SimpleStatementLine)
        return not isinstance(node, cst.BaseExpression)


class Tree:
    """Tree relations of one file (``context.analysis.tree``)."""

    def __init__(self, source: SourceContext) -> None:
        self.source = source
        self._statements: dict[cst.CSTNode, list[cst.BaseStatement]] = {}
        self._scopes: dict[cst.CSTNode, ScopeNode] = {}

    @property
    def parents(self) -> Mapping[cst.CSTNode, cst.CSTNode]:
        """Every node's parent (formatting nodes left out), in visiting order."""
        return self.source.parents

    @functools.cached_property
    def index(self) -> FileIndex:
        return build_index(self.parents)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The parent, its parent, and so on up to the module."""
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def ancestry(self, node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, cst.CSTNode]]:
        """``(child, ancestor)`` pairs from ``node`` up: each ancestor with the child of it
        on the way down to ``node`` (to ask "is it in the body or the test?")."""
        child = node
        for ancestor in self.ancestors(node):
            yield child, ancestor
            child = ancestor

    def within(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        """Is ``node`` ``container`` or inside it?"""
        return node is container or any(ancestor is container for ancestor in self.ancestors(node))

    def scope_of(self, node: cst.CSTNode) -> ScopeNode:
        """The function whose body runs ``node``, or the module."""
        found = self._scopes.get(node)
        if found is None:
            found = self.source.module
            for child, ancestor in self.ancestry(node):
                if isinstance(ancestor, cst.FunctionDef) and child is ancestor.body:
                    found = ancestor
                    break
            self._scopes[node] = found
        return found

    def class_of(self, function: cst.FunctionDef) -> cst.ClassDef | None:
        """The class a function is a method of (defined directly in its body)."""
        block = self.parents.get(function)
        owner = self.parents.get(block) if block is not None else None
        return owner if isinstance(owner, cst.ClassDef) else None

    def method_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        """The class whose method runs ``node`` (its scope is a method), or None."""
        scope = self.scope_of(node)
        return self.class_of(scope) if isinstance(scope, cst.FunctionDef) else None

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The statement (a line, or a compound statement) directly containing ``node``."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            current = self.parents.get(current)
        return current

    def running_block(self, node: cst.CSTNode) -> cst.Module | cst.IndentedBlock | None:
        """The block (or module) whose statements run whenever ``node``'s statement does:
        the nearest one holding ``node``, a `with` body counting as part of the block
        around its `with` (``with torch.no_grad():`` runs its body unconditionally)."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.Module):
                return ancestor
            if isinstance(ancestor, cst.IndentedBlock) and not isinstance(self.parents.get(ancestor), cst.With):
                return ancestor
        return None

    def if_chain_head(self, branch: cst.If | cst.Else) -> cst.If | None:
        """The first ``if`` of the if/elif/else chain that ``branch`` is a link of."""
        top: cst.CSTNode = branch
        while True:
            parent = self.parents.get(top)
            if not (isinstance(parent, cst.If) and parent.orelse is top):
                break
            top = parent
        return top if isinstance(top, cst.If) else None

    def statement_list(self, statement: cst.CSTNode) -> tuple[Sequence[cst.BaseStatement], int] | None:
        """The statements of the block (or module) that holds ``statement``, and its index."""
        parent = self.parents.get(statement)
        if not isinstance(parent, (cst.Module, cst.IndentedBlock)):
            return None
        for index, candidate in enumerate(parent.body):
            if candidate is statement:
                return parent.body, index
        return None

    def statements(self, scope: cst.CSTNode) -> list[cst.BaseStatement]:
        """The statements of ``scope`` (a function or the module) in source order, compound
        statements before the statements they hold; nested functions and classes are
        listed but not entered (they are their own scopes)."""
        cached = self._statements.get(scope)
        if cached is None:
            collector = _Statements(scope)
            (scope.body if isinstance(scope, cst.FunctionDef) else scope).visit(collector)
            cached = self._statements[scope] = collector.found
        return cached


def if_chain(statement: cst.If) -> tuple[list[cst.If], cst.Else | None]:
    """The ``if`` and ``elif`` links of a chain, and its final ``else``."""
    links = [statement]
    while isinstance(links[-1].orelse, cst.If):
        links.append(links[-1].orelse)
    final = links[-1].orelse
    return links, final if isinstance(final, cst.Else) else None
