"""GradScalers: which expressions hold one, and the scale / unscale_ / step / update calls.

A *scaler* is a name or attribute bound to a GradScaler construction (any spelling), or
named ``scaler`` / ``*_scaler`` and used as ``X.scale(loss).backward()``. A *scaled
backward* is ``X.scale(loss).backward()`` or ``s = X.scale(loss); s.backward()``.
Scalers are compared by their dotted spelling (``scaler``, ``self.scaler``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import Assignment

from amplint.analysis.autocast import AutocastAnalysis, AutocastBlock, AutocastUse
from amplint.analysis.bindings import Bindings
from amplint.analysis.classes import Classes
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import dotted_name, last_name
from amplint.analysis.torch_api import GRAD_SCALERS, RUNTIME_GRAD_SCALERS, RUNTIME_SCALING
from amplint.analysis.training import TrainingAnalysis, is_scaler_name
from amplint.analysis.tree import Tree


@dataclass(frozen=True)
class ScalerCall:
    call: cst.Call
    scaler: str  # dotted spelling of the receiver
    method: str  # scale | unscale_ | step | update
    optimizer: str | None  # dotted spelling of the optimizer argument, when there is one
    # Whose object the receiver is, when that separates it from another of the same
    # spelling: the function a parameter belongs to, or the class of a `self.<attr>`.
    owner: cst.FunctionDef | cst.ClassDef | None = None

    def same_object_possible(self, other: ScalerCall) -> bool:
        """Can ``other`` act on the same scaler? Not when both are parameters of different
        functions, or ``self`` attributes of different classes, even if spelled alike."""
        if other.scaler != self.scaler:
            return False
        if self.owner is None or other.owner is None or type(self.owner) is not type(other.owner):
            return True
        return self.owner is other.owner


@dataclass(eq=False)
class ScalerAnalysis:
    """GradScalers of one file (``context.analysis.scalers``)."""

    tree: Tree
    names: NameResolver
    bindings: Bindings
    classes: Classes
    training: TrainingAnalysis
    autocast: AutocastAnalysis

    def is_construction(self, node: cst.CSTNode) -> bool:
        """A GradScaler built: any spelling of torch's, or amplint.runtime's helpers."""
        if not isinstance(node, cst.Call):
            return False
        qualified = self.names.resolve(node.func)
        return qualified in GRAD_SCALERS or qualified in RUNTIME_GRAD_SCALERS

    def served_region(self, construction: cst.Call) -> cst.ClassDef | cst.FunctionDef | cst.Module:
        """The code a GradScaler construction serves: its class when stored on ``self``
        (built in ``__init__``, used in ``train_step``), else its function, or the whole
        module for a module-level scaler."""
        parent = self.tree.parent(construction)
        assign = self.tree.parent(parent) if isinstance(parent, cst.IfExp) else parent
        if isinstance(assign, cst.Assign):
            for target in assign.targets:
                owner = self.classes.instance_attribute(target.target)
                if owner is not None:
                    return owner[0]
        return self.tree.scope_of(construction)

    def in_region(self, node: cst.CSTNode, region: cst.CSTNode) -> bool:
        """Does ``node`` run in ``region`` (a method of the class, the function itself)?"""
        if isinstance(region, cst.Module):
            return True
        if isinstance(region, cst.ClassDef):
            found = self.classes.method_of(node)
            return found is not None and found[0] is region
        return self.tree.scope_of(node) is region

    def served_blocks(self, region: cst.CSTNode) -> list[AutocastBlock]:
        """The autocast blocks of a scaler's region; for a function, also those of the
        closures it defines (ml-tarflow's `main` builds the scaler and defines the
        `compute_loss` that opens the training autocast)."""
        if isinstance(region, cst.FunctionDef):
            return [block for block in self.autocast.blocks if self.tree.within(block.statement, region)]
        return [block for block in self.autocast.blocks if self.in_region(block.statement, region)]

    def member_context_uses(self, region: cst.CSTNode) -> list[AutocastUse]:
        """The autocasts of the ``with self.<attr>:`` items of functions of ``region``,
        where the class sets that attribute only to autocast contexts; none if any such
        item is something else (nanoGPT's trainers keep the context on the instance:
        ``self.ctx = nullcontext() if ... else torch.amp.autocast(...)``, then ``with
        self.ctx:``)."""
        uses: list[AutocastUse] = []
        for statement in self.tree.index.withs:
            if self.tree.scope_of(statement) is not region:
                continue
            for item in statement.items:
                member = self.classes.instance_attribute(item.item)
                values = self.classes.attribute_values(*member) if member is not None else None
                if not values:
                    continue
                found = [self.autocast.autocast_use(value) for value in values]
                if any(use is None for use in found):
                    return []
                uses.extend(use for use in found if use is not None)
        return uses

    @functools.cached_property
    def constructions(self) -> list[cst.Call]:
        return [call for call in self.tree.index.calls if self.is_construction(call)]

    @functools.cached_property
    def constructed_names(self) -> frozenset[str]:
        """Dotted targets (``scaler``, ``self.scaler``) assigned a GradScaler construction."""
        return self.bindings.assigned_targets(self.is_construction)

    def is_scaler(self, expr: cst.BaseExpression) -> bool:
        spelled = dotted_name(expr)
        if spelled is None:
            return False
        if spelled in self.constructed_names:
            return True
        if not self._named_scaler(spelled):
            return False
        # A scaler by its name only where it is used as one (`X.scale(loss).backward()`), or
        # where the file does not show what it is (a parameter, a member set elsewhere):
        # fairscale's `layer_scaler = LayerwiseGradientScaler(...)` steps without scaling.
        return spelled in self._scaling_spellings or spelled not in self._call_bound_names

    def _named_scaler(self, spelled: str) -> bool:
        return is_scaler_name(spelled.split(".")[-1])

    @functools.cached_property
    def _scaling_spellings(self) -> frozenset[str]:
        """Receivers of a ``.scale(...)`` whose result is backpropagated (directly, or through
        a name bound to it)."""
        receivers = (self._scaled_receiver(call) for call in self.tree.index.calls)
        return frozenset(spelled for spelled in map(dotted_name, filter(None, receivers)) if spelled is not None)

    @functools.cached_property
    def _call_bound_names(self) -> frozenset[str]:
        """Dotted targets the file assigns the result of some call."""
        return self.bindings.assigned_targets(lambda value: isinstance(value, cst.Call))

    @functools.cached_property
    def calls(self) -> list[ScalerCall]:
        found = []
        for call in self.tree.index.calls:
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value not in ("scale", "unscale_", "step", "update"):
                continue
            if not self.is_scaler(func.value):
                continue
            optimizer = dotted_name(call.args[0].value) if call.args and func.attr.value in ("unscale_", "step") else None
            found.append(ScalerCall(call, dotted_name(func.value) or "", func.attr.value, optimizer, self._owner(func.value)))
        return found

    def _owner(self, receiver: cst.BaseExpression) -> cst.FunctionDef | cst.ClassDef | None:
        if isinstance(receiver, cst.Name):
            params = [binding.node for binding in self.bindings.of(receiver) if isinstance(binding, Assignment)]
            if len(params) != 1 or not isinstance(params[0], cst.Param):
                return None
            function = next((a for a in self.tree.ancestors(params[0]) if isinstance(a, cst.FunctionDef)), None)
            return function
        found = self.classes.instance_attribute(receiver)
        return found[0] if found is not None else None

    @functools.cached_property
    def file_scales(self) -> bool:
        """Does the file do gradient scaling at all: a GradScaler, any ``.scale(...)`` or
        apex's ``amp.scale_loss(...)``, or a scaler-named callable given the loss
        (``loss_scaler(loss, optimizer)``, timm's NativeScaler protocol, as in DeiT,
        ConvNeXt and MAE)?"""
        if self.constructions:
            return True
        if any(self.names.resolve(call.func) in RUNTIME_SCALING for call in self.tree.index.calls):
            return True  # amplint.runtime.MixedPrecision scales in its own backward
        for call in self.tree.index.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("scale", "scale_loss"):
                return True  # `scaler.scale(loss)`; apex's `with amp.scale_loss(loss, opt)` (DiffusionDepth)
            spelled = dotted_name(func)
            if call.args and spelled is not None and (spelled in self.constructed_names or self._named_scaler(spelled)):
                return True  # by its name alone: `self.loss_scaler = NativeScaler()` scales in its call
        return False

    def scaled_backward_scaler(self, call: cst.Call) -> str | None:
        """For a tensor backward of a scaled loss, the scaler's spelling; else None."""
        receiver = self._scaled_receiver(call)
        return dotted_name(receiver) if receiver is not None and self.is_scaler(receiver) else None

    def _scaled_receiver(self, call: cst.Call) -> cst.BaseExpression | None:
        """For a tensor backward of ``X.scale(...)`` (directly, or through a name bound to
        it), ``X``; else None."""
        if not self.training.is_tensor_backward(call) or not isinstance(call.func, cst.Attribute):
            return None
        target = call.func.value
        if isinstance(target, cst.Name):
            bound = self.bindings.single_value(target) or self._assigned_just_before(target.value, call)
            target = bound if bound is not None else target
        if isinstance(target, cst.Call) and isinstance(target.func, cst.Attribute) and target.func.attr.value == "scale":
            return target.func.value
        return None

    def _assigned_just_before(self, name: str, at: cst.CSTNode) -> cst.BaseExpression | None:
        """The value of ``name = value``, the statement right before ``at``'s in its block
        (JOTR rebinds the loss's own name: ``_loss = scaler.scale(_loss)``, then
        ``_loss.backward()``)."""
        statement = self.tree.statement_of(at)
        located = self.tree.statement_list(statement) if statement is not None else None
        if located is None or located[1] == 0:
            return None
        previous = located[0][located[1] - 1]
        if not isinstance(previous, cst.SimpleStatementLine) or len(previous.body) != 1:
            return None
        assign = previous.body[0]
        if (
            isinstance(assign, cst.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)
            and assign.targets[0].target.value == name
        ):
            return assign.value
        return None

    @functools.cached_property
    def scaled_backwards(self) -> list[tuple[cst.Call, str]]:
        found = []
        for call in self.tree.index.calls:
            scaler = self.scaled_backward_scaler(call)
            if scaler is not None:
                found.append((call, scaler))
        return found

    def scales_backward_in(self, scope: cst.CSTNode, scaler: str) -> bool:
        """Does ``scope`` itself run a backward scaled by ``scaler``?"""
        return any(spelled == scaler and self.tree.scope_of(backward) is scope for backward, spelled in self.scaled_backwards)

    def update_left_to_caller(self, step: ScalerCall) -> bool:
        """Is ``step`` on a scaler parameter whose ``update()`` belongs to the caller: a
        helper that steps the optimizers it is handed but does no scaled backward itself
        (its callers may live in other files), or a function that a function of this
        file calls with the scaler it then updates?"""
        function = step.owner
        if isinstance(function, cst.ClassDef):
            return self._member_handed_in(function, step.scaler)
        if not isinstance(function, cst.FunctionDef):
            return False
        if not self.scales_backward_in(function, step.scaler):
            return True
        for update in self.calls:
            caller = update.owner
            if update.method != "update" or not isinstance(caller, cst.FunctionDef) or caller is function:
                continue
            for call in self.tree.index.calls:
                if (
                    last_name(call.func) == function.name.value
                    and self.tree.scope_of(call) is caller
                    and any(dotted_name(arg.value) == update.scaler for arg in call.args)
                ):
                    return True
        # A scaler handed in as a parameter belongs to the caller, and so may its update():
        # mmgeneration's `train_step(..., loss_scaler=None)` runs the D and G steps, and its
        # runner, in another file, updates once after. Only a caller in this file that
        # passes the scaler and never updates it shows the update missing.
        handed_in = any(param.name.value == step.scaler for param in _parameters(function))
        return handed_in and not any(last_name(call.func) == function.name.value for call in self.tree.index.calls)

    def _member_handed_in(self, cls: cst.ClassDef, scaler: str) -> bool:
        """Is ``self.<attr>`` a scaler the class is handed (set only from parameters of its
        methods) and never scales a backward with? Then its owner updates it: animeface's
        optimizer wrapper steps `self._scaler` from `__init__(optimizer, scaler)`, and the
        accelerator that built the scaler updates it once after all optimizers (round BE)."""
        attribute = scaler.split(".", 1)[1] if scaler.count(".") == 1 else None
        values = self.classes.attribute_values(cls, attribute) if attribute is not None else None
        if not values or not all(
            isinstance(value, cst.Name)
            and (bindings := self.bindings.assignments(value))
            and all(isinstance(binding.node, cst.Param) for binding in bindings)
            for value in values
        ):
            return False
        return not any(spelled == scaler and self.tree.method_class(backward) is cls for backward, spelled in self.scaled_backwards)

    def in_scope(self, scope: cst.CSTNode) -> list[ScalerCall]:
        return [c for c in self.calls if self.tree.scope_of(c.call) is scope]


def _parameters(function: cst.FunctionDef) -> list[cst.Param]:
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]
