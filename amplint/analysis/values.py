"""What an expression is statically known to be: one of a few strings, or dtypes.

Only what is certain counts: a literal, a torch dtype attribute, a name bound exactly
once in scope to such a thing, a conditional expression of them, or a lookup in a
literal dict. Everything else is unknown (None), and rules stay silent on unknowns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from amplint.analysis.bindings import Bindings
from amplint.analysis.calls import CallTargets, member_spec
from amplint.analysis.classes import Classes, assigns_attribute
from amplint.analysis.modules import ProjectModules
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import dotted_name
from amplint.analysis.torch_api import DEVICE_CONSTRUCTORS, DTYPE_ALIASES

_MAX_DEPTH = 8


@dataclass(eq=False)
class Values:
    """Static values of expressions (``context.analysis.values``).

    With ``members``, an attribute read is known too when the file assigns it only plain
    values: ``self.dtype`` through every assignment in its class, ``config.dtype`` through
    the class ``config`` was built from here (its fields, and the constructor's keyword)
    (``context.analysis.member_values``).
    """

    names: NameResolver
    bindings: Bindings
    classes: Classes
    members: bool = False
    # Constants of other project modules (``from config import AMP_DTYPE``); None: not asked.
    modules: ProjectModules | None = None
    # Members inherited from a project base class (``self.amp_dtype`` defined by the base
    # trainer in another file); None: not asked.
    calls: CallTargets | None = None
    _building_members: bool = field(default=False, init=False, repr=False)

    def string_values(self, node: cst.BaseExpression, depth: int = 0) -> frozenset[str] | None:
        """The possible string values of ``node``, or None when not statically known."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return frozenset({value}) if isinstance(value, str) else None
        named, found = self._named(node, depth, "strings", self.string_values)
        if named:
            return found
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
            # {"gpu": "cuda", "cpu": "cpu"}[accelerator]: the chosen value when the key is
            # known, else any of them.
            entries = self._entries(node.value, depth, self.string_values)
            if not entries:
                return None
            table: dict[str | None, frozenset[str]] = {}
            for key, found in entries:
                table[key] = table.get(key, frozenset()) | found
            keys = self._lookup_keys(node)
            if keys is not None and None not in table and keys <= table.keys():
                return frozenset().union(*(table[key] for key in keys))
            return frozenset().union(*table.values())
        return None

    def dtype_values(self, node: cst.BaseExpression, depth: int = 0) -> frozenset[str] | None:
        """The possible dtypes of ``node`` (canonical names like ``float16``), or None."""
        if depth > _MAX_DEPTH:
            return None
        qualified = self.names.resolve(node)
        if qualified is not None and qualified.startswith("torch."):
            alias = DTYPE_ALIASES.get(qualified.removeprefix("torch."))
            return frozenset({alias}) if alias else None
        named, found = self._named(node, depth, "dtypes", self.dtype_values)
        if named:
            return found
        table = node.value if isinstance(node, cst.Subscript) else None
        if isinstance(table, cst.Name):
            # A dict held in a name bound once (SAM2-Distillation-Pipeline's
            # `dtype_by_name[amp_dtype]`; round BK).
            table = self.bindings.single_value(table)
        if isinstance(node, cst.Subscript) and isinstance(table, cst.Dict):
            # {'float16': torch.float16, 'bfloat16': torch.bfloat16}[dtype]: any of the values.
            entries = self._entries(table, depth, self.dtype_values)
            if entries is None:
                return None
            keys = self._lookup_keys(node)
            if keys is not None:
                chosen = frozenset(value for key, found in entries if key in keys for value in found)
                if chosen:
                    return chosen
            return frozenset(value for _, found in entries for value in found)
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "getattr"
            and len(node.args) == 2
            and self.names.resolve(node.args[0].value) == "torch"
        ):
            # getattr(torch, "bfloat16")
            names = self.string_values(node.args[1].value, depth + 1)
            if names is not None and all(name in DTYPE_ALIASES for name in names):
                return frozenset(DTYPE_ALIASES[name] for name in names)
        return None

    def _named(
        self, node: cst.BaseExpression, depth: int, kind: str, reader: Callable[[cst.BaseExpression, int], frozenset[str] | None]
    ) -> tuple[bool, frozenset[str] | None]:
        """Values ``node`` has by name: another module's constant, or what a conditional, a
        name or an attribute is bound to. False first when ``node`` is none of these."""
        constant = self._constant(node, kind)
        if constant is not None:
            return True, constant or None
        if isinstance(node, (cst.IfExp, cst.Name, cst.Attribute)):
            return True, self._through(node, depth, reader, kind)
        return False, None

    def _constant(self, node: cst.BaseExpression, kind: str) -> frozenset[str] | None:
        """The ``kind`` ("strings" or "dtypes") values of another project module's constant
        that ``node`` names; an empty set when the constant holds the other kind; None when
        ``node`` names no known constant."""
        if self.modules is None or not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        qualified = self.names.resolve(node)
        constant = self.modules.constant(qualified) if qualified is not None else None
        if constant is None:
            return None
        return frozenset(constant.get(kind, ()))

    def _through(
        self,
        node: cst.IfExp | cst.Name | cst.Attribute,
        depth: int,
        evaluate: Callable[[cst.BaseExpression, int], frozenset[str] | None],
        kind: str,
    ) -> frozenset[str] | None:
        """The values of either branch of a conditional, or of what a name (or, with
        ``members``, an attribute) is bound to: once, or once per branch of an if/elif chain."""
        if isinstance(node, cst.IfExp):
            sources: list[cst.BaseExpression] | None = [node.body, node.orelse]
        elif isinstance(node, cst.Name):
            bound = self.bindings.single_value(node)
            sources = [bound] if bound is not None else self.bindings.branch_values(node)
        else:
            sources = self._member_sources(node) if self.members else None
            if sources is None and self.members:
                return self._inherited(node, kind)
        if not sources:
            return None
        found = [evaluate(source, depth + 1) for source in sources]
        if any(values is None for values in found):
            return None
        return frozenset().union(*found)  # type: ignore[arg-type]

    def _member_sources(self, node: cst.Attribute) -> list[cst.BaseExpression] | None:
        own = self.classes.instance_attribute(node)
        if own is not None:
            return self.classes.attribute_values(*own)
        construction = self._construction(node.value)
        spelled = dotted_name(node)
        if construction is None or spelled is None or self.classes.assigned_from_outside(spelled):
            return None
        return self.classes.construction_values(construction, node.attr.value)

    def _inherited(self, node: cst.Attribute, kind: str) -> frozenset[str] | None:
        """``self.attr`` that its class neither assigns nor defines, from the class's
        project base class: what ``class_members`` says of it there."""
        found = self.inherited_member(node)
        entry = found[2] if found is not None else None
        return frozenset(entry[kind]) if isinstance(entry, dict) and kind in entry else None

    def inherited_member(self, node: cst.BaseExpression) -> tuple[str, str, Any] | None:
        """For ``self.attr`` that its class neither assigns nor defines: the file of the
        base class that gives it, ``Class.attr`` there, and what is known of its values."""
        own = self.classes.instance_attribute(node)
        if self.calls is None or own is None or self.classes.members(*own) or self._building_members:
            return None  # (while this file's table is built, its own inheritance is not followed)
        cls, attr = own
        if any(method.name.value == attr for method in self.classes.methods(cls)):
            return None
        base = self.calls.bases.get(cls.name.value) if isinstance(self.classes.tree.parent(cls), cst.Module) else None
        if base is None:
            return None
        found = self.calls.find(member_spec(base, attr), "members", lambda: {"members": self.class_members})
        return (found[0], found[2], found[3]) if found is not None else None

    @functools.cached_property
    def class_members(self) -> dict[str, dict[str, list[str]]]:
        """The known values of each attribute of each module-level class (assigned in its
        methods or body, or returned by a read-only property), by ``Class.attr``: for a
        subclass in another file, which inherits them."""
        table: dict[str, dict[str, list[str]]] = {}
        self._building_members = True
        try:
            self._fill_members(table)
        finally:
            self._building_members = False
        return table

    def _fill_members(self, table: dict[str, dict[str, list[str]]]) -> None:
        for cls in self.classes.module_classes():
            for attr in self.classes.attribute_names(cls):
                sources = self.classes.attribute_values(cls, attr)
                if not sources:
                    continue
                for kind, reader in (("dtypes", self.dtype_values), ("strings", self.string_values)):
                    found = [reader(source, 1) for source in sources]
                    if all(values is not None for values in found):
                        table[f"{cls.name.value}.{attr}"] = {kind: sorted(frozenset().union(*found))}  # type: ignore[arg-type]
                        break
                if all(is_cuda_value(self.names, self.bindings, source) for source in sources):
                    # `self.device = torch.device("cuda")`: a subclass in another file is CUDA-only.
                    table.setdefault(f"{cls.name.value}.{attr}", {})["cuda_only"] = True  # type: ignore[assignment]
                elif all(is_chosen_by_caller(self.names, self.bindings, source) for source in sources):
                    # `self.device = device` in `__init__`, or a `device` property returning
                    # `next(self.parameters()).device`: the subclass's callers choose it.
                    table.setdefault(f"{cls.name.value}.{attr}", {})["chosen_by_caller"] = True  # type: ignore[assignment]

    def _construction(self, base: cst.BaseExpression) -> cst.Call | None:
        """The one call that built ``base`` (``config = TrainConfig(...)``, or
        ``self.config = TrainConfig(...)`` in its class), when that is certain."""
        if isinstance(base, cst.Name):
            bound = self.bindings.single_value(base)
            return bound if isinstance(bound, cst.Call) else None
        own = self.classes.instance_attribute(base)
        if own is None:
            return None
        values = self.classes.attribute_values(*own)
        return values[0] if values is not None and len(values) == 1 and isinstance(values[0], cst.Call) else None

    def _entries(
        self, table: cst.Dict, depth: int, evaluate: Callable[[cst.BaseExpression, int], frozenset[str] | None]
    ) -> list[tuple[str | None, frozenset[str]]] | None:
        """Each entry of a literal dict: its key (None unless a string literal) and the
        values ``evaluate`` finds for it; None when a value is unknown or the dict unpacks."""
        entries: list[tuple[str | None, frozenset[str]]] = []
        for element in table.elements:
            if not isinstance(element, cst.DictElement):
                return None
            found = evaluate(element.value, depth + 1)
            if found is None:
                return None
            key = element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else None
            entries.append((key if isinstance(key, str) else None, found))
        return entries

    def _lookup_keys(self, node: cst.Subscript) -> frozenset[str] | None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        return self.string_values(node.slice[0].slice.value)


def is_cuda_literal_device(names: NameResolver, expr: cst.BaseExpression) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``f"cuda:{rank}"``, ``"cuda:{}".format(rank)``, ``"cuda:%d" % rank``,
    ``torch.device("cuda")``, ``torch.device("cuda", 0)``, ``torch.device(0)``, and a
    conditional of these."""
    if isinstance(expr, cst.IfExp):
        return is_cuda_literal_device(names, expr.body) and is_cuda_literal_device(names, expr.orelse)
    if isinstance(expr, cst.Call) and names.resolve(expr.func) in DEVICE_CONSTRUCTORS and expr.args:
        if isinstance(expr.args[0].value, cst.Integer):
            return True  # `torch.device(0)`: an index alone names a CUDA device (LoftQ)
        return is_cuda_literal_device(names, expr.args[0].value)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format":
        template = expr.func.value
        value = template.evaluated_value if isinstance(template, cst.SimpleString) else None
        return isinstance(value, str) and value.startswith("cuda:")
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and isinstance(expr.left, cst.SimpleString):
        value = expr.left.evaluated_value
        return isinstance(value, str) and value.startswith("cuda:")  # `"cuda:%d" % local_rank` (CDAE)
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return isinstance(value, str) and value.split(":")[0] == "cuda"
    if isinstance(expr, cst.FormattedString) and expr.parts and isinstance(expr.parts[0], cst.FormattedStringText):
        text = expr.parts[0].value
        if len(expr.parts) == 1:
            return text.split(":")[0] == "cuda"  # f"cuda" (mochi)
        return text.split(":")[0] == "cuda" and ":" in text  # f"cuda:{rank}"
    return False


def _binding_is_cuda(names: NameResolver, bindings: Bindings, binding: Any, depth: int) -> bool:
    value = bindings.value_of_binding(binding)
    if value is not None:
        return _is_cuda_value(names, bindings, value, depth + 1)
    returned = _unpacked_returns(bindings, binding)
    return bool(returned) and all(_is_cuda_value(names, bindings, item, depth + 1) for item in returned or ())


def is_cuda_binding(names: NameResolver, bindings: Bindings, binding: Any) -> bool:
    """Does this binding of a name give it only CUDA devices, also through a tuple a
    function of the file returns (``rank, device = setup_ddp()``)?"""
    return _binding_is_cuda(names, bindings, binding, 0)


def _unpacked_returns(bindings: Bindings, binding: Any) -> list[cst.BaseExpression] | None:
    """For ``rank, device = setup()`` of a module-level function of this file whose every
    ``return`` is a tuple of that length: the element each return gives this name (a DDP
    set-up that returns ``torch.device(f"cuda:{local_rank}")``; round BM); else None."""
    target = getattr(binding, "node", None)
    tree = bindings.tree
    element = tree.parent(target) if target is not None else None
    targets = tree.parent(element) if isinstance(element, cst.Element) else None
    assign_target = tree.parent(targets) if isinstance(targets, cst.Tuple) else None
    statement = tree.parent(assign_target) if isinstance(assign_target, cst.AssignTarget) else None
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and isinstance(targets, cst.Tuple)):
        return None
    if any(isinstance(item, cst.StarredElement) for item in targets.elements):
        return None
    call = statement.value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
        return None
    defined = [
        item
        for item in tree.source.module.body
        if isinstance(item, (cst.FunctionDef, cst.ClassDef)) and item.name.value == call.func.value
    ]
    if len(defined) != 1 or not isinstance(defined[0], cst.FunctionDef):
        return None  # not a function of this module, or defined more than once
    function = defined[0]
    index = targets.elements.index(cst.ensure_type(element, cst.Element))
    returned: list[cst.BaseExpression] = []
    for node in tree.index.returns:
        if tree.scope_of(node) is not function:
            continue
        value = node.value
        if not (isinstance(value, cst.Tuple) and len(value.elements) == len(targets.elements)):
            return None
        if any(isinstance(item, cst.StarredElement) for item in value.elements):
            return None
        returned.append(value.elements[index].value)
    return returned or None


def _class_constant(bindings: Bindings, attribute: cst.Attribute) -> cst.BaseExpression | None:
    """The value the body of the module-level class ``attribute.value`` names gives the
    attribute, when it gives it once and nothing in the file assigns ``Class.attr``."""
    tree = bindings.tree
    owner = cst.ensure_type(attribute.value, cst.Name).value
    classes = [item for item in tree.source.module.body if isinstance(item, cst.ClassDef) and item.name.value == owner]
    if len(classes) != 1:
        return None
    values: list[cst.BaseExpression] = []
    for statement in classes[0].body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == attribute.attr.value for t in small.targets
            ):
                values.append(small.value)
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attribute.attr.value:
                if small.value is None:
                    return None
                values.append(small.value)
    if len(values) != 1:
        return None
    if assigns_attribute(tree, f"{owner}.{attribute.attr.value}"):
        return None
    if any(isinstance(call.func, cst.Name) and call.func.value == "setattr" for call in tree.index.calls):
        return None
    return values[0]


def is_cuda_value(names: NameResolver, bindings: Bindings, value: cst.BaseExpression) -> bool:
    """A CUDA device literal, or a name bound only to such literals (``device =
    f"cuda:{rank}"`` on one branch, ``"cuda:0"`` on the other; then ``self.device =
    device``)."""
    return _is_cuda_value(names, bindings, value, 0)


def is_parameter_value(names: NameResolver, bindings: Bindings, value: cst.BaseExpression) -> bool:
    """A parameter of the enclosing function, as is or as ``torch.device(<parameter>)``:
    ``self.device = device`` in an ``__init__``."""
    if isinstance(value, cst.Call) and names.resolve(value.func) in DEVICE_CONSTRUCTORS and len(value.args) == 1:
        value = value.args[0].value
    if not isinstance(value, cst.Name):
        return False
    found = bindings.assignments(value)
    return bool(found) and all(isinstance(binding.node, cst.Param) for binding in found)


def is_chosen_by_caller(names: NameResolver, bindings: Bindings, value: cst.BaseExpression) -> bool:
    """A device that the code building or moving the object chooses: a parameter (see
    ``is_parameter_value``), or the device of the module's own parameters
    (``next(self.parameters()).device``, what transformers' ``device`` property returns),
    which is wherever the caller put the model."""
    return is_parameter_value(names, bindings, value) or _is_own_parameters_device(value)


def _is_own_parameters_device(value: cst.BaseExpression) -> bool:
    owner = _parameters_owner(value)
    while isinstance(owner, cst.Attribute):  # `next(self.llm.parameters())`: a submodule's
        owner = owner.value
    return isinstance(owner, cst.Name) and owner.value == "self"


def is_parameters_device(value: cst.BaseExpression) -> bool:
    """``next(model.parameters()).device`` (or ``buffers()``, also through ``iter(...)``):
    the device of some module's own parameters."""
    return _parameters_owner(value) is not None


def _parameters_owner(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The module of ``next(<module>.parameters()).device``, or None."""
    if not (isinstance(value, cst.Attribute) and value.attr.value == "device"):
        return None
    call = value.value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "next" and call.args):
        return None
    inner = call.args[0].value
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "iter" and inner.args:
        inner = inner.args[0].value
    if not (
        isinstance(inner, cst.Call)
        and isinstance(inner.func, cst.Attribute)
        and inner.func.attr.value in ("parameters", "buffers")
    ):
        return None
    return inner.func.value


def _is_cuda_value(names: NameResolver, bindings: Bindings, value: cst.BaseExpression, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(value, cst.Name):
        found = bindings.of(value)
        return bool(found) and all(_binding_is_cuda(names, bindings, binding, depth) for binding in found)
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
        # `ModelArgs.device` of a module-level class whose body sets `device = "cuda"` and
        # that nothing sets again (Paper-Replications' Kimi-K2 trainer, round BM).
        constant = _class_constant(bindings, value)
        return constant is not None and _is_cuda_value(names, bindings, constant, depth + 1)
    if (
        isinstance(value, cst.Call)
        and names.resolve(value.func) in DEVICE_CONSTRUCTORS
        and len(value.args) == 1
        and isinstance(value.args[0].value, cst.Name)
    ):
        # `device_str = f"cuda:{rank}"; device = torch.device(device_str)` (mochi's fine-tuner)
        return _is_cuda_value(names, bindings, value.args[0].value, depth + 1)
    return is_cuda_literal_device(names, value)
