"""Device facts: which *device variable* a scope has, and which conditions test the device.

Analysis API (``context.analysis.devices``):

- ``variables(node)``: the device variables visible to code at ``node``: in its
  function (module-level code: the module), a parameter or name ``device`` or an
  attribute access whose last name is ``device`` (``args.device``,
  ``accelerator.device``); in a method, also ``self.device`` when the class assigns it
  anywhere. Integer indices (``args.gpu``, ``local_rank``) are not device variables.
- ``expression_at(node)``: the one device variable a fix may write at ``node`` (bound
  before it, unambiguous), as source text, or None.
- ``is_device_test(expr)``: does ``expr`` test the device type or CUDA availability?
- ``in_device_condition(node)``: does ``node`` run only under such a test (an enclosing
  ``if``/conditional expression, or an earlier guard that leaves the function)?
- ``tested_device(expr)``: the device expression a device-type test examines.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import Assignment

from amplint.analysis.bindings import Bindings
from amplint.analysis.calls import CallTargets
from amplint.analysis.classes import Classes
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import (
    dotted_name,
    has_call,
    is_none,
    last_name,
    match_arguments,
    operands,
    root_name,
    string_literal,
)
from amplint.analysis.torch_api import (
    AUTOCASTS,
    AVAILABILITY_TESTS,
    DEVICE_CONSTRUCTORS,
    DEVICE_TYPES,
    GRAD_SCALERS,
    MODERN_CUSTOM_AUTOGRAD,
)
from amplint.analysis.tree import ScopeNode, Tree, if_chain
from amplint.analysis.values import (
    Values,
    is_chosen_by_caller,
    is_cuda_binding,
    is_cuda_value,
    is_parameters_device,
)
from amplint.engine.context import SourceContext
from amplint.engine.walk import ReadOnlyVisitor

# Functions that read a configuration from a file, and the containers projects wrap one in.
CONFIG_LOADERS = frozenset(
    {
        "yaml.safe_load", "yaml.load", "yaml.full_load", "json.load", "toml.load", "tomllib.load",
        "omegaconf.OmegaConf.load", "mmcv.Config.fromfile", "mmengine.Config.fromfile", "mmengine.config.Config.fromfile",
    }
)
CONFIG_WRAPPERS = frozenset({"DictConfig", "EasyDict", "edict", "create", "Munch", "munchify", "AttrDict"})

# Flags whose name says they mean "running on CUDA/GPU": `use_cuda`, `args.cuda`, `x.is_cuda`.
_FLAG_WORDS = ("cuda", "gpu", "cpu")
# Methods whose result is a tensor: a name bound to one is data. `.half()` and `.to()` are
# left out (models are cast and moved with them); `.float()` and the other casts are in,
# since a module's `.device` says where its weights live, which is no choice either.
TENSOR_RESULTS = frozenset(
    {
        "cuda", "argmax", "argmin", "softmax", "log_softmax", "sigmoid", "detach", "contiguous", "view", "reshape",
        "flatten", "squeeze", "unsqueeze", "permute",
        # `y = batch["y"].float()` (EfficientSED, round BI): a cast of data keeps it data.
        "float", "double", "long", "int", "bool", "clone",
    }
)
TENSOR_TYPES = frozenset({"torch.Tensor", "torch.FloatTensor"})
SPAWNS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.spawn.spawn"})
SKIP_DECORATORS = frozenset({"skipif", "skipIf", "skipUnless"})
_MAX_DEPTH = 6
DDP = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"})
# Calls that raise without CUDA (torch.cuda's lazy initialisation; verified on torch 2.13's
# CPU build, which a test re-checks): code that makes them unguarded requires CUDA.
CUDA_STATE_CALLS = frozenset(
    {
        "torch.cuda.synchronize",
        "torch.cuda.current_device",
        "torch.cuda.get_device_properties",
        "torch.cuda.get_device_name",
        "torch.cuda.get_device_capability",
        "torch.cuda.current_stream",
        "torch.cuda.mem_get_info",  # UniDepth's training loop logs free memory
        "torch.cuda.ipc_collect",  # EasyAnimate's validation ends with it
        "torch.cuda.set_per_process_memory_fraction",  # NeMo's memory profiler
        "torch.cuda.reset_peak_memory_stats",  # physicsnemo's StormCast logs peak memory
    }
)
# NVIDIA's management library: it fails without an NVIDIA driver (physicsnemo's DoMINO
# trainer calls `nvmlInit()` at import; round BL).
NVML_CALLS = frozenset({"pynvml.nvmlInit", "pynvml.nvmlDeviceGetHandleByIndex", "nvidia_smi.nvmlInit"})
_RAISE_WITHOUT_CUDA = CUDA_STATE_CALLS | NVML_CALLS
INIT_DEVICE_MESH = frozenset({"torch.distributed.device_mesh.init_device_mesh", "torch.distributed.init_device_mesh"})
AMP_CALLABLES = AUTOCASTS | GRAD_SCALERS | MODERN_CUSTOM_AUTOGRAD
# An availability test that may choose another device (device_count() often just counts GPUs).
FALLBACK_TESTS = AVAILABILITY_TESTS - {"torch.cuda.device_count"}
OTHER_DEVICES = frozenset({"cpu", "mps", "xpu"})
# Variables that hold the device code runs on (not `init_device`, `map_location` and kin).
DEVICE_NAMES = frozenset({"device", "device_type", "accelerator"})
# Members only a tensor has (a module, a config or an accelerator has none of them): a
# name read with one holds data, and its `.device` is where that data is, not a choice.
TENSOR_ATTRIBUTES = frozenset({"shape", "ndim", "requires_grad", "grad_fn", "is_cuda"})
# ... and methods, when called: `cfg.size` may be a config field, `x.size()` is a tensor's;
# `loss.backward()` takes no tensor, `accelerator.backward(loss)` does.
TENSOR_METHODS = frozenset({"numel", "size", "dim", "item", "tolist"})


@dataclass(frozen=True)
class DeviceVariable:
    expr: cst.BaseExpression  # one occurrence (a Name, a Param's name, or an attribute)
    text: str  # its dotted spelling: ``device``, ``args.device``, ``self.device``
    kind: str  # "parameter" | "name" | "self" | "attribute"


def _needs_gpus(test: cst.BaseExpression) -> bool:
    """Does ``test`` hold only with at least one GPU: a number of GPUs above zero
    (``len(args.gpu_ids) > 1``, ``args.n_gpu >= 1``), possibly one ``and``-part of it?"""
    return any(_is_gpu_count_above_zero(part) for part in operands(test, cst.And))


def _is_gpu_count_above_zero(test: cst.BaseExpression) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    count, target = test.left, test.comparisons[0]
    if not isinstance(target.comparator, cst.Integer):
        return False
    bound = int(target.comparator.value, 0)
    if not (isinstance(target.operator, cst.GreaterThan) and bound >= 0) and not (
        isinstance(target.operator, cst.GreaterThanEqual) and bound >= 1
    ):
        return False
    if isinstance(count, cst.Call) and isinstance(count.func, cst.Name) and count.func.value == "len" and len(count.args) == 1:
        count = count.args[0].value
    name = last_name(count) if isinstance(count, (cst.Name, cst.Attribute)) else None
    return name is not None and any(word in ("gpu", "gpus") for word in name.lower().split("_"))


def _is_device_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return isinstance(value, str) and value.split(":")[0] in DEVICE_TYPES
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        return bool(expr.elements) and all(_is_device_literal(element.value) for element in expr.elements)
    return False




class _Occurrences(ReadOnlyVisitor):
    """Device-variable occurrences in one scope's own code (nested functions and classes excluded)."""

    def __init__(self, names: NameResolver, root: cst.CSTNode) -> None:
        self.names = names
        self.root = root
        self.found: list[DeviceVariable] = []
        self.tensors: set[str] = set()  # names this scope uses as tensors
        # `device = x.device`: the target, and the name whose device it reads.
        self.device_reads: list[tuple[cst.Name, str]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is not self.root and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return False
        return super().on_visit(node)

    def visit_Param(self, node: cst.Param) -> bool:
        if node.name.value == "device":
            self.found.append(DeviceVariable(node.name, "device", "parameter"))
        if node.annotation is not None and self._names_tensor(node.annotation.annotation):
            self.tensors.add(node.name.value)  # `x: torch.Tensor`, `x: Optional[Tensor]`
        return False

    def _names_tensor(self, annotation: cst.BaseExpression) -> bool:
        if isinstance(annotation, cst.Subscript):
            return any(
                isinstance(element.slice, cst.Index) and self._names_tensor(element.slice.value) for element in annotation.slice
            )
        if isinstance(annotation, cst.BinaryOperation):  # `Tensor | None`
            return self._names_tensor(annotation.left) or self._names_tensor(annotation.right)
        return self.names.resolve(annotation) in TENSOR_TYPES

    def visit_Arg(self, node: cst.Arg) -> bool:
        # `x.to(device=...)`: the keyword is a parameter name of the callee, not a variable.
        node.value.visit(self)
        return False

    def visit_Assign(self, node: cst.Assign) -> bool:
        # `image = batch["image"].cuda()`: data moved to CUDA, whatever else it is;
        # `preds = logits[:, 1:].argmax(dim=2)`: the result of a method only tensors have.
        value = node.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in TENSOR_RESULTS:
            self.tensors.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
        for target in node.targets:
            pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = [(target.target, value)]
            if isinstance(target.target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.target.elements) == len(value.elements):
                # `B, device = latents.shape[0], latents.device` (SimpleTuner)
                pairs = [(name.value, read.value) for name, read in zip(target.target.elements, value.elements, strict=True)]
            for name, read in pairs:
                if (
                    isinstance(name, cst.Name)
                    and name.value == "device"
                    and isinstance(read, cst.Attribute)
                    and read.attr.value == "device"
                    and isinstance(read.value, cst.Name)
                ):
                    self.device_reads.append((name, read.value.value))
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            method = func.attr.value
            if method in TENSOR_METHODS or (method == "backward" and not any(arg.keyword is None for arg in node.args)):
                self.tensors.add(func.value.value)
        return True

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        # `x[0, ...]`, `x[:, 1:]`: indexing by several axes or slices is a tensor's (or an array's).
        if isinstance(node.value, cst.Name) and (
            len(node.slice) > 1
            or any(
                isinstance(element.slice, cst.Slice)
                or (isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Ellipsis))
                for element in node.slice
            )
        ):
            self.tensors.add(node.value.value)
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value in TENSOR_ATTRIBUTES and isinstance(node.value, cst.Name):
            self.tensors.add(node.value.value)
        # `torch.device` is the constructor, not a variable.
        if node.attr.value == "device" and self.names.resolve(node) is None:
            text = dotted_name(node)
            if text is not None:
                kind = "self" if text == "self.device" else "attribute"
                self.found.append(DeviceVariable(node, text, kind))
        # The attribute name itself is not a variable; only its base may hold one.
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value == "device":
            self.found.append(DeviceVariable(node, "device", "name"))
        return False

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False


@dataclass(eq=False)
class DeviceAnalysis:
    """Device facts of one file (``context.analysis.devices``)."""

    source: SourceContext
    tree: Tree
    names: NameResolver
    bindings: Bindings
    classes: Classes
    # Which project function a call runs (for functions that return False off CUDA); None: not asked.
    calls: CallTargets | None = None
    # What a member inherited from a project base class in another file holds; None: not asked.
    member_values: Values | None = None
    _occurrence_cache: dict[cst.CSTNode, tuple[DeviceVariable, ...]] = field(default_factory=dict, init=False, repr=False)
    # `device` targets of `device = x.device` for a name `x` its scope uses as a tensor.
    _tensor_device_targets: set[cst.CSTNode] = field(default_factory=set, init=False, repr=False)
    _plain_calls_cache: dict[cst.FunctionDef, list[cst.Call]] = field(default_factory=dict, init=False, repr=False)
    # Set while `device_gated` is computed: its device tests may ask it again, through a
    # parameter's arguments, and a 1,900-line file then took half a minute (index-tts's
    # copy of transformers' GPT-2, round BJ).
    _gating_in_progress: bool = field(default=False, init=False, repr=False)

    # -- scopes ----------------------------------------------------------------------------


    def _occurrences(self, scope: ScopeNode) -> tuple[DeviceVariable, ...]:
        if scope not in self._occurrence_cache:
            collector = _Occurrences(self.names, scope)
            scope.visit(collector)
            self._occurrence_cache[scope] = tuple(
                variable for variable in collector.found if not _is_tensor_device(variable, collector.tensors)
            )
            self._tensor_device_targets.update(target for target, read in collector.device_reads if read in collector.tensors)
        return self._occurrence_cache[scope]

    def _class_assigns_self_device(self, cls: cst.ClassDef) -> bool:
        """Does the class have a ``device`` member: ``self.device = ...`` in a method, or a
        class-body field (``device: torch.device`` in a dataclass)?"""
        return bool(self.classes.members(cls, "device"))

    # -- device variables --------------------------------------------------------------------

    def variables(self, node: cst.CSTNode) -> list[DeviceVariable]:
        scope = self.tree.scope_of(node)
        found = list(self._occurrences(scope))
        cls = self.tree.class_of(scope) if isinstance(scope, cst.FunctionDef) else None
        if cls is not None and self._class_assigns_self_device(cls) and not any(v.kind == "self" for v in found):
            found.append(DeviceVariable(cst.parse_expression("self.device"), "self.device", "self"))
        variables = [
            variable for variable in found if self._is_variable(variable, cls) and not self._bound_only_after(variable, node)
        ]
        if any(v.kind == "name" for v in found) and not any(v.kind in ("name", "parameter") for v in variables):
            # The scope's own `device` is a CUDA literal: a tensor's or module's `.device`
            # there is that device, not a choice (MONAI's tutorials: `noise.device`).
            variables = [variable for variable in variables if variable.kind != "attribute"]
        return variables

    def _bound_only_after(self, variable: DeviceVariable, node: cst.CSTNode) -> bool:
        """Is a local ``device`` (or the tensor ``x`` of ``x.device``) bound only by
        statements after ``node``, with no loop around both? UniRig's validation step binds
        `device = bones_b.device` in a loop that follows its autocast block (round BH), and
        STORM reads `flattened_sample.device` of a tensor its autocast block computes (round
        BJ): at the autocast no such device exists."""
        if variable.kind == "name":
            at: cst.CSTNode = variable.expr
            spelled = "device"
        elif variable.kind == "attribute" and isinstance(root := root_name(variable.expr), cst.Name):
            at, spelled = root, root.value
        else:
            return False
        scope = self.tree.scope_of(node)
        if not isinstance(scope, (cst.FunctionDef, cst.Module)):
            return False
        bindings = self.bindings.assignments(at, spelled)
        if not bindings or any(
            (binding.scope is binding.scope.globals and not isinstance(scope, cst.Module)) or isinstance(binding.node, cst.Param)
            for binding in bindings
        ):
            return False
        start = self.source.span(node)[0]
        loops = [ancestor for ancestor in self.tree.ancestors(node) if isinstance(ancestor, (cst.For, cst.While))]
        for binding in bindings:
            target = binding.node
            if self.tree.scope_of(target) is not scope or self.source.span(target)[0] <= start:
                return False
            if any(self.tree.within(target, loop) for loop in loops):
                return False  # a later iteration reads what an earlier one bound
        return True

    def _is_variable(self, variable: DeviceVariable, cls: cst.ClassDef | None) -> bool:
        if variable.kind == "self":
            # `self.device = torch.device("cuda")` in every assignment, here or in the base
            # class that gives it (neosr's models: the base in another file): CUDA-only code.
            # Nor a placeholder never set to a device (micro_diffusion's text encoder wrapper:
            # `self.device = None`, and nothing in the file sets another).
            return cls is None or not (
                self._self_device_is_cuda(cls) or self._inherits_cuda_device(variable.expr) or self._self_device_is_none(cls)
            )
        if variable.kind == "attribute" and (
            self._of_cuda_bound_instance(variable.expr) or self._attribute_set_only_to_cuda(variable.text)
        ):
            return False
        if variable.kind == "parameter":
            # `def train(model, device)` that this file calls only with a CUDA device.
            return not self._param_filled_with_cuda(self.tree.parent(variable.expr))
        if variable.kind != "name":
            return True
        # A bare `device` must be a binding the code made (not an unbound global), and
        # one that can hold something other than CUDA: `device = torch.device("cuda")`
        # in a CUDA-only test is not a choice of device.
        bindings = self.bindings.assignments(variable.expr, "device")
        if not bindings:
            return False
        if all(binding.node in self._tensor_device_targets for binding in bindings):
            # Only ever where a tensor's data is, as `x.device` itself (ACE-Step's
            # `device = target_wavs.device` beside `target_wavs.shape`).
            return False
        if not all(self._binds_cuda_literal(binding) or self._param_filled_with_cuda(binding.node) for binding in bindings):
            return True
        # Bound to CUDA only: still a variable where the code tests that very binding, or
        # where a module-level one may be rebound at run time.
        if any(binding.scope is binding.scope.globals for binding in bindings) and self.rebinds_globals:
            return True
        return any(binding in self._tested_device_bindings for binding in bindings)

    @functools.cached_property
    def _tested_device_bindings(self) -> list[Assignment]:
        """The bindings of ``device`` names whose type the file tests (``device.type ==
        "cuda"``, ``"cuda" in device``, ``device.startswith("cuda")``)."""
        found: list[Assignment] = []
        for node in self.tree.parents:
            if isinstance(node, (cst.Comparison, cst.Call)) and self.is_device_test(node):
                tested = self.tested_device(node)
                if isinstance(tested, cst.Name) and tested.value == "device":
                    found.extend(self.bindings.assignments(tested, "device"))
        return found

    @functools.cached_property
    def rebinds_globals(self) -> bool:
        """Can the file's module-level names be rebound at run time (``exec(open(...).read())``
        configurators, ``globals().update(...)``, an argparse ``--device`` option)?"""
        for call in self.tree.index.calls:
            qualified = self.names.resolve(call.func)
            if qualified == "exec":
                return True
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "update"
                and isinstance(call.func.value, cst.Call)
                and self.names.resolve(call.func.value.func) == "globals"
            ):
                return True
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "add_argument"
                and any(string_literal(arg.value) in ("--device", "-device", "--device_type") for arg in call.args)
            ):
                return True
        return False

    def _inherits_cuda_device(self, node: cst.BaseExpression) -> bool:
        found = self.member_values.inherited_member(node) if self.member_values is not None else None
        entry = found[2] if found is not None else None
        return isinstance(entry, dict) and entry.get("cuda_only") is True

    def _self_device_is_cuda(self, cls: cst.ClassDef) -> bool:
        values = self.classes.attribute_values(cls, "device")
        return bool(values) and all(self._holds_cuda(value) for value in values or ())

    def _self_device_is_none(self, cls: cst.ClassDef) -> bool:
        values = self.classes.attribute_values(cls, "device")
        if not values or not all(is_none(value) for value in values):
            return False
        return not any(
            isinstance(target.target, cst.Attribute)
            and target.target.attr.value == "device"
            and not (isinstance(target.target.value, cst.Name) and target.target.value.value == "self")
            for assign in self.tree.index.assigns
            for target in assign.targets
        )

    def _attribute_set_only_to_cuda(self, spelled: str) -> bool:
        """Does the file set ``cfg.device`` (spelled the same) only to CUDA devices, at least
        once (a Kaggle trainer's `cfg.device = "cuda:%d" % cfg.local_rank` under DDP and
        `"cuda:%d" % cfg.gpu` otherwise, then `run_eval(model, loader, cfg)` reads it)?"""
        values = [value for _, value in self._assignments_to(spelled)]
        return bool(values) and all(is_cuda_value(self.names, self.bindings, value) for value in values)

    def _of_cuda_bound_instance(self, expr: cst.BaseExpression) -> bool:
        """``ctx.device`` where ``ctx`` is a parameter annotated with a class of this file
        that sets ``self.device`` only to CUDA (mochi's ``preprocess(ctx: GPUContext, ...)``)."""
        if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name):
            return False
        bindings = self.bindings.assignments(expr.value)
        if not bindings:
            return False
        for binding in bindings:
            param = binding.node
            if not isinstance(param, cst.Param) or param.annotation is None:
                return False
            annotation = param.annotation.annotation
            named = [
                cls for cls in self.tree.index.classes if isinstance(annotation, cst.Name) and cls.name.value == annotation.value
            ]
            if len(named) != 1:
                return False
            values = self.classes.attribute_values(named[0], expr.attr.value)
            if not values or not all(self._holds_cuda(value) for value in values):
                return False
        return True

    def _holds_cuda(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """A CUDA device (see ``is_cuda_value``), or a parameter every call in this file fills
        with one (``self.device = device`` in an ``__init__`` the file only calls with CUDA)."""
        if is_cuda_value(self.names, self.bindings, value):
            return True
        if not isinstance(value, cst.Name) or depth > _MAX_DEPTH:
            return False
        bindings = self.bindings.assignments(value)
        return bool(bindings) and all(self._param_filled_with_cuda(binding.node, depth + 1) for binding in bindings)

    def _param_filled_with_cuda(self, param: cst.CSTNode | None, depth: int = 0) -> bool:
        """Is ``param`` a parameter of a function that this file calls, only by its name in
        plain calls, and always with a CUDA device for it (the caller's own CUDA device
        passed down: ``train(model, loader, torch.device("cuda", 0))``)? A function the file
        also hands on (a callback, ``spawn(train, ...)``) may be called with anything."""
        given = self.parameter_arguments(param)
        return bool(given) and all(self._holds_cuda(value, depth) for value in given or ())

    def parameter_arguments(self, param: cst.CSTNode | None) -> list[cst.BaseExpression] | None:
        """What every call of the file gives ``param`` (its default where a call leaves it
        out), when the file calls its function, only by its name in plain calls; else None."""
        if not isinstance(param, cst.Param) or param.star not in ("", cst.MaybeSentinel.DEFAULT):
            return None
        function = self._enclosing_function(param)
        if function is None:
            return None
        calls = self.plain_calls_of(function)
        if not calls:
            return None
        owner = self.tree.class_of(function)
        positional = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if owner is not None and positional and not any(
            self.names.resolve(decorator.decorator) == "staticmethod" for decorator in function.decorators
        ):
            positional = positional[1:]  # `self` (or `cls`) is not in the call's arguments
        found: list[cst.BaseExpression] = []
        for call in calls:
            matched = match_arguments(call.args, positional)
            if matched is None:
                return None
            given = matched[0].get(param.name.value, param.default)
            if given is None:
                return None
            found.append(given)
        return found

    def arguments_for(self, name: cst.Name) -> list[cst.BaseExpression] | None:
        """``parameter_arguments`` of the one parameter ``name`` is bound to, if it is one."""
        bindings = self.bindings.assignments(name)
        return self.parameter_arguments(bindings[0].node) if len(bindings or ()) == 1 else None

    def plain_calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of ``function`` in this file (its class's constructions for an
        ``__init__``), or none when its name is also read any other way."""
        if function in self._plain_calls_cache:
            return self._plain_calls_cache[function]
        owner = self.tree.class_of(function)
        if owner is not None and function.name.value == "__init__":
            name = owner.name.value
            calls = [call for call in self.tree.index.calls if isinstance(call.func, cst.Name) and call.func.value == name]
        else:
            name = function.name.value
            calls = [call for call in self.tree.index.calls if self._calls_function(call, function)]
        plain = calls if self.name_counts[name] == len(calls) + 1 else []  # + 1: the definition's own name
        self._plain_calls_cache[function] = plain
        return plain

    @functools.cached_property
    def name_counts(self) -> Counter[str]:
        """How often each name is spelled in the file."""
        return Counter(node.value for node in self.tree.parents if isinstance(node, cst.Name))

    def _binds_cuda_literal(self, binding: Assignment) -> bool:
        target = binding.node
        statement = self.tree.parent(target)
        while statement is not None and not isinstance(statement, (cst.Assign, cst.AnnAssign, cst.BaseStatement)):
            statement = self.tree.parent(statement)
        if not isinstance(statement, (cst.Assign, cst.AnnAssign)) or statement.value is None:
            return False
        if isinstance(statement, cst.Assign) and not all(isinstance(t.target, cst.Name) for t in statement.targets):
            # `local_rank, device = setup_ddp()`, whose returns give this name CUDA.
            return is_cuda_binding(self.names, self.bindings, binding)
        if isinstance(statement.value, cst.Integer):
            return True  # `device = 0  # the GPU you want to use`: an index alone names a CUDA device (eomt)
        key = _string_key(statement.value)
        if key is not None:
            return self._key_set_only_to_cuda(key)
        return is_cuda_value(self.names, self.bindings, statement.value)

    def _key_set_only_to_cuda(self, key: str) -> bool:
        """Does every dict literal of the file that has the string key ``key``, and every
        assignment to ``x[key]``, give it a CUDA device, at least once (HybridHash's
        `config = {..., "device": torch.device("cuda:0")}`, read as `device =
        config["device"]` in the function the config is handed to)?"""
        values = [
            element.value
            for node in self.tree.parents
            if isinstance(node, cst.Dict)
            for element in node.elements
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == key
        ]
        values += [value for target, value in self._assignments if _string_key(target) == key]
        return bool(values) and all(is_cuda_value(self.names, self.bindings, value) for value in values)

    def has_variable(self, node: cst.CSTNode) -> bool:
        return bool(self.variables(node))

    def arrives_from_outside(self, node: cst.CSTNode) -> bool:
        """Is every device variable at ``node`` handed in from outside the file: a parameter
        of a function the file never calls, or ``self.device`` set only from a parameter of
        the method that sets it (``self.device = device`` in ``__init__``) or a property
        returning the device of the module's own parameters, in its class or in a project
        base class? Its value is then chosen by code this file does not show."""
        variables = self.variables(node)
        scope = self.tree.scope_of(node)
        cls = self.tree.class_of(scope) if isinstance(scope, cst.FunctionDef) else None
        return bool(variables) and all(self._from_outside(variable, cls) for variable in variables)

    def _from_outside(self, variable: DeviceVariable, cls: cst.ClassDef | None) -> bool:
        if variable.kind == "parameter":
            return self._of_uncalled_function(variable.expr)
        if variable.kind == "name":
            # A read of the parameter in the function's body, or the device of a model's own
            # parameters (`device = next(model.parameters()).device`: wherever the code that
            # built the model put it; jetson-llm-train's trainers, round BM).
            bound = self.bindings.assignments(variable.expr)
            return bool(bound) and all(
                (isinstance(binding.node, cst.Param) and self._of_uncalled_function(binding.node))
                or ((value := self.bindings.value_of_binding(binding)) is not None and is_parameters_device(value))
                for binding in bound
            )
        if variable.kind == "attribute":
            # `cfg.device` of a config read from a file (`cfg = DictConfig(yaml.safe_load(f))`:
            # learn-new-things, round BL): the file's reader chose it, as a caller would.
            root = root_name(variable.expr)
            bound = self.bindings.assignments(root) if root is not None else []
            return bool(bound) and all(
                (value := self.bindings.value_of_binding(binding)) is not None and self._loaded_config(value) for binding in bound
            )
        if variable.kind != "self" or cls is None:
            return False
        if self.classes.members(cls, "device") or any(method.name.value == "device" for method in self.classes.methods(cls)):
            # A `None` placeholder until the model is loaded (jetson-llm-train's trainer sets
            # `self.device = None` in `__init__`; round BM) chooses nothing.
            values = [value for value in self.classes.attribute_values(cls, "device") or () if not is_none(value)]
            return bool(values) and all(is_chosen_by_caller(self.names, self.bindings, value) for value in values)
        found = self.member_values.inherited_member(variable.expr) if self.member_values is not None else None
        entry = found[2] if found is not None else None
        return isinstance(entry, dict) and entry.get("chosen_by_caller") is True

    def _loaded_config(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """Is ``value`` a configuration read from a file (``yaml.safe_load(f)``,
        ``OmegaConf.load(path)``, ``json.load(f)``), possibly wrapped (``DictConfig(...)``,
        ``EasyDict(...)``)?"""
        if depth > 3 or not isinstance(value, cst.Call):
            return False
        qualified = self.names.resolve(value.func) or ""
        if qualified in CONFIG_LOADERS:
            return True
        wrapper = qualified.rsplit(".", 1)[-1] if qualified else (last_name(value.func) or "")
        return wrapper in CONFIG_WRAPPERS and len(value.args) == 1 and self._loaded_config(value.args[0].value, depth + 1)

    def _of_uncalled_function(self, node: cst.CSTNode) -> bool:
        function = self._enclosing_function(node)
        return function is not None and not self.plain_calls_of(function)

    def _enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        return next((ancestor for ancestor in self.tree.ancestors(node) if isinstance(ancestor, cst.FunctionDef)), None)

    def expression_at(self, node: cst.CSTNode, *, strict: bool = False) -> str | None:
        """Source text of the device variable a fix at ``node`` can use, if one is certain.

        In order: a parameter ``device``; a name ``device`` bound before ``node`` (in an
        enclosing block) or a global one seen from a function; ``self.device`` assigned
        by the class (outside the method that assigns it, or after the assignment); an
        attribute ``x.device`` already read earlier in the scope. Two different
        candidates of the same rank make it ambiguous: None. ``strict`` (for safe fixes)
        accepts only the first two kinds, the ones certainly bound when ``node`` runs.
        """
        start = self.source.span(node)[0]
        scope = self.tree.scope_of(node)
        variables = self.variables(node)
        ranks: list[set[str]] = [set(), set(), set(), set()]
        for variable in variables:
            if variable.kind == "parameter":
                ranks[0].add(variable.text)
            elif variable.kind == "name" and self._name_bound_before(variable.expr, node):
                ranks[1].add(variable.text)
            elif variable.kind == "self" and self._self_device_usable(scope, node):
                ranks[2].add(variable.text)
            elif (
                variable.kind == "attribute"
                and self.source.span(variable.expr)[0] < start
                and self._root_bound(variable.expr, node)
                and not self._root_rebound_between(variable.expr, node)
            ):
                ranks[3].add(variable.text)
        for rank in ranks[:2] if strict else ranks:
            if len(rank) == 1:
                return next(iter(rank))
            if len(rank) > 1:
                return None
        return None

    def _root_bound(self, expr: cst.BaseExpression, node: cst.CSTNode) -> bool:
        """Is the name ``expr`` (``z.device``) reads from bound whenever ``node`` runs: a
        parameter or a name bound on every path to it? FastVideo binds ``z`` in one branch
        only, so ``z.device`` there would raise UnboundLocalError on the others."""
        root = root_name(expr)
        if root is None:
            return False
        bindings = self.bindings.of(root)
        if any(isinstance(binding, Assignment) and isinstance(binding.node, cst.Param) for binding in bindings):
            return True
        return self.bindings.bound_on_every_path(root, node)

    def _root_rebound_between(self, expr: cst.BaseExpression, node: cst.CSTNode) -> bool:
        """Is the name ``expr`` (``pc.device``) reads from bound again after that read and
        before ``node``? RVT's ``pc`` is a tensor where ``pc.device`` is read, then a list."""
        root = root_name(expr)
        if root is None:
            return True
        read, start = self.source.span(expr)[0], self.source.span(node)[0]
        return any(read < self.source.span(binding.node)[0] < start for binding in self.bindings.assignments(root))

    def _name_bound_before(self, name: cst.CSTNode, node: cst.CSTNode) -> bool:
        bindings = self.bindings.assignments(name, "device")
        if not bindings:
            return False
        use_scope = self.bindings.scope(node)
        start = self.source.span(node)[0]
        for binding in bindings:
            if binding.scope is not use_scope and use_scope is not None and binding.scope is use_scope.globals:
                continue  # a global read from a function: bound by the time it runs
            bound_at = binding.node
            if isinstance(bound_at, cst.Param):
                continue
            if self.source.span(bound_at)[0] >= start:
                return False
            if not self._dominates(bound_at, node):
                return False
        return True

    def _dominates(self, binding: cst.CSTNode, node: cst.CSTNode) -> bool:
        """Is the statement that binds ``binding`` in a block that also holds ``node``?"""
        statement: cst.CSTNode | None = binding
        while statement is not None and not isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            statement = self.tree.parent(statement)
        if statement is None:
            return False
        if isinstance(statement, (cst.For, cst.With)) and not isinstance(self.tree.parent(binding), cst.AssignTarget):
            # `for device in ...` / `with ... as device`: bound for the body only.
            return self.tree.within(node, statement)
        block = self.tree.parent(statement)
        return block is not None and self.tree.within(node, block)

    def _self_device_usable(self, scope: ScopeNode, node: cst.CSTNode) -> bool:
        if not isinstance(scope, cst.FunctionDef):
            return False
        assigned_here = _self_device_targets(scope)
        if not assigned_here:
            return True  # assigned by another method (typically __init__)
        start = self.source.span(node)[0]
        return any(self.source.span(target)[0] < start and self._dominates(target, node) for target in assigned_here)

    # -- device-type tests ---------------------------------------------------------------

    def is_device_test(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """``device.type == "cuda"``, ``"cuda" in str(device)``, ``device.startswith("cuda")``,
        ``torch.cuda.is_available()``, ``x.is_cuda``, ``use_cuda`` / ``args.cuda``, a name
        bound once to one of these, or ``and``/``or``/``not`` of them."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return self.is_device_test(expr.expression, depth + 1)
        if isinstance(expr, cst.BooleanOperation):
            return self.is_device_test(expr.left, depth + 1) or self.is_device_test(expr.right, depth + 1)
        if isinstance(expr, cst.Comparison):
            # `torch.cuda.device_count() > rank`: a comparison of an availability probe.
            if any(
                isinstance(side, cst.Call) and self.names.resolve(side.func) in AVAILABILITY_TESTS
                for side in (expr.left, *(target.comparator for target in expr.comparisons))
            ):
                return True
            left = expr.left
            for target in expr.comparisons:
                if isinstance(
                    target.operator, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn, cst.Is, cst.IsNot)
                ) and (_is_device_literal(left) or _is_device_literal(target.comparator)):
                    return True
                left = target.comparator
            return False
        if isinstance(expr, cst.Call):
            if self.names.resolve(expr.func) in AVAILABILITY_TESTS:
                return True
            return (
                isinstance(expr.func, cst.Attribute)
                and expr.func.attr.value == "startswith"
                and len(expr.args) == 1
                and _is_device_literal(expr.args[0].value)
            )
        name = last_name(expr) or _string_key(expr)
        if name is not None:
            lowered = name.lower()
            if any(word in lowered.split("_") or lowered == f"is_{word}" for word in _FLAG_WORDS):
                return True
            if isinstance(expr, cst.Name):
                bound = self.bindings.single_value(expr)
                if bound is not None:
                    return self.is_device_test(bound, depth + 1)
                # A parameter every call of the file fills with a device-gated flag
                # (ME-IIS: `amp_enabled=bool(amp_enabled)`, the caller's own `... and
                # device.type == "cuda"`; round BF).
                given = self.arguments_for(expr)
                return bool(given) and all(self.gated_on_device(value, depth + 1) for value in given or ())
        return False

    def gated_on_device(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Does a device test decide ``expr`` (an autocast's ``enabled=`` or ``dtype=``)?
        A device test itself, a conditional or ``and``/``or`` with one, a comparison of
        such a value (``self.scaler is not None``), or a name, attribute or key the file
        assigns such a value to anywhere: ``config["amp"] = config["amp"] and
        config["cuda"]``, ``self.scaler = GradScaler() if not self.cpu else None``, a dtype
        that is float32 unless ``torch.cuda.is_available()``. AMP is then CUDA-only on
        purpose."""
        if depth > _MAX_DEPTH:
            return False
        if self.is_device_test(expr, depth):
            return True
        if isinstance(expr, cst.IfExp):
            return self.is_device_test(expr.test) or any(self.gated_on_device(side, depth + 1) for side in (expr.body, expr.orelse))
        if isinstance(expr, cst.BooleanOperation):
            return self.gated_on_device(expr.left, depth + 1) or self.gated_on_device(expr.right, depth + 1)
        if isinstance(expr, cst.Comparison):
            sides = (expr.left, *(target.comparator for target in expr.comparisons))
            return any(not is_none(side) and self.gated_on_device(side, depth + 1) for side in sides)
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Name) and expr.func.value == "bool" and len(expr.args) == 1:
                # `use_amp = bool(cfg.fp16 and self.device.type == "cuda")` (a Kaggle solution's
                # embedders, round AZ)
                return self.gated_on_device(expr.args[0].value, depth + 1)
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "is_enabled" and not expr.args:
                # `amp_enabled = scaler.is_enabled()` of a `GradScaler("cuda", enabled=use_amp
                # and cuda_available)` (Transformer4LongTailed, round BH)
                return self.gated_on_device(expr.func.value, depth + 1)
            if (self.names.resolve(expr.func) or "").endswith("GradScaler"):
                enabled = next((arg.value for arg in expr.args if arg.keyword is not None and arg.keyword.value == "enabled"), None)
                return enabled is not None and self.gated_on_device(enabled, depth + 1)
            return self._returns_false_off_device(expr)
        key = last_name(expr) or _string_key(expr)
        if key is None or not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript)):
            return False
        return any(self.gated_on_device(value, depth + 1) for value in self._assigned_to(key))

    def _returns_false_off_device(self, call: cst.Call) -> bool:
        """Does ``call`` run a project function (here or in another file) that returns
        ``False`` where a device test says so (YOLO's ``amp = check_amp(model)``: ``if
        device.type in ("cpu", "mps"): return False``)?"""
        if self._gating_in_progress:
            return False
        spec = self.calls.callee(call) if self.calls is not None else None
        if spec is None or self.calls is None:
            return False
        found = self.calls.find(spec, "device_gated", lambda: {"device_gated": self.device_gated})
        return found is not None and found[3] is True

    @functools.cached_property
    def device_gated(self) -> dict[str, bool]:
        """The functions of this file (by key) with a ``return False`` under an ``if`` on a
        device test (part of the file's project summary)."""
        found: dict[str, bool] = {}
        self._gating_in_progress = True
        try:
            self._find_device_gated(found)
        finally:
            self._gating_in_progress = False
        return found

    def _find_device_gated(self, found: dict[str, bool]) -> None:
        for node in self.tree.index.returns:
            if not _falsy_return(node.value):
                continue
            function = self.tree.scope_of(node)
            if not isinstance(function, cst.FunctionDef) or self.calls is None:
                continue
            key = self.calls.function_key(function)
            if key is not None and self._under_device_test(node, function):
                found[key] = True

    def _under_device_test(self, node: cst.CSTNode, function: cst.CSTNode) -> bool:
        for child, ancestor in self.tree.ancestry(node):
            if ancestor is function:
                return False
            if isinstance(ancestor, cst.If) and child is ancestor.body and self.is_device_test(ancestor.test):
                return True
        return False

    def _set_only_under_device_test(self, test: cst.BaseExpression, *, taken: bool) -> bool:
        """Does the branch of ``if <test>:`` that runs when the test is ``taken`` run only
        where a value is set that the file sets (to anything but ``None``) only under a
        device test? ``if self.scaler is not None:`` (or ``if self.scaler:``) where
        vqa-model-builder's ``_setup_amp`` builds its GradScaler only when
        ``self.device.type == "cuda"`` (round BF); the ``else`` of ``if autocast_dtype is
        None:`` where Video_inpainting_DPO sets the dtype only on CUDA (round BG)."""
        subject, holds_when_set = test, True
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            subject, holds_when_set = test.expression, False
        elif isinstance(test, cst.Comparison):
            if len(test.comparisons) != 1 or not is_none(test.comparisons[0].comparator):
                return False
            operator = test.comparisons[0].operator
            if not isinstance(operator, (cst.Is, cst.IsNot)):
                return False
            subject, holds_when_set = test.left, isinstance(operator, cst.IsNot)
        if taken != holds_when_set:
            return False
        spelled = dotted_name(subject) if isinstance(subject, (cst.Name, cst.Attribute)) else None
        if spelled is None:
            return False
        given = [(target, value) for target, value in self._assignments_to(spelled) if not is_none(value)]
        return bool(given) and all(
            self._under_device_test(target, self.tree.scope_of(target))
            or self._none_off_device(value)
            # `amp_dtype = resolve_amp_dtype()`, which returns `None` off CUDA
            or (isinstance(value, cst.Call) and self._returns_false_off_device(value))
            for target, value in given
        )

    def _none_off_device(self, value: cst.BaseExpression) -> bool:
        """``GradScaler('cuda') if use_amp and self.device.type == 'cuda' else None``
        (TradingBOT, round BH): not ``None`` only where a device test, not negated, holds."""
        if not (isinstance(value, cst.IfExp) and is_none(value.orelse) and self.is_device_test(value.test)):
            return False
        code = self.source.module.code_for_node(value.test)
        return not re.search(r"\bnot\b|!=", code)

    def _assigned_to(self, key: str) -> list[cst.BaseExpression]:
        """The values the file assigns to a name, attribute or string key spelled ``key``."""
        return [value for target, value in self._assignments if (last_name(target) or _string_key(target)) == key]

    def _assignments_to(self, spelled: str) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """The (target, value) pairs of the file's assignments to ``spelled`` (``opt.x``)."""
        return [(target, value) for target, value in self._assignments if dotted_name(target) == spelled]

    @functools.cached_property
    def _assignments(self) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
        for assign in self.tree.index.assigns:
            for target in assign.targets:
                pairs.append((target.target, assign.value))
                if isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(assign.value, cst.Call):
                    # `use_amp, amp_dtype, use_scaler = resolve_amp(device, precision)`: each
                    # name holds a part of what the call returns (see `_returns_false_off_device`).
                    pairs += [
                        (element.value, assign.value)
                        for element in target.target.elements
                        if isinstance(element, cst.Element) and isinstance(element.value, (cst.Name, cst.Attribute))
                    ]
        return pairs

    def tested_device(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The device expression a device-type test looks at (``device`` in
        ``device.type == "cuda"`` or ``"cuda" in str(device)``), if there is one."""
        for comparison in _walk_tests(expr):
            sides: list[cst.BaseExpression] = []
            if isinstance(comparison, cst.Comparison):
                left = comparison.left
                for target in comparison.comparisons:
                    if _is_device_literal(left) and not _is_device_literal(target.comparator):
                        sides.append(target.comparator)
                    elif _is_device_literal(target.comparator) and not _is_device_literal(left):
                        sides.append(left)
                    left = target.comparator
            elif (
                isinstance(comparison, cst.Call)
                and isinstance(comparison.func, cst.Attribute)
                and comparison.func.attr.value == "startswith"
            ):
                sides.append(comparison.func.value)
            for side in sides:
                device = self._device_of(side)
                if device is not None:
                    return device
        return None

    def always_cuda(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Is ``expr`` a name the file binds only to CUDA devices (a `None` placeholder
        aside), directly or through a device-type test of such a name (NeuroLM: `device =
        'cuda'`, `device = f'cuda:{rank}'`, then `device_type = 'cuda' if 'cuda' in device
        else 'cpu'`), and cannot rebind at run time?"""
        if not isinstance(expr, cst.Name) or depth > _MAX_DEPTH or self.rebinds_globals:
            return False
        bound = self.bindings.plain_values(expr)
        if not bound or all(is_none(value) for value in bound):
            return False
        for value in bound:
            if is_none(value) or is_cuda_value(self.names, self.bindings, value):
                continue
            if isinstance(value, cst.IfExp) and _is_device_literal(value.body):
                tested = self.tested_device(value.test)
                if tested is not None and self.always_cuda(tested, depth + 1):
                    continue
            return False
        return True

    def _device_of(self, side: cst.BaseExpression) -> cst.BaseExpression | None:
        # `device.type` → device; `str(device)` → device; a name or attribute → itself.
        if isinstance(side, cst.Attribute) and side.attr.value == "type":
            return side.value if dotted_name(side.value) is not None else None
        if (
            isinstance(side, cst.Call)
            and self.names.resolve(side.func) == "str"
            and len(side.args) == 1
            and not side.args[0].keyword
            and not side.args[0].star
        ):
            return self._device_of(side.args[0].value) or (
                side.args[0].value if dotted_name(side.args[0].value) is not None else None
            )
        if dotted_name(side) is not None:
            return side
        return None

    def in_device_condition(self, node: cst.CSTNode) -> bool:
        """Does ``node`` run only where a device-type / CUDA-availability test decided?"""
        child = node
        current = self.tree.parent(node)
        while current is not None and not isinstance(current, (cst.Module, cst.ClassDef)):
            if isinstance(current, cst.FunctionDef):
                if child is current.body and (
                    self._skipped_without_device(current) or self._in_class_skipped_without_device(current)
                ):
                    return True
                return self._module_requires_device(node)
            if (
                isinstance(current, (cst.If, cst.IfExp))
                and child is not current.test
                and (self.is_device_test(current.test) or self._set_only_under_device_test(current.test, taken=child is current.body))
            ):
                return True
            # Runs only with GPUs: ManiSkill2-Learn sets up DDP under `if len(args.gpu_ids) > 1:`
            # (round BJ), where its device is CUDA.
            if isinstance(current, cst.If) and child is current.body and _needs_gpus(current.test):
                return True
            # `torch.cuda.is_available() and init_process_group("nccl")`
            if (
                isinstance(current, cst.BooleanOperation)
                and child is current.right
                and self.is_device_test(current.left)
            ):
                return True
            if isinstance(current, cst.IndentedBlock) and self._guarded_by_earlier_statement(current, child):
                return True
            if isinstance(current, cst.If) and child is current.body and self._guarded_under_same_test(current):
                return True
            child, current = current, self.tree.parent(current)
        if isinstance(current, cst.Module):
            return self._guarded_by_earlier_statement(current, child)
        return self._module_requires_device(node)

    def _module_requires_device(self, node: cst.CSTNode) -> bool:
        """Does the module stop at import without the device (``assert
        torch.cuda.is_available()`` at module level, before the definition that holds
        ``node``)? Nothing defined after it can run elsewhere (lightweight-gan)."""
        top: cst.CSTNode = node
        for ancestor in self.tree.ancestors(node):
            if isinstance(ancestor, cst.Module):
                return self._guarded_by_earlier_statement(ancestor, top)
            top = ancestor
        return False

    def _in_class_skipped_without_device(self, function: cst.FunctionDef) -> bool:
        """A method of a class (or a class nested in one) skipped without the device:
        ``@unittest.skipUnless(torch.cuda.is_available(), ...)`` on a TestCase."""
        current = self.tree.parent(function)
        while isinstance(current, (cst.IndentedBlock, cst.ClassDef)):
            if isinstance(current, cst.ClassDef) and self._skipped_without_device(current):
                return True
            current = self.tree.parent(current)
        return False

    def _skipped_without_device(self, definition: cst.FunctionDef | cst.ClassDef) -> bool:
        """``@pytest.mark.skipif(not torch.cuda.is_available(), ...)`` and unittest's kin."""
        for decorator in definition.decorators:
            call = decorator.decorator
            if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None:
                continue
            if last_name(call.func) in SKIP_DECORATORS and self.is_device_test(call.args[0].value):
                return True
        return False

    def _exits_without_device(self, statement: cst.If) -> bool:
        """``if ...: ... elif torch.cuda.is_available(): ... else: sys.exit(1)``: a chain
        that tests the device on some branch and leaves on the last (DINO's setup)."""
        links, final = if_chain(statement)
        return final is not None and _leaves(final.body) and any(self.is_device_test(link.test) for link in links)

    def requires_cuda(self, node: cst.CSTNode, *, on_its_path: bool = False) -> bool:
        """Does the function (or module) running ``node`` require CUDA anyway, before or
        after it: ``torch.cuda.set_device(...)``, ``.cuda()``, ``init_device_mesh("cuda")``,
        ``device_id=`` a CUDA device, or a method of its class that does? ``on_its_path``:
        only such calls that run whenever ``node`` does (in a block that holds ``node``,
        or in ``node``'s own statement), not ones in another branch."""
        scope = self.tree.scope_of(node)
        path = (node, self.tree.statement_of(node)) if on_its_path else None
        return (
            self._scope_requires_cuda(scope, path, follow_methods=True)
            or self._constructor_requires_cuda(scope)
            or self._enclosing_requires_cuda(scope)
            or self._imported_only_with_cuda(node)
        )

    def _imported_only_with_cuda(self, node: cst.CSTNode) -> bool:
        """Does the module, at import and before the top-level statement that holds
        ``node`` (its function's definition), run a call that requires CUDA, on no
        condition? LDM.py prints `torch.cuda.get_device_name()` at import, which raises
        without CUDA, so nothing after it runs anywhere else (round BF)."""
        first = self._first_statement_requiring_cuda
        if first is None:
            return False
        module = self.source.module
        top = next((child for child, ancestor in self.tree.ancestry(node) if ancestor is module), None)
        return top is not None and any(statement is top for statement in module.body[first + 1 :])

    @functools.cached_property
    def _first_statement_requiring_cuda(self) -> int | None:
        """The position of the module's first plain top-level statement that runs a call
        requiring CUDA (not under an ``if`` or ``try``: those may not run)."""
        module = self.source.module
        positions = {id(statement): number for number, statement in enumerate(module.body)}
        found = [
            positions[id(statement)]
            for call in self.tree.index.calls
            if isinstance(statement := self.tree.statement_of(call), cst.SimpleStatementLine)
            and id(statement) in positions
            and self.tree.scope_of(call) is module
            and self.call_requires_cuda(call)
        ]
        return min(found, default=None)

    def queries_cuda_state(self, node: cst.CSTNode) -> bool:
        """Does the function (or module) running ``node`` call, on any branch and outside
        any device test, a CUDA state function that raises without CUDA
        (``torch.cuda.synchronize()`` in nanoGPT's ``bench.py`` timing loop)? Its author
        writes for CUDA: a device string there is ``"cuda"`` or ``"cpu"``."""
        scope = self.tree.scope_of(node)
        return any(
            self.tree.scope_of(call) is scope
            and self.names.resolve(call.func) in CUDA_STATE_CALLS
            and not self.in_device_condition(call)
            for call in self.tree.index.calls
        )

    def block_binds_cuda_device(self, node: cst.CSTNode) -> bool:
        """Does the block that runs ``node`` also bind a device variable to a CUDA device
        (VideoTuna's sequence-parallel branch calls ``dist.init_process_group("nccl")``,
        then sets ``device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}")``)? That block
        is the code's CUDA path."""
        block = self.tree.running_block(node)
        statements = block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else ()
        for statement in statements:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not isinstance(small, cst.Assign) or len(small.targets) != 1:
                    continue
                # `device = ...`, or `args.device = torch.device('cuda', local_rank)`.
                if last_name(small.targets[0].target) in DEVICE_NAMES and is_cuda_value(self.names, self.bindings, small.value):
                    return True
        return False

    def _enclosing_requires_cuda(self, scope: ScopeNode) -> bool:
        """Is ``scope`` a closure whose enclosing function requires CUDA whenever it defines
        it (instruct-pix2pix's ``main`` calls ``model.eval().cuda()``, then defines the
        ``generate`` that opens the autocast)?"""
        if not isinstance(scope, cst.FunctionDef):
            return False
        outer = self.tree.scope_of(scope)
        if not isinstance(outer, cst.FunctionDef) or self.tree.class_of(scope) is not None:
            return False
        return self._scope_requires_cuda(outer, (scope, scope), follow_methods=True)

    def _constructor_requires_cuda(self, scope: ScopeNode) -> bool:
        """Is ``scope`` a method of a class whose ``__init__`` requires CUDA whenever it runs
        (map-anything's model wrappers call ``torch.cuda.get_device_capability()`` there):
        no instance exists without CUDA."""
        return any(self.call_requires_cuda(call) for call in self.constructor_calls(scope))

    def constructor_calls(self, scope: ScopeNode) -> list[cst.Call]:
        """For a method other than ``__init__``: the calls its class's ``__init__`` makes
        whenever it runs (in its own body, under no condition); none for anything else."""
        found = self.classes.method_of(scope.body) if isinstance(scope, cst.FunctionDef) else None
        if found is None or found[1].name.value == "__init__":
            return []
        init = next((method for method in self.classes.methods(found[0]) if method.name.value == "__init__"), None)
        if init is None:
            return []
        return [
            call
            for call in self.tree.index.calls
            if self.tree.scope_of(call) is init and self.tree.running_block(call) is init.body
        ]

    def _scope_requires_cuda(
        self, scope: ScopeNode, path: tuple[cst.CSTNode, cst.CSTNode | None] | None, *, follow_methods: bool
    ) -> bool:
        for call in self.tree.index.calls:
            if self.tree.scope_of(call) is not scope:
                continue
            if path is not None and not self.on_path(call, *path):
                continue
            if self.call_requires_cuda(call):
                return True
            if follow_methods:
                method = self._own_method_called(call)
                if method is not None and method is not scope and self._scope_requires_cuda(method, None, follow_methods=False):
                    return True  # axolotl's `compute_loss` calls `self._compute_block_rewards`
        return False

    def sibling_requires_cuda_on_same_test(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a method of a class, under an ``if`` one of whose ``and``-parts is
        also the whole test under which another method of the class requires CUDA? VoxCPM's
        ``Accelerator`` initialises NCCL in ``__init__`` under ``if self.world_size > 1 and
        not dist.is_initialized():``, and its ``prepare_model`` wraps the model in
        ``DistributedDataParallel(device_ids=[...])`` under ``if self.world_size > 1:``: its
        distributed path needs CUDA either way."""
        found = self.classes.method_of(node)
        guard = self._innermost_if(node)
        if found is None or guard is None:
            return False
        owner, method = found
        module = self.source.module
        parts = {module.code_for_node(part) for part in operands(guard.test, cst.And)}
        for call in self.tree.index.calls:
            other = self.classes.method_of(call)
            if other is None or other[0] is not owner or other[1] is method or not self.call_requires_cuda(call):
                continue
            test = self._innermost_if(call)
            if test is not None and module.code_for_node(test.test) in parts:
                return True
        return False

    def _innermost_if(self, node: cst.CSTNode) -> cst.If | None:
        """The nearest ``if`` whose body (not its ``else``) holds ``node``."""
        for child, ancestor in self.tree.ancestry(node):
            if isinstance(ancestor, cst.If) and child is ancestor.body:
                return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return None
        return None

    def call_requires_cuda(self, call: cst.Call) -> bool:
        qualified = self.names.resolve(call.func)
        if qualified == "torch.cuda.set_device":
            return True
        if qualified in _RAISE_WITHOUT_CUDA and not self.in_device_condition(call):
            return True  # `torch.cuda.synchronize()` raises without CUDA (ConvNeXt-V2's loops)
        if (
            qualified == "torch.cuda.device"
            and len(call.args) == 1
            and isinstance(call.args[0].value, (cst.Integer, cst.Name, cst.Attribute, cst.BinaryOperation, cst.Subscript))
            and not is_none(call.args[0].value)
            and not self.in_device_condition(call)
        ):
            return True  # `with torch.cuda.device(rank % torch.cuda.device_count()):` (makani); -1 is a no-op
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "enable_xformers_memory_efficient_attention"
            and not self.in_device_condition(call)
        ):
            return True  # diffusers raises "xformers' memory efficient attention is only available for GPU"
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda" and (
            qualified is None or isinstance(call.func.value, cst.Call)
        ):
            return True  # `model.cuda()`, `x.cuda(rank)`, `torch.tensor([1]).cuda()`
        if any(
            arg.keyword is not None and arg.keyword.value == "device" and self._is_cuda_device_argument(arg.value)
            for arg in call.args
        ):
            return True  # `torch.randn(..., device="cuda")`
        if (
            (qualified is None or not qualified.startswith("torch."))
            and not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "autocast")
            and any(
                arg.keyword is not None and arg.keyword.value == "device_type" and self._is_cuda_device_argument(arg.value)
                for arg in call.args
            )
            and not self.in_device_condition(call)
        ):
            # A project's own setup told it runs on CUDA: dllm-distillation's
            # `init_parallel_state(..., device_type="cuda")` builds a CUDA device mesh (round BJ).
            # Torch's AMP calls take a device type without needing the device.
            return True
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "to"
            and call.args
            and call.args[0].keyword is None
            and self._is_cuda_device_argument(call.args[0].value)
        ):
            return True  # `model.to("cuda")`
        if qualified in INIT_DEVICE_MESH and call.args and self._is_cuda(call.args[0].value):
            return True
        if any(arg.keyword is not None and arg.keyword.value == "device_id" and self._is_cuda(arg.value) for arg in call.args):
            return True
        return qualified in DDP and any(
            arg.keyword is not None and arg.keyword.value == "device_ids" and not is_none(arg.value) for arg in call.args
        )  # DDP takes device_ids only for a module on an accelerator

    def _is_cuda_device_argument(self, expr: cst.BaseExpression) -> bool:
        """A CUDA literal (``"cuda"``), or an instance attribute its class only ever sets to a
        CUDA device (``fd = self._feature_device`` set to ``torch.device(f"cuda:{i}")``
        on every branch). A plain ``device`` name bound to ``"cuda"`` does not count: the
        file may test or rebind it, which makes it a device variable."""
        if _is_device_literal(expr):
            return self._is_cuda(expr)
        if isinstance(expr, cst.Call) and self.names.resolve(expr.func) in DEVICE_CONSTRUCTORS:
            # `loss.initialize(device=torch.device("cuda", index=self.rank))` (fastenhancer)
            return self._is_cuda(expr)
        if isinstance(expr, cst.Name):
            bound = self.bindings.single_value(expr)
            expr = bound if bound is not None else expr
        return self._is_cuda_attribute(expr)

    def _is_cuda_attribute(self, expr: cst.BaseExpression) -> bool:
        found = self.classes.instance_attribute(expr)
        if found is None:
            return False
        values = self.classes.attribute_values(*found)
        return bool(values) and all(is_cuda_value(self.names, self.bindings, value) for value in values or ())

    def _own_method_called(self, call: cst.Call) -> cst.FunctionDef | None:
        """The method ``self.m(...)`` calls, when ``m`` is defined in the caller's class."""
        cls = self._self_call_class(call)
        if cls is None:
            return None
        name = call.func.attr.value  # type: ignore[attr-defined]
        return next((method for method in self.classes.methods(cls) if method.name.value == name), None)

    def callers_require_cuda(self, node: cst.CSTNode, *, on_its_path: bool = False) -> bool:
        """Is the function running ``node`` called in this file, and only from functions
        that require CUDA (nnU-Net's ``setup_ddp`` is called by ``run_ddp``, which then
        calls ``torch.cuda.set_device``)? ``on_its_path``: the caller requires CUDA
        whenever it makes the call (see ``requires_cuda``)."""
        function = self.tree.scope_of(node)
        if not isinstance(function, cst.FunctionDef):
            return False
        spawned = self._spawned_per_cuda_device(function)
        calls = [
            call
            for call in self.tree.index.calls
            if self._calls_function(call, function) and not (spawned and self._call_skips_branch(call, node, function))
        ]
        callers = [self.tree.scope_of(call) for call in calls]
        return (bool(calls) or spawned) and all(
            isinstance(caller, cst.FunctionDef)
            and caller is not function
            and (self.requires_cuda(call, on_its_path=on_its_path) or self.in_device_condition(call))
            for call, caller in zip(calls, callers, strict=True)
        )

    def _call_skips_branch(self, call: cst.Call, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
        """Is ``call`` in the ``else`` of an ``if`` whose test, spelled the same, guards
        ``node`` inside ``function``? 3D-ResNets spawns ``main_worker`` per CUDA device under
        ``if opt.distributed:`` and calls it directly in the ``else``, where the worker's own
        ``if opt.distributed: init_process_group("nccl")`` does not run."""
        code = self.source.module.code_for_node
        skipped = {
            code(ancestor.test)
            for child, ancestor in self.tree.ancestry(call)
            if isinstance(ancestor, cst.If) and child is ancestor.orelse
        }
        if not skipped:
            return False
        for child, ancestor in self.tree.ancestry(node):
            if ancestor is function:
                return False
            if isinstance(ancestor, cst.If) and child is ancestor.body and code(ancestor.test) in skipped:
                return True
        return False

    def _calls_function(self, call: cst.Call, function: cst.FunctionDef) -> bool:
        """``f(...)`` for a module-level ``f``; ``self.m(...)`` in the class that defines ``m``."""
        func = call.func
        if isinstance(func, cst.Name):
            return func.value == function.name.value
        owner = self.tree.class_of(function)
        return (
            owner is not None
            and isinstance(func, cst.Attribute)
            and func.attr.value == function.name.value
            and self._self_call_class(call) is owner
        )

    def _self_call_class(self, call: cst.Call) -> cst.ClassDef | None:
        """For ``self.m(...)`` in a method (``self`` being that method's own), its class."""
        func = call.func
        if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
            return None
        found = self.classes.method_of(call)
        return found[0] if found is not None and self.classes.self_name(found[1]) == func.value.value else None

    def _spawned_per_cuda_device(self, function: cst.FunctionDef) -> bool:
        """``torch.multiprocessing.spawn(main_worker, nprocs=torch.cuda.device_count())``:
        one process per CUDA device runs the function (EasyOCR's trainers); or a spawn under
        a CUDA test (mini-llm's ``if torch.cuda.is_available(): spawn(distributed_training,
        ..., nprocs=args.num_gpus)``, round BM). Every spawn of it must be one of these."""
        spawns = []
        for call in self.tree.index.calls:
            if self.names.resolve(call.func) not in SPAWNS or not call.args:
                continue
            target = call.args[0].value
            if not (call.args[0].keyword is None and isinstance(target, cst.Name) and target.value == function.name.value):
                continue
            nprocs = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "nprocs"), None)
            spawns.append((nprocs is not None and self._counts_cuda_devices(nprocs)) or self.in_device_condition(call))
        return bool(spawns) and all(spawns)

    def _counts_cuda_devices(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, cst.Call):
            return self.names.resolve(expr.func) == "torch.cuda.device_count"
        if isinstance(expr, cst.BinaryOperation):
            return self._counts_cuda_devices(expr.left, depth + 1)
        if isinstance(expr, cst.Name):
            values = self.bindings.plain_values(expr)
            return bool(values) and all(self._counts_cuda_devices(value, depth + 1) for value in values or ())
        if isinstance(expr, cst.Attribute):
            # `opt.ngpus_per_node = torch.cuda.device_count()` (3D-ResNets' main.py): set
            # only to the count, everywhere in the file.
            spelled = dotted_name(expr)
            values = [value for _, value in self._assignments_to(spelled)] if spelled is not None else []
            return bool(values) and all(self._counts_cuda_devices(value, depth + 1) for value in values)
        return False

    def on_path(self, call: cst.Call, node: cst.CSTNode, statement: cst.CSTNode | None) -> bool:
        """Does ``call`` run whenever ``node`` (whose statement is ``statement``) does?"""
        if statement is not None and self.tree.within(call, statement):
            return True
        block = self._unavoidable_block(call)
        return block is not None and self.tree.within(node, block)

    def _unavoidable_block(self, call: cst.Call) -> cst.Module | cst.IndentedBlock | None:
        """The outermost block that cannot go on without running ``call``: out of an ``if``
        whose ``else`` leaves (``if is_xformers_available(): ... else: raise``), and out of
        an ``if`` on a parameter that defaults to True and is never bound again
        (Gen-L-Video's ``enable_xformers_memory_efficient_attention: bool = True``): the
        function's own default path."""
        block = self.tree.running_block(call)
        while isinstance(block, cst.IndentedBlock):
            statement = self.tree.parents.get(block)
            if not isinstance(statement, cst.If) or statement.body is not block:
                break
            if statement.orelse is None:
                if not self._true_by_default(statement.test):
                    break
            elif not (isinstance(statement.orelse, cst.Else) and _leaves(statement.orelse.body)):
                break
            block = self.tree.running_block(statement)
        return block

    def _true_by_default(self, test: cst.BaseExpression) -> bool:
        if not isinstance(test, cst.Name):
            return False
        bindings = self.bindings.of(test)
        return (
            len(bindings) == 1
            and isinstance(bindings[0], Assignment)
            and isinstance(bindings[0].node, cst.Param)
            and isinstance(bindings[0].node.default, cst.Name)
            and bindings[0].node.default.value == "True"
        )

    def _is_cuda(self, expr: cst.BaseExpression) -> bool:
        """A CUDA device (``"cuda"``, ``torch.device("cuda", rank)``), a name bound only to
        one, or an instance attribute its class only sets to one (``device_id=self.device``
        after ``self.device = torch.device(f"cuda:{i}")``: mochi's multi-GPU context)."""
        return is_cuda_value(self.names, self.bindings, expr) or self._is_cuda_attribute(expr)

    @functools.cached_property
    def runs_elsewhere(self) -> bool:
        """Does the file show any intent to run without CUDA: AMP code, or a non-CUDA device
        chosen (`chooses_other_device`)?"""
        for call in self.tree.index.calls:
            qualified = self.names.resolve(call.func)
            if qualified in AMP_CALLABLES or (
                isinstance(call.func, cst.Attribute) and call.func.attr.value == "autocast" and qualified is None
            ):
                return True
        return self.chooses_other_device

    @functools.cached_property
    def chooses_other_device(self) -> bool:
        """Does the file choose a device other than CUDA anywhere: ``"cpu"``/``"mps"``/``"xpu"``
        as a device value or default, or an availability test with a fallback (not an
        assertion, not a guard that exits)?"""
        for call in self.tree.index.calls:
            if self.names.resolve(call.func) in FALLBACK_TESTS and self._is_fallback(call):
                return True
        return any(
            isinstance(node, cst.SimpleString) and self._is_other_device(node) for node in self.tree.parents
        )

    def _is_fallback(self, test: cst.Call) -> bool:
        if self._guards_cuda_query(test):
            return False
        statement = self.tree.statement_of(test)
        if isinstance(statement, cst.SimpleStatementLine) and any(isinstance(small, cst.Assert) for small in statement.body):
            return False
        if isinstance(statement, cst.If) and self.tree.within(test, statement.test):
            links, final = if_chain(statement)
            if len(links) == 1 and self._only_measures(statement):
                return False
            return not (final is None and len(links) == 1 and _leaves(statement.body))
        return True

    def _guards_cuda_query(self, test: cst.Call) -> bool:
        """Does this availability test only make a question about the GPU safe to ask:
        ``torch.cuda.is_available() and torch.cuda.get_device_properties(0).is_integrated``,
        ``torch.cuda.get_device_properties(0).is_integrated if torch.cuda.is_available() else
        False`` (jetson-llm-train, round BM)? The answer is a flag, not a device: no other
        device is chosen there."""
        parent = self.tree.parent(test)
        if isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And) and parent.left is test:
            return self._queries_cuda(parent.right)
        if isinstance(parent, cst.IfExp) and parent.test is test:
            return self._queries_cuda(parent.body) and isinstance(parent.orelse, (cst.Name, cst.Integer)) and dotted_name(parent.orelse) not in DEVICE_NAMES
        return False

    def _queries_cuda(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a question to ``torch.cuda`` (a call of one of its functions, or an
        attribute or comparison of one)?"""
        while isinstance(expr, (cst.Attribute, cst.Comparison)):
            expr = expr.value if isinstance(expr, cst.Attribute) else expr.left
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.names.resolve(expr.func) or ""
        return qualified.startswith("torch.cuda.") and qualified not in FALLBACK_TESTS

    def _only_measures(self, statement: cst.If) -> bool:
        """Does this availability test only decide what to log: its branches call no torch.cuda
        function but memory statistics, and move, choose or name no device (the
        `MetricLogger` that DeiT, ALBEF and BLIP copy adds "max mem" to its log line when
        CUDA is there)?"""
        branches: list[cst.CSTNode] = [statement.body]
        if statement.orelse is not None:
            branches.append(statement.orelse)
        found = _Measures(self.names)
        for branch in branches:
            branch.visit(found)
        return found.only_measures

    def _is_other_device(self, literal: cst.SimpleString) -> bool:
        """Is this ``"cpu"``/``"mps"``/``"xpu"`` literal used as a device: in ``torch.device``,
        as a ``device=`` argument or a device parameter's default, bound to a device-named
        variable, as an ``--device`` option's default, or as one side of a device choice?"""
        value = string_literal(literal)
        if value is None or value.split(":")[0] not in OTHER_DEVICES:
            return False
        parent = self.tree.parent(literal)
        if isinstance(parent, cst.IfExp):
            # `torch.load(path, map_location="cpu" if quant else device)` stages weights in
            # host memory; it chooses no device to run on (LLaMA2-Accessory).
            return not self._is_map_location(parent)
        if isinstance(parent, cst.Arg):
            call = self.tree.parent(parent)
            if parent.keyword is not None and parent.keyword.value in ("device", "device_type"):
                # `model.to_empty(device="cpu")`, `x.to(device="cpu")` stage weights or tensors in
                # host memory, as `map_location` does (a Megatron converter); they choose no
                # device to run on.
                return not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "to_empty"))
            if isinstance(call, cst.Call):
                if self.names.resolve(call.func) in DEVICE_CONSTRUCTORS:
                    # `map_location=torch.device("cpu")` stages weights as the string does
                    # (MambaInLlama's distillation scripts).
                    return not self._is_map_location(call)
                if parent.keyword is not None and parent.keyword.value == "default":
                    return any("device" in (string_literal(arg.value) or "") for arg in call.args)
            return False
        if isinstance(parent, cst.Param):
            return parent.name.value == "device"
        if isinstance(parent, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            return any(last_name(target) in DEVICE_NAMES for target in targets)
        return False

    def _is_map_location(self, value: cst.BaseExpression) -> bool:
        """Is ``value`` the ``map_location=`` argument of a call, itself or as one side of a
        conditional expression there?"""
        holder = self.tree.parent(value)
        if isinstance(holder, cst.IfExp):
            holder = self.tree.parent(holder)
        return isinstance(holder, cst.Arg) and holder.keyword is not None and holder.keyword.value == "map_location"

    def _guarded_under_same_test(self, branch: cst.If) -> bool:
        """An earlier ``if`` of the same block with the same test whose body leaves without
        the device (``if cfg["distributed"]: if torch.cuda.is_available(): ... else: raise``),
        then ``if cfg["distributed"]: init_process_group("nccl")`` (MASTER-pytorch): the
        second ``if`` runs only where the first found the device. Only for a test that
        reads names and subscripts: a call could answer differently the second time."""
        located = self.tree.statement_list(branch)
        if located is None or has_call(branch.test):
            return False
        siblings, index = located
        test = self.source.module.code_for_node(branch.test)
        for earlier in siblings[:index]:
            if (
                isinstance(earlier, cst.If)
                and self.source.module.code_for_node(earlier.test) == test
                and isinstance(earlier.body, cst.IndentedBlock)
                and self._guards(earlier.body.body)
            ):
                return True
        return False

    def _guarded_by_earlier_statement(self, block: cst.IndentedBlock | cst.Module, child: cst.CSTNode) -> bool:
        """``if not torch.cuda.is_available(): raise ...`` or ``assert <device test>`` earlier in the block."""
        return self._guards(_statements_before(block.body, child))

    def _guards(self, statements: Sequence[cst.BaseStatement]) -> bool:
        """Does one of ``statements`` leave (or assert) unless the device is there?"""
        for statement in statements:
            if (
                isinstance(statement, cst.If)
                and statement.orelse is None
                and self.is_device_test(statement.test)
                and _leaves(statement.body)
            ):
                return True
            if isinstance(statement, cst.If) and self._exits_without_device(statement):
                return True
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assert) and self.is_device_test(small.test):
                        return True
        return False


def _is_tensor_device(variable: DeviceVariable, tensors: set[str]) -> bool:
    """``x.device`` of a name the scope uses as a tensor (``x.shape``, ``x.backward()``,
    ``x = batch["x"].cuda()``): it says where the data is, even in CUDA-only code, so it
    is no device variable."""
    expr = variable.expr
    if variable.kind != "attribute" or not isinstance(expr, cst.Attribute):
        return False
    if isinstance(expr.value, cst.Attribute) and expr.value.attr.value in _TENSOR_MEMBERS:
        return True  # `layer.self_attn.q_proj.weight.device`: where a weight lives (2Mamba2Furious)
    return isinstance(expr.value, cst.Name) and expr.value.value in tensors


# Members that hold a tensor on any module or tensor: `.weight`, `.bias`, `.grad`, `.data`.
_TENSOR_MEMBERS = frozenset({"weight", "bias", "grad", "data"})


def _string_key(expr: cst.CSTNode) -> str | None:
    """The key of ``x["amp"]`` (a subscript by one string literal)."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1:
        return None
    index = expr.slice[0].slice
    value = index.value.evaluated_value if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString) else None
    return value if isinstance(value, str) else None


def _is_self_device(target: cst.BaseExpression) -> bool:
    return (
        isinstance(target, cst.Attribute)
        and target.attr.value == "device"
        and isinstance(target.value, cst.Name)
        and target.value.value == "self"
    )




def _self_device_targets(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []

    class _Visitor(ReadOnlyVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if _is_self_device(node.target):
                found.append(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if _is_self_device(node.target):
                found.append(node.target)

    function.body.visit(_Visitor())
    return found


def _walk_tests(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(expr, cst.UnaryOperation):
        yield from _walk_tests(expr.expression)
    elif isinstance(expr, cst.BooleanOperation):
        yield from _walk_tests(expr.left)
        yield from _walk_tests(expr.right)
    else:
        yield expr


def _statements_before(body: Sequence[cst.BaseStatement], child: cst.CSTNode) -> list[cst.BaseStatement]:
    for index, statement in enumerate(body):
        if statement is child:
            return list(body[:index])
    return []


def _leaves(suite: cst.BaseSuite) -> bool:
    """Does this block end by leaving (raise / return / exit)?"""
    if isinstance(suite, cst.SimpleStatementSuite):
        small = suite.body[-1]
    elif isinstance(suite, cst.IndentedBlock) and isinstance(suite.body[-1], cst.SimpleStatementLine):
        small = suite.body[-1].body[-1]
    else:
        return False
    if isinstance(small, (cst.Raise, cst.Return)):
        return True
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        callee = dotted_name(small.value.func) or ""
        # pytest.skip / self.skipTest raise: a test skipped without CUDA leaves too.
        return callee in ("exit", "quit", "sys.exit", "os._exit", "pytest.skip", "pytest.exit", "pytest.fail", "self.skipTest")
    return False


# torch.cuda calls that only read or reset memory statistics: logging them chooses no device.
_MEMORY_STATISTICS = frozenset(
    {
        "torch.cuda.max_memory_allocated",
        "torch.cuda.memory_allocated",
        "torch.cuda.max_memory_reserved",
        "torch.cuda.memory_reserved",
        "torch.cuda.max_memory_cached",
        "torch.cuda.memory_cached",
        "torch.cuda.reset_peak_memory_stats",
        "torch.cuda.reset_max_memory_allocated",
        "torch.cuda.memory_summary",
        "torch.cuda.memory_stats",
    }
)


class _Measures(ReadOnlyVisitor):
    """Collects whether code does nothing with devices but read CUDA memory statistics."""

    def __init__(self, names: NameResolver) -> None:
        self.names = names
        self.only_measures = True

    def visit_Call(self, node: cst.Call) -> bool:
        qualified = self.names.resolve(node.func) or ""
        if qualified.startswith("torch.") and qualified not in _MEMORY_STATISTICS:
            self.only_measures = False
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("cuda", "to", "cpu"):
            self.only_measures = False
        return self.only_measures

    def visit_Name(self, node: cst.Name) -> bool:
        if "device" in node.value.lower() or node.value in ("DataParallel", "DistributedDataParallel"):
            self.only_measures = False
        return False

    def visit_SimpleString(self, node: cst.SimpleString) -> bool:
        value = string_literal(node)
        if value is not None and value.split(":")[0] in OTHER_DEVICES | {"cuda"}:
            self.only_measures = False
        return False


def _falsy_return(value: cst.BaseExpression | None) -> bool:
    """``return False`` / ``return None`` / a bare ``return``, or a tuple of those
    (``return False, None, False``: vqafromscratch's ``resolve_amp`` off CUDA; a
    ``resolve_amp_dtype()`` that returns ``None`` there: neural-operator-jetson-benchmark,
    round BN): nothing of AMP is on."""
    if value is None:
        return True
    if isinstance(value, cst.Name):
        return value.value in ("False", "None")
    if isinstance(value, cst.Tuple):
        return bool(value.elements) and all(isinstance(element, cst.Element) and _falsy_return(element.value) for element in value.elements)
    return False
