"""What an expression is statically known to be: a literal, a dtype, or one of a few.

Only what is certain counts: a literal, a torch dtype attribute, a name bound exactly
once in scope to such a thing, a conditional expression of them, or a lookup in a
literal dict. Everything else is unknown (None), and rules stay silent on unknowns.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import Assignment, Scope, ScopeProvider

from amplint.analysis.context import RuleContext
from amplint.engine.walk import ReadOnlyVisitor

LOW_PRECISION = frozenset({"float16", "bfloat16"})
# torch attributes naming dtypes, by canonical name.
DTYPE_ALIASES = {
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
}
# Strings commonly mapped to dtypes (nanoGPT's `dtype = 'bfloat16'`).
DTYPE_STRINGS = {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "float32": "float32", "fp32": "float32"}

_MAX_DEPTH = 8


def _scopes(context: RuleContext) -> Mapping[cst.CSTNode, Scope | None]:
    return context.wrapper.resolve(ScopeProvider)


def _parents(context: RuleContext) -> Mapping[cst.CSTNode, cst.CSTNode]:
    return context.parents


def assigned_values(context: RuleContext, name: cst.Name) -> list[cst.BaseExpression]:
    """Every value ``name`` is bound to by assignment in its scope (others skipped).

    For tuple unpacking the value is the whole right-hand side.
    """
    scope = _scopes(context).get(name)
    values: list[cst.BaseExpression] = []
    if scope is None:
        return values
    for assignment in scope[name.value]:
        if not isinstance(assignment, Assignment):
            continue
        parent = _parents(context).get(assignment.node)
        # `model, optimizer = wrap(model, optimizer)`: the whole right-hand side.
        while isinstance(parent, (cst.Element, cst.Tuple, cst.List)):
            parent = _parents(context).get(parent)
        statement = _parents(context).get(parent) if isinstance(parent, cst.AssignTarget) else parent
        if isinstance(statement, (cst.Assign, cst.AnnAssign)) and statement.value is not None:
            values.append(statement.value)
    return values


def single_binding(context: RuleContext, name: cst.Name) -> cst.BaseExpression | None:
    """The value ``name`` was bound to, if it has exactly one binding, by plain assignment."""
    scope = _scopes(context).get(name)
    if scope is None:
        return None
    assignments = [a for a in scope[name.value]]
    if len(assignments) != 1 or not isinstance(assignments[0], Assignment):
        return None
    target = assignments[0].node
    parent = _parents(context).get(target)
    if isinstance(parent, cst.AssignTarget):
        statement = _parents(context).get(parent)
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            return statement.value
    if isinstance(parent, cst.AnnAssign) and parent.target is target and parent.value is not None:
        return parent.value
    return None


def plain_bindings(context: RuleContext, name: cst.Name) -> list[cst.BaseExpression] | None:
    """Every value ``name`` is bound to in its scope, when each binding is a plain
    ``name = value`` (one target) or ``name: T = value``; None when any is something else
    (an import, a loop target, tuple unpacking, ``+=``, a parameter, a ``def``)."""
    scope = _scopes(context).get(name)
    if scope is None:
        return None
    values: list[cst.BaseExpression] = []
    for assignment in scope[name.value]:
        if not isinstance(assignment, Assignment):
            return None
        target = assignment.node
        parent = _parents(context).get(target)
        if isinstance(parent, cst.AssignTarget):
            statement = _parents(context).get(parent)
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                values.append(statement.value)
                continue
        if isinstance(parent, cst.AnnAssign) and parent.target is target and parent.value is not None:
            values.append(parent.value)
            continue
        return None
    return values or None


def string_values(context: RuleContext, node: cst.BaseExpression, depth: int = 0) -> frozenset[str] | None:
    """The possible string values of ``node``, or None when not statically known."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return frozenset({value}) if isinstance(value, str) else None
    if isinstance(node, cst.IfExp):
        body, orelse = string_values(context, node.body, depth + 1), string_values(context, node.orelse, depth + 1)
        return body | orelse if body is not None and orelse is not None else None
    if isinstance(node, cst.Name):
        bound = single_binding(context, node)
        return string_values(context, bound, depth + 1) if bound is not None else None
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
        # {"gpu": "cuda", "cpu": "cpu"}[accelerator]: the chosen value when the key is
        # known, else any of them.
        table: dict[str | None, frozenset[str]] = {}
        for element in node.value.elements:
            if not isinstance(element, cst.DictElement):
                return None
            found = string_values(context, element.value, depth + 1)
            if found is None:
                return None
            key = element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else None
            table[key if isinstance(key, str) else None] = table.get(key if isinstance(key, str) else None, frozenset()) | found
        if not table:
            return None
        keys = _dict_lookup_keys(context, node)
        if keys is not None and None not in table and keys <= table.keys():
            return frozenset().union(*(table[key] for key in keys))
        return frozenset().union(*table.values())
    return None


def dtype_values(context: RuleContext, node: cst.BaseExpression, depth: int = 0) -> frozenset[str] | None:
    """The possible dtypes of ``node`` (canonical names like ``float16``), or None."""
    if depth > _MAX_DEPTH:
        return None
    qualified = context.analysis.names.resolve(node)
    if qualified is not None and qualified.startswith("torch."):
        alias = DTYPE_ALIASES.get(qualified.removeprefix("torch."))
        return frozenset({alias}) if alias else None
    if isinstance(node, cst.IfExp):
        body, orelse = dtype_values(context, node.body, depth + 1), dtype_values(context, node.orelse, depth + 1)
        return body | orelse if body is not None and orelse is not None else None
    if isinstance(node, cst.Name):
        bound = single_binding(context, node)
        return dtype_values(context, bound, depth + 1) if bound is not None else None
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
        # {'float16': torch.float16, 'bfloat16': torch.bfloat16}[dtype]: any of the values.
        values: set[str] = set()
        for element in node.value.elements:
            if not isinstance(element, cst.DictElement):
                return None
            found = dtype_values(context, element.value, depth + 1)
            if found is None:
                return None
            values |= found
        keys = _dict_lookup_keys(context, node)
        if keys is not None:
            chosen = {
                value
                for element in node.value.elements
                if isinstance(element, cst.DictElement)
                and isinstance(element.key, cst.SimpleString)
                and element.key.evaluated_value in keys
                for value in (dtype_values(context, element.value, depth + 1) or ())
            }
            if chosen:
                return frozenset(chosen)
        return frozenset(values)
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "getattr"
        and len(node.args) == 2
        and context.analysis.names.resolve(node.args[0].value) == "torch"
    ):
        # getattr(torch, "bfloat16")
        names = string_values(context, node.args[1].value, depth + 1)
        if names is not None and all(name in DTYPE_ALIASES for name in names):
            return frozenset(DTYPE_ALIASES[name] for name in names)
    return None


def _dict_lookup_keys(context: RuleContext, node: cst.Subscript) -> frozenset[str] | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    return string_values(context, node.slice[0].slice.value)


def bool_value(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def mentions(node: cst.CSTNode, words: frozenset[str]) -> bool:
    """Does the code of ``node`` name any of ``words`` (as identifier or string content)?"""
    found = False

    class _Visitor(ReadOnlyVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            nonlocal found
            if name.value in words or any(word in name.value.lower() for word in words):
                found = True

        def visit_SimpleString(self, string: cst.SimpleString) -> None:
            nonlocal found
            value = string.evaluated_value
            if isinstance(value, str) and any(word in value.lower() for word in words):
                found = True

    node.visit(_Visitor())
    return found
