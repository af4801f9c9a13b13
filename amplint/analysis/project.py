"""Facts that cross functions and files: what calling a project function does.

A trainer opens the autocast block and calls a loss function defined in ``losses.py``,
or a method that runs ``loss.backward()``. Each file of the project gets a *summary*,
computed once from its own analysis and kept by the engine's project index: for each
module-level function and method, the binary-cross-entropy calls and tensor backwards in
its own code, and the calls it makes that can be resolved statically; and the file's
module-level constants with a known dtype or string value; and the autocast wrappers it
defines (``amplint.analysis.wrappers``).

``effects(call)`` follows a call through these summaries, at most ``MAX_DEPTH`` calls
deep, and says which BCE calls and backwards it reaches and through which chain. A call
that cannot be resolved statically — a method of an object whose class is unknown,
``getattr``, a registry lookup by a runtime string, a module outside the project —
breaks the chain, and nothing is claimed (precision first). Which function a call runs
is ``amplint.analysis.calls``'s answer, shared with the autocast wrappers.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst

from amplint.analysis.autocast import AutocastAnalysis
from amplint.analysis.bindings import Bindings
from amplint.analysis.calls import CallTargets, Spec, member_spec
from amplint.analysis.classes import Classes
from amplint.analysis.devices import DeviceAnalysis
from amplint.analysis.modules import ProjectModules
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import last_name
from amplint.analysis.torch_api import REMOVED_TORCH_MODULES
from amplint.analysis.training import TrainingAnalysis
from amplint.analysis.tree import ScopeNode, Tree
from amplint.analysis.values import Values
from amplint.analysis.wrappers import AutocastWrappers, ScalerMakers
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
    # Calls that need CUDA (`torch.tensor(..., device="cuda")`, `.cuda()`) and run whenever
    # the call does: GaussianRenderer's constructor, reached by LGM's.
    cuda: tuple[Reached, ...] = ()


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
    calls: CallTargets
    wrappers: AutocastWrappers
    scaler_makers: ScalerMakers
    devices: DeviceAnalysis

    # -- this file's summary ---------------------------------------------------------------

    @functools.cached_property
    def summary(self) -> Summary:
        functions: dict[str, dict[str, list[Any]]] = {}
        for function in self.tree.index.functions:
            key = self.calls.function_key(function)
            if key is not None:
                functions[key] = {"bce": [], "backward": [], "calls": [], "cuda": []}
        for call in self.tree.index.calls:
            scope = self.tree.scope_of(call)
            key = self.calls.function_key(scope) if isinstance(scope, cst.FunctionDef) else None
            if key is None or key not in functions or self.autocast.in_disabled_region(call):
                continue
            entry = functions[key]
            line = self.source.location(self.source.span(call)[0]).row
            text = _short(self.source.module.code_for_node(call.func))
            # Runs whenever the function does: in its body, not under a branch or a loop, and
            # before any `return` (traiNNer's init_distributed returns early without DDP).
            always = (
                isinstance(scope, cst.FunctionDef)
                and self.tree.running_block(call) is scope.body
                and not any(start < self.source.span(call)[0] for start in self._returns(scope))
            )
            if always and self.devices.call_requires_cuda(call):
                entry["cuda"].append([line, f"{text}(...)"])
            if self.is_bce(call):
                entry["bce"].append([line, text])
            elif self.training.is_tensor_backward(call) and self._trains(call):
                entry["backward"].append([line, f"{text}()"])
            else:
                spec = self.calls.callee(call)
                if spec is not None:
                    entry["calls"].append([spec, line, always])
        return {
            **self.calls.name_tables(),
            "functions": functions,
            "constants": self._constants(),
            "autocast_wrappers": self.wrappers.defined,
            "scaler_makers": self.scaler_makers.defined,
            "members": self.values.class_members,
            "device_gated": self.devices.device_gated,
            "torch_before": self._own_torch_ceiling,
        }

    @functools.cached_property
    def _own_torch_ceiling(self) -> list[int] | None:
        """The release before which every torch this file runs on lies, when it imports a
        module torch has since dropped, unguarded (``from torch._six import inf``, not in a
        ``try`` whose ``except ImportError`` falls back)."""
        ceiling: tuple[int, int] | None = None
        for statement in self.tree.index.imports:
            if self._guarded_import(statement):
                continue
            for module in _imported_modules(statement):
                dropped = REMOVED_TORCH_MODULES.get(module)
                if dropped is not None and (ceiling is None or dropped < ceiling):
                    ceiling = dropped
        return list(ceiling) if ceiling is not None else None

    def _guarded_import(self, statement: cst.Import | cst.ImportFrom) -> bool:
        for child, ancestor in self.tree.ancestry(statement):
            if isinstance(ancestor, cst.Try) and child is ancestor.body:
                return bool(ancestor.handlers)
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
        return False

    @functools.cached_property
    def torch_ceiling(self) -> tuple[int, int] | None:
        """The release this file's code must run below, from its own imports or those of
        the project modules it imports at module level (ssacl's engine imports `util.misc`,
        which does `from torch._six import inf`): None when nothing bounds it."""
        own = self._own_torch_ceiling
        found: list[tuple[int, int]] = [(own[0], own[1])] if own else []
        for statement in self.source.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not isinstance(small, (cst.Import, cst.ImportFrom)):
                    continue
                for module, level in _imported_project_candidates(small):
                    path = self.modules.module_path(module, self.source.path, level)
                    summary = self._summary_of(str(path)) if path is not None else None
                    ceiling = summary.get("torch_before") if summary is not None else None
                    if isinstance(ceiling, list) and len(ceiling) == 2:
                        found.append((int(ceiling[0]), int(ceiling[1])))
        return min(found) if found else None

    def _returns(self, function: cst.FunctionDef) -> list[int]:
        """Where the ``return`` statements of ``function`` (not of functions inside it) start."""
        return self._return_starts.get(function, [])

    @functools.cached_property
    def _return_starts(self) -> dict[cst.CSTNode, list[int]]:
        found: dict[cst.CSTNode, list[int]] = {}
        for node in self.tree.parents:
            if isinstance(node, cst.Return):
                found.setdefault(self.tree.scope_of(node), []).append(self.source.span(node)[0])
        return found

    def _trains(self, backward: cst.Call) -> bool:
        """Is this backward a training step's — a scaled backward, a loss's
        (``total_loss.backward()``), or one in a function that steps an optimizer — and not
        a measurement (a profiler's ``y.sum().backward()`` that sizes batches)? Only those
        are followed across calls."""
        receiver = backward.func.value if isinstance(backward.func, cst.Attribute) else None
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "scale":
            return True
        name = last_name(receiver) if receiver is not None else None
        if name is not None and "loss" in name.lower():
            return True
        return bool(self.training.scope_optimizer_steps(self.tree.scope_of(backward)))

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

    # -- effects --------------------------------------------------------------------------------

    def describe(self, reached: Reached) -> str:
        """``pkg/losses.py:12, via compute_loss → helper``."""
        where = self.modules.display(reached.path)
        return f"{where}:{reached.line}, via {' → '.join(step.split(' (')[0] for step in reached.chain)}"

    def elsewhere(self, reached: Reached) -> bool:
        return os.path.abspath(reached.path) != os.path.abspath(self.source.path)

    def effects(self, call: cst.Call, *, constructors: bool = False) -> Effects | None:
        """The BCE calls and backwards ``call`` reaches through project functions (and, with
        ``constructors``, through the ``__init__`` of a project class it constructs)."""
        spec = self.calls.callee(call)
        if spec is None:
            return None
        return self._follow(self.source.path, self.summary, spec, MAX_DEPTH, frozenset(), constructors)

    def _follow(
        self, path: str, summary: Summary, spec: Spec, depth: int, seen: frozenset[tuple[str, str]], constructors: bool
    ) -> Effects | None:
        if depth <= 0:
            return None
        found = self.calls.lookup(path, summary, spec, "functions", self._summary_of)
        if found is None and constructors and not spec.get("bound"):
            found = self.calls.lookup(path, summary, member_spec(spec, "__init__"), "functions", self._summary_of)
        if found is None:
            return None
        target_path, target_summary, key, facts = found
        if (target_path, key) in seen:
            return Effects()
        here = f"{key} ({Path(target_path).name})"
        bce = [Reached(target_path, line, text, (here,)) for line, text in facts["bce"]]
        backward = [Reached(target_path, line, text, (here,)) for line, text in facts["backward"]]
        cuda = [Reached(target_path, line, text, (here,)) for line, text in facts.get("cuda", ())]
        for inner, _line, *always in facts["calls"]:
            reached = self._follow(target_path, target_summary, inner, depth - 1, seen | {(target_path, key)}, constructors)
            if reached is None:
                continue
            bce += [Reached(r.path, r.line, r.text, (here, *r.chain)) for r in reached.bce]
            backward += [Reached(r.path, r.line, r.text, (here, *r.chain)) for r in reached.backward]
            if always and always[0] is True:
                cuda += [Reached(r.path, r.line, r.text, (here, *r.chain)) for r in reached.cuda]
        return Effects(tuple(bce), tuple(backward), tuple(cuda))

    def requires_cuda(self, node: cst.CSTNode) -> bool:
        """Does a project function or class that needs CUDA run whenever ``node`` does: one
        called on ``node``'s path in its scope, or, for a function of this module, one
        called at module level before the function's definition (LGM's scripts build
        ``model = LGM(opt)``, whose renderer makes a ``device="cuda"`` tensor, then define
        the ``process`` that opens a "cuda" autocast)?"""
        scope = self.tree.scope_of(node)
        statement = self.tree.statement_of(node)
        for call in self.tree.index.calls:
            if self.tree.scope_of(call) is scope and self.devices.on_path(call, node, statement) and self._needs_cuda(call):
                return True
        if self._constructor_needs_cuda(scope):
            return True
        if isinstance(scope, cst.Module) and self._main_requires_cuda:
            return True
        function = scope if isinstance(scope, cst.FunctionDef) else None
        while function is not None and not isinstance(self.tree.parent(self.tree.statement_of(function) or function), cst.Module):
            outer = self.tree.scope_of(function)
            function = outer if isinstance(outer, cst.FunctionDef) else None
        if function is None:
            return False
        start = self.source.span(function)[0]
        return any(
            isinstance(self.tree.running_block(call), cst.Module)
            and self.tree.scope_of(call) is self.tree.scope_of(function)
            and self.source.span(call)[0] < start
            and self._needs_cuda(call)
            for call in self.tree.index.calls
        )

    def uncalled_in_script(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a module-level function that this script (a module with an ``if
        __name__ == "__main__":`` block, or a notebook) never names again: a helper left over that does not
        run when the script does (ViT-Lens's ``setup(rank, world_size)``, which nothing calls,
        beside the ``main`` that sets up the process group its own way)?"""
        function = self._module_function(node)
        return function is not None and self._runs_top_to_bottom and self.devices.name_counts[function.name.value] == 1

    @property
    def _runs_top_to_bottom(self) -> bool:
        """Is the module run as a whole, as a script (``if __name__ == "__main__":``) or a
        notebook is (Paper-Replications' notebooks define a ``setup()`` that no cell calls;
        round BM)? A library module's functions are called from elsewhere."""
        return bool(self._main_blocks) or self.source.path.endswith(".ipynb")

    def called_only_by_cuda_main(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a module-level function that only the script's ``if __name__ ==
        "__main__":`` block calls, directly in it, where that block also calls something
        that needs CUDA (MMAudio's ``batch_eval.py`` runs ``distributed_setup()``, then a
        ``main()`` that sets the CUDA device)?"""
        function = self._module_function(node)
        # No plain calls: also named otherwise (handed on, exported) or never called.
        calls = self.devices.plain_calls_of(function) if function is not None else []
        blocks = self._main_blocks
        return bool(calls) and all(self.tree.running_block(call) in blocks for call in calls) and self._main_requires_cuda

    def _module_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The module-level function whose own code holds ``node``, if it is one."""
        function = self.tree.scope_of(node)
        if isinstance(function, cst.FunctionDef) and isinstance(self.tree.parent(function), cst.Module):
            return function
        return None

    def in_main_block(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in the module's ``if __name__ == "__main__":`` block?"""
        return any(self.tree.within(node, block) for block in self._main_blocks)

    @functools.cached_property
    def _main_blocks(self) -> list[cst.CSTNode]:
        return [
            statement.body
            for statement in self.source.module.body
            if isinstance(statement, cst.If) and _is_main_guard(statement.test)
        ]

    @functools.cached_property
    def _main_requires_cuda(self) -> bool:
        """Does the script's ``if __name__ == "__main__":`` block, which runs whenever its
        module-level code does as a script, call something that needs CUDA (CLIP4Clip
        initialises NCCL at module level; its ``main()`` sets the CUDA device)?"""
        for block in self._main_blocks:
            for call in self.tree.index.calls:
                if self.tree.running_block(call) is block and (self.devices.call_requires_cuda(call) or self._needs_cuda(call)):
                    return True
        return False

    def _constructor_needs_cuda(self, scope: ScopeNode) -> bool:
        """Is ``scope`` a method of a class whose ``__init__`` always calls a project function
        or class that needs CUDA (PhysicsLM4's model adapter builds lingua's
        ``GPUMemoryMonitor("cuda")``, whose ``__init__`` asks ``torch.cuda`` for the device's
        name and memory)? No instance exists without CUDA."""
        return any(self._needs_cuda(call) for call in self.devices.constructor_calls(scope))

    def _needs_cuda(self, call: cst.Call) -> bool:
        effects = self.effects(call, constructors=True)
        return effects is not None and bool(effects.cuda)

    def _summary_of(self, path: str) -> Summary | None:
        if Path(path).resolve() == Path(self.source.path).resolve():
            return self.summary
        return self.modules.summary_of(Path(path))


def _imported_modules(statement: cst.Import | cst.ImportFrom) -> list[str]:
    """The absolute modules an import statement names (``from torch._six import inf`` →
    ``torch._six``; ``import torch._six`` → ``torch._six``)."""
    if isinstance(statement, cst.Import):
        return [cst.helpers.get_full_name_for_node(alias.name) or "" for alias in statement.names]
    if statement.relative or statement.module is None:
        return []
    return [cst.helpers.get_full_name_for_node(statement.module) or ""]


def _imported_project_candidates(statement: cst.Import | cst.ImportFrom) -> list[tuple[str, int]]:
    """The modules an import may load, as (name, relative level): ``from util.misc import
    x`` → ``util.misc``, and ``util.misc.x`` in case ``x`` is a submodule."""
    if isinstance(statement, cst.Import):
        return [(cst.helpers.get_full_name_for_node(alias.name) or "", 0) for alias in statement.names]
    level = len(statement.relative)
    module = cst.helpers.get_full_name_for_node(statement.module) if statement.module is not None else ""
    found = [(module or "", level)] if module or level else []
    if not isinstance(statement.names, cst.ImportStar):
        for alias in statement.names:
            name = cst.helpers.get_full_name_for_node(alias.name) or ""
            found.append((f"{module}.{name}" if module else name, level))
    return [(name, level) for name, level in found if name and not name.startswith("torch")]


def _short(text: str, limit: int = 40) -> str:
    """A callee as messages show it: ``loss.backward``, or ``….backward`` when long."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…." + flat.rsplit(".", 1)[-1]


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = (test.left, target.comparator)
    return any(isinstance(side, cst.Name) and side.value == "__name__" for side in sides) and any(
        isinstance(side, cst.SimpleString) and side.evaluated_value == "__main__" for side in sides
    )
