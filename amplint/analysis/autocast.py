"""Autocast blocks: which statements run under autocast, on which device, in which dtype.

Analysis API (``context.analysis.autocast``):

- ``autocast_use(expr)`` classifies an expression used as a ``with`` item: an
  ``AutocastUse`` (device types, dtypes, disabled?, the call, the conditional that
  selects it) or None when it is not an autocast.
- ``blocks`` lists every ``AutocastBlock`` (a ``with`` statement item that is an
  autocast) in source order; ``blocks_in(scope)`` those of one function or the module.
- ``enclosing(node)`` is the innermost block whose *body* contains ``node``.

An autocast is any spelling of ``torch.autocast`` / ``torch.amp.autocast`` / the
deprecated ``torch.{cuda,cpu}.amp.autocast``, any ``<obj>.autocast(...)`` method
(Accelerate, Fabric: device and dtype unknown), a name bound once in scope to one of
these or to ``functools.partial`` of one (then called), or a conditional expression with
one as a branch (``nullcontext() if device_type == "cpu" else torch.amp.autocast(...)``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from amplint.analysis.scopes import enclosing_scope, index_of
from amplint.analysis.values import bool_value, dtype_values, single_binding, string_values
from amplint.engine.context import FileContext

AUTOCAST_CALLABLES = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.autocast_mode.autocast",
        "torch.cpu.amp.autocast",
        "torch.cpu.amp.autocast_mode.autocast",
    }
)
# The device type the deprecated spellings imply.
IMPLIED_DEVICE = {
    "torch.cuda.amp.autocast": "cuda",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
    "torch.cpu.amp.autocast_mode.autocast": "cpu",
}
# torch.get_autocast_dtype(device) when nothing was set (verified on torch 2.13).
DEFAULT_DTYPE = {"cuda": "float16", "cpu": "bfloat16", "mps": "float16", "xpu": "bfloat16"}
# New-style positional order: autocast(device_type, dtype, enabled, cache_enabled).
NEW_ORDER = ("device_type", "dtype", "enabled", "cache_enabled")
OLD_ORDER = ("enabled", "dtype", "cache_enabled")


@dataclass(frozen=True)
class AutocastUse:
    call: cst.Call | None
    device_types: frozenset[str] | None  # None: unknown
    dtypes: frozenset[str] | None  # None: unknown
    disabled: bool  # enabled=False literally
    device_expr: cst.BaseExpression | None = None
    dtype_expr: cst.BaseExpression | None = None
    enabled_expr: cst.BaseExpression | None = None
    conditional: cst.IfExp | None = None  # `a if test else b` selecting it
    deprecated: bool = False
    method: bool = False  # <obj>.autocast(...): not torch's own


@dataclass(frozen=True)
class AutocastBlock:
    statement: cst.With
    item: cst.WithItem
    use: AutocastUse

    @property
    def disabled(self) -> bool:
        return self.use.disabled


def call_arguments(call: cst.Call, order: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    """Map a call's arguments to parameter names; None if it unpacks ``*args``/``**kw``."""
    mapped: dict[str, cst.BaseExpression] = {}
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if position >= len(order):
                return None
            mapped[order[position]] = arg.value
            position += 1
        else:
            mapped[arg.keyword.value] = arg.value
    return mapped


class AutocastAnalysis:
    def __init__(self, context: FileContext) -> None:
        self.context = context

    # -- classification -------------------------------------------------------------------

    def autocast_use(self, expr: cst.BaseExpression, depth: int = 0) -> AutocastUse | None:
        if depth > 4:
            return None
        if isinstance(expr, cst.IfExp):
            for branch in (expr.body, expr.orelse):
                use = self.autocast_use(branch, depth + 1)
                if use is not None:
                    return AutocastUse(**{**use.__dict__, "conditional": expr})
            return None
        if isinstance(expr, cst.Name):
            bound = single_binding(self.context, expr)
            return self.autocast_use(bound, depth + 1) if bound is not None else None
        if not isinstance(expr, cst.Call):
            return None
        return self._from_call(expr, depth)

    def _from_call(self, call: cst.Call, depth: int) -> AutocastUse | None:
        qualified = self.context.names.resolve(call.func)
        if qualified in AUTOCAST_CALLABLES:
            return self._torch_autocast(call, qualified or "", call)
        if qualified == "functools.partial" or (
            isinstance(call.func, cst.Name) and call.func.value == "partial" and qualified is None
        ):
            return None  # a partial object itself is not a context manager
        if isinstance(call.func, cst.Name):
            # ctx = functools.partial(torch.autocast, "cuda", dtype=...); with ctx():
            bound = single_binding(self.context, call.func)
            if isinstance(bound, cst.Call) and self.context.names.resolve(bound.func) == "functools.partial":
                if bound.args and self.context.names.resolve(bound.args[0].value) in AUTOCAST_CALLABLES:
                    inner = self.context.names.resolve(bound.args[0].value) or ""
                    merged = bound.with_changes(args=(*bound.args[1:], *call.args))
                    return self._torch_autocast(merged, inner, call)
            return None
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "autocast" and qualified is None:
            return AutocastUse(call=call, device_types=None, dtypes=None, disabled=False, method=True)
        return None

    def _torch_autocast(self, call: cst.Call, qualified: str, reported: cst.Call) -> AutocastUse:
        implied = IMPLIED_DEVICE.get(qualified)
        arguments = call_arguments(call, OLD_ORDER if implied else NEW_ORDER)
        if arguments is None:
            return AutocastUse(call=reported, device_types=None, dtypes=None, disabled=False, deprecated=bool(implied))
        device_expr = arguments.get("device_type")
        devices: frozenset[str] | None
        if implied:
            devices = frozenset({implied})
        elif device_expr is not None:
            devices = string_values(self.context, device_expr)
        else:
            devices = None
        dtype_expr = arguments.get("dtype")
        dtypes: frozenset[str] | None
        if dtype_expr is not None and not (isinstance(dtype_expr, cst.Name) and dtype_expr.value == "None"):
            dtypes = dtype_values(self.context, dtype_expr)
        elif devices is not None and all(device in DEFAULT_DTYPE for device in devices):
            dtypes = frozenset(DEFAULT_DTYPE[device] for device in devices)
        else:
            dtypes = None
        enabled_expr = arguments.get("enabled")
        disabled = enabled_expr is not None and bool_value(enabled_expr) is False
        return AutocastUse(
            call=reported,
            device_types=devices,
            dtypes=dtypes,
            disabled=disabled,
            device_expr=device_expr,
            dtype_expr=dtype_expr,
            enabled_expr=enabled_expr,
            deprecated=bool(implied),
        )

    # -- blocks ----------------------------------------------------------------------------

    @functools.cached_property
    def blocks(self) -> list[AutocastBlock]:
        found: list[AutocastBlock] = []
        for statement in index_of(self.context).withs:
            for item in statement.items:
                use = self.autocast_use(item.item)
                if use is not None:
                    found.append(AutocastBlock(statement, item, use))
        return found

    @functools.cached_property
    def _by_statement(self) -> dict[cst.With, list[AutocastBlock]]:
        table: dict[cst.With, list[AutocastBlock]] = {}
        for block in self.blocks:
            table.setdefault(block.statement, []).append(block)
        return table

    def blocks_of(self, statement: cst.With) -> list[AutocastBlock]:
        return self._by_statement.get(statement, [])

    def blocks_in(self, scope: cst.CSTNode) -> list[AutocastBlock]:
        return [block for block in self.blocks if enclosing_scope(self.context, block.statement) is scope]

    def enclosing(self, node: cst.CSTNode) -> AutocastBlock | None:
        """The innermost autocast block whose body contains ``node``."""
        from amplint.analysis.compat import parents

        parent_of = parents(self.context)
        child = node
        current = parent_of.get(node)
        while current is not None:
            if isinstance(current, cst.With) and child is current.body:
                blocks = self.blocks_of(current)
                if blocks:
                    return blocks[-1]
            if isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None  # a function defined under autocast does not run there
            child, current = current, parent_of.get(current)
        return None

    def in_disabled_region(self, node: cst.CSTNode) -> bool:
        block = self.enclosing(node)
        return block is not None and block.disabled
