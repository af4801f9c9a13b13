"""What a name is bound to: one reader of libcst's scope analysis for every rule.

A *binding* of a name is one libcst assignment of it in the scope where it is read: an
assignment statement, an import, a parameter, a loop or ``with`` target, a ``def``...
Rules ask for the values a name can hold only through the three questions below, all
derived from the same list of bindings:

- ``single_value(name)``: the one value of a name bound exactly once, by ``name = value``
  (one target) or ``name: T = value``; else None.
- ``plain_values(name)``: every value, when each binding is such a plain assignment;
  None when any binding is something else (an import, a loop target, unpacking, ``+=``,
  a parameter, a ``def``).
- ``assigned_values(name)``: the values of the bindings that are assignment statements
  (the whole right-hand side for tuple unpacking), the others skipped.

The scope analysis is the largest single cost of a file; it runs only when one of these
is first asked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import Assignment, BaseAssignment, ImportAssignment, Scope, ScopeProvider

from amplint.analysis.syntax import dotted_name
from amplint.analysis.tree import Tree, if_chain
from amplint.engine.context import SourceContext


@dataclass(eq=False)
class Bindings:
    """The bindings of names in one file (``context.analysis.bindings``)."""

    source: SourceContext
    tree: Tree

    @functools.cached_property
    def _scopes(self) -> Mapping[cst.CSTNode, Scope | None]:
        return self.source.metadata(ScopeProvider)

    def scope(self, node: cst.CSTNode) -> Scope | None:
        """libcst's scope in which ``node`` is evaluated."""
        return self._scopes.get(node)

    def of(self, at: cst.CSTNode, spelled: str | None = None) -> list[BaseAssignment]:
        """Every binding of the name ``spelled`` in the scope of ``at`` (by default ``at`` is
        a Name, and ``spelled`` its identifier)."""
        if spelled is None:
            spelled = cst.ensure_type(at, cst.Name).value
        scope = self._scopes.get(at)
        return list(scope[spelled]) if scope is not None else []

    def assignments(self, at: cst.CSTNode, spelled: str | None = None) -> list[Assignment]:
        """The bindings ``of`` returns that code in this file makes (not imports, not builtins)."""
        return [
            binding
            for binding in self.of(at, spelled)
            if isinstance(binding, Assignment) and not isinstance(binding, ImportAssignment)
        ]

    # -- values ---------------------------------------------------------------------------

    def value_of_binding(self, binding: BaseAssignment) -> cst.BaseExpression | None:
        """The value of ``name = value`` (one target) or ``name: T = value``, else None."""
        if not isinstance(binding, Assignment):
            return None
        target = binding.node
        parent = self.tree.parent(target)
        if isinstance(parent, cst.AssignTarget):
            statement = self.tree.parent(parent)
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                return statement.value
        if isinstance(parent, cst.AnnAssign) and parent.target is target and parent.value is not None:
            return parent.value
        return None

    def single_value(self, name: cst.Name) -> cst.BaseExpression | None:
        bindings = self.of(name)
        return self.value_of_binding(bindings[0]) if len(bindings) == 1 else None

    def plain_values(self, name: cst.Name) -> list[cst.BaseExpression] | None:
        values: list[cst.BaseExpression] = []
        for binding in self.of(name):
            value = self.value_of_binding(binding)
            if value is None:
                return None
            values.append(value)
        return values or None

    def branch_values(self, name: cst.Name) -> list[cst.BaseExpression] | None:
        """The values of a name bound once per branch of one ``if``/``elif``/``else`` chain
        (optionally after a default bound just before the chain), every binding plain;
        None otherwise. The branches are alternatives, so these are all it can hold there."""
        values = self.plain_values(name)
        if values is None or len(values) < 2:
            return None
        chains: set[int] = set()
        defaults: list[cst.CSTNode] = []
        for binding in self.of(name):
            if not isinstance(binding, Assignment):
                return None
            statement = self.tree.statement_of(binding.node)
            chain = self._chain_of(statement) if statement is not None else None
            if chain is None:
                if statement is None:
                    return None
                defaults.append(statement)
            else:
                chains.add(id(chain))
        if len(chains) != 1 or len(defaults) > 1:
            return None
        if defaults:
            (chain_id,) = chains
            located = self.tree.statement_list(defaults[0])
            if located is None:
                return None
            siblings, index = located
            after = siblings[index + 1 :]
            if not after or id(after[0]) != chain_id:
                return None  # the default must be the statement right before the chain
        return values

    def _chain_of(self, statement: cst.CSTNode) -> cst.If | None:
        """The outermost ``if`` of the ``if``/``elif``/``else`` chain whose branch holds
        ``statement`` directly, or None."""
        block = self.tree.parent(statement)
        branch = self.tree.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if isinstance(branch, cst.Else):
            branch = self.tree.parent(branch)
        if not isinstance(branch, cst.If):
            return None
        outer = self.tree.parent(branch)
        while isinstance(outer, cst.If) and outer.orelse is branch:
            branch, outer = outer, self.tree.parent(outer)
        return branch

    def assigned_values(self, name: cst.Name) -> list[cst.BaseExpression]:
        values: list[cst.BaseExpression] = []
        for binding in self.of(name):
            if not isinstance(binding, Assignment):
                continue
            parent = self.tree.parent(binding.node)
            # `model, optimizer = wrap(model, optimizer)`: the whole right-hand side.
            while isinstance(parent, (cst.Element, cst.Tuple, cst.List)):
                parent = self.tree.parent(parent)
            statement = self.tree.parent(parent) if isinstance(parent, cst.AssignTarget) else parent
            if isinstance(statement, (cst.Assign, cst.AnnAssign)) and statement.value is not None:
                values.append(statement.value)
        return values

    def assigned_before(self, name: cst.Name, at: cst.CSTNode) -> bool:
        """Is every binding of ``name`` in ``at``'s scope made by code that starts before ``at``?"""
        scope = self._scopes.get(at)
        if scope is None:
            return False
        assignments = [binding for binding in scope[name.value] if isinstance(binding, Assignment)]
        start = self.source.span(at)[0]
        return bool(assignments) and all(self.source.span(binding.node)[0] < start for binding in assignments)

    def bound_on_every_path(self, name: cst.Name, at: cst.CSTNode) -> bool:
        """Is ``name`` bound before ``at`` whichever way the code runs? Every binding comes
        first (``assigned_before``), and one of them, in ``at``'s own function or module,
        runs whenever ``at`` does: in a block that also holds ``at`` (`with` bodies count),
        or in one link of an if/elif/else chain, ending in `else`, whose every link binds
        the name (Person_reID binds its dtype only under ``if fp16: ... elif bf16: ...``)."""
        if not self.assigned_before(name, at):
            return False
        scope = self.tree.scope_of(at)
        bindings = [binding for binding in self.assignments(at, name.value) if self.tree.scope_of(binding.node) is scope]
        return any(self._reaches(binding.node, at, bindings) for binding in bindings)

    def _reaches(self, target: cst.CSTNode, at: cst.CSTNode, bindings: list[Assignment]) -> bool:
        node: cst.CSTNode | None = self.tree.statement_of(target)
        while node is not None:
            block = self.tree.running_block(node)
            if block is None:
                return False
            if self.tree.within(at, block):
                return True
            owner = self.tree.parent(block)
            head = self.tree.if_chain_head(owner) if isinstance(owner, (cst.If, cst.Else)) else None
            if head is None:
                return False
            links, final = if_chain(head)
            branches: list[cst.If | cst.Else] = [*links, final] if final is not None else []
            if not branches or not all(any(self.tree.within(b.node, branch.body) for b in bindings) for branch in branches):
                return False
            node = head
        return False

    def assigned_targets(self, is_value: Callable[[cst.BaseExpression], bool]) -> frozenset[str]:
        """Dotted targets (``scaler``, ``self.scaler``) of assignment statements whose value
        ``is_value`` accepts, anywhere in the file."""
        names = set()
        for assign in self.tree.index.assigns:
            if is_value(assign.value):
                for target in assign.targets:
                    spelled = dotted_name(target.target)
                    if spelled:
                        names.add(spelled)
        return frozenset(names)

    # -- imports ----------------------------------------------------------------------------

    def import_binding(self, node: cst.CSTNode) -> ImportAssignment | None:
        """The one import that binds the root name of ``node``, when that is certain."""
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return None
        bindings = self.of(root)
        if len(bindings) != 1 or not isinstance(bindings[0], ImportAssignment):
            return None
        return bindings[0]

    def imports_of(self, statement: cst.Import | cst.ImportFrom, bound: str) -> list[ImportAssignment]:
        """The bindings of ``bound`` that ``statement`` makes."""
        scope = self._scopes.get(statement)
        return [
            binding
            for binding in (scope[bound] if scope is not None else ())
            if isinstance(binding, ImportAssignment) and binding.node is statement
        ]

    def module_binding(self, module: str, at: cst.CSTNode | None = None) -> str | None:
        """The name that denotes top-level package ``module`` at ``at`` (module scope if None).

        ``import torch`` and ``import torch.nn`` bind ``torch``; ``import torch as th``
        binds ``th``. A candidate counts only if every binding visible at the use site is
        such a module-level import (a parameter or assignment named ``torch`` shadows it).
        """
        scope = self._scopes.get(at) if at is not None else self._scopes.get(self.source.module)
        if scope is None:
            return None
        global_scope = scope.globals
        candidates: list[str] = []
        for name in sorted(_module_import_names(self.source.module, module)):
            bindings = list(scope[name])
            if bindings and all(
                isinstance(binding, ImportAssignment)
                and binding.scope is global_scope
                and _imports_module(binding.node, module)
                for binding in bindings
            ):
                candidates.append(name)
        if module in candidates:
            return module
        return candidates[0] if candidates else None

    def is_free(self, name: str, at: cst.CSTNode) -> bool:
        """True when ``name`` is bound nowhere visible from ``at`` (so an import may bind it)."""
        scope = self._scopes.get(at)
        if scope is None:
            return False
        return not list(scope[name]) and not list(scope.globals[name])


def _imports_module(statement: cst.CSTNode, module: str) -> bool:
    if not isinstance(statement, cst.Import):
        return False
    for alias in statement.names:
        dotted = cst.helpers.get_full_name_for_node(alias.name)
        if dotted is None:
            continue
        if alias.asname is None and (dotted == module or dotted.startswith(module + ".")):
            return True
        if alias.asname is not None and dotted == module:
            return True
    return False


def _module_import_names(tree: cst.Module, module: str) -> set[str]:
    """Names top-level ``import`` lines bind to ``module`` (``torch``, or an alias)."""
    names: set[str] = set()
    for statement in tree.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if not isinstance(small, cst.Import):
                continue
            for alias in small.names:
                dotted = cst.helpers.get_full_name_for_node(alias.name) or ""
                if alias.asname is not None and dotted == module:
                    names.add(cst.ensure_type(alias.asname.name, cst.Name).value)
                elif alias.asname is None and (dotted == module or dotted.startswith(module + ".")):
                    names.add(module)
    return names
