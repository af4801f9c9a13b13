"""Compatibility fallbacks: deliberate support for old PyTorch that rules leave alone.

Code in an ``except`` clause whose ``try`` body uses the modern replacement, or in an
``if``/``else`` branch (or conditional-expression branch) whose sibling uses it, exists
to run on versions where the replacement is missing. Branches chosen by a device test
are not: they are alternatives for different hardware, in the same torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from amplint.analysis.names import NameResolver
from amplint.analysis.torch_api import AVAILABILITY_TESTS, DEVICE_TYPES
from amplint.analysis.tree import Tree
from amplint.engine.walk import ReadOnlyVisitor


class _NameCollector(ReadOnlyVisitor):
    def __init__(self) -> None:
        self.nodes: list[cst.CSTNode] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.nodes.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.nodes.append(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.nodes.append(node)


# Functions whose device-less call is the old form that every torch has, and whose new form
# adds a device type first: `torch.is_autocast_enabled()` asks about CUDA in any release, so
# a branch calling it uses no replacement (must3r's `elif torch.is_autocast_enabled():`
# beside `torch.get_autocast_cpu_dtype()`; round BJ). Value: the old form's argument count.
_DEVICE_LESS_FORMS = {"torch.is_autocast_enabled": 0, "torch.set_autocast_enabled": 1}


def _calls(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []

    class _Visitor(ReadOnlyVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node.func)

    test.visit(_Visitor())
    return found


@dataclass(eq=False)
class Compat:
    """Compatibility fallbacks in one file (``context.analysis.compat``)."""

    tree: Tree
    names: NameResolver

    def uses(self, subtree: cst.CSTNode, is_replacement: Callable[[str], bool]) -> bool:
        """Does ``subtree`` reference (or import from) anything ``is_replacement`` accepts?"""
        collector = _NameCollector()
        subtree.visit(collector)
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
            for qualified in self.names.qualified_names(node):
                if is_replacement(qualified.name) and not self._device_less_call(node, qualified.name):
                    return True
        return False

    def _device_less_call(self, func: cst.CSTNode, name: str) -> bool:
        """Is ``func`` called in the old, device-less form of ``name``?"""
        arity = _DEVICE_LESS_FORMS.get(name)
        call = self.tree.parent(func)
        return (
            arity is not None
            and isinstance(call, cst.Call)
            and call.func is func
            and len(call.args) == arity
            and all(arg.keyword is None for arg in call.args)
        )

    def _tests_device(self, test: cst.BaseExpression) -> bool:
        """Branches chosen by device (``x.device.type == "mps"``, ``torch.cuda.is_available()``)
        are alternatives for different hardware, not for different torch versions."""

        class _Visitor(ReadOnlyVisitor):
            found = False

            def visit_SimpleString(self, node: cst.SimpleString) -> None:
                value = node.evaluated_value
                if isinstance(value, str) and value.split(":")[0] in DEVICE_TYPES:
                    self.found = True

        visitor = _Visitor()
        test.visit(visitor)
        if visitor.found:
            return True
        return any(self.names.resolve(node) in AVAILABILITY_TESTS for node in _calls(test))

    def in_fallback(self, node: cst.CSTNode, is_replacement: Callable[[str], bool]) -> bool:
        """Is ``node`` in the old-torch branch of code whose other branch uses the replacement?"""
        for child, ancestor in self.tree.ancestry(node):
            if isinstance(ancestor, cst.Try) and child in ancestor.handlers and self.uses(ancestor.body, is_replacement):
                return True
            if isinstance(ancestor, (cst.If, cst.IfExp)) and not self._tests_device(ancestor.test):
                sibling: cst.CSTNode | None = None
                if child is ancestor.body:
                    sibling = ancestor.orelse
                elif child is ancestor.orelse:
                    sibling = ancestor.body
                if sibling is not None and self.uses(sibling, is_replacement):
                    return True
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and self._after_early_return(ancestor, child, is_replacement):
                return True
        return False

    def _after_early_return(
        self, block: cst.IndentedBlock | cst.Module, child: cst.CSTNode, is_replacement: Callable[[str], bool]
    ) -> bool:
        """Does an ``if`` earlier in ``block`` return the replacement, so that ``child`` runs
        only where it is missing (EIGN: ``if hasattr(torch.amp, "GradScaler"): return
        torch.amp.GradScaler(...)``, then ``return torch.cuda.amp.GradScaler(...)``)?"""
        for statement in block.body:
            if statement is child:
                return False
            if (
                isinstance(statement, cst.If)
                and statement.orelse is None
                and not self._tests_device(statement.test)
                and isinstance(statement.body, cst.IndentedBlock)
                and statement.body.body
                and _returns(statement.body.body[-1])
                and self.uses(statement.body, is_replacement)
            ):
                return True
        return False


def _returns(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Return, cst.Raise)) for small in statement.body
    )
