"""Read-only traversal of libcst trees in libcst's own visiting order.

libcst's visitors rebuild every node they pass (each ``_visit_and_replace_children``
constructs and validates a new node), which made traversal the largest cost of linting
a file. Nothing here builds a node: children are read from the dataclass fields, in the
order libcst visits them, so visitors see exactly the sequence libcst would give them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import libcst as cst

# libcst visits the children of these node types in an order other than their dataclass
# field order (parentheses and leading lines are declared last but come first, among
# others). tests/test_walk.py derives this table from the installed libcst and checks
# walks against libcst's visitors.
_FOR_CLAUSE = ("asynchronous", "whitespace_after_for", "target", "whitespace_before_in", "whitespace_after_in", "iter")
_IMPORT = ("whitespace_after_import", "names", "semicolon")
_IMPORT_FROM = (
    "whitespace_after_from",
    "relative",
    "module",
    "whitespace_before_import",
    "whitespace_after_import",
    "lpar",
    "names",
    "rpar",
    "semicolon",
)
_VISIT_ORDER: dict[str, tuple[str, ...]] = {
    "AnnAssign": ("target", "annotation", "equal", "value", "semicolon"),
    "Annotation": ("whitespace_before_indicator", "whitespace_after_indicator", "annotation"),
    "Arg": ("whitespace_after_star", "keyword", "equal", "value", "comma", "whitespace_after_arg"),
    "AsName": ("whitespace_before_as", "name", "whitespace_after_as"),
    "Assert": ("whitespace_after_assert", "test", "comma", "msg", "semicolon"),
    "Attribute": ("lpar", "value", "dot", "attr", "rpar"),
    "Await": ("lpar", "whitespace_after_await", "expression", "rpar"),
    "BinaryOperation": ("lpar", "left", "operator", "right", "rpar"),
    "BooleanOperation": ("lpar", "left", "operator", "right", "rpar"),
    "Call": ("lpar", "func", "whitespace_after_func", "whitespace_before_args", "args", "rpar"),
    "ClassDef": (
        "leading_lines",
        "decorators",
        "lines_after_decorators",
        "whitespace_after_class",
        "name",
        "whitespace_after_name",
        "type_parameters",
        "whitespace_after_type_parameters",
        "lpar",
        "bases",
        "keywords",
        "rpar",
        "whitespace_before_colon",
        "body",
    ),
    "CompFor": ("whitespace_before", *_FOR_CLAUSE, "ifs", "inner_for_in"),
    "CompIf": ("whitespace_before", "whitespace_before_test", "test"),
    "Comparison": ("lpar", "left", "comparisons", "rpar"),
    "ConcatenatedString": ("lpar", "left", "whitespace_between", "right", "rpar"),
    "Decorator": ("leading_lines", "whitespace_after_at", "decorator", "trailing_whitespace"),
    "Dict": ("lpar", "lbrace", "elements", "rbrace", "rpar"),
    "DictComp": (
        "lpar",
        "lbrace",
        "key",
        "whitespace_before_colon",
        "whitespace_after_colon",
        "value",
        "for_in",
        "rbrace",
        "rpar",
    ),
    "DictElement": ("key", "whitespace_before_colon", "whitespace_after_colon", "value", "comma"),
    "Else": ("leading_lines", "whitespace_before_colon", "body"),
    "ExceptHandler": (
        "leading_lines",
        "whitespace_after_except",
        "type",
        "name",
        "whitespace_before_colon",
        "body",
    ),
    "ExceptStarHandler": (
        "leading_lines",
        "whitespace_after_except",
        "whitespace_after_star",
        "type",
        "name",
        "whitespace_before_colon",
        "body",
    ),
    "Finally": ("leading_lines", "whitespace_before_colon", "body"),
    "For": ("leading_lines", *_FOR_CLAUSE, "whitespace_before_colon", "body", "orelse"),
    "FormattedString": ("lpar", "parts", "rpar"),
    "FormattedStringExpression": (
        "whitespace_before_expression",
        "expression",
        "equal",
        "whitespace_after_expression",
        "format_spec",
    ),
    "From": ("whitespace_before_from", "whitespace_after_from", "item"),
    "FunctionDef": (
        "leading_lines",
        "decorators",
        "lines_after_decorators",
        "asynchronous",
        "whitespace_after_def",
        "name",
        "whitespace_after_name",
        "type_parameters",
        "whitespace_after_type_parameters",
        "whitespace_before_params",
        "params",
        "returns",
        "whitespace_before_colon",
        "body",
    ),
    "GeneratorExp": ("lpar", "elt", "for_in", "rpar"),
    "Global": ("whitespace_after_global", "names", "semicolon"),
    "If": (
        "leading_lines",
        "whitespace_before_test",
        "test",
        "whitespace_after_test",
        "body",
        "orelse",
    ),
    "IfExp": (
        "lpar",
        "body",
        "whitespace_before_if",
        "whitespace_after_if",
        "test",
        "whitespace_before_else",
        "whitespace_after_else",
        "orelse",
        "rpar",
    ),
    "Import": _IMPORT,
    "ImportFrom": _IMPORT_FROM,
    "IndentedBlock": ("header", "body", "footer"),
    "Index": ("whitespace_after_star", "value"),
    "Lambda": ("lpar", "whitespace_after_lambda", "params", "colon", "body", "rpar"),
    # PEP 810 `lazy` imports (libcst 1.9): the plain import's order after the `lazy` keyword.
    "LazyImport": ("whitespace_after_lazy", *_IMPORT),
    "LazyImportFrom": ("whitespace_after_lazy", *_IMPORT_FROM),
    "List": ("lpar", "lbracket", "elements", "rbracket", "rpar"),
    "ListComp": ("lpar", "lbracket", "elt", "for_in", "rbracket", "rpar"),
    "Match": (
        "leading_lines",
        "whitespace_after_match",
        "subject",
        "whitespace_before_colon",
        "whitespace_after_colon",
        "cases",
        "footer",
    ),
    "MatchAs": ("lpar", "pattern", "whitespace_before_as", "whitespace_after_as", "name", "rpar"),
    "MatchCase": (
        "leading_lines",
        "whitespace_after_case",
        "pattern",
        "whitespace_before_if",
        "whitespace_after_if",
        "guard",
        "whitespace_before_colon",
        "body",
    ),
    "MatchClass": (
        "lpar",
        "cls",
        "whitespace_after_cls",
        "whitespace_before_patterns",
        "patterns",
        "kwds",
        "whitespace_after_kwds",
        "rpar",
    ),
    "MatchKeywordElement": (
        "key",
        "whitespace_before_equal",
        "whitespace_after_equal",
        "pattern",
        "comma",
    ),
    "MatchList": ("lpar", "lbracket", "patterns", "rbracket", "rpar"),
    "MatchMapping": (
        "lpar",
        "lbrace",
        "elements",
        "whitespace_before_rest",
        "rest",
        "trailing_comma",
        "rbrace",
        "rpar",
    ),
    "MatchMappingElement": (
        "key",
        "whitespace_before_colon",
        "whitespace_after_colon",
        "pattern",
        "comma",
    ),
    "MatchOr": ("lpar", "patterns", "rpar"),
    "MatchStar": ("whitespace_before_name", "name", "comma"),
    "MatchTuple": ("lpar", "patterns", "rpar"),
    "Module": ("header", "body", "footer"),
    "NamedExpr": (
        "lpar",
        "target",
        "whitespace_before_walrus",
        "whitespace_after_walrus",
        "value",
        "rpar",
    ),
    "Nonlocal": ("whitespace_after_nonlocal", "names", "semicolon"),
    "Param": (
        "whitespace_after_star",
        "name",
        "annotation",
        "equal",
        "default",
        "comma",
        "whitespace_after_param",
    ),
    "Parameters": (
        "posonly_params",
        "posonly_ind",
        "params",
        "star_arg",
        "kwonly_params",
        "star_kwarg",
    ),
    "Raise": ("whitespace_after_raise", "exc", "cause", "semicolon"),
    "Return": ("whitespace_after_return", "value", "semicolon"),
    "Set": ("lpar", "lbrace", "elements", "rbrace", "rpar"),
    "SetComp": ("lpar", "lbrace", "elt", "for_in", "rbrace", "rpar"),
    "SimpleStatementLine": ("leading_lines", "body", "trailing_whitespace"),
    "SimpleStatementSuite": ("leading_whitespace", "body", "trailing_whitespace"),
    "Slice": ("lower", "first_colon", "upper", "second_colon", "step"),
    "StarredDictComp": (
        "lpar",
        "lbrace",
        "whitespace_before_value",
        "value",
        "for_in",
        "rbrace",
        "rpar",
    ),
    "StarredDictElement": ("whitespace_before_value", "value", "comma"),
    "StarredElement": ("lpar", "whitespace_before_value", "value", "rpar", "comma"),
    "Subscript": (
        "lpar",
        "value",
        "whitespace_after_value",
        "lbracket",
        "slice",
        "rbracket",
        "rpar",
    ),
    "TemplatedString": ("lpar", "parts", "rpar"),
    "TemplatedStringExpression": (
        "whitespace_before_expression",
        "expression",
        "equal",
        "whitespace_after_expression",
        "format_spec",
    ),
    "Try": ("leading_lines", "whitespace_before_colon", "body", "handlers", "orelse", "finalbody"),
    "TryStar": (
        "leading_lines",
        "whitespace_before_colon",
        "body",
        "handlers",
        "orelse",
        "finalbody",
    ),
    "Tuple": ("lpar", "elements", "rpar"),
    "TypeAlias": (
        "whitespace_after_type",
        "name",
        "whitespace_after_name",
        "type_parameters",
        "whitespace_after_type_parameters",
        "whitespace_after_equals",
        "value",
        "semicolon",
    ),
    "TypeParam": ("param", "equal", "whitespace_after_star", "default", "comma"),
    "TypeParameters": ("lbracket", "params", "rbracket"),
    "TypeVar": ("name", "colon", "bound"),
    "UnaryOperation": ("lpar", "operator", "expression", "rpar"),
    "While": (
        "leading_lines",
        "whitespace_after_while",
        "test",
        "whitespace_before_colon",
        "body",
        "orelse",
    ),
    "With": (
        "leading_lines",
        "asynchronous",
        "whitespace_after_with",
        "lpar",
        "items",
        "rpar",
        "whitespace_before_colon",
        "body",
    ),
    "Yield": ("lpar", "whitespace_after_yield", "value", "rpar"),
}

_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}
for _name, _order in _VISIT_ORDER.items():
    _type = getattr(cst, _name, None)
    if isinstance(_type, type) and issubclass(_type, cst.CSTNode):
        _FIELDS[_type] = _order


def child_fields(node_type: type[cst.CSTNode]) -> tuple[str, ...]:
    """The fields of ``node_type`` that may hold child nodes, in visiting order."""
    names = _FIELDS.get(node_type)
    if names is None:
        names = _FIELDS[node_type] = tuple(field.name for field in dataclasses.fields(node_type))
    return names


# Formatting nodes: whitespace, comments, punctuation and operator tokens. No name,
# expression or statement is ever below one, so analyses that look for those skip them
# (about two thirds of a module's nodes). Rules may not visit them (rules/base.py).
TRIVIA: tuple[type[cst.CSTNode], ...] = (
    cst.BaseParenthesizableWhitespace,
    cst.TrailingWhitespace,
    cst.EmptyLine,
    cst.Comment,
    cst.Newline,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.Asynchronous,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.ParamSlash,
    cst.ParamStar,
)

_NOT_A_NODE, _TRIVIA, _SIGNIFICANT = 0, 1, 2
# isinstance against libcst's abstract classes goes through the ABC machinery; a lookup
# by exact type is several times cheaper, and this is the innermost loop of every walk.
_KINDS: dict[type, int] = {type(None): _NOT_A_NODE, str: _NOT_A_NODE, bool: _NOT_A_NODE}


def _kind(value_type: type) -> int:
    kind = _KINDS.get(value_type)
    if kind is None:
        if not issubclass(value_type, cst.CSTNode):
            kind = _NOT_A_NODE
        else:
            kind = _TRIVIA if issubclass(value_type, TRIVIA) else _SIGNIFICANT
        _KINDS[value_type] = kind
    return kind


def _children(node: cst.CSTNode, least: int) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    kinds = _KINDS
    for name in child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            for item in value:
                item_type = type(item)
                if (kinds[item_type] if item_type in kinds else _kind(item_type)) >= least:
                    found.append(item)
        elif (kinds[value_type] if value_type in kinds else _kind(value_type)) >= least:
            found.append(value)
    return found


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children in visiting order (libcst's ``node.children``, without copying)."""
    return _children(node, _TRIVIA)


def significant_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children in visiting order, formatting nodes (``TRIVIA``) left out."""
    return _children(node, _SIGNIFICANT)


def handler(visitor_class: type, prefix: str, node_type: type[cst.CSTNode]) -> Callable[..., object] | None:
    """``visitor_class``'s own ``visit_<Type>`` or ``leave_<Type>`` (``prefix``), if it
    has one: what libcst's visitors look up, without libcst's typed no-op stubs."""
    found = getattr(visitor_class, f"{prefix}_{node_type.__name__}", None)
    if found is None or getattr(found, "_is_no_op", False):
        return None
    return found  # type: ignore[no-any-return]


def check_handlers(visitor_class: type, label: str) -> None:
    """Refuse, when the class is defined, handlers the walks here would never call:
    libcst's per-attribute hooks (``visit_Call_func``) and handlers of formatting nodes.
    (Each class answers for its own methods; visitor classes are also defined inside
    functions, so this must stay cheap.)"""
    for attribute in vars(visitor_class):
        prefix, _, type_name = attribute.partition("_")
        if prefix not in ("visit", "leave"):
            continue
        if "_" in type_name:
            raise TypeError(f"{label}: attribute visitor {attribute!r} is not supported")
        node_type = getattr(cst, type_name, None)
        if isinstance(node_type, type) and issubclass(node_type, TRIVIA):
            raise TypeError(f"{label}: formatting nodes are never visited: {attribute}")


def walk(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``root`` and every node below it, in pre-order (the order visitors see them)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


class ReadOnlyVisitor(cst.CSTVisitor):
    """A ``CSTVisitor`` whose ``node.visit(visitor)`` does not rebuild the tree.

    It visits children itself, in libcst's order, and tells libcst not to. Its
    ``visit_<Type>`` methods may return False to skip children, as usual. It does not
    go into formatting nodes (``TRIVIA``), and libcst's per-attribute hooks
    (``visit_<Type>_<field>``) are not called; defining either is an error.
    """

    _visit_handlers: ClassVar[dict[type[cst.CSTNode], Callable[..., object] | None]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._visit_handlers = {}
        check_handlers(cls, cls.__name__)

    def on_visit(self, node: cst.CSTNode) -> bool:
        handlers = type(self)._visit_handlers
        node_type = type(node)
        if node_type in handlers:
            on_visit = handlers[node_type]
        else:
            # What libcst's CSTVisitor.on_visit looks up, looked up once per node type.
            on_visit = handlers[node_type] = handler(type(self), "visit", node_type)
        if on_visit is None or on_visit(self, node) is not False:
            for child in significant_children(node):
                # What child.visit(self) does for a visitor that visits children itself.
                self.on_visit(child)
                self.on_leave(child)
        return False


Callback = Callable[[cst.CSTNode], object]


def traverse(
    root: cst.CSTNode,
    visitors: Callable[[type[cst.CSTNode]], Sequence[Callback]],
    leavers: Callable[[type[cst.CSTNode]], Sequence[Callback]],
) -> None:
    """Call ``visitors(type)`` on entering each node and ``leavers(type)`` on leaving it
    (formatting nodes, ``TRIVIA``, are not entered).

    Both are asked once per node type they are wanted for; callbacks cannot prune the
    walk (like libcst's batched visitors, whose return values are ignored).
    """
    visit_cache: dict[type[cst.CSTNode], Sequence[Callback]] = {}
    leave_cache: dict[type[cst.CSTNode], Sequence[Callback]] = {}
    # A pending leave is pushed as a one-element list, told apart from nodes by type.
    stack: list[cst.CSTNode | list[cst.CSTNode]] = [root]
    while stack:
        item = stack.pop()
        if type(item) is list:
            node = item[0]
            for callback in leave_cache[type(node)]:
                callback(node)
            continue
        node = item  # type: ignore[assignment]
        node_type = type(node)
        on_visit = visit_cache.get(node_type)
        if on_visit is None:
            on_visit = visit_cache[node_type] = visitors(node_type)
            leave_cache[node_type] = leavers(node_type)
        for callback in on_visit:
            callback(node)
        if leave_cache[node_type]:
            stack.append([node])
        stack.extend(reversed(significant_children(node)))
