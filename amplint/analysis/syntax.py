"""Facts about an expression that its syntax alone gives: no names resolved, no bindings.

Everything here is a pure function of the nodes passed in; the analyses that need the
file (names, bindings, scopes) build on these.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import libcst as cst

from amplint.engine.walk import ReadOnlyVisitor, walk


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


def has_call(node: cst.CSTNode) -> bool:
    """Does ``node`` call anything (itself a call, or one inside it)?"""
    return any(isinstance(child, cst.Call) for child in walk(node))


def operands(test: cst.BaseExpression, operator: type[cst.BaseBooleanOp]) -> list[cst.BaseExpression]:
    """The parts of an ``and`` (``cst.And``) or ``or`` (``cst.Or``) chain, in order; the
    test itself when it is no such chain."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, operator):
        return [*operands(test.left, operator), *operands(test.right, operator)]
    return [test]


def caught(handler: cst.ExceptHandler) -> list[cst.BaseExpression] | None:
    """The exception expressions an ``except`` clause names (``except (A, b.C):`` → ``A``,
    ``b.C``); None for a bare ``except:``."""
    if handler.type is None:
        return None
    if isinstance(handler.type, cst.Tuple):
        return [element.value for element in handler.type.elements]
    return [handler.type]


def root_name(node: cst.CSTNode) -> cst.Name | None:
    """The name an expression's full name starts from (through attributes, calls and
    subscripts, as libcst's ``get_full_name_for_node`` looks through them)."""
    while True:
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return node if isinstance(node, cst.Name) else None


def receiver_root(node: cst.BaseExpression) -> cst.BaseExpression:
    """The innermost object of a chain of attributes, calls and subscripts."""
    root = node
    while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
        root = root.value if not isinstance(root, cst.Call) else root.func
    return root


def string_literal(expr: cst.BaseExpression | None) -> str | None:
    """The value of a plain string literal (``"cuda"``), else None."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def constant(expr: cst.BaseExpression) -> str | int | None:
    """The value of a string or integer literal, else None."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    return None


def is_none(expr: cst.BaseExpression) -> bool:
    """The literal ``None``."""
    return isinstance(expr, cst.Name) and expr.value == "None"


def bool_value(node: cst.BaseExpression) -> bool | None:
    """``True``/``False`` written literally, else None."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def call_arguments(call: cst.Call, order: Sequence[str]) -> dict[str, cst.BaseExpression] | None:
    """Map a call's arguments to parameter names by ``order`` for the positional ones;
    None if it unpacks ``*args``/``**kw`` or passes more positional arguments than named."""
    matched = match_arguments(call.args, order)
    return matched[0] if matched is not None else None


def match_arguments(
    args: Sequence[cst.Arg], positional: Sequence[str], keywords: Collection[str] | None = None
) -> tuple[dict[str, cst.BaseExpression], dict[str, cst.BaseExpression]] | None:
    """Arguments by parameter name: positional ones in the order of ``positional``,
    keywords by their name; a keyword not among ``keywords`` (when given) goes to the
    second mapping, what a ``**kwargs`` parameter would receive. None if they unpack
    ``*args``/``**kw`` or pass more positional arguments than named."""
    mapped: dict[str, cst.BaseExpression] = {}
    rest: dict[str, cst.BaseExpression] = {}
    position = 0
    for arg in args:
        if arg.star:
            return None
        if arg.keyword is None:
            if position >= len(positional):
                return None
            mapped[positional[position]] = arg.value
            position += 1
        elif keywords is None or arg.keyword.value in keywords:
            mapped[arg.keyword.value] = arg.value
        else:
            rest[arg.keyword.value] = arg.value
    return mapped, rest


def assigned_names(statement: cst.BaseStatement) -> set[str]:
    """Names a simple statement line binds by (augmented, annotated) assignment."""
    names: set[str] = set()
    if not isinstance(statement, cst.SimpleStatementLine):
        return names

    def collect(target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            names.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                collect(element.value)

    for small in statement.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                collect(target.target)
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
            collect(small.target)
    return names


def loaded_names(node: cst.CSTNode) -> set[str]:
    """Every bare name ``node`` mentions (attribute names excluded)."""
    names: set[str] = set()

    class _Visitor(ReadOnlyVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            attribute.value.visit(self)
            return False

    node.visit(_Visitor())
    return names


def count_names(node: cst.CSTNode, name: str) -> int:
    """How often the identifier ``name`` occurs in ``node`` (attribute names included)."""
    count = 0

    class _Counter(ReadOnlyVisitor):
        def visit_Name(self, found: cst.Name) -> None:
            nonlocal count
            count += found.value == name

    node.visit(_Counter())
    return count


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
