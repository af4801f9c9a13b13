"""Resolve an expression to the one qualified name it denotes, or to nothing.

A name with several possible bindings (an import on one branch, another import or an
assignment on another) is deliberately unresolved: rules stay silent on it, and output
never depends on set iteration order.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Mapping
from typing import Any

import libcst as cst
from libcst.metadata import (
    QualifiedName,
    QualifiedNameSource,
    ScopeProvider,
)

from amplint.analysis.syntax import root_name as syntax_root_name
from amplint.analysis.tree import Tree
from amplint.engine.context import SourceContext

_BUILTINS = frozenset(dir(builtins))
_EXTERNAL = (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN)


class NameResolver:
    """Qualified names, as QualifiedNameProvider computes them, asked of the scope only for
    the nodes rules look at (the provider's own pass over every node costs as much as
    parsing). An expression whose root name no import binds, and that is no builtin,
    cannot denote an imported name: it is answered without the scope analysis at all.
    """

    def __init__(self, source: SourceContext, tree: Tree) -> None:
        self._source = source
        self._tree = tree

    @functools.cached_property
    def _scopes(self) -> Mapping[cst.CSTNode, Any]:
        return self._source.metadata(ScopeProvider)

    @functools.cached_property
    def _index(self) -> _ImportIndex:
        return _ImportIndex(self._tree)

    def qualified_names(self, node: cst.CSTNode) -> set[QualifiedName]:
        scope = self._scopes.get(node)
        if scope is None:
            return set()
        return set(scope.get_qualified_names_for(node))

    def resolve(self, node: cst.CSTNode) -> str | None:
        """The imported or builtin name ``node`` denotes, when that is certain."""
        root_name = syntax_root_name(node)
        if root_name is None and isinstance(node, (cst.Attribute, cst.Call, cst.Subscript)):
            return None  # `"".join`, `f()()`: an expression no import names
        if root_name is not None:
            root = root_name.value
            index = self._index
            role = _role(root_name, index.tree)
            if role in ("name", "harmless"):
                return None  # not a variable: the scope analysis resolves nothing here either
            if not index.star and root not in index.bindings:
                if root not in _BUILTINS:
                    return None  # no import binds it, and it is no builtin
                if index.plain_import(root) is None:
                    # A builtin the file rebinds somewhere: this read may see the
                    # builtin or the rebinding. Unsure, so unresolved (the scope analysis
                    # would say which, at the cost of analysing the whole file).
                    return None
            if root in STAR_MODULES and index.star_module(root) and role == "read":
                full = cst.helpers.get_full_name_for_node(node)
                return full if full is not None and full.split(".")[0] == root else None
            base = index.plain_import(root)
            if base is not None and role == "read":
                if root not in index.bindings:
                    return base  # libcst names a builtin's attributes by the builtin alone
                full = cst.helpers.get_full_name_for_node(node)
                if full is not None:
                    return base + full[len(root) :]
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


# Top-level modules read as themselves when only a star import can have bound them.
STAR_MODULES = frozenset({"torch"})


class _ImportIndex:
    """The file's imports by bound name, and where each name occurs.

    A name is a *plain import* when every binding of it is a module-level, absolute import
    of one and the same thing (or, for a builtin, when nothing binds it) and every other
    occurrence of it only reads it: then each read denotes that import or builtin, exactly
    what the scope analysis would say, and the scope analysis (the largest single cost of
    a file) is not needed to know it. ``tests/test_names.py`` checks the equivalence. The
    one deliberate difference: a builtin the file rebinds somewhere is left unresolved
    everywhere (silence, where the scope analysis might have said "builtin").
    """

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.star = False
        self.bindings: dict[str, list[str | None]] = {}  # name → qualified name per import (None: not plain)
        self.occurrences: dict[str, list[cst.Name]] = {}
        self._plain: dict[str, str | None] = {}
        for node in tree.parents:
            if isinstance(node, cst.Name):
                self.occurrences.setdefault(node.value, []).append(node)
            elif isinstance(node, cst.Import):
                for alias in node.names:
                    name = alias.evaluated_name
                    if alias.evaluated_alias is not None:
                        self.bindings.setdefault(alias.evaluated_alias, []).append(name)
                    else:
                        # `import a.b` binds `a` to the package `a`, like `import a`.
                        self.bindings.setdefault(name.split(".")[0], []).append(name.split(".")[0])
            elif isinstance(node, cst.ImportFrom):
                if isinstance(node.names, cst.ImportStar):
                    self.star = True
                    continue
                module = None if node.relative or node.module is None else cst.helpers.get_full_name_for_node(node.module)
                for alias in node.names:
                    bound = alias.evaluated_alias or alias.evaluated_name
                    self.bindings.setdefault(bound, []).append(f"{module}.{alias.evaluated_name}" if module else None)

    def star_module(self, name: str) -> bool:
        """Is ``name`` a module that only a star import can bind here (``torch`` read in a
        file whose ``from data_utils.utils import *`` brings it, and that never binds it
        itself)? Read as that module: code that reads it would fail otherwise."""
        if not self.star or name in self.bindings:
            return False
        return all(_role(occurrence, self.tree) in ("read", "name", "harmless") for occurrence in self.occurrences.get(name, ()))

    def plain_import(self, name: str) -> str | None:
        if name not in self._plain:
            self._plain[name] = self._compute_plain(name)
        return self._plain[name]

    def _compute_plain(self, name: str) -> str | None:
        if self.star:
            return None
        targets = set(self.bindings.get(name, ()))
        if not targets and name in _BUILTINS:
            targets = {name}  # a builtin nothing in the file rebinds
        if len(targets) != 1 or None in targets:
            return None
        owners: set[cst.CSTNode] = set()
        reads: list[cst.Name] = []
        for occurrence in self.occurrences.get(name, ()):
            role = _role(occurrence, self.tree)
            if role == "other":
                return None
            if role == "import":
                owner = _owner(occurrence, self.tree)
                if owner is None:
                    return None
                owners.add(owner)
            elif role == "read":
                reads.append(occurrence)
        # Every binding imports the same thing, so a read means it whichever binding it
        # sees; without a module-level one, each read must be inside an importing function.
        functions = [owner for owner in owners if isinstance(owner, cst.FunctionDef)]
        if owners and len(functions) == len(owners):
            for read in reads:
                if not any(_inside(read, function, self.tree) for function in functions):
                    return None
        return next(iter(targets))


# Parents in which a Name is only read (never bound, deleted or declared global).
_READ_PARENTS = (
    cst.Call,
    cst.BinaryOperation,
    cst.BooleanOperation,
    cst.UnaryOperation,
    cst.Comparison,
    cst.ComparisonTarget,
    cst.Expr,
    cst.Return,
    cst.Await,
    cst.Decorator,
    cst.IfExp,
    cst.If,
    cst.While,
    cst.Assert,
    cst.Index,
    cst.WithItem,
    cst.Raise,
    cst.Yield,
    cst.DictElement,
    cst.Slice,
    cst.FormattedStringExpression,
    cst.Lambda,
)


# Parents in which a Name is read in one field and bound (or declared) in the others.
_READ_FIELD: dict[type[cst.CSTNode], str] = {
    cst.WithItem: "item",
    cst.Assign: "value",
    cst.AnnAssign: "value",
    cst.Subscript: "value",
    cst.Param: "default",
    cst.ExceptHandler: "type",
}


def _role(name: cst.Name, tree: Tree) -> str:
    """"read"; "import" (bound by an import); "name" (a keyword's name, which the scope
    analysis resolves by its spelling like a read); "harmless" (an attribute's name or an
    imported module's name, which it does not resolve); or "other" (anything else, which
    may bind)."""
    parent = tree.parent(name)
    if isinstance(parent, cst.Attribute):
        if parent.value is not name:
            return "harmless"
        top: cst.CSTNode = parent
        while isinstance(tree.parent(top), cst.Attribute):
            top = tree.parents[top]
        # `import torch.cuda.amp as amp`, `from torch.cuda import amp`: a module's name.
        return "harmless" if isinstance(tree.parent(top), (cst.ImportAlias, cst.ImportFrom)) else "read"
    if isinstance(parent, cst.Arg):
        return "read" if parent.value is name else "name"
    if isinstance(parent, cst.ImportFrom):
        return "harmless" if parent.module is name else "other"
    read_field = _READ_FIELD.get(type(parent)) if parent is not None else None
    if read_field is not None:
        return "read" if getattr(parent, read_field) is name else "other"
    if isinstance(parent, (cst.ImportAlias, cst.AsName)):
        current: cst.CSTNode | None = parent
        while current is not None and not isinstance(current, (cst.Import, cst.ImportFrom)):
            current = tree.parent(current)
        if current is None:
            return "other"  # `except E as name`, `with x as name`
        return "import"
    if isinstance(parent, cst.Annotation):
        return "read"
    if isinstance(parent, (cst.Element, cst.StarredElement)):
        return _element_role(parent, tree)
    if isinstance(parent, _READ_PARENTS):
        return "read"
    return "other"


def _element_role(element: cst.CSTNode, tree: Tree) -> str:
    """A name in a tuple/list/set display: bound when the display is an assignment target."""
    top = element
    while isinstance(top, (cst.Element, cst.StarredElement, cst.Tuple, cst.List, cst.Set)):
        parent = tree.parent(top)
        if parent is None:
            return "other"
        top = parent
    if isinstance(top, _READ_PARENTS) and not isinstance(top, cst.WithItem):
        return "read"
    if isinstance(top, cst.ExceptHandler):
        return "read"  # `except (A, B):` - the name an except binds is an AsName
    if isinstance(top, cst.Param):
        return "read" if top.default is not None and tree.within(element, top.default) else "other"
    if isinstance(top, (cst.Assign, cst.Arg, cst.Return, cst.Subscript, cst.SubscriptElement, cst.Index)):
        # The value side of these; their target side is never reached through a display.
        return "read" if not isinstance(top, cst.Assign) or _is_value(top, element, tree) else "other"
    return "other"


def _is_value(assign: cst.Assign, node: cst.CSTNode, tree: Tree) -> bool:
    return tree.within(node, assign.value)



def _owner(name: cst.Name, tree: Tree) -> cst.CSTNode | None:
    """The module or function whose scope an import of ``name`` binds it in (None: a class)."""
    current = tree.parent(name)
    while current is not None:
        if isinstance(current, (cst.Module, cst.FunctionDef)):
            return current
        if isinstance(current, (cst.ClassDef, cst.Lambda)):
            return None
        current = tree.parent(current)
    return None


def _inside(node: cst.CSTNode, ancestor: cst.FunctionDef, tree: Tree) -> bool:
    """Is ``node`` in the body of ``ancestor`` (not its decorators, defaults or annotations)?"""
    child: cst.CSTNode = node
    current = tree.parent(node)
    while current is not None:
        if current is ancestor:
            return child is ancestor.body
        child, current = current, tree.parent(current)
    return False
