"""The engine's read-only walk meets nodes exactly as libcst's own visitors do.

Rules run on ``amplint.engine.walk.traverse`` instead of libcst's batched visitor (which
rebuilds every node it passes). These tests hold the walk to libcst: the visiting-order
table against the installed libcst's source, and the sequence of visit and leave events,
the parent map and the file index against libcst's visitors, over every fixture, every
rule example and a slice of the standard library.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import sysconfig
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from amplint.analysis.scopes import build_index
from amplint.engine.context import FileContext, parent_map
from amplint.engine.source import decode
from amplint.engine.walk import child_fields, children, traverse, walk
from amplint.rules import all_rules
from amplint.rules.base import Rule

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.mark.parametrize("node_type", _node_types(), ids=lambda node_type: node_type.__name__)
def test_visiting_order_matches_libcst_source(node_type: type[cst.CSTNode]) -> None:
    source = inspect.getsource(node_type._visit_and_replace_children)
    visited = list(dict.fromkeys(_VISITED_FIELD.findall(source)))
    ours = [name for name in child_fields(node_type) if name in visited]
    assert ours == visited


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
    sources.append(("syntax-sampler", _SYNTAX_SAMPLER))
    return sources


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
"""


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[name for name, _ in _sources()])
def test_walk_matches_libcst_visitors(name: str, text: str) -> None:
    module = cst.parse_module(decode(text.encode()).text)
    recorder = _Recorder()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(recorder)
    expected = recorder.events

    events: list[tuple[str, cst.CSTNode]] = []
    traverse(
        module,
        lambda node_type: [lambda node: events.append(("visit", node))],
        lambda node_type: [lambda node: events.append(("leave", node))],
    )
    assert [(kind, id(node)) for kind, node in events] == [
        (kind, id(node)) for kind, node in expected
    ]
    assert [id(node) for node in walk(module)] == [
        id(node) for kind, node in expected if kind == "visit"
    ]

    parents = parent_map(module)
    reference = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider)
    assert {id(node): id(parent) for node, parent in parents.items()} == {
        id(node): id(parent) for node, parent in reference.items()
    }
    # Keys in visiting order: the file index relies on it.
    assert [id(node) for node in parents] == [
        id(node) for kind, node in expected if kind == "visit"
    ][1:]


def test_children_are_libcst_children() -> None:
    module = cst.parse_module(_SYNTAX_SAMPLER)
    for node in walk(module):
        assert [id(child) for child in children(node)] == [id(child) for child in node.children]


def test_file_index_lists_nodes_in_source_order() -> None:
    text = "@wrap(a())\ndef f(x=g()):\n    with h() as y:\n        z = y(k())\nclass C(base()):\n    w = m()\n"
    context = FileContext("<test>", decode(text.encode()), cst.parse_module(text))
    index = build_index(context)
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


def test_rules_may_not_define_attribute_visitors() -> None:
    with pytest.raises(TypeError, match="attribute visitor"):

        class _AttributeVisitor(Rule):
            """## What it does"""

            code = "AMP998"
            name = "attribute-visitor"
            summary = "x"
            triggers = frozenset({"x"})

            def visit_Call_func(self, node: cst.Call) -> None:
                pass
