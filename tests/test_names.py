"""Name resolution: the fast path for plain imports agrees with libcst's scope analysis.

``NameResolver.resolve`` answers most names without running the scope analysis (the
largest single cost of a file). These tests compare it, node by node, with what the
scope analysis says, over every fixture and every rule example, and pin the cases where
the fast path must step aside (shadowing, class-level imports, rebinding).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import QualifiedNameSource

from amplint.analysis.context import RuleContext
from amplint.engine.source import decode
from amplint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL = (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN)


def _context(text: str) -> RuleContext:
    source = decode(text.encode())
    return RuleContext("<test>", source, cst.parse_module(source.text))


def _scope_answer(context: RuleContext, node: cst.CSTNode) -> str | None:
    """What the scope analysis alone says ``node`` denotes (the slow, reference answer)."""
    names = context.analysis.names.qualified_names(node)
    if len(names) != 1:
        return None
    (name,) = names
    if name.source not in EXTERNAL:
        return None
    return name.name.removeprefix("builtins.") if name.source is QualifiedNameSource.BUILTIN else name.name


def _disagreements(text: str) -> list[tuple[str, str | None, str | None]]:
    context = _context(text)
    found = []
    for node in list(context.parents):
        if not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            continue
        fast, reference = context.analysis.names.resolve(node), _scope_answer(context, node)
        if reference == "None" and fast is None:
            continue  # libcst names `(x + 1).clamp` after the builtin None; nothing to resolve
        if fast != reference:
            found.append((context.module.code_for_node(node), fast, reference))
    return found


def _sources() -> list[tuple[str, str]]:
    sources = [(path.name, path.read_text(encoding="utf-8")) for path in sorted((ROOT / "fixtures").glob("*.py"))]
    for rule in all_rules():
        sources += [(f"{rule.code}-valid-{i}", text) for i, text in enumerate(rule.VALID)]
        sources += [(f"{rule.code}-invalid-{i}", example.code) for i, example in enumerate(rule.INVALID)]
    return sources


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[name for name, _ in _sources()])
def test_fast_resolution_agrees_with_the_scope_analysis(name: str, text: str) -> None:
    assert _disagreements(text) == []


def _resolve_all(text: str, spelling: str) -> list[str | None]:
    context = _context(text)
    return [
        context.analysis.names.resolve(node)
        for node in context.parents
        if isinstance(node, (cst.Name, cst.Attribute)) and context.module.code_for_node(node) == spelling
    ]


def test_plain_imports_resolve_through_aliases_calls_and_subscripts() -> None:
    text = (
        "import torch as th\nimport torch.distributed\nfrom torch.cuda import amp as a\n"
        "x = th.amp.autocast\ny = a.GradScaler().scale\nz = torch.distributed.init_process_group\n"
    )
    assert _resolve_all(text, "th.amp.autocast") == ["torch.amp.autocast"]
    assert _resolve_all(text, "a.GradScaler().scale") == ["torch.cuda.amp.GradScaler.scale"]
    assert _resolve_all(text, "torch.distributed.init_process_group") == ["torch.distributed.init_process_group"]
    assert _disagreements(text) == []


@pytest.mark.parametrize(
    "text",
    [
        # A parameter shadows the import inside its function.
        "import torch\n\ndef f(torch):\n    return torch.autocast\n",
        # An assignment rebinds it.
        "import torch\ntorch = None\ny = torch.autocast\n",
        # Two different imports under one name.
        "try:\n    from torch.amp import autocast\nexcept ImportError:\n    from torch.cuda.amp import autocast\nx = autocast\n",
        # A class-level import is not visible from methods.
        "class A:\n    import torch\n\n    def f(self):\n        return torch.autocast\n",
        # An import in one function is not visible from another.
        "def f():\n    import torch\n\ndef g():\n    return torch.autocast\n",
        # Tuple targets, for targets, with targets, except targets, walrus, global.
        "import torch\nfor torch in range(3):\n    pass\ny = torch.autocast\n",
        "import torch\n(torch, x) = 1, 2\ny = torch.autocast\n",
        "import torch\nwith open('f') as torch:\n    pass\ny = torch.autocast\n",
        "import torch\ntry:\n    pass\nexcept Exception as torch:\n    pass\ny = torch.autocast\n",
        "import torch\nif (torch := 1):\n    pass\ny = torch.autocast\n",
        "import torch\n\ndef f():\n    global torch\n    torch = 1\n\ny = torch.autocast\n",
        "from torch import *\nx = autocast\n",
        "from . import torch\nx = torch.autocast\n",
    ],
)
def test_the_fast_path_steps_aside_where_names_are_rebound(text: str) -> None:
    assert _disagreements(text) == []


def test_builtins_read_in_displays_and_defaults_stay_resolved() -> None:
    # Names inside tuples, dicts, defaults and except clauses are reads, not rebindings.
    text = (
        "def f(x=(len, len), y=[len]):\n    return {'a': (len, 1)}\n\n"
        "try:\n    pass\nexcept (len, OSError):\n    raise len\nz = len\n"
    )
    assert set(_resolve_all(text, "len")) == {"len"}
    assert _disagreements(text) == []


def test_a_rebound_builtin_is_left_unresolved() -> None:
    text = "def f():\n    str = 'x'\n    return str\n\ny = str(1)\n"
    context = _context(text)
    call = next(node for node in context.parents if isinstance(node, cst.Call))
    # The scope analysis would say "str" for the module-level call; amplint stays silent.
    assert _scope_answer(context, call.func) == "str"
    assert context.analysis.names.resolve(call.func) is None


def test_names_that_are_no_variables_resolve_to_nothing() -> None:
    text = "import torch\nimport torch.nn as nn\nx = f(torch=1).torch\n"
    assert _disagreements(text) == []
    context = _context(text)
    keyword = next(node for node in context.parents if isinstance(node, cst.Arg) and node.keyword is not None)
    assert keyword.keyword is not None
    assert context.analysis.names.resolve(keyword.keyword) is None


def test_torch_brought_by_a_star_import_is_read_as_torch() -> None:
    # IDvs.MoRec: `torch` comes only from `from data_utils.utils import *`; code reading it
    # would fail otherwise, so it is torch (the scope analysis leaves it unresolved).
    text = "from data_utils.utils import *\n\nscaler = torch.cuda.amp.GradScaler()\ntorch.cuda.set_device(0)\n"
    context = _context(text)
    calls = [node for node in context.parents if isinstance(node, cst.Call)]
    assert [context.analysis.names.resolve(call.func) for call in calls] == [
        "torch.cuda.amp.GradScaler",
        "torch.cuda.set_device",
    ]
    # Bound in the file itself, or without a star import, it is not taken on trust.
    for other in (
        "from data_utils.utils import *\ntorch = load()\nx = torch.cuda.amp.GradScaler()\n",
        "x = torch.cuda.amp.GradScaler()\n",
    ):
        context = _context(other)
        call = next(node for node in context.parents if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute))
        assert context.analysis.names.resolve(call.func) is None, other
