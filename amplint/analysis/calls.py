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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import libcst as cst

from amplint.analysis.bindings import Bindings
from amplint.analysis.classes import Classes
from amplint.analysis.modules import ProjectModules
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import dotted_name
from amplint.analysis.tree import Tree
from amplint.engine.context import SourceContext

Spec = dict[str, Any]


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
            if isinstance(func.value, cst.Name) and self._is_self(func.value):
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
        if isinstance(built.func, cst.Name):
            cls = self.classes.class_named(built.func.value)
            if cls is not None and isinstance(self.tree.parent(cls), cst.Module):
                return {"local": f"{cls.name.value}.{method}", "bound": True}
            spec = self._qualified_spec(self.names.resolve(built.func)) or self._relative_spec(built.func)
        else:
            spec = self._qualified_spec(self.names.resolve(built.func))
        if spec is None or "import" not in spec:
            return None
        return {"import": spec["import"], "level": spec["level"], "attr": f"{spec['attr']}.{method}", "bound": True}

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
