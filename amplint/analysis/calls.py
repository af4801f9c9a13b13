"""Which project function a call runs: the resolution every cross-function fact shares.

A call is resolved only when the function it runs is certain from the code: a module-level
function of this file called by its name; ``self.method(...)`` inside the class that
defines it; a method of an object built from a project class by its name
(``criterion = MyLoss()`` then ``criterion(...)`` runs ``MyLoss.forward``); a function or
class imported from another module of the project (absolute or relative import). Anything
else — a method of an object whose class is unknown, ``getattr``, a registry lookup by a
runtime string, a module outside the project — is unresolved (None), and the facts that
would cross it are not claimed.

Targets are recorded as *specs* that do not depend on where the file lies: ``local`` (a
function or ``Class.method`` of the same file) or ``import`` (a module name with the
relative level of its import, and the attribute path inside it); ``target`` turns a spec
into the file and the function key inside it, as the importing file would find them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst

from amplint.analysis.bindings import Bindings
from amplint.analysis.classes import Classes
from amplint.analysis.modules import ProjectModules
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import dotted_name
from amplint.analysis.tree import Tree
from amplint.engine.context import SourceContext
from amplint.engine.index import Summary

Spec = dict[str, Any]
# How many hops a lookup takes: to a base class (``Trainer`` → ``BaseTrainer``), or
# through a re-export (``from .base import *``).
MAX_STEPS = 6


@dataclass(eq=False)
class CallTargets:
    """Resolves calls of one file to project functions (``context.analysis.calls``)."""

    source: SourceContext
    tree: Tree
    names: NameResolver
    bindings: Bindings
    classes: Classes
    modules: ProjectModules

    def function_key(self, function: cst.FunctionDef) -> str | None:
        """``f`` for a module-level function, ``C.m`` for a method of a module-level class."""
        parent = self.tree.parent(function)
        if isinstance(parent, cst.Module):
            return function.name.value
        owner = self.tree.class_of(function)
        if owner is not None and isinstance(self.tree.parent(owner), cst.Module):
            return f"{owner.name.value}.{function.name.value}"
        return None

    def callee(self, call: cst.Call) -> Spec | None:
        """Where the function ``call`` runs is defined, as a spec; None when not certain."""
        return self.function_spec(call.func, "forward")

    def function_spec(self, func: cst.BaseExpression, call_method: str = "forward") -> Spec | None:
        """The project function ``func`` (the callee expression of a call) names."""
        if isinstance(func, cst.Name):
            return self._name_spec(func, call_method)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            own = self.classes.instance_attribute(func.value) if isinstance(func.value, cst.Attribute) else None
            if self._is_super(func.value):
                # `super().__init__(...)`: the base class's method (sam-3d-objects' pipeline
                # subclass, whose base's constructor needs CUDA; round BM).
                found = self.classes.method_of(func)
                base = self.bases.get(found[0].name.value) if found is not None and isinstance(self.tree.parent(found[0]), cst.Module) else None
                return member_spec(base, method) if base is not None else None
            if isinstance(func.value, cst.Name) and self._is_self(func.value):
                # The class's own method, or (found through ``bases``) an inherited one.
                found = self.classes.method_of(func)
                if found is not None and isinstance(self.tree.parent(found[0]), cst.Module):
                    return {"local": f"{found[0].name.value}.{method}", "bound": True}
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

    @staticmethod
    def _is_super(value: cst.BaseExpression) -> bool:
        return (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "super"
            and (not value.args or len(value.args) == 2)
        )

    def _is_self(self, name: cst.Name) -> bool:
        found = self.classes.method_of(name)
        return found is not None and self.classes.self_name(found[1]) == name.value

    def _name_spec(self, func: cst.Name, call_method: str) -> Spec | None:
        qualified = self.names.resolve(func)
        if qualified is not None:
            return self._qualified_spec(qualified) or self._relative_spec(func)
        relative = self._relative_spec(func)
        if relative is not None:
            return relative
        if any(function.name.value == func.value for function in self._module_functions()):
            return {"local": func.value} if self.bindings.of(func) else None
        if func.value in self.classes_defined and self.bindings.of(func):
            return {"local": func.value}  # a class of this file: what calling it builds
        # `criterion(out, y)` with `criterion = MyLoss()`: its forward runs.
        built = self.bindings.single_value(func)
        return self._class_spec(built, call_method) if isinstance(built, cst.Call) else None

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
        found = self._class_reference(built.func)
        return member_spec(found, method) if found is not None else None

    def _class_reference(self, expr: cst.BaseExpression) -> Spec | None:
        """The project class ``expr`` names: a module-level class of this file, or one
        imported from another module (which the index may or may not find in the project)."""
        if isinstance(expr, cst.Name):
            cls = self.classes.class_named(expr.value)
            if cls is not None and isinstance(self.tree.parent(cls), cst.Module):
                return {"local": cls.name.value}
            spec = self._qualified_spec(self.names.resolve(expr)) or self._relative_spec(expr)
        else:
            spec = self._qualified_spec(self.names.resolve(expr))
        return spec if spec is not None and "import" in spec else None

    @functools.cached_property
    def bases(self) -> dict[str, Spec]:
        """The base class of each module-level class of this file that has exactly one
        (keywords such as ``metaclass=`` aside), when it is a project class: the methods a
        class does not define, it inherits from there. With several bases the method
        resolution order is left alone."""
        found: dict[str, Spec] = {}
        for statement in self.source.module.body:
            if not isinstance(statement, cst.ClassDef):
                continue
            bases = [arg for arg in statement.bases if arg.keyword is None]
            if len(bases) != 1 or bases[0].star:
                continue
            reference = self._class_reference(bases[0].value)
            if reference is not None and reference.get("local") != statement.name.value:
                found[statement.name.value] = reference
        return found

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

    def target(self, path: str, spec: Spec) -> tuple[str, str] | None:
        """The file and the function key that a spec, found in the file ``path``, names."""
        if "local" in spec:
            return path, str(spec["local"])
        module, level, attr = str(spec["import"]), int(spec["level"]), str(spec["attr"])
        parts = [*module.split("."), *[part for part in attr.split(".") if part]] if module else attr.split(".")
        # The longest module prefix that is a file of the project; the rest is inside it.
        for cut in range(len(parts) - 1, 0, -1):
            found = self.modules.module_path(".".join(parts[:cut]), path, level)
            if found is not None:
                return str(found), ".".join(parts[cut:])
        return None

    @functools.cached_property
    def function_keys(self) -> dict[str, dict[str, Any]]:
        """Every function key of this file (what ``lookup`` asks to know that a class
        defines a method)."""
        keys = (self.function_key(function) for function in self.tree.index.functions)
        return {key: {} for key in keys if key is not None}

    def find(self, spec: Spec, table: str, own: Callable[[], Summary]) -> tuple[str, Summary, str, Any] | None:
        """``lookup`` from this file, for parts of the analysis that run before this file's
        whole summary can be made: ``own()`` gives what it holds of ``table``."""
        local: Summary = {**self.name_tables(), **own()}

        def summary_of(path: str) -> Summary | None:
            return local if Path(path).resolve() == Path(self.source.path).resolve() else self.modules.summary_of(Path(path))

        return self.lookup(self.source.path, local, spec, table, summary_of)

    def lookup(
        self,
        path: str,
        summary: Summary,
        spec: Spec,
        table: str,
        summary_of: Callable[[str], Summary | None],
        steps: int = MAX_STEPS,
        star_name: str | None = None,
    ) -> tuple[str, Summary, str, Any] | None:
        """The entry of ``table`` (``functions``, ``autocast_wrappers``, ``members``) in the
        summary of the file that defines what ``spec`` names (``spec`` was recorded in the
        file ``path``, whose summary is ``summary``): (its file, that file's summary, the
        key, the entry). A name a module re-exports (``from .base import *`` in a package's
        ``__init__``) is followed to its module, and a method a class does not define to
        its base class; ``steps`` bounds how many such hops are taken."""
        while steps > 0:
            steps -= 1
            found = self.target(path, spec)
            if found is None:
                return None
            target_path, key = found
            if target_path != path:
                if star_name is not None and not self.modules.may_define(Path(target_path), star_name):
                    return None  # a star-imported module that never mentions the name
                star_name = None
                found_summary = summary_of(target_path)
                if found_summary is None:
                    return None
                path, summary = target_path, found_summary
            entry = summary.get(table, {}).get(key)
            if entry is not None:
                return path, summary, key, entry
            head, _, rest = key.partition(".")
            if head not in _defined(summary):
                reexport = summary.get("reexports", {}).get(head)
                if reexport is not None:
                    spec = _within(reexport, rest, spec)
                    continue
                for star in summary.get("stars", ()):
                    inner = self.lookup(path, summary, _within(star, key, spec), table, summary_of, steps, head)
                    if inner is not None:
                        return inner
                return None
            owner, _, method = key.rpartition(".")
            base = summary.get("bases", {}).get(owner) if owner and "." not in owner else None
            if base is None or key in summary.get("functions", {}):
                return None  # not a class's method, or defined there (and not what is asked)
            spec = member_spec(base, method)
        return None

    @functools.cached_property
    def classes_defined(self) -> list[str]:
        return [statement.name.value for statement in self.source.module.body if isinstance(statement, cst.ClassDef)]

    @functools.cached_property
    def reexports(self) -> dict[str, Spec]:
        """What each name a module-level ``from … import name`` binds comes from (a module
        whose ``__init__`` re-exports its package's classes)."""
        found: dict[str, Spec] = {}
        for statement in self._module_imports():
            if isinstance(statement.names, cst.ImportStar):
                continue
            level = len(statement.relative)
            module = cst.helpers.get_full_name_for_node(statement.module) if statement.module else ""
            for alias in statement.names:
                bound = alias.evaluated_alias or alias.evaluated_name
                if module:
                    found[bound] = {"import": module, "level": level, "attr": alias.evaluated_name}
                else:
                    found[bound] = {"import": alias.evaluated_name, "level": level, "attr": ""}
        return found

    @functools.cached_property
    def stars(self) -> list[Spec]:
        """The modules a module-level ``from … import *`` takes its names from."""
        return [
            {"import": cst.helpers.get_full_name_for_node(statement.module) or "", "level": len(statement.relative), "attr": ""}
            for statement in self._module_imports()
            if isinstance(statement.names, cst.ImportStar) and statement.module is not None
        ]

    def _module_imports(self) -> Iterator[cst.ImportFrom]:
        for statement in self.source.module.body:
            if isinstance(statement, cst.SimpleStatementLine):
                yield from (small for small in statement.body if isinstance(small, cst.ImportFrom))

    def name_tables(self) -> Summary:
        """The parts of the summary that ``lookup`` follows names through."""
        return {
            "functions": self.function_keys,
            "classes": self.classes_defined,
            "bases": self.bases,
            "reexports": self.reexports,
            "stars": self.stars,
        }


def _defined(summary: Summary) -> set[str]:
    """The module-level names a summary's file defines (functions and classes)."""
    return {key.split(".")[0] for key in summary.get("functions", {})} | set(summary.get("classes", ()))


def _within(module: Spec, rest: str, spec: Spec) -> Spec:
    """``rest`` (a key: ``Trainer.amp_dtype``) inside what the import spec ``module`` names."""
    attr = ".".join(part for part in (str(module["attr"]), rest) if part)
    found: Spec = {"import": module["import"], "level": module["level"], "attr": attr}
    if spec.get("bound"):
        found["bound"] = True
    return found


def member_spec(cls: Spec, method: str) -> Spec:
    """The spec of the method ``method`` of the class spec ``cls``, called on an instance."""
    if "local" in cls:
        return {"local": f"{cls['local']}.{method}", "bound": True}
    return {"import": cls["import"], "level": cls["level"], "attr": f"{cls['attr']}.{method}", "bound": True}
