"""The engine's read-only walk meets nodes exactly as libcst's own visitors do.

Rules run on ``amplint.engine.walk.traverse`` instead of libcst's batched visitor (which
rebuilds every node it passes). These tests hold the walk to libcst: the visiting-order
table against the installed libcst's source, and the sequence of visit and leave events,
the parent map and the file index against libcst's visitors, over every fixture, every
rule example and a slice of the standard library. The scope analysis, run on the same
read-only descent (``FastMetadataWrapper``), is compared with libcst's own: every
expression context, every node's scope, each scope's assignments and accesses with the
referents of every access, and the qualified names of every name, attribute and call.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
import re
import sys
import sysconfig
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import libcst as cst
import pytest
from libcst.metadata import (
    ExpressionContextProvider,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    ScopeProvider,
)
from packaging.version import Version

from amplint.analysis.tree import build_index
from amplint.api import check_source
from amplint.engine import parse
from amplint.engine.config import Settings
from amplint.engine.context import SourceContext, parent_map, render, syntactic_spans
from amplint.engine.metadata import FastMetadataWrapper
from amplint.engine.rule import Rule
from amplint.engine.runner import Job, Mode, process_source
from amplint.engine.source import decode
from amplint.engine.walk import (
    _VISIT_ORDER,
    TRIVIA,
    ReadOnlyVisitor,
    child_fields,
    children,
    significant_children,
    traverse,
    walk,
)
from amplint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
_EMPTY = cst.Module([])
_VISITED_FIELD = re.compile(r'visit_\w+\(\s*self,\s*"(\w+)"')


def _node_types() -> list[type[cst.CSTNode]]:
    found: set[type[cst.CSTNode]] = set()
    pending: list[type[cst.CSTNode]] = [cst.CSTNode]  # type: ignore[type-abstract]
    while pending:
        current = pending.pop()
        for subclass in current.__subclasses__():
            pending.append(subclass)
            # libcst's slots decorator leaves the class it copied behind; keep the real one.
            public = getattr(sys.modules[subclass.__module__], subclass.__name__, None) is subclass
            if public and dataclasses.is_dataclass(subclass) and not inspect.isabstract(subclass):
                found.add(subclass)
    return sorted(found, key=lambda node_type: node_type.__name__)


_LIBCST = Version(importlib.metadata.version("libcst"))

# Node types in the table that the oldest supported libcst (pyproject.toml) lacks, with the
# release that added each to the `libcst` namespace.
_NODE_TYPES_SINCE: dict[str, str] = {
    "TemplatedString": "1.8.4",
    "TemplatedStringExpression": "1.8.4",
    "LazyImport": "1.9.0",
    "LazyImportFrom": "1.9.0",
    "StarredDictComp": "1.9.0",
}


def _visited_fields(node_type: type[cst.CSTNode]) -> list[str]:
    """The fields libcst's ``_visit_and_replace_children`` visits, in its order."""
    source = inspect.getsource(node_type._visit_and_replace_children)
    return list(dict.fromkeys(_VISITED_FIELD.findall(source)))


def _holds_nodes(hint: object) -> bool:
    """Whether a field annotated ``hint`` can hold a node (itself, in a union or a sequence)."""
    if isinstance(hint, type):
        return issubclass(hint, cst.CSTNode)
    return any(_holds_nodes(argument) for argument in typing.get_args(hint))


def _node_fields(node_type: type[cst.CSTNode]) -> list[str]:
    """The dataclass fields of ``node_type`` whose annotation admits a node, in field order."""
    hints = typing.get_type_hints(node_type)
    return [field.name for field in dataclasses.fields(node_type) if _holds_nodes(hints[field.name])]


@pytest.mark.parametrize("node_type", _node_types(), ids=lambda node_type: node_type.__name__)
def test_visiting_order_matches_libcst_source(node_type: type[cst.CSTNode]) -> None:
    name = node_type.__name__
    visited = _visited_fields(node_type)
    node_fields = _node_fields(node_type)
    # libcst visits every field that can hold a node and nothing else: otherwise its
    # visitors and node.children would disagree with the fields (libcst before 1.5 never
    # visited MatchCase.whitespace_before_colon), and an empty reading of the source is
    # caught here for every node type that has children.
    assert sorted(visited) == sorted(node_fields), f"{name}: libcst visits {visited}, node fields {node_fields}"
    table = _VISIT_ORDER.get(name)
    if table is not None:
        missing = sorted(set(table) - {field.name for field in dataclasses.fields(node_type)})
        assert not missing, f"_VISIT_ORDER[{name!r}] names fields libcst {_LIBCST} lacks: {missing}"
        assert list(table) == visited, f"_VISIT_ORDER[{name!r}] is not libcst {_LIBCST}'s order"
    else:
        assert node_fields == visited, f"libcst visits {name} as {visited}, not in field order: add it to _VISIT_ORDER"
    assert [field for field in child_fields(node_type) if field in node_fields] == visited


def test_visiting_order_table_is_compared_in_full() -> None:
    """Every table entry meets a node type of the installed libcst whose order was read;
    the only exceptions are node types newer than it."""
    present = {node_type.__name__: node_type for node_type in _node_types()}
    compared = {name for name, node_type in present.items() if _visited_fields(node_type)}
    # Most node types have children; a pattern that stopped matching libcst's source would
    # compare nothing and pass every per-type test of a leaf.
    assert len(compared) > len(present) // 2 > 0
    for name in _VISIT_ORDER:
        if name in present:
            assert name in compared, f"{name}: libcst's visiting order was not read"
        else:
            since = _NODE_TYPES_SINCE.get(name)
            assert since is not None, f"_VISIT_ORDER names {name}, which libcst {_LIBCST} does not have"
            assert Version(since) > _LIBCST, f"{name} should exist from libcst {since} (installed {_LIBCST})"
    for name, since in _NODE_TYPES_SINCE.items():
        assert (name in present) == (Version(since) <= _LIBCST), f"{name}: expected from libcst {since}"


def test_samplers_reach_every_node_type_the_table_orders() -> None:
    """The walk and scope comparisons below see each specially ordered node type at least once."""
    seen = {type(node).__name__ for _, text in _sampler_sources() for node in walk(cst.parse_module(text))}
    present = {node_type.__name__ for node_type in _node_types()}
    assert sorted(name for name in _VISIT_ORDER if name in present and name not in seen) == []


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.events: list[tuple[str, cst.CSTNode]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", node))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", original_node))


def _sources() -> list[tuple[str, str]]:
    sources = [
        (path.name, path.read_text(encoding="utf-8"))
        for path in sorted((ROOT / "fixtures").glob("*.py"))
    ]
    for rule in all_rules():
        sources += [(f"{rule.code}-valid-{i}", text) for i, text in enumerate(rule.VALID)]
        sources += [
            (f"{rule.code}-invalid-{i}", example.code) for i, example in enumerate(rule.INVALID)
        ]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    # Modules dense in syntax libcst orders specially: decorators, classes, comprehensions,
    # conditional expressions, keyword arguments, annotations, match statements.
    for name in (
        "dataclasses.py",
        "functools.py",
        "argparse.py",
        "typing.py",
        "inspect.py",
        "ast.py",
        "enum.py",
    ):
        path = stdlib / name
        if path.exists():
            sources.append((name, path.read_text(encoding="utf-8")))
    return sources + _sampler_sources()


def _sampler_sources() -> list[tuple[str, str]]:
    """The syntax samplers, with each newer feature the installed libcst parses."""
    sources = [
        ("syntax-sampler", _SYNTAX_SAMPLER),
        ("syntax-sampler-crlf", _SYNTAX_SAMPLER.replace("\n", "\r\n")),
    ]
    return sources + [(name, text) for name, text in _NEWER_SYNTAX.items() if _libcst_refusal(text) is None]


_SYNTAX_SAMPLER = """
import a.b as c
from .x import (y as z, w)
@decorate(arg=1)
class K(Base, metaclass=M):
    x: int = (1)
    def f(self, a, /, b: int = 2, *args, c=3, **kw) -> "K":
        return [v if v else -v for v in args if v] + {k: v for k, v in kw.items()}
async def g(*, x):
    async with x as (y, z), open(p) as q:
        await y
    async for i in z:
        yield i
    lam = lambda a, *b, c=1, **d: (a, *b, c, d)
    s = x[1:2:3, ..., None]
    t = f"{x!r:>{width}} {y=}"
    match x:
        case {"k": [1, *rest]} | Point(x=0, y=_) as p if p:
            pass
        case _:
            del x
    try:
        raise ValueError("v") from None
    except* (TypeError, ValueError) as e:
        global w
    finally:
        assert x, "message"
    while (n := len(x)) > 0:
        x -= 1
    else:
        ...
def outer(items):
    count = 0
    def inner():
        nonlocal count
        try:
            count += 1
        except (KeyError, IndexError):
            return {"a": 1, **items} or {c for c in items} and not (i for i in items)
        if count: pass
        elif items: return ["x" "y", *items]
        else: return {1, 2}
    match items:
        case (1, 2) | [3, *_]:
            pass
    return inner
"""

# Syntax newer than the oldest Python amplint runs on (3.10), one feature each. Every source
# the installed libcst parses joins the samplers above (walk, spans, render and scope analysis
# held to libcst's); test_newer_syntax_is_analysed_or_reported covers all of them.
_NEWER_SYNTAX: dict[str, str] = {
    "pep695-generic-function": (
        "def first[T: (int, str), *Ts, **P](items: list[T], *rest: *Ts) -> T:\n"
        "    def inner[U: T](u: U) -> U:\n"
        "        return u\n"
        "    return inner(items[0])\n"
    ),
    "pep695-generic-class": (
        "class Box[T: Hashable](Base[T], metaclass=Meta):\n"
        "    item: T\n"
        "    def get[S](self, default: S) -> T | S:\n"
        "        return self.item or default\n"
    ),
    "pep695-type-alias": (
        "type Pair = tuple[int, int]\n"
        "type Tree[T] = T | list[Tree[T]]\n"
        "class C:\n"
        "    type Local[K, V] = dict[K, V]\n"
    ),
    "pep696-type-parameter-defaults": (
        "class A[T = int, *Ts = *tuple[int, str], **P = [int, str]]: pass\n"
        "def f[T: int = bool](x: T) -> T: return x\n"
        "type Alias[K = str, V = K] = dict[K, V]\n"
    ),
    "pep701-nested-quotes": (
        'a = f"{"nested"} {f"{f"{x!r}"}"} {y:{"width"}}"\n'
        "b = f'{\"\\n\".join(lines)}' f\"{d['key']}\"\n"
    ),
    "pep701-multiline-and-comments": (
        'total = f"""{\n'
        "    a  # a comment inside the expression\n"
        '    + b  # "quotes" in a comment\n'
        '}"""\n'
        'short = f"{\n    x\n    if x else y  # comment\n}"\n'
    ),
    "pep750-template-strings": (
        'greeting = t"hello {name!r:>{width}} {value=}"\n'
        'raw = rt"\\d{x}" + t"""\n{block}\n"""\n'
        'nested = t"{t"{inner}"}"\n'
    ),
    # Two template strings side by side: libcst 1.9.0 fails on it with an internal error.
    "pep750-implicit-concatenation": 't"a {x}" t"b {y}"\n',
    "pep798-unpacking-in-comprehensions": "merged = {**m for m in maps}\nflat = [*xs for xs in rows]\n",
    "pep810-lazy-imports": "lazy import a.b as c\nlazy from .x import (y, z)\n",
}

# The first libcst release that parses each feature the oldest supported one does not;
# features not listed must parse on every supported libcst.
_PARSED_SINCE: dict[str, str | None] = {
    "pep750-template-strings": "1.8.4",
    "pep750-implicit-concatenation": None,
    "pep798-unpacking-in-comprehensions": "1.9.0",
    "pep810-lazy-imports": "1.9.0",
}


def _libcst_refusal(text: str) -> BaseException | None:
    try:
        cst.parse_module(text)
    except Exception as error:  # noqa: BLE001 - how libcst refuses is what is recorded
        return error
    return None


_DEPRECATED_SCALER = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


@pytest.mark.parametrize("name", list(_NEWER_SYNTAX))
def test_newer_syntax_is_analysed_or_reported(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Analysed where libcst parses it; else AMP900 where the running Python cannot compile
    it either, and the documented warning where it can. Never AMP999, never an exception."""
    text = _DEPRECATED_SCALER + _NEWER_SYNTAX[name]
    refusal = _libcst_refusal(text)
    since = _PARSED_SINCE.get(name, "0")
    if since is not None and Version(since) <= _LIBCST:
        assert refusal is None, f"libcst {_LIBCST} should parse {name}: {refusal}"

    codes = [diagnostic.code for diagnostic in check_source(text, "newer.py")]
    if refusal is None:
        assert codes == ["AMP001"]  # the file was analysed
        return
    if parse.cpython_compiles(text) is not None:
        assert codes == ["AMP900"]  # this Python refuses it too: the user's syntax error here
    else:
        assert codes == ([] if isinstance(refusal, cst.ParserSyntaxError) else ["AMP900"])

    # On a Python that compiles it (3.12+; 3.14 for template strings), as if here.
    monkeypatch.setattr(parse, "cpython_compiles", lambda text, path="<unknown>": None)
    report = process_source("newer.py", text.encode(), Job(Mode.CHECK, Settings(), all_rules()))
    if isinstance(refusal, cst.ParserSyntaxError):
        assert report.diagnostics == []
        assert report.warnings and "libcst cannot parse this valid Python" in report.warnings[0]
    else:
        # libcst failing inside is its bug, reported as AMP900 (engine/parse.py).
        assert [d.code for d in report.diagnostics] == ["AMP900"]
        assert "cannot parse" in report.diagnostics[0].message


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[name for name, _ in _sources()])
def test_walk_matches_libcst_visitors(name: str, text: str) -> None:
    _check_walk(cst.parse_module(decode(text.encode()).text))


def _under_trivia(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    current: cst.CSTNode | None = node
    while current is not None:
        if isinstance(current, TRIVIA):
            return True
        current = parents.get(current)
    return False


def _check_walk(module: cst.Module) -> None:
    reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider)
    recorder = _Recorder()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(recorder)
    expected = recorder.events

    events: list[tuple[str, cst.CSTNode]] = []
    traverse(
        module,
        lambda node_type: [lambda node: events.append(("visit", node))],
        lambda node_type: [lambda node: events.append(("leave", node))],
    )
    # The walk leaves out formatting nodes and everything below them (only more of them).
    assert [(kind, id(node)) for kind, node in events] == [
        (kind, id(node)) for kind, node in expected if not _under_trivia(node, reference)
    ]
    assert [id(node) for node in walk(module)] == [
        id(node) for kind, node in expected if kind == "visit"
    ]

    parents = parent_map(module)
    assert {id(node): id(parent) for node, parent in parents.items()} == {
        id(node): id(parent) for node, parent in reference.items() if not _under_trivia(node, reference)
    }
    # Keys in visiting order: the file index relies on it.
    assert [id(node) for node in parents] == [
        id(node) for kind, node in expected if kind == "visit" and not _under_trivia(node, reference)
    ][1:]


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[name for name, _ in _sources()])
def test_render_is_libcst_code(name: str, text: str) -> None:
    module = cst.parse_module(decode(text.encode()).text)
    assert render(module) == module.code


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[name for name, _ in _sources()])
def test_spans_are_libcst_positions(name: str, text: str) -> None:
    module = cst.parse_module(decode(text.encode()).text)
    _check_spans(module)


def _check_spans(module: cst.Module) -> None:
    code = module.code
    # Lines as libcst's positions count them (\r\n, \r or \n).
    starts = [0] + [match.end() for match in re.finditer(r"\r\n?|\n", code)]
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    expected = {
        id(node): (starts[r.start.line - 1] + r.start.column, starts[r.end.line - 1] + r.end.column)
        for node, r in positions.items()
    }
    assert {id(node): span for node, span in syntactic_spans(module).items()} == expected


def test_children_are_libcst_children() -> None:
    module = cst.parse_module(_SYNTAX_SAMPLER)
    for node in walk(module):
        assert [id(child) for child in children(node)] == [id(child) for child in node.children]


def test_file_index_lists_nodes_in_source_order() -> None:
    text = "@wrap(a())\ndef f(x=g()):\n    with h() as y:\n        z = y(k())\nclass C(base()):\n    w = m()\n"
    context = SourceContext("<test>", decode(text.encode()), cst.parse_module(text))
    index = build_index(context.parents)
    callees = [context.module.code_for_node(call.func) for call in index.calls]
    assert callees == ["wrap", "a", "g", "h", "y", "k", "base", "m"]
    assert [function.name.value for function in index.functions] == ["f"]
    assert len(index.withs) == 1
    assert [context.module.code_for_node(assign.value) for assign in index.assigns] == [
        "y(k())",
        "m()",
    ]


def test_leave_runs_after_the_subtree_and_visit_before() -> None:
    module = cst.parse_module("f(g(x))\n")
    seen: list[str] = []

    def visit(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Call):
            seen.append(f"enter {cst.Module([]).code_for_node(node.func)}")

    def leave(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Call):
            seen.append(f"leave {cst.Module([]).code_for_node(node.func)}")

    traverse(
        module,
        lambda node_type: [visit],
        lambda node_type: [leave] if node_type is cst.Call else [],
    )
    assert seen == ["enter f", "enter g", "leave g", "leave f"]


def _scope_facts(scopes: Mapping[cst.CSTNode, Any], module: cst.Module) -> dict[str, Any]:
    in_tree = {id(node) for node in parent_map(module)} | {id(module)}

    def key(node: cst.CSTNode | None) -> object:
        if node is None or id(node) in in_tree:
            return id(node)
        # String annotations are parsed afresh by each analysis: compare them by their code.
        return (type(node).__name__, _EMPTY.code_for_node(node))

    def name(scope: Any) -> object:
        """A scope by its kind, its node and (recursively) its parent's name."""
        if scope is None:
            return None
        parent = getattr(scope, "parent", scope)
        return (type(scope).__name__, key(getattr(scope, "node", None)), name(parent) if parent is not scope else None)

    # Formatting nodes are not visited by the fast analysis, so they have no scope there.
    by_node = {key(node): name(scope) for node, scope in scopes.items() if not isinstance(node, TRIVIA)}
    contents: dict[object, tuple[Any, ...]] = {}
    for scope in {id(s): s for s in scopes.values() if s is not None}.values():
        assignments = sorted(
            ((assignment.name, type(assignment).__name__, key(getattr(assignment, "node", None))) for assignment in scope.assignments),
            key=repr,
        )
        accesses = sorted(
            (
                (
                    key(access.node),
                    access.is_annotation,
                    access.is_type_hint,
                    sorted(((referent.name, key(getattr(referent, "node", None))) for referent in access.referents), key=repr),
                )
                for access in scope.accesses
            ),
            key=repr,
        )
        contents[name(scope)] = (assignments, accesses)
    return {"by_node": by_node, "contents": contents}


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[name for name, _ in _sources()])
def test_fast_wrapper_computes_libcst_metadata(name: str, text: str) -> None:
    _check_metadata(cst.parse_module(decode(text.encode()).text))


def _check_metadata(module: cst.Module) -> None:
    reference = MetadataWrapper(module, unsafe_skip_copy=True)
    fast = FastMetadataWrapper(module, unsafe_skip_copy=True)

    expected_contexts = reference.resolve(ExpressionContextProvider)
    contexts = fast.resolve(ExpressionContextProvider)
    assert {id(node): value for node, value in contexts.items()} == {
        id(node): value for node, value in expected_contexts.items()
    }

    expected_scopes, scopes = reference.resolve(ScopeProvider), fast.resolve(ScopeProvider)
    assert _scope_facts(scopes, module) == _scope_facts(expected_scopes, module)

    for node, scope in scopes.items():
        reference_scope = expected_scopes.get(node)  # None for string annotations' nodes
        if scope is not None and reference_scope is not None and isinstance(node, (cst.Name, cst.Attribute, cst.Call)):
            expected = reference_scope.get_qualified_names_for(node)
            assert scope.get_qualified_names_for(node) == expected


def test_file_context_uses_the_fast_wrapper() -> None:
    text = "import torch\nx = torch.float16\n"
    context = SourceContext("<test>", decode(text.encode()), cst.parse_module(text))
    assert isinstance(context.wrapper, FastMetadataWrapper)
    assignment = next(node for node in context.parents if isinstance(node, cst.Name) and node.value == "x")
    scope = context.wrapper.resolve(ScopeProvider)[assignment]
    assert [type(a).__name__ for a in scope["torch"]] == ["ImportAssignment"]


def _corpus_sample() -> list[Path]:
    trees = [Path(sysconfig.get_paths()["stdlib"])]
    try:
        import torch
    except ImportError:
        pass
    else:
        trees.append(Path(torch.__file__).parent)
    files = [path for tree in trees for path in sorted(tree.rglob("*.py")) if "site-packages" not in path.relative_to(tree).parts]
    return files[::10]


@pytest.mark.corpus
def test_walk_and_metadata_on_a_corpus_sample() -> None:
    """Every tenth file of the standard library and of installed torch (minutes)."""
    checked = 0
    for path in _corpus_sample():
        try:
            text = decode(path.read_bytes()).text
            module = cst.parse_module(text)
        except Exception:  # noqa: BLE001 - files neither analysis can read are not the point here
            continue
        _check_walk(module)
        _check_metadata(module)
        _check_spans(module)
        checked += 1
    assert checked > 100


def test_read_only_visitor_sees_what_a_libcst_visitor_sees() -> None:
    """Same visit/leave events, pruning included (children of a call's arguments skipped)."""

    def recorder(base: type[cst.CSTVisitor]) -> Any:
        class Recorder(base):  # type: ignore[valid-type, misc]
            def __init__(self) -> None:
                super().__init__()
                self.events: list[tuple[str, int]] = []

            def visit_Name(self, node: cst.Name) -> None:
                self.events.append(("name", id(node)))

            def visit_Arg(self, node: cst.Arg) -> bool:
                self.events.append(("arg", id(node)))
                return False

            def leave_Call(self, original_node: cst.Call) -> None:
                self.events.append(("leave call", id(original_node)))

        return Recorder()

    module = cst.parse_module(_SYNTAX_SAMPLER)
    expected, ours = recorder(cst.CSTVisitor), recorder(ReadOnlyVisitor)
    module.visit(expected)
    module.visit(ours)
    assert ours.events == expected.events
    assert any(kind == "arg" for kind, _ in ours.events)


def test_significant_children_leave_out_formatting_only() -> None:
    module = cst.parse_module(_SYNTAX_SAMPLER)
    for node in walk(module):
        everything = children(node)
        kept = significant_children(node)
        assert kept == [child for child in everything if not isinstance(child, TRIVIA)]
        # Nothing but formatting lies below formatting.
        if isinstance(node, TRIVIA):
            assert all(isinstance(below, TRIVIA) for below in walk(node))


class _RuleBase(Rule[SourceContext]):
    """## What it does"""

    abstract = True
    code = "AMP998"
    name = "test-rule"
    summary = "x"
    triggers = frozenset({"x"})


def _pass(self: object, node: cst.CSTNode) -> None:
    pass


@pytest.mark.parametrize("base", [_RuleBase, ReadOnlyVisitor], ids=["rule", "read-only-visitor"])
@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("visit_Call_func", "attribute visitor"),
        ("visit_Comma", "formatting nodes are never visited"),
        ("leave_SimpleWhitespace", "formatting nodes are never visited"),
    ],
)
def test_visitors_may_not_define_handlers_the_walk_never_calls(base: type, method: str, message: str) -> None:
    """Per-attribute hooks and formatting-node handlers are refused when the class is defined."""
    with pytest.raises(TypeError, match=message):
        type("_Refused", (base,), {"__doc__": "## What it does", method: _pass})


def test_scope_visitor_on_leave_is_the_one_mirrored() -> None:
    """FastMetadataWrapper re-states libcst's ScopeVisitor.on_leave (for speed); a libcst
    that changes it must fail here rather than silently diverge."""
    from libcst.metadata.scope_provider import ScopeVisitor

    body = [line.strip() for line in inspect.getsource(ScopeVisitor.on_leave).splitlines()[1:] if line.strip()]
    assert body == [
        "self.provider.set_metadata(original_node, self.scope)",
        "if isinstance(original_node, _ASSIGNMENT_LIKE_NODES):",
        "self.scope._assignment_count += 1",
        "super().on_leave(original_node)",
    ]


def test_expression_context_module_is_left_as_it_was() -> None:
    from libcst.metadata import expression_context_provider

    before = expression_context_provider.ExpressionContextVisitor
    module = cst.parse_module("a, b = c[d], e(f=g)\n")
    FastMetadataWrapper(module, unsafe_skip_copy=True).resolve(ExpressionContextProvider)
    assert expression_context_provider.ExpressionContextVisitor is before
    assert before.__module__ == "libcst.metadata.expression_context_provider"
