"""Facts that cross functions and files: what calling a project function does.

A trainer opens the autocast block and calls a loss function defined in ``losses.py``,
or a method that runs ``loss.backward()``. Each file of the project gets a *summary*,
computed once from its own analysis and kept by the engine's project index: for each
module-level function and method, the binary-cross-entropy calls and tensor backwards in
its own code, and the calls it makes that can be resolved statically; and the file's
module-level constants with a known dtype or string value.

``effects(call)`` follows a call through these summaries, at most ``MAX_DEPTH`` calls
deep, and says which BCE calls and backwards it reaches and through which chain. A call
that cannot be resolved statically — a method of an object whose class is unknown,
``getattr``, a registry lookup by a runtime string, a module outside the project —
breaks the chain, and nothing is claimed (precision first).

Callees are recorded as *specs* that do not depend on where the file lies: ``local``
(a function or ``Class.method`` of the same file) or ``import`` (a module name with the
relative level of its import, and the attribute path inside it); the index resolves a
module name to a file as the importing file would.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst

from amplint.analysis.autocast import AutocastAnalysis
from amplint.analysis.bindings import Bindings
from amplint.analysis.classes import Classes
from amplint.analysis.modules import ProjectModules
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import dotted_name
from amplint.analysis.training import TrainingAnalysis
from amplint.analysis.tree import Tree
from amplint.analysis.values import Values
from amplint.engine.context import SourceContext
from amplint.engine.index import Summary

MAX_DEPTH = 3

BCE_FUNCTIONS = frozenset(
    {
        "torch.nn.functional.binary_cross_entropy",
        "torch.binary_cross_entropy",
        "torch._C._nn.binary_cross_entropy",
    }
)
BCE_MODULES = frozenset({"torch.nn.BCELoss", "torch.nn.modules.loss.BCELoss"})
MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})

Spec = dict[str, Any]


@dataclass(frozen=True)
class Reached:
    """A BCE call or a backward that a call reaches: where it is, and the calls leading there."""

    path: str
    line: int
    text: str
    chain: tuple[str, ...]  # the functions called, outermost first ("compute_loss", "helper")


@dataclass(frozen=True)
class Effects:
    bce: tuple[Reached, ...] = ()
    backward: tuple[Reached, ...] = ()


@dataclass(eq=False)
class ProjectAnalysis:
    """Cross-function facts of one file (``context.analysis.project``)."""

    source: SourceContext
    tree: Tree
    names: NameResolver
    bindings: Bindings
    classes: Classes
    values: Values
    training: TrainingAnalysis
    autocast: AutocastAnalysis
    modules: ProjectModules

    # -- this file's summary ---------------------------------------------------------------

    @functools.cached_property
    def summary(self) -> Summary:
        functions: dict[str, dict[str, list[Any]]] = {}
        for function in self.tree.index.functions:
            key = self.function_key(function)
            if key is not None:
                functions[key] = {"bce": [], "backward": [], "calls": []}
        for call in self.tree.index.calls:
            scope = self.tree.scope_of(call)
            key = self.function_key(scope) if isinstance(scope, cst.FunctionDef) else None
            if key is None or key not in functions or self.autocast.in_disabled_region(call):
                continue
            entry = functions[key]
            line = self.source.location(self.source.span(call)[0]).row
            text = _short(self.source.module.code_for_node(call.func))
            if self.is_bce(call):
                entry["bce"].append([line, text])
            elif self.training.is_tensor_backward(call):
                entry["backward"].append([line, f"{text}()"])
            else:
                spec = self.callee(call)
                if spec is not None:
                    entry["calls"].append([spec, line])
        return {"functions": functions, "constants": self._constants()}

    def function_key(self, function: cst.FunctionDef) -> str | None:
        """``f`` for a module-level function, ``C.m`` for a method of a module-level class."""
        parent = self.tree.parent(function)
        if isinstance(parent, cst.Module):
            return function.name.value
        owner = self.tree.class_of(function)
        if owner is not None and isinstance(self.tree.parent(owner), cst.Module):
            return f"{owner.name.value}.{function.name.value}"
        return None

    def _constants(self) -> dict[str, dict[str, list[str]]]:
        constants: dict[str, dict[str, list[str]]] = {}
        for statement in self.source.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                    continue
                target = small.targets[0].target
                if not isinstance(target, cst.Name) or self.bindings.single_value(target) is not small.value:
                    continue
                dtypes = self.values.dtype_values(small.value)
                strings = self.values.string_values(small.value) if dtypes is None else None
                if dtypes is not None:
                    constants[target.value] = {"dtypes": sorted(dtypes)}
                elif strings is not None:
                    constants[target.value] = {"strings": sorted(strings)}
        return constants

    # -- what a call is -----------------------------------------------------------------------

    def is_bce(self, call: cst.Call) -> bool:
        """A binary-cross-entropy call: the functional form, or an ``nn.BCELoss`` instance
        called (bound to a name once, or constructed in place)."""
        qualified = self.names.resolve(call.func)
        if qualified in BCE_FUNCTIONS:
            return True
        target: cst.BaseExpression | None = call.func
        if isinstance(target, cst.Name):
            target = self.bindings.single_value(target)
        elif isinstance(target, cst.Attribute):
            own = self.classes.instance_attribute(target)
            values = self.classes.attribute_values(*own) if own is not None else None
            target = values[0] if values is not None and len(values) == 1 else None
        return isinstance(target, cst.Call) and self.names.resolve(target.func) in BCE_MODULES

    def callee(self, call: cst.Call) -> Spec | None:
        """Where the function ``call`` runs is defined, as a spec; None when not certain."""
        func = call.func
        if isinstance(func, cst.Name):
            return self._name_spec(func, call)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            own = self.classes.instance_attribute(func.value) if isinstance(func.value, cst.Attribute) else None
            if isinstance(func.value, cst.Name) and self._is_self(func.value):
                found = self.classes.method_of(call)
                if found is not None and isinstance(self.tree.parent(found[0]), cst.Module):
                    return {"local": f"{found[0].name.value}.{method}"}
                return None
            if own is not None:
                values = self.classes.attribute_values(*own)
                built = values[0] if values is not None and len(values) == 1 else None
                return self._class_spec(built, method)
            if isinstance(func.value, cst.Name):
                built = self.bindings.single_value(func.value)
                if isinstance(built, cst.Call):
                    return self._class_spec(built, method)
            return self._qualified_spec(self.names.resolve(func))
        return None

    def _is_self(self, name: cst.Name) -> bool:
        found = self.classes.method_of(name)
        return found is not None and self.classes.self_name(found[1]) == name.value

    def _name_spec(self, func: cst.Name, call: cst.Call) -> Spec | None:
        qualified = self.names.resolve(func)
        if qualified is not None:
            return self._qualified_spec(qualified) or self._relative_spec(func)
        relative = self._relative_spec(func)
        if relative is not None:
            return relative
        if any(function.name.value == func.value for function in self._module_functions()):
            return {"local": func.value} if self.bindings.of(func) else None
        # `criterion(out, y)` with `criterion = MyLoss()`: its forward runs.
        built = self.bindings.single_value(func)
        return self._class_spec(built, "forward") if isinstance(built, cst.Call) else None

    def _module_functions(self) -> Iterator[cst.FunctionDef]:
        return (statement for statement in self.source.module.body if isinstance(statement, cst.FunctionDef))

    def _class_spec(self, built: cst.BaseExpression | None, method: str) -> Spec | None:
        """The method ``method`` of the project class ``built`` constructs (a call of a
        class by its name: ``MyLoss()``, ``losses.MyLoss()``; not ``X.from_pretrained()``)."""
        if not isinstance(built, cst.Call):
            return None
        called = dotted_name(built.func)
        if called is None or not called.split(".")[-1][:1].isupper():
            return None
        if isinstance(built.func, cst.Name):
            cls = self.classes.class_named(built.func.value)
            if cls is not None and isinstance(self.tree.parent(cls), cst.Module):
                return {"local": f"{cls.name.value}.{method}"}
            spec = self._qualified_spec(self.names.resolve(built.func)) or self._relative_spec(built.func)
        else:
            spec = self._qualified_spec(self.names.resolve(built.func))
        if spec is None or "import" not in spec:
            return None
        return {"import": spec["import"], "level": spec["level"], "attr": f"{spec['attr']}.{method}"}

    def _qualified_spec(self, qualified: str | None) -> Spec | None:
        if not qualified or qualified.startswith(("torch.", "builtins.")) or "." not in qualified:
            return None
        module, _, attr = qualified.rpartition(".")
        return {"import": module, "level": 0, "attr": attr}

    def _relative_spec(self, name: cst.Name) -> Spec | None:
        """``from .losses import compute_loss``: the names the scope analysis leaves relative."""
        for binding in self.bindings.of(name):
            statement = getattr(binding, "node", None)
            if not isinstance(statement, cst.ImportFrom) or isinstance(statement.names, cst.ImportStar):
                continue
            level = len(statement.relative)
            module = cst.helpers.get_full_name_for_node(statement.module) if statement.module else ""
            for alias in statement.names:
                if (alias.evaluated_alias or alias.evaluated_name) == name.value:
                    if level == 0:
                        return {"import": module, "level": 0, "attr": alias.evaluated_name}
                    if module:
                        return {"import": module, "level": level, "attr": alias.evaluated_name}
                    return {"import": alias.evaluated_name, "level": level, "attr": ""}
        return None

    # -- effects --------------------------------------------------------------------------------

    def describe(self, reached: Reached) -> str:
        """``pkg/losses.py:12, via compute_loss → helper``: the path relative to the project
        root that holds it (as a reader finds it from the repository), else absolute."""
        path = Path(reached.path).resolve()
        roots = self.source.index.roots if self.source.index is not None else ()
        holder = next((root for root in roots if root in path.parents), None)
        where = path.relative_to(holder).as_posix() if holder is not None else str(path)
        return f"{where}:{reached.line}, via {' → '.join(step.split(' (')[0] for step in reached.chain)}"

    def elsewhere(self, reached: Reached) -> bool:
        return os.path.abspath(reached.path) != os.path.abspath(self.source.path)

    def effects(self, call: cst.Call) -> Effects | None:
        """The BCE calls and backwards ``call`` reaches through project functions."""
        spec = self.callee(call)
        if spec is None:
            return None
        return self._follow(self.source.path, self.summary, spec, MAX_DEPTH, frozenset())

    def _follow(self, path: str, summary: Summary, spec: Spec, depth: int, seen: frozenset[tuple[str, str]]) -> Effects | None:
        target = self._resolve(path, summary, spec)
        if target is None or depth <= 0:
            return None
        target_path, target_summary, key = target
        if (target_path, key) in seen:
            return Effects()
        facts = target_summary.get("functions", {}).get(key)
        if facts is None:
            return None
        here = f"{key} ({Path(target_path).name})"
        bce = [Reached(target_path, line, text, (here,)) for line, text in facts["bce"]]
        backward = [Reached(target_path, line, text, (here,)) for line, text in facts["backward"]]
        for inner, _line in facts["calls"]:
            found = self._follow(target_path, target_summary, inner, depth - 1, seen | {(target_path, key)})
            if found is None:
                continue
            bce += [Reached(r.path, r.line, r.text, (here, *r.chain)) for r in found.bce]
            backward += [Reached(r.path, r.line, r.text, (here, *r.chain)) for r in found.backward]
        return Effects(tuple(bce), tuple(backward))

    def _resolve(self, path: str, summary: Summary, spec: Spec) -> tuple[str, Summary, str] | None:
        if "local" in spec:
            return path, summary, str(spec["local"])
        module, level, attr = str(spec["import"]), int(spec["level"]), str(spec["attr"])
        parts = [*module.split("."), *[part for part in attr.split(".") if part]] if module else attr.split(".")
        # The longest module prefix that is a file of the project; the rest is inside it.
        for cut in range(len(parts) - 1, 0, -1):
            found = self.modules.module_path(".".join(parts[:cut]), path, level)
            if found is not None:
                target_summary = self._summary_of(found)
                return (str(found), target_summary, ".".join(parts[cut:])) if target_summary is not None else None
        return None

    def _summary_of(self, path: Path) -> Summary | None:
        if path == Path(self.source.path).resolve():
            return self.summary
        return self.modules.summary_of(path)


def _short(text: str, limit: int = 40) -> str:
    """A callee as messages show it: ``loss.backward``, or ``….backward`` when long."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…." + flat.rsplit(".", 1)[-1]
