"""The layers of amplint and what each may import (docs/architecture.md).

Every import counts: module level, inside functions, and under ``TYPE_CHECKING``. A
layer may import only the layers listed for it, and the modules of amplint import one
another without a cycle (importing a module's own package ``__init__`` implicitly is not
an edge: Python runs it first anyway).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "amplint"

# Each layer, and the layers its modules may import (itself included). The package's own
# `__init__` (`import amplint` for its version) is importable from everywhere.
BASE = {"amplint.diagnostics"}
ENGINE = BASE | {"amplint.engine"}
ANALYSIS = ENGINE | {"amplint.analysis"}
FIXES = ANALYSIS | {"amplint.fixes"}
RULES = FIXES | {"amplint.rules"}
DOCS = {*BASE, "amplint.engine", "amplint.rules", "amplint.docs"}
OUTPUT = DOCS | {"amplint.output"}
ALLOWED: dict[str, set[str]] = {
    "amplint": set(),
    "amplint.__main__": {"amplint.cli"},
    "amplint.diagnostics": {"amplint.diagnostics"},
    "amplint.engine": ENGINE,
    "amplint.analysis": ANALYSIS,
    "amplint.fixes": FIXES,
    "amplint.rules": RULES,
    "amplint.docs": DOCS,
    "amplint.output": OUTPUT,
    "amplint.notebook": ENGINE | {"amplint.notebook"},
    "amplint.api": RULES | OUTPUT | {"amplint.notebook", "amplint.api"},
    # The CLI is commands, options and exit codes over the library API; `amplint server`
    # starts the language server (imported lazily: its libraries are an optional extra).
    "amplint.cli": BASE
    | {"amplint.api", "amplint.output", "amplint.docs", "amplint.cli", "amplint.runtime.doctor", "amplint.server"},
    "amplint.server": BASE | {"amplint.api", "amplint.docs", "amplint.server"},
    # The runtime helpers stand alone: they ship to users' training code.
    "amplint.runtime": {"amplint.runtime"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, str]:
    return {_module_name(path): path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str, source: str, known: set[str]) -> Iterator[str]:
    """The amplint modules ``module`` imports (a ``from x import y`` names ``x.y`` when that
    is a module, else ``x``)."""
    package = module if module in known and _is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "amplint" or alias.name.startswith("amplint."):
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target != "amplint" and not target.startswith("amplint."):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                yield candidate if candidate in known else target


def _is_package(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file()


def _layer(module: str) -> str:
    matches = [layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")]
    return max(matches, key=len)


def _allows(layer: str, target: str) -> bool:
    return any(target == allowed or target.startswith(allowed + ".") for allowed in ALLOWED[layer]) or target == "amplint"


def layer_violations(sources: Mapping[str, str]) -> list[str]:
    known = set(sources)
    found = []
    for module, source in sources.items():
        layer = _layer(module)
        for target in _imports(module, source, known):
            if not _allows(layer, target):
                found.append(f"{module} imports {target} ({layer} may import only {sorted(ALLOWED[layer])})")
    return found


def import_cycles(sources: Mapping[str, str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    known = set(sources)
    graph = {
        module: {
            target
            for target in _imports(module, source, known)
            if target in known and target != module and not module.startswith(target + ".")
        }
        for module, source in sources.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return components


def test_every_module_belongs_to_a_layer() -> None:
    assert all(_layer(module) for module in _sources())


def test_layers_import_only_what_they_may() -> None:
    assert layer_violations(_sources()) == []


def test_no_import_cycle() -> None:
    assert import_cycles(_sources()) == []


def test_a_forbidden_import_is_caught() -> None:
    sources = _sources()
    # The engine reaching up into the analysis, even only for type checking.
    sources["amplint.engine.context"] += (
        "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from amplint.analysis import FileAnalysis\n"
    )
    assert layer_violations(sources) == [
        f"amplint.engine.context imports amplint.analysis (amplint.engine may import only {sorted(ENGINE)})"
    ]
    # The runtime helpers must not depend on the linter, even inside a function.
    sources = _sources()
    sources["amplint.runtime._amp"] += "\ndef f():\n    from amplint.rules import all_rules\n"
    assert any(v.startswith("amplint.runtime._amp imports amplint.rules") for v in layer_violations(sources))


def test_a_cycle_is_caught() -> None:
    sources = _sources()
    sources["amplint.analysis.tree"] += "\nfrom amplint.analysis.training import TrainingAnalysis\n"
    assert any("amplint.analysis.tree" in cycle and "amplint.analysis.training" in cycle for cycle in import_cycles(sources))
