"""Training facts: backward calls, losses, optimizer steps, and inference-only code.

Analysis API (``context.analysis.training``, a :class:`TrainingAnalysis`):

- ``backward_calls`` / ``scope_backward_calls(scope)``: tensor backwards.
  ``delegated_backward_calls``: ``accelerator.backward(loss)``-style calls.
- ``optimizer_steps`` / ``scope_optimizer_steps(scope)``: ``opt.step()`` and
  ``scaler.step(opt)``; ``optimizer_names``: dotted names bound to a ``torch.optim``
  construction (``optimizer``, ``self.optimizer``).
- ``loss_names(scope)``: names the scope binds to a loss computation.
- ``trains`` (the file) / ``scope_trains(scope)``; ``in_inference(node)``,
  ``under_no_grad(node)``.
- ``is_accumulation_test(expr)``: ``(step + 1) % accum == 0`` and its variants.

A *tensor backward* is ``<expr>.backward()`` with no positional argument (keywords such
as ``retain_graph=`` allowed), including ``scaler.scale(loss).backward()``, or
``torch.autograd.backward(...)``. ``accelerator.backward(loss)`` takes the loss as an
argument and is not one. A file *trains* when it has a tensor backward or steps an
optimizer; code under ``torch.no_grad()`` / ``torch.inference_mode()``, in functions
decorated with them, or in functions named for evaluation only infers.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field
from pathlib import PurePath

import libcst as cst

from amplint.analysis.bindings import Bindings
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import bool_value, dotted_name, last_name
from amplint.analysis.torch_api import NO_GRAD
from amplint.analysis.tree import Tree
from amplint.engine.context import SourceContext

# Function names that mark evaluation-only code: at the start or after an underscore
# (`evaluate`, `log_validation`, `run_inference`, `save_checkpoint`).
TEST_FILE = re.compile(r"(^test_.*|.*_test)\.(py|ipynb)$")
TEST_DIRECTORIES = frozenset({"tests", "test"})
# ... notebooks too (ready-steady-go's `nbs/00_benchmark.ipynb`, round BF).
# Performance measurements as well (physicsnemo's `measure_perf.py` and its `profiling/`
# tutorial time AMP on synthetic data; round BL).
BENCHMARK_FILE = re.compile(r"(^bench(mark)?s?(_.*)?|.*_bench(mark)?|^perf(_.*)?|.*_perf)\.(py|ipynb)$")
BENCHMARK_DIRECTORIES = frozenset({"benchmarks", "benchmark", "bench", "benchmarking", "profiling"})
# A script named as a numerical check (VMamba's `vmamba_checks.py` compares two models'
# gradients under autocast).
CHECK_FILE = re.compile(r"(^checks?_.*|.*_checks?)\.py$")
# What follows `apex/` in a copy of NVIDIA apex: its package again (a repository checkout)
# or one of its subpackages.
APEX_PARTS = frozenset({"apex", "amp", "contrib", "fp16_utils", "pyprof", "optimizers", "parallel", "normalization", "mlp", "transformer"})
EVALUATION_NAME = re.compile(
    r"(?:^|_)(eval|valid|val|test|infer|inference|predict|sample|export|save|generate)", re.IGNORECASE
)
FUNCTIONAL_LOSSES = frozenset(
    {
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "kl_div",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "huber_loss", "ctc_loss",
        "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss", "multi_margin_loss",
        "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
        "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
    }
)  # fmt: skip


def is_optimizer_name(name: str) -> bool:
    lowered = name.lower()
    return "optim" in lowered or lowered == "opt" or lowered.startswith("opt_") or lowered.endswith("_opt")


def is_scaler_name(name: str) -> bool:
    lowered = name.lower()
    return lowered == "scaler" or lowered.endswith("_scaler") or lowered in ("grad_scaler", "loss_scaler")


def is_accumulation_test(expr: cst.BaseExpression) -> bool:
    """Is ``expr`` a gradient-accumulation test: ``(step + 1) % accum == 0``,
    ``step % accum == 0``, ``not (i + 1) % n`` (possibly ``or``-ed with a last-step test)?"""
    if isinstance(expr, cst.BooleanOperation):
        return is_accumulation_test(expr.left) or is_accumulation_test(expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _is_modulo(expr.expression)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        comparison = expr.comparisons[0]
        sides = (expr.left, comparison.comparator)
        return isinstance(comparison.operator, (cst.Equal, cst.NotEqual)) and any(
            _is_modulo(side) for side in sides
        )
    return False


def _is_modulo(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo)


# Methods that move, cast or switch a module's mode without running it.
# Functions named for running a model without training it (`inference`, `run_inference`,
# `evaluate`, `predict_batch`); "test" and "val" are left out (`value_head`, `test_step`).
_INFERENCE_CALLEE = re.compile(r"(?:\w*_)?(?:inference|infer|evaluate|predict)(?:_\w*)?", re.IGNORECASE)
_NO_GRADIENT_METHODS = frozenset({"eval", "half", "bfloat16", "float", "to", "cuda", "cpu", "type", "requires_grad_"})


@dataclass(eq=False)
class TrainingAnalysis:
    """Training facts of one file (``context.analysis.training``)."""

    source: SourceContext
    tree: Tree
    names: NameResolver
    bindings: Bindings
    _without_grad_cache: dict[str, bool] = field(default_factory=dict, init=False, repr=False)

    @functools.cached_property
    def in_apex_copy(self) -> bool:
        """Is this a file of a copy of NVIDIA apex that the project keeps (VALOR's
        ``apex/apex/contrib/bottleneck/test.py``, ``apex/apex/pyprof/examples/``): the AMP
        library's own kernels, tests and profiling examples, not the project's training?"""
        parts = PurePath(self.source.path.replace("\\", "/")).parts[:-1]
        return any(part == "apex" and following in APEX_PARTS for part, following in itertools.pairwise(parts))

    @functools.cached_property
    def in_test_module(self) -> bool:
        """Is this a test module (``test_*.py``, ``*_test.py``, under ``tests/`` or
        ``test/``)? Tests cast reference tensors and run a few unscaled low-precision steps
        on purpose: they compare numerics, they do not train."""
        path = self._path
        return bool(TEST_FILE.match(path.name)) or bool(TEST_DIRECTORIES & set(path.parts[:-1]))

    @functools.cached_property
    def in_benchmark_module(self) -> bool:
        """Is this a benchmark (``bench.py``, ``benchmark_*.py``, ``*_bench.py``, under
        ``benchmarks/``)?"""
        path = self._path
        return bool(BENCHMARK_FILE.match(path.name)) or bool(BENCHMARK_DIRECTORIES & set(path.parts[:-1]))

    @functools.cached_property
    def in_check_module(self) -> bool:
        """Is this a check script (``check_*.py``, ``*_check.py``, ``*_checks.py``)?"""
        return bool(CHECK_FILE.match(self._path.name))

    @functools.cached_property
    def _path(self) -> PurePath:
        return PurePath(self.source.path.replace("\\", "/"))

    # -- what a call or value is -------------------------------------------------------------

    def is_tensor_backward(self, call: cst.Call) -> bool:
        if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "backward":
            return False
        if self.names.resolve(call.func) == "torch.autograd.backward":
            return True
        # A positional argument means the loss is passed in: accelerator.backward(loss).
        return not any(arg.keyword is None for arg in call.args)

    def is_optimizer_construction(self, expr: cst.BaseExpression | None) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.names.resolve(expr.func) or ""
        parts = qualified.split(".")
        # torch.optim.lr_scheduler.StepLR and swa_utils.SWALR step too, but are not optimizers.
        return (
            qualified.startswith("torch.optim.")
            and parts[-1][:1].isupper()
            and not {"lr_scheduler", "swa_utils"} & set(parts)
        )

    def is_loss_module_construction(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.names.resolve(expr.func) or ""
        return qualified.startswith("torch.nn.") and qualified.endswith("Loss")

    def is_loss_call(self, call: cst.Call) -> bool:
        """A loss computation: a torch loss function, an ``nn.*Loss`` instance, or a call
        whose own name is ``criterion`` or contains ``loss`` (``losses.update`` is not)."""
        qualified = self.names.resolve(call.func) or ""
        if qualified.startswith("torch.nn.functional.") and qualified.split(".")[-1] in FUNCTIONAL_LOSSES:
            return True
        if isinstance(call.func, cst.Name):
            bound = self.bindings.single_value(call.func)
            if bound is not None and self.is_loss_module_construction(bound):
                return True
        if qualified:
            return False  # some other library's function: its name proves nothing
        name = last_name(call.func)
        if name is None:
            return False
        lowered = name.lower()
        return lowered == "criterion" or ("loss" in lowered and not lowered.startswith(("get_", "log", "print")))

    # -- the file's training code -------------------------------------------------------------

    @functools.cached_property
    def delegated_backward_calls(self) -> list[cst.Call]:
        """``accelerator.backward(loss)``, ``optimizer.backward(loss)``: the library runs it."""
        return [
            call
            for call in self.tree.index.calls
            if isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "backward"
            and not self.is_tensor_backward(call)
        ]

    @functools.cached_property
    def frozen_modules(self) -> frozenset[str]:
        """Dotted names of modules the file freezes: ``X.requires_grad_(False)``, or
        ``for p in X.parameters(): p.requires_grad = False``."""
        frozen: set[str] = set()
        for call in self.tree.index.calls:
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "requires_grad_"
                and call.args
                and bool_value(call.args[0].value) is False
            ):
                spelled = dotted_name(call.func.value)
                if spelled:
                    frozen.add(spelled)
        for assign in self.tree.index.assigns:
            target = assign.targets[0].target
            if not (isinstance(target, cst.Attribute) and target.attr.value == "requires_grad"):
                continue
            if bool_value(assign.value) is not False:
                continue
            loop = next((ancestor for ancestor in self.tree.ancestors(assign) if isinstance(ancestor, cst.For)), None)
            if loop is not None and isinstance(loop.iter, cst.Call):
                owner = loop.iter.func
                if isinstance(owner, cst.Attribute) and owner.attr.value in ("parameters", "named_parameters"):
                    spelled = dotted_name(owner.value)
                    if spelled:
                        frozen.add(spelled)
        return frozenset(frozen)

    def is_frozen(self, spelled: str) -> bool:
        """Is the module spelled ``spelled`` frozen: frozen explicitly, or only ever run
        without gradients?"""
        return spelled in self.frozen_modules or self._used_only_without_grad(spelled)

    def _used_only_without_grad(self, spelled: str) -> bool:
        """Is ``spelled`` called at least once, every call under ``torch.no_grad()`` /
        ``torch.inference_mode()``, and otherwise only assigned, moved, cast or put in
        eval mode? No gradient ever reaches it, so it is as frozen as
        ``requires_grad_(False)`` makes it (seed-vc's half-precision wav2vec feature
        extractor). Any other use (passed on, returned, its parameters read) may train it."""
        if spelled not in self._without_grad_cache:
            self._without_grad_cache[spelled] = self._only_without_grad(spelled)
        return self._without_grad_cache[spelled]

    def _in_surgery(self, occurrence: cst.CSTNode, spelled: str) -> bool:
        """Is ``occurrence`` part of an assignment that only rewires the module's own parts
        (seed-vc: ``m.encoder.layers = m.encoder.layers[:n]``)?"""
        statement = self.tree.statement_of(occurrence)
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return False
        assign = statement.body[0]
        return isinstance(assign, cst.Assign) and all(
            (dotted_name(target.target) or "").startswith(spelled + ".") for target in assign.targets
        )

    def _only_without_grad(self, spelled: str) -> bool:
        called = False
        for occurrence in self.occurrences(spelled):
            parent = self.tree.parent(occurrence)
            if isinstance(parent, cst.AssignTarget):
                continue
            if isinstance(parent, cst.Attribute) and parent.value is occurrence:
                call = self.tree.parent(parent)
                if not (isinstance(call, cst.Call) and call.func is parent):
                    if self._in_surgery(occurrence, spelled):
                        continue
                    return False
                if parent.attr.value in _NO_GRADIENT_METHODS:
                    continue
                if parent.attr.value != "forward":
                    return False
            elif isinstance(parent, cst.Call) and parent.func is occurrence:
                call = parent
            elif isinstance(parent, cst.Arg) and self._is_inference_call(self.tree.parent(parent)):
                # `caption = inference(image, model_vlm)`: a function named for inference runs
                # it, wherever that function lives (OSEDiff's RAM tagger, round AU).
                called = True
                continue
            else:
                return False
            if not self.under_no_grad(call):
                return False
            called = True
        return called

    def _is_inference_call(self, node: cst.CSTNode | None) -> bool:
        if not isinstance(node, cst.Call):
            return False
        callee = dotted_name(node.func)
        return callee is not None and _INFERENCE_CALLEE.fullmatch(callee.rsplit(".", 1)[-1]) is not None

    def occurrences(self, spelled: str) -> list[cst.BaseExpression]:
        """Every read or write of the dotted name ``spelled`` in the file, in no set order."""
        return self._occurrences.get(spelled, [])

    @functools.cached_property
    def _occurrences(self) -> dict[str, list[cst.BaseExpression]]:
        """Every read or write of each dotted name (``model``, ``self.encoder``) in the file."""
        found: dict[str, list[cst.BaseExpression]] = {}
        for node, parent in self.tree.parents.items():
            if isinstance(node, cst.Name) and isinstance(parent, cst.Attribute) and parent.attr is node:
                continue  # the `attr` of `x.attr`, not a name of its own
            if isinstance(node, (cst.Name, cst.Attribute)):
                spelled = dotted_name(node)
                if spelled is not None:
                    found.setdefault(spelled, []).append(node)
        return found

    @functools.cached_property
    def optimizer_names(self) -> frozenset[str]:
        """Dotted targets assigned a ``torch.optim`` construction (``self.optimizer``)."""
        return self.bindings.assigned_targets(self.is_optimizer_construction)

    def loss_names(self, scope: cst.CSTNode) -> frozenset[str]:
        """Names ``scope`` binds to a loss computation (``loss = criterion(out, y)``)."""
        names = set()
        for assign in self.tree.index.assigns:
            if not isinstance(assign.value, cst.Call) or not self.is_loss_call(assign.value):
                continue
            if self.tree.scope_of(assign) is not scope:
                continue
            for target in assign.targets:
                if isinstance(target.target, cst.Name):
                    names.add(target.target.value)
        return frozenset(names)

    def scope_optimizer_steps(self, scope: cst.CSTNode) -> list[cst.Call]:
        return [call for call in self.optimizer_steps if self.tree.scope_of(call) is scope]

    def scope_trains(self, scope: cst.CSTNode) -> bool:
        """Does ``scope`` itself run a tensor backward or step an optimizer?"""
        return bool(self.scope_backward_calls(scope) or self.scope_optimizer_steps(scope))

    @functools.cached_property
    def backward_calls(self) -> list[cst.Call]:
        return [call for call in self.tree.index.calls if self.is_tensor_backward(call)]

    @functools.cached_property
    def optimizer_steps(self) -> list[cst.Call]:
        """``opt.step()`` on an optimizer-like receiver, and ``scaler.step(opt)``."""
        steps = []
        for call in self.tree.index.calls:
            if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "step":
                continue
            receiver = call.func.value
            name = last_name(receiver) or ""
            if call.args:
                if is_scaler_name(name):
                    steps.append(call)
            elif is_optimizer_name(name) or (
                isinstance(receiver, cst.Name)
                and self._may_construct_optimizers
                and self.is_optimizer_construction(self.bindings.single_value(receiver))
            ):
                steps.append(call)
        return steps

    @functools.cached_property
    def _may_construct_optimizers(self) -> bool:
        """A ``torch.optim`` construction needs the word in the text; without it, no
        receiver's binding is worth resolving (a scope analysis per file)."""
        return "optim" in self.source.text

    @functools.cached_property
    def trains(self) -> bool:
        return bool(self.backward_calls) or bool(self.optimizer_steps)

    def scope_backward_calls(self, scope: cst.CSTNode) -> list[cst.Call]:
        return [call for call in self.backward_calls if self.tree.scope_of(call) is scope]

    def in_inference(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in code that only infers (no_grad / inference_mode / eval-named)?"""
        return self.under_no_grad(node) or any(
            isinstance(ancestor, cst.FunctionDef) and EVALUATION_NAME.search(ancestor.name.value)
            for ancestor in self.tree.ancestors(node)
        )

    def body_runs_without_grad(self, statement: cst.With) -> bool:
        """Does the body of ``statement`` run with gradients off: under ``no_grad`` around
        it, with a ``no_grad`` item of its own (``with autocast(), torch.no_grad():``, in
        either order), or made only of ``with torch.no_grad():`` blocks?"""
        if self.under_no_grad(statement) or self._opens_no_grad(statement):
            return True
        body = statement.body
        return (
            isinstance(body, cst.IndentedBlock)
            and bool(body.body)
            and all(isinstance(inner, cst.With) and self._opens_no_grad(inner) for inner in body.body)
        )

    def _opens_no_grad(self, statement: cst.With) -> bool:
        return any(isinstance(item.item, cst.Call) and self.names.resolve(item.item.func) in NO_GRAD for item in statement.items)

    def under_no_grad(self, node: cst.CSTNode) -> bool:
        """Does ``node`` run with gradients off: inside ``with torch.no_grad()`` /
        ``torch.inference_mode()``, or in a function decorated with them?"""
        for child, current in self.tree.ancestry(node):
            if isinstance(current, cst.With) and child is current.body:
                for item in current.items:
                    if isinstance(item.item, cst.Call) and self.names.resolve(item.item.func) in NO_GRAD:
                        return True
            if isinstance(current, cst.FunctionDef):
                for decorator in current.decorators:
                    target = decorator.decorator
                    target = target.func if isinstance(target, cst.Call) else target
                    if self.names.resolve(target) in NO_GRAD:
                        return True
        return False
