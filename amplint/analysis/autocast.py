"""Autocast blocks: which statements run under autocast, on which device, in which dtype.

Analysis API (``context.analysis.autocast``, an :class:`AutocastAnalysis`):

- ``blocks``: every :class:`AutocastBlock` of the file in source order. A block is one
  ``with`` item that is an autocast; ``block.statement`` is the ``with`` statement,
  ``block.item`` the item, ``block.use`` what is known about it, ``block.disabled``
  whether it is an autocast-disabled region (``enabled=False`` literally).
- ``blocks_in(scope)``: the blocks whose ``with`` statement belongs to ``scope`` (a
  ``FunctionDef``, or the ``Module`` for module-level code; nested functions are their
  own scopes). ``blocks_of(with_statement)``: the blocks of one ``with`` statement.
- ``enclosing(node)``: the innermost block whose *body* contains ``node`` (a function
  or class defined under autocast does not run there), or None.
  ``in_disabled_region(node)``: is that block an autocast-disabled region?
- ``autocast_use(expr)``: classify any expression as a ``with`` item: an
  :class:`AutocastUse` or None. ``use.call`` is the autocast call node (for a
  conditional, the call in its autocast branch; for ``functools.partial``, the call of
  the partial object), ``use.device_expr`` / ``use.dtype_expr`` / ``use.enabled_expr``
  the argument expressions (positional or keyword, old or new parameter order),
  ``use.device_types`` / ``use.dtypes`` the statically known values as sets of strings
  (``"cuda"``, ``"float16"``, ``"bfloat16"``) or None when unknown, ``use.conditional``
  the ``a if test else b`` that selects it, ``use.deprecated`` for
  ``torch.{cuda,cpu}.amp.autocast``, ``use.method`` for ``<obj>.autocast(...)``.

An autocast (RULES.md "An autocast block") is a call of any spelling of
``torch.autocast`` / ``torch.amp.autocast`` / the deprecated
``torch.{cuda,cpu}.amp.autocast``, or of ``amplint.runtime.autocast`` (which fixes
rewrite code to use: without a dtype it may run in bfloat16 or float16); any ``<obj>.autocast(...)`` method (Accelerate,
Fabric: device and dtype unknown); a name bound in the same function or module to one of
these, or to ``functools.partial`` of one (then called); a conditional expression with
one of these as a branch (``nullcontext() if device_type == "cpu" else
torch.amp.autocast(...)``), written directly as the ``with`` item or bound to a name.
A lookup in a literal dict of autocasts (``{"bf16": autocast(dtype=torch.bfloat16), "fp16":
autocast(dtype=torch.float16)}[args.precision]``, or such a dict bound once to a name) is
an autocast whose dtypes are the dict's. A name bound several times counts when every binding is an autocast or a no-op context
(``nullcontext()``, ``contextlib.suppress``): ``amp_autocast = suppress`` then
``amp_autocast = partial(torch.autocast, ...)`` on one branch is timm's spelling of
that conditional.

Device type and dtype are known when given as literals, or as names bound once in
scope to literals, to a conditional of literals, or to a literal-valued dict lookup. A
missing dtype is the device's default (``torch.get_autocast_dtype``, verified on torch
2.13: float16 on cuda, mps, xpu, mtia; bfloat16 on cpu, hpu, xla). When several
autocasts may be selected, the sets are their union (unknown if any is unknown).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import libcst as cst

from amplint.analysis import torch_api
from amplint.analysis.bindings import Bindings
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import bool_value, call_arguments, is_none
from amplint.analysis.tree import ScopeNode, Tree
from amplint.analysis.values import Values
from amplint.analysis.wrappers import (
    NO_OP_CONTEXTS,
    PARTIALS,
    AutocastWrappers,
    FoundWrapper,
    Source,
    bind,
    default_of,
)

_MAX_DEPTH = 6

T = TypeVar("T")


@dataclass(frozen=True)
class AutocastUse:
    """What is statically known about one autocast used as a ``with`` item."""

    call: cst.Call | None
    device_types: frozenset[str] | None  # None: unknown
    dtypes: frozenset[str] | None  # None: unknown
    disabled: bool  # enabled=False literally (every selectable autocast)
    device_expr: cst.BaseExpression | None = None
    dtype_expr: cst.BaseExpression | None = None
    enabled_expr: cst.BaseExpression | None = None
    conditional: cst.IfExp | None = None  # `a if test else b` selecting it
    deprecated: bool = False  # torch.{cuda,cpu}.amp.autocast
    method: bool = False  # <obj>.autocast(...): not torch's own
    runtime: bool = False  # amplint.runtime.autocast: the device's dtype unless one is given
    # When one of several autocasts is selected (both branches of a conditional, or
    # several bindings of a name): each of them; the fields above are their union.
    alternatives: tuple[AutocastUse, ...] = ()
    # A project function made it (``amplint.analysis.wrappers``): "`get_autocast` (train/precision.py:6)".
    via: str | None = None

    @property
    def dtype_by_device(self) -> bool:
        """Is the dtype each device's default (torch's autocast given no dtype, on known
        devices)? Alternatives: each of them that may run enabled."""
        if self.alternatives:
            return all(one.dtype_by_device for one in self.alternatives if not one.disabled)
        return not (self.runtime or self.method or self.via) and self.dtype_expr is None and self.device_types is not None

    @property
    def bfloat16_only_off_cuda(self) -> bool:
        """bfloat16 only as the default of the device chosen instead of CUDA
        (`autocast("cuda" if available else "cpu")`); not a CPU-only autocast."""
        return self.dtype_by_device and self.device_types is not None and "cuda" in self.device_types

    @property
    def float16_only_on_cuda(self) -> bool:
        """float16 only on CUDA: every other device it may choose defaults to bfloat16, so a
        GradScaler matters only there."""
        return (
            self.dtype_by_device
            and self.device_types is not None
            and all(torch_api.DEFAULT_DTYPE.get(device) == "bfloat16" for device in self.device_types - {"cuda"})
        )

    @property
    def origin(self) -> str:
        """What a message adds about where the autocast comes from (empty when written here)."""
        return f" (the autocast comes from {self.via})" if self.via is not None else ""


@dataclass(frozen=True)
class AutocastBlock:
    """One ``with`` item that is an autocast; its body is ``statement.body``."""

    statement: cst.With
    item: cst.WithItem
    use: AutocastUse

    @property
    def disabled(self) -> bool:
        return self.use.disabled




def _union(sets: Sequence[frozenset[str] | None]) -> frozenset[str] | None:
    if any(values is None for values in sets):
        return None
    return frozenset().union(*sets)  # type: ignore[arg-type]


def merge(uses: Sequence[AutocastUse]) -> AutocastUse:
    """One use standing for whichever of ``uses`` runs."""
    if len(uses) == 1:
        return uses[0]
    first = uses[0]
    return replace(
        first,
        device_types=_union([use.device_types for use in uses]),
        dtypes=_union([use.dtypes for use in uses]),
        disabled=all(use.disabled for use in uses),
        deprecated=any(use.deprecated for use in uses),
        method=all(use.method for use in uses),
        alternatives=tuple(uses),
    )


class _NoOp:
    """Marks a no-op context (or context factory) among the alternatives."""


_NO_OP = _NoOp()


@dataclass(eq=False)
class AutocastAnalysis:
    """Autocast blocks of one file (``context.analysis.autocast``)."""

    tree: Tree
    names: NameResolver
    bindings: Bindings
    values: Values
    wrappers: AutocastWrappers

    # -- classification -------------------------------------------------------------------

    def autocast_use(self, expr: cst.BaseExpression) -> AutocastUse | None:
        """What ``expr``, used as a ``with`` item, is: an autocast, or None."""
        found = self._context_value(expr, 0)
        return found if isinstance(found, AutocastUse) else None

    def _context_value(self, expr: cst.BaseExpression, depth: int) -> AutocastUse | _NoOp | None:
        """A context-manager value: an autocast, a no-op context, or None (anything else)."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.IfExp):
            return self._conditional(expr, depth)
        if isinstance(expr, cst.Name):
            return self._from_bindings(expr, depth)
        if isinstance(expr, cst.Subscript):
            table = self.bindings.single_value(expr.value) if isinstance(expr.value, cst.Name) else expr.value
            return self._lookup(table, depth) if isinstance(table, cst.Dict) else None
        if not isinstance(expr, cst.Call):
            return None
        if self.names.resolve(expr.func) in NO_OP_CONTEXTS:
            return _NO_OP
        factory = self._factory(expr.func, depth + 1)
        if isinstance(factory, _NoOp):
            return _NO_OP
        if factory is not None:
            return factory(expr)
        wrapper = self.wrappers.named_by(expr.func)
        if wrapper is not None and wrapper.record["kind"] == "context":
            return self.wrapped_use(wrapper, expr, None)
        if (
            isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "autocast"
            and self.names.resolve(expr.func) is None
        ):
            return AutocastUse(call=expr, device_types=None, dtypes=None, disabled=False, method=True)
        return None

    def _factory(self, func: cst.BaseExpression, depth: int) -> _Factory | _NoOp | None:
        """What calling ``func`` makes: a function from the call to its autocast use."""
        if depth > _MAX_DEPTH:
            return None
        qualified = self.names.resolve(func)
        if qualified in torch_api.AUTOCASTS or qualified in torch_api.RUNTIME_AUTOCASTS:
            return _Factory(self, qualified or "", ())
        if qualified in NO_OP_CONTEXTS:
            return _NO_OP
        if isinstance(func, cst.Call) and self.names.resolve(func.func) in PARTIALS:
            # functools.partial(torch.autocast, "cuda", dtype=...)
            if not func.args or func.args[0].keyword is not None or func.args[0].star:
                return None
            inner = self.names.resolve(func.args[0].value)
            if inner in torch_api.AUTOCASTS:
                return _Factory(self, inner or "", tuple(func.args[1:]))
            return None
        if isinstance(func, cst.Call):
            wrapper = self.wrappers.named_by(func.func)
            if wrapper is not None and wrapper.record["kind"] == "factory":
                return _WrapperFactory(self, wrapper, func)
        if isinstance(func, cst.IfExp):
            return self._conditional_factory(func, depth)
        if isinstance(func, cst.Name):
            return self._factory_from_bindings(func, depth)
        return None

    def _conditional(self, expr: cst.IfExp, depth: int) -> AutocastUse | _NoOp | None:
        found = [self._context_value(branch, depth + 1) for branch in (expr.body, expr.orelse)]
        uses = [value for value in found if isinstance(value, AutocastUse)]
        if not uses:
            return _NO_OP if all(isinstance(value, _NoOp) for value in found) else None
        # One autocast branch is enough, whatever the other is (RULES.md).
        return replace(merge(uses), conditional=expr)

    def _lookup(self, table: cst.Dict, depth: int) -> AutocastUse | _NoOp | None:
        """``{"bf16": autocast(dtype=torch.bfloat16), "fp16": ...}[precision]``: any of the
        dict's contexts may be chosen, so the use is their union."""
        found: list[AutocastUse | _NoOp | None] = [
            self._context_value(element.value, depth + 1) if isinstance(element, cst.DictElement) else None
            for element in table.elements
        ]
        if not found or any(value is None for value in found):
            return None
        uses = [value for value in found if isinstance(value, AutocastUse)]
        return merge(uses) if uses else _NO_OP

    def _bound(self, name: cst.Name, depth: int, classify: Callable[[cst.BaseExpression, int], T | None]) -> list[T] | None:
        """What each binding of ``name`` is, when every binding is a plain assignment that
        ``classify`` recognises; None when one is bound to something else on some path."""
        values = self.bindings.plain_values(name)
        if values is None:
            return None
        found = [classify(value, depth + 1) for value in values]
        if any(value is None for value in found):
            return None
        return [value for value in found if value is not None]

    def _from_bindings(self, name: cst.Name, depth: int) -> AutocastUse | _NoOp | None:
        found = self._bound(name, depth, self._context_value)
        if found is None:
            return None
        uses = [value for value in found if isinstance(value, AutocastUse)]
        return merge(uses) if uses else _NO_OP

    def _conditional_factory(self, func: cst.IfExp, depth: int) -> _Factory | _NoOp | None:
        found = [self._factory(branch, depth + 1) for branch in (func.body, func.orelse)]
        if any(value is None for value in found):
            return None
        factories = [value for value in found if isinstance(value, _Factory)]
        if not factories:
            return _NO_OP
        return _Choice(self, factories, func)

    def _factory_from_bindings(self, name: cst.Name, depth: int) -> _Factory | _NoOp | None:
        found = self._bound(name, depth, self._factory)
        if found is None:
            return None
        factories = [value for value in found if isinstance(value, _Factory)]
        if not factories:
            return _NO_OP
        return factories[0] if len(factories) == 1 and len(found) == 1 else _Choice(self, factories, None)

    def runtime_autocast(self, call: cst.Call, reported: cst.Call) -> AutocastUse:
        """``amplint.runtime.autocast(device, dtype, enabled, cache_enabled)``: without a
        dtype it runs in the device's (bfloat16 where native, float16 otherwise)."""
        arguments = call_arguments(call, torch_api.RUNTIME_AUTOCAST_ORDER)
        if arguments is None:
            return AutocastUse(call=reported, device_types=None, dtypes=torch_api.RUNTIME_DTYPES, disabled=False, runtime=True)
        device_expr, dtype_expr, enabled_expr = (arguments.get(key) for key in ("device", "dtype", "enabled"))
        found = self.values.string_values(device_expr) if device_expr is not None else None
        devices = frozenset(value.split(":")[0] for value in found) if found is not None else None
        dtypes = self.values.dtype_values(dtype_expr) if dtype_expr is not None else torch_api.RUNTIME_DTYPES
        return AutocastUse(
            call=reported,
            device_types=devices,
            dtypes=dtypes,
            disabled=enabled_expr is not None and bool_value(enabled_expr) is False,
            device_expr=device_expr,
            dtype_expr=dtype_expr,
            enabled_expr=enabled_expr,
            runtime=True,
        )

    def torch_autocast(self, call: cst.Call, qualified: str, reported: cst.Call) -> AutocastUse:
        """The use of torch's autocast ``qualified`` called with ``call``'s arguments."""
        if qualified in torch_api.RUNTIME_AUTOCASTS:
            return self.runtime_autocast(call, reported)
        found = torch_api.symbol(qualified)
        implied = found.implied_device if found is not None else None
        arguments = call_arguments(call, torch_api.DEPRECATED_AUTOCAST_ORDER if implied else torch_api.AUTOCAST_ORDER)
        if arguments is None:
            return AutocastUse(
                call=reported,
                device_types=frozenset({implied}) if implied else None,
                dtypes=None,
                disabled=False,
                deprecated=bool(implied),
            )
        device_expr = arguments.get("device_type")
        devices: frozenset[str] | None
        if implied:
            devices = frozenset({implied})
        elif device_expr is not None:
            devices = self.values.string_values(device_expr)
        else:
            devices = None
        dtype_expr = arguments.get("dtype")
        dtypes: frozenset[str] | None
        if dtype_expr is not None and not (isinstance(dtype_expr, cst.Name) and dtype_expr.value == "None"):
            dtypes = self.values.dtype_values(dtype_expr)
        elif devices is not None and all(device in torch_api.DEFAULT_DTYPE for device in devices):
            dtypes = frozenset(torch_api.DEFAULT_DTYPE[device] for device in devices)
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

    def wrapped_use(self, wrapper: FoundWrapper, making: cst.Call, final: cst.Call | None) -> AutocastUse:
        """The autocast a project wrapper makes: ``making`` calls the wrapper, and for a
        factory wrapper ``final`` calls what it returned (``autocast()``)."""
        reported = final if final is not None else making
        unknown = AutocastUse(call=reported, device_types=None, dtypes=None, disabled=False, via=wrapper.description)
        bound = bind(wrapper, making)
        if bound is None or (final is not None and any(arg.star or arg.keyword is None for arg in final.args)):
            return unknown
        by_param, extra = bound
        if final is not None:
            extra = {**extra, **{arg.keyword.value: arg.value for arg in final.args if arg.keyword is not None}}
        uses = [self._outcome_use(wrapper, outcome, by_param, extra, reported) for outcome in wrapper.record["outcomes"]]
        return merge(uses)

    def _outcome_use(
        self,
        wrapper: FoundWrapper,
        outcome: dict[str, object],
        by_param: dict[str, cst.BaseExpression],
        extra: dict[str, cst.BaseExpression],
        reported: cst.Call,
    ) -> AutocastUse:
        recorded = outcome["arguments"]
        assert isinstance(recorded, dict)
        given: dict[str, cst.BaseExpression | Source | None] = {}
        for parameter in ("device_type", "dtype", "enabled"):
            source = recorded.get(parameter)
            if source is None:
                given[parameter] = extra.get(parameter) if outcome["forwards"] else None
            elif "param" in source:
                name = source["param"]
                given[parameter] = by_param[name] if name in by_param else default_of(wrapper.record, name) or {}
            else:
                given[parameter] = source
        found = torch_api.symbol(str(outcome["autocast"]))
        implied = found.implied_device if found is not None else None
        device, dtype, enabled = given["device_type"], given["dtype"], given["enabled"]
        devices = frozenset({implied}) if implied else self._strings(device) if device is not None else None
        dtypes: frozenset[str] | None
        if dtype is not None and not _is_none(dtype):
            dtypes = self._dtypes(dtype)
        elif devices is not None and all(value in torch_api.DEFAULT_DTYPE for value in devices):
            dtypes = frozenset(torch_api.DEFAULT_DTYPE[value] for value in devices)
        else:
            dtypes = None
        switch = bool_value(enabled) if isinstance(enabled, cst.BaseExpression) else enabled.get("bool") if enabled else None
        return AutocastUse(
            call=reported,
            device_types=devices,
            dtypes=dtypes,
            disabled=switch is False,
            device_expr=device if isinstance(device, cst.BaseExpression) else None,
            dtype_expr=dtype if isinstance(dtype, cst.BaseExpression) else None,
            enabled_expr=enabled if isinstance(enabled, cst.BaseExpression) else None,
            via=wrapper.description,
        )

    def _strings(self, given: cst.BaseExpression | Source) -> frozenset[str] | None:
        if isinstance(given, cst.BaseExpression):
            found = self.values.string_values(given)
        else:
            found = frozenset(given["strings"]) if "strings" in given else None
        return frozenset(value.split(":")[0] for value in found) if found is not None else None

    def _dtypes(self, given: cst.BaseExpression | Source) -> frozenset[str] | None:
        if isinstance(given, cst.BaseExpression):
            return self.values.dtype_values(given)
        return frozenset(given["dtypes"]) if "dtypes" in given else None

    # -- blocks ----------------------------------------------------------------------------

    @functools.cached_property
    def blocks(self) -> list[AutocastBlock]:
        found: list[AutocastBlock] = []
        for statement in self.tree.index.withs:
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

    @functools.cached_property
    def _by_scope(self) -> dict[cst.CSTNode, list[AutocastBlock]]:
        table: dict[cst.CSTNode, list[AutocastBlock]] = {}
        for block in self.blocks:
            table.setdefault(self.tree.scope_of(block.statement), []).append(block)
        return table

    def blocks_of(self, statement: cst.With) -> list[AutocastBlock]:
        """The autocast items of one ``with`` statement (usually zero or one)."""
        return self._by_statement.get(statement, [])

    def blocks_in(self, scope: ScopeNode | cst.CSTNode) -> list[AutocastBlock]:
        """The blocks whose ``with`` statement is in ``scope`` (a function or the module)."""
        return self._by_scope.get(scope, [])

    def enclosing(self, node: cst.CSTNode) -> AutocastBlock | None:
        """The innermost autocast block whose body contains ``node``."""
        for child, current in self.tree.ancestry(node):
            if isinstance(current, cst.With) and child is current.body:
                blocks = self.blocks_of(current)
                if blocks:
                    return blocks[-1]
            if isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None  # a function defined under autocast does not run there
        return None

    def in_disabled_region(self, node: cst.CSTNode) -> bool:
        block = self.enclosing(node)
        return block is not None and block.disabled


class _Factory:
    """A callable that makes a torch autocast: the autocast itself, or a partial of it."""

    def __init__(self, analysis: AutocastAnalysis, qualified: str, bound_args: tuple[cst.Arg, ...]) -> None:
        self.analysis = analysis
        self.qualified = qualified
        self.bound_args = bound_args

    def __call__(self, call: cst.Call) -> AutocastUse:
        merged = call.with_changes(args=(*self.bound_args, *call.args)) if self.bound_args else call
        return self.analysis.torch_autocast(merged, self.qualified, call)


class _WrapperFactory(_Factory):
    """What a factory wrapper returned: ``autocast = get_autocast(precision)``."""

    def __init__(self, analysis: AutocastAnalysis, wrapper: FoundWrapper, making: cst.Call) -> None:
        super().__init__(analysis, "", ())
        self.wrapper = wrapper
        self.making = making

    def __call__(self, call: cst.Call) -> AutocastUse:
        return self.analysis.wrapped_use(self.wrapper, self.making, call)


def _is_none(given: cst.BaseExpression | Source) -> bool:
    if isinstance(given, cst.BaseExpression):
        return is_none(given)
    return bool(given.get("none"))


class _Choice(_Factory):
    """One of several autocast factories (``torch.autocast if amp else nullcontext``)."""

    def __init__(self, analysis: AutocastAnalysis, factories: list[_Factory], conditional: cst.IfExp | None) -> None:
        super().__init__(analysis, factories[0].qualified, factories[0].bound_args)
        self.factories = factories
        self.conditional = conditional

    def __call__(self, call: cst.Call) -> AutocastUse:
        use = merge([factory(call) for factory in self.factories])
        return replace(use, conditional=self.conditional) if self.conditional is not None else use
