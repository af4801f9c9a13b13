"""Training facts: backward calls, losses, optimizer steps, and inference-only code.

A *tensor backward* is ``<expr>.backward()`` with no positional argument (keywords such
as ``retain_graph=`` allowed), including ``scaler.scale(loss).backward()``, or
``torch.autograd.backward(...)``. ``accelerator.backward(loss)`` takes the loss as an
argument and is not one. A file *trains* when it has a tensor backward or steps an
optimizer; code under ``torch.no_grad()`` / ``torch.inference_mode()``, in functions
decorated with them, or in functions named for evaluation only infers.
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from amplint.analysis.names import last_name
from amplint.analysis.scopes import enclosing_scope, index_of
from amplint.analysis.values import single_binding
from amplint.engine.context import FileContext

NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"})
EVALUATION_NAME = re.compile(r"^_*(eval|valid|test|infer|predict|sample|export|save)", re.IGNORECASE)
FUNCTIONAL_LOSSES = frozenset(
    {
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "kl_div",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "huber_loss", "ctc_loss",
        "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss", "multi_margin_loss",
        "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
        "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
    }
)  # fmt: skip


def is_tensor_backward(context: FileContext, call: cst.Call) -> bool:
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "backward":
        return False
    if context.names.resolve(call.func) == "torch.autograd.backward":
        return True
    # A positional argument means the loss is passed in: accelerator.backward(loss).
    return not any(arg.keyword is None for arg in call.args)


def is_optimizer_name(name: str) -> bool:
    lowered = name.lower()
    return "optim" in lowered or lowered == "opt" or lowered.startswith("opt_") or lowered.endswith("_opt")


def is_scaler_name(name: str) -> bool:
    lowered = name.lower()
    return lowered == "scaler" or lowered.endswith("_scaler") or lowered in ("grad_scaler", "loss_scaler")


def is_optimizer_construction(context: FileContext, expr: cst.BaseExpression | None) -> bool:
    if not isinstance(expr, cst.Call):
        return False
    qualified = context.names.resolve(expr.func) or ""
    return qualified.startswith("torch.optim.") and qualified.split(".")[-1][:1].isupper()


def is_loss_module_construction(context: FileContext, expr: cst.BaseExpression) -> bool:
    if not isinstance(expr, cst.Call):
        return False
    qualified = context.names.resolve(expr.func) or ""
    return qualified.startswith("torch.nn.") and qualified.endswith("Loss")


def is_loss_call(context: FileContext, call: cst.Call) -> bool:
    """A loss computation: a torch loss function, an ``nn.*Loss`` instance, or a call
    whose own name is ``criterion`` or contains ``loss`` (``losses.update`` is not)."""
    qualified = context.names.resolve(call.func) or ""
    if qualified.startswith("torch.nn.functional.") and qualified.split(".")[-1] in FUNCTIONAL_LOSSES:
        return True
    if isinstance(call.func, cst.Name):
        bound = single_binding(context, call.func)
        if bound is not None and is_loss_module_construction(context, bound):
            return True
    if qualified:
        return False  # some other library's function: its name proves nothing
    name = last_name(call.func)
    if name is None:
        return False
    lowered = name.lower()
    return lowered == "criterion" or ("loss" in lowered and not lowered.startswith(("get_", "log", "print")))


class TrainingAnalysis:
    def __init__(self, context: FileContext) -> None:
        self.context = context

    @functools.cached_property
    def backward_calls(self) -> list[cst.Call]:
        return [call for call in index_of(self.context).calls if is_tensor_backward(self.context, call)]

    @functools.cached_property
    def optimizer_steps(self) -> list[cst.Call]:
        """``opt.step()`` on an optimizer-like receiver, and ``scaler.step(opt)``."""
        steps = []
        for call in index_of(self.context).calls:
            if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "step":
                continue
            receiver = call.func.value
            name = last_name(receiver) or ""
            if call.args:
                if is_scaler_name(name):
                    steps.append(call)
            elif is_optimizer_name(name) or (
                isinstance(receiver, cst.Name)
                and is_optimizer_construction(self.context, single_binding(self.context, receiver))
            ):
                steps.append(call)
        return steps

    @functools.cached_property
    def trains(self) -> bool:
        return bool(self.backward_calls) or bool(self.optimizer_steps)

    def scope_backward_calls(self, scope: cst.CSTNode) -> list[cst.Call]:
        return [call for call in self.backward_calls if enclosing_scope(self.context, call) is scope]

    def in_inference(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in code that only infers (no_grad / inference_mode / eval-named)?"""
        from amplint.analysis.compat import parents

        parent_of = parents(self.context)
        child = node
        current = parent_of.get(node)
        while current is not None:
            if isinstance(current, cst.With) and child is current.body:
                for item in current.items:
                    if isinstance(item.item, cst.Call) and self.context.names.resolve(item.item.func) in NO_GRAD:
                        return True
            if isinstance(current, cst.FunctionDef):
                if EVALUATION_NAME.match(current.name.value):
                    return True
                for decorator in current.decorators:
                    target = decorator.decorator
                    target = target.func if isinstance(target, cst.Call) else target
                    if self.context.names.resolve(target) in NO_GRAD:
                        return True
            child, current = current, parent_of.get(current)
        return False
