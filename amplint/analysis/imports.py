"""Module-level imports: which name reaches a module, and where a new import goes.

Fixes that emit ``torch.amp.…``, ``functools.partial`` or ``amplint.runtime.…`` must
never emit a name that is not bound at the use site; these helpers answer whether it
is, and produce the one edit (identical across fixes, so the engine applies it once)
that binds it when it is not.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import ImportAssignment, Scope, ScopeProvider

from amplint.analysis.context import RuleContext
from amplint.diagnostics import Edit


def _scopes(context: RuleContext) -> dict[cst.CSTNode, Scope | None]:
    return context.wrapper.resolve(ScopeProvider)  # type: ignore[return-value]


def _imports_module(assignment_node: cst.CSTNode, module: str) -> bool:
    if not isinstance(assignment_node, cst.Import) or isinstance(
        assignment_node.names, cst.ImportStar
    ):
        return False
    for alias in assignment_node.names:
        dotted = cst.helpers.get_full_name_for_node(alias.name)
        if dotted is None:
            continue
        if alias.asname is None and (dotted == module or dotted.startswith(module + ".")):
            return True
        if alias.asname is not None and dotted == module:
            return True
    return False


def module_binding(context: RuleContext, module: str, at: cst.CSTNode | None = None) -> str | None:
    """The name that denotes top-level package ``module`` at ``at`` (module scope if None).

    ``import torch`` and ``import torch.nn`` bind ``torch``; ``import torch as th`` binds
    ``th``. A candidate counts only if every binding visible at the use site is such an
    import (a parameter or assignment named ``torch`` shadows it).
    """
    scope = _scopes(context).get(at) if at is not None else _scopes(context).get(context.module)
    if scope is None:
        return None
    global_scope = scope.globals
    candidates: list[str] = []
    for name in sorted(_bound_names(context.module, module)):
        assignments = list(scope[name])
        if assignments and all(
            isinstance(assignment, ImportAssignment)
            and assignment.scope is global_scope
            and _imports_module(assignment.node, module)
            for assignment in assignments
        ):
            candidates.append(name)
    if module in candidates:
        return module
    return candidates[0] if candidates else None


def _bound_names(tree: cst.Module, module: str) -> set[str]:
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


def name_is_free(context: RuleContext, name: str, at: cst.CSTNode) -> bool:
    """True when ``name`` is bound nowhere visible from ``at`` (so an import may bind it)."""
    scope = _scopes(context).get(at)
    if scope is None:
        return False
    return not list(scope[name]) and not list(scope.globals[name])


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.ImportFrom)
        and isinstance(small.module, cst.Name)
        and small.module.value == "__future__"
        for small in statement.body
    )


def _is_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _plain_import_name(statement: cst.BaseStatement) -> str | None:
    """``x.y`` for a line that is exactly ``import x.y``, else None."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Import) or len(small.names) != 1:
        return None
    return cst.helpers.get_full_name_for_node(small.names[0].name)


def add_import(context: RuleContext, statement: str, *, position: str = "sorted") -> Edit:
    """An edit inserting ``statement`` (``import x``) as a top-level line.

    ``sorted`` (for the standard library) puts it among the leading ``import x`` lines in
    alphabetical order, as isort would; ``last`` puts it after the leading block of
    imports (third-party code). With no imports it goes after the docstring and the
    ``__future__`` imports.
    """
    body = list(context.module.body)
    index = 0
    while index < len(body) and ((index == 0 and _is_docstring(body[index])) or _is_future_import(body[index])):
        index += 1
    run: list[cst.BaseStatement] = []
    while index + len(run) < len(body) and _is_import(body[index + len(run)]):
        run.append(body[index + len(run)])
    line = statement + context.source.newline
    if not run:
        if index == 0:
            return context.insert(context.line_start(context.span(body[0])[0]) if body else 0, line)
        return context.insert(context.line_end(context.span(body[index - 1])[1] - 1), line)
    if position != "last":
        new_name = statement.split()[1]
        for existing in run:
            name = _plain_import_name(existing)
            if name is None:
                break  # isort puts plain imports before from-imports within a section
            if name.lower() > new_name.lower():
                return context.insert(context.line_start(context.span(existing)[0]), line)
    return context.insert(context.line_end(context.span(run[-1])[1] - 1), line)
