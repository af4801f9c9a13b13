"""Imports that fixes need: bind a module where a fix emits it, remove what became unused.

Fixes that emit ``torch.amp.…``, ``functools.partial`` or ``amplint.runtime.…`` must
never emit a name that is not bound at the use site. The importer says which name
denotes a module there (``th`` after ``import torch as th``), or produces the one edit
that binds it (identical across fixes, so the engine applies it once), or says that no
fix is possible (the name means something else). It also removes import aliases that a
fix leaves unused.
"""

from __future__ import annotations

from collections.abc import Set

import libcst as cst
from libcst.metadata import ImportAssignment

from amplint.analysis.context import RuleContext
from amplint.analysis.syntax import caught
from amplint.diagnostics import Edit
from amplint.fixes.calls import ListEdits
from amplint.fixes.edits import delete_statement

RUNTIME = "amplint.runtime"


def bound_name(alias: cst.ImportAlias) -> str:
    """The name an import alias binds (``import a.b`` binds ``a``)."""
    return alias.evaluated_alias or alias.evaluated_name.split(".")[0]


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.ImportFrom) and isinstance(small.module, cst.Name) and small.module.value == "__future__"
        for small in statement.body
    )


def _is_import(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
    )


def _in_import_block(statement: cst.BaseStatement) -> bool:
    """An absolute import line, or a ``try`` block that imports with an ``except
    ImportError`` fallback."""
    if _is_import(statement):
        assert isinstance(statement, cst.SimpleStatementLine)
        return not any(isinstance(small, cst.ImportFrom) and small.relative for small in statement.body)
    if not isinstance(statement, cst.Try) or not statement.handlers or statement.finalbody is not None:
        return False
    body = statement.body
    return (
        isinstance(body, cst.IndentedBlock)
        and all(_in_import_block(inner) for inner in body.body)
        and all(_catches_import_error(handler) for handler in statement.handlers)
    )


def _catches_import_error(handler: cst.ExceptHandler) -> bool:
    names = caught(handler)
    return names is not None and any(
        isinstance(name, cst.Name) and name.value in ("ImportError", "ModuleNotFoundError") for name in names
    )


def _plain_import_name(statement: cst.BaseStatement) -> str | None:
    """``x.y`` for a line that is exactly ``import x.y``, else None."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not isinstance(small, cst.Import) or len(small.names) != 1:
        return None
    return cst.helpers.get_full_name_for_node(small.names[0].name)


class Importer:
    """Import bookkeeping for the fixes of one file."""

    def __init__(self, context: RuleContext) -> None:
        self.context = context
        self.bindings = context.analysis.bindings
        self.tree = context.analysis.tree

    # -- binding a module ----------------------------------------------------------------------

    def add_import(self, statement: str, *, position: str = "sorted") -> Edit:
        """An edit inserting ``statement`` (``import x``) as a top-level line in the import block.

        The import block is the run of top-level imports after the docstring and the
        ``__future__`` imports, ``try: import … except ImportError: …`` blocks included.
        It ends at the first other statement, and before a relative import: a
        ``sys.path`` manipulation, like any statement between imports, may be what makes
        the imports after it work, and relative imports are the project's own, so new
        imports never go after them. (An absolute import of the project's own modules
        cannot be told from a third-party one; it counts as part of the block.)

        ``sorted`` (for the standard library and torch) puts it among the leading
        ``import x`` lines in alphabetical order, as isort would; ``last`` puts it at the
        end of the block (third-party code). With no imports it goes after the docstring
        and the ``__future__`` imports.
        """
        context = self.context
        body = list(context.module.body)
        index = 0
        while index < len(body) and ((index == 0 and _is_docstring(body[index])) or _is_future_import(body[index])):
            index += 1
        run: list[cst.BaseStatement] = []
        while index + len(run) < len(body) and _in_import_block(body[index + len(run)]):
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

    def bind_module(
        self, module: str, at: cst.CSTNode, *, replacing: cst.Import | cst.ImportFrom | None = None
    ) -> tuple[str, list[Edit]] | None:
        """The name that denotes ``module`` at ``at``, and the edits that bind it if needed.

        An existing module-level import is reused (``th`` for ``import torch as th``);
        otherwise, when the name is free, ``import module`` is added: where ``replacing``
        (an import the fix removes) stood, if that is a top-level line, so the import block
        stays in order; else in the import block. None when the name is taken by
        something else.
        """
        bound = self.bindings.module_binding(module, at)
        if bound is not None:
            return bound, []
        if not self.bindings.is_free(module, at):
            return None
        line = self.tree.parent(replacing) if replacing is not None else None
        if line is not None and line in self.context.module.body:
            start = self.context.line_start(self.context.span(line)[0])
            return module, [self.context.insert(start, f"import {module}{self.context.source.newline}")]
        return module, [self.add_import(f"import {module}")]

    def runtime(self) -> list[Edit] | None:
        """Edits that make ``amplint.runtime`` usable at module level, or None if impossible.

        Nothing when ``import amplint.runtime`` is already there; ``import amplint.runtime``
        (the same edit from every fix, applied once) when ``amplint`` is free; None when the
        name ``amplint`` means something else in this file.
        """
        context = self.context
        for statement in context.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if alias.asname is None and cst.helpers.get_full_name_for_node(alias.name) == RUNTIME:
                            return []
        scope = self.bindings.scope(context.module)
        if scope is not None:
            for assignment in scope["amplint"]:
                if not isinstance(assignment, ImportAssignment) or not isinstance(assignment.node, cst.Import):
                    return None
                node = assignment.node
                if any(
                    alias.asname is not None
                    and cst.helpers.get_full_name_for_node(alias.name) not in ("amplint",)
                    and cst.ensure_type(alias.asname.name, cst.Name).value == "amplint"
                    for alias in node.names
                ):
                    return None
        return [self.add_import(f"import {RUNTIME}", position="last")]

    # -- removing bindings -------------------------------------------------------------------------

    def remove_names(self, statement: cst.Import | cst.ImportFrom, names: Set[str]) -> Edit | None:
        """Delete the aliases binding ``names`` from an import that is alone on its line (the
        whole line when none is left, ``pass`` when it was alone in an indented block);
        None when the import shares its line with other statements. Only the removed
        names' text goes: a parenthesized import keeps its layout and comments."""
        context = self.context
        line = self.tree.parent(statement)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        assert not isinstance(statement.names, cst.ImportStar)
        removed = {index for index, alias in enumerate(statement.names) if bound_name(alias) in names}
        if len(removed) == len(statement.names):
            block = self.tree.parent(line)
            if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
                return context.replace(statement, "pass")
            return delete_statement(context, line)
        editor = import_names(context, statement)
        editor.drop(removed)
        return editor.edit()


def import_names(context: RuleContext, statement: cst.Import | cst.ImportFrom) -> ListEdits:
    """Edits to the names of an import (``from m import (a, b)``, ``import a, b``)."""
    assert not isinstance(statement.names, cst.ImportStar)
    open_at = close_at = None
    if isinstance(statement, cst.ImportFrom) and statement.lpar is not None and statement.rpar is not None:
        open_at = context.span(statement.lpar)[0]
        close_at = context.span(statement.rpar)[1] - 1
    return ListEdits(context, statement, statement.names, open_at, close_at)
