"""Project functions that make torch's autocast or GradScaler, as other files call them.

Projects wrap the autocast once and call the wrapper everywhere (icefall's
``torch_autocast(enabled=params.use_fp16)``, open_clip's ``autocast =
get_autocast(args.precision)`` then ``with autocast():``). A *wrapper* is a module-level
function or a method of a module-level class, of this file or of another project file, of
one of these forms (and nothing looser, so that a block is never imagined):

- ``@contextlib.contextmanager`` whose every ``yield`` is a bare ``yield`` statement
  inside ``with <autocast>:`` (``with torch.amp.autocast(device_type, **kwargs): yield``,
  perhaps on branches chosen by the torch version; a ``yield`` outside any autocast is the
  "AMP off" branch; a deprecated ``torch.cuda.amp.autocast`` beside a modern spelling is
  the old-torch fallback and is not counted): calling it is an autocast (a *context*
  wrapper);
- undecorated, with no ``yield``, every ``return`` giving an autocast call (a *context*
  wrapper), or every one giving an autocast *factory* — the autocast callable itself,
  ``functools.partial`` of it, or a ``lambda:`` calling it — (a *factory* wrapper); a
  return of a no-op context (``contextlib.nullcontext()``, ``suppress``) or of a no-op
  factory may stand beside them, as the "AMP off" branch.

A wrapper is recognised where it is called by a name that contains ``autocast``
(``torch_autocast``, ``get_autocast``, ``self.maybe_autocast``), the word the autocast
rules' pre-filter looks for.

What the wrapper passes to the autocast is recorded per parameter of torch's autocast
(``device_type``, ``dtype``, ``enabled``): a parameter of the wrapper (filled at the call
site, or by its default), the static value it has in the wrapper's file, or unknown; and
whether the wrapper forwards its ``**kwargs``. These records are part of the file's
project summary, so that a call in another file is understood without reading the
wrapper's code again; ``AutocastAnalysis`` turns them into the :class:`AutocastUse` of a
call site.

A *scaler maker* (:class:`ScalerMakers`) is a module-level function whose every
``return`` builds an always-enabled GradScaler (no ``enabled=``, or ``enabled=True``), or
a module-level class whose ``__init__`` assigns one to an attribute unconditionally
(DeiT's and VideoMamba's ``NativeScalerWithGradNormCount``): calling it builds a scaler
that scales whatever the dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import libcst as cst

from amplint.analysis import torch_api
from amplint.analysis.bindings import Bindings
from amplint.analysis.calls import CallTargets
from amplint.analysis.modules import ProjectModules
from amplint.analysis.names import NameResolver
from amplint.analysis.syntax import bool_value, last_name, match_arguments
from amplint.analysis.tree import Tree
from amplint.analysis.values import Values
from amplint.engine.context import SourceContext

# Context managers that do nothing: the other branch of "autocast or not".
NO_OP_CONTEXTS = frozenset({"contextlib.nullcontext", "contextlib.suppress", "contextlib.ExitStack"})
PARTIALS = frozenset({"functools.partial"})
CONTEXT_MANAGERS = frozenset({"contextlib.contextmanager"})
# The parameters of torch's autocast whose values the analysis uses.
RECORDED = ("device_type", "dtype", "enabled")

T = TypeVar("T", bound=cst.CSTNode)
Wrapper = dict[str, Any]  # the summary record; see ``_record``
Source = dict[str, Any]  # {"param": name} | {"strings"|"dtypes": [...]} | {"bool": b} | {"none": True} | {}


@dataclass(frozen=True)
class Found:
    """A project function a call names: its summary record and where it is defined."""

    record: dict[str, Any]
    where: str  # "icefall/utils.py:123"

    @property
    def description(self) -> str:
        return f"`{self.record['name']}` at {self.where}"


@dataclass(frozen=True)
class FoundWrapper(Found):
    """An autocast wrapper, and whether the call site's object fills its first parameter
    (``self.make_autocast()``)."""

    bound: bool = False


@dataclass(eq=False)
class AutocastWrappers:
    """Autocast wrappers: those this file defines, and those its calls name."""

    source: SourceContext
    tree: Tree
    names: NameResolver
    bindings: Bindings
    values: Values
    calls: CallTargets
    modules: ProjectModules

    # -- this file's wrappers ----------------------------------------------------------------

    @functools.cached_property
    def defined(self) -> dict[str, Wrapper]:
        """The wrappers this file defines, by function key (``f``, ``Class.m``)."""
        found: dict[str, Wrapper] = {}
        for function in self._candidates():
            key = self.calls.function_key(function)
            if key is None:
                continue
            record = self._record(function)
            if record is not None:
                found[key] = record
        return found

    def _candidates(self) -> list[cst.FunctionDef]:
        """The functions that name an autocast in a call, its arguments or a ``return``
        (most functions of a file name none: looking at their calls is cheaper than
        walking them)."""
        found: dict[cst.FunctionDef, None] = {}
        for call in self.tree.index.calls:
            if _names_autocast(call.func) or any(_names_autocast(arg.value) for arg in call.args):
                scope = self.tree.scope_of(call)
                if isinstance(scope, cst.FunctionDef):
                    found[scope] = None
        for node in self.tree.index.returns:
            if node.value is not None and _names_autocast(node.value):
                scope = self.tree.scope_of(node)
                if isinstance(scope, cst.FunctionDef):
                    found[scope] = None
        return list(found)

    def _record(self, function: cst.FunctionDef) -> Wrapper | None:
        decorators = [self.names.resolve(decorator.decorator) for decorator in function.decorators]
        static = decorators in (["staticmethod"], ["builtins.staticmethod"])
        if not decorators or static:
            if self._yields(function):
                return None
            outcomes = [self._returned(value, function) for value in self._returns(function)]
        elif len(decorators) == 1 and decorators[0] in CONTEXT_MANAGERS:
            outcomes = self._context_manager(function)
        else:
            return None
        if not outcomes or any(outcome is None for outcome in outcomes):
            return None
        kinds = {outcome["kind"] for outcome in outcomes if outcome is not None}
        autocasts = [outcome for outcome in outcomes if outcome is not None and "autocast" in outcome]
        if len(kinds) != 1 or not autocasts:
            return None
        modern = [outcome for outcome in autocasts if not _deprecated(outcome)]
        if modern:
            autocasts = modern  # the deprecated spellings beside them are the old-torch fallback
        params = function.params
        if isinstance(params.star_arg, cst.Param):
            return None  # *args: which positional argument lands where is unknown
        return {
            "name": function.name.value,
            "line": self.source.location(self.source.span(function.name)[0]).row,
            "kind": kinds.pop(),
            "params": [[param.name.value, self._default(param)] for param in (*params.posonly_params, *params.params)],
            "kwonly": [[param.name.value, self._default(param)] for param in params.kwonly_params],
            "kwargs": params.star_kwarg.name.value if params.star_kwarg is not None else None,
            "static": static,
            "outcomes": autocasts,
        }

    def _default(self, param: cst.Param) -> Source | None:
        """The source of a parameter's default (None: no default, the caller must pass it)."""
        return self._value_source(param.default) if param.default is not None else None

    def _returns(self, function: cst.FunctionDef) -> Iterator[cst.BaseExpression | None]:
        return (node.value for node in self._own(self.tree.index.returns, function))

    def _yields(self, function: cst.FunctionDef) -> bool:
        return any(True for _ in self._own(self.tree.index.yields, function))

    def _own(self, nodes: list[T], function: cst.FunctionDef) -> Iterator[T]:
        """The nodes of ``function``'s own code (not of functions nested in it)."""
        return (node for node in nodes if self.tree.scope_of(node) is function)

    def _returned(self, value: cst.BaseExpression | None, function: cst.FunctionDef) -> Source | None:
        """What one ``return`` gives: an autocast or a no-op, as a context or a factory."""
        if value is None:
            return None
        if isinstance(value, cst.Call):
            qualified = self.names.resolve(value.func)
            if qualified in NO_OP_CONTEXTS:
                return {"kind": "context"}
            if qualified in torch_api.AUTOCASTS:
                return self._outcome("context", qualified or "", value.args, function)
            if qualified in PARTIALS and value.args and value.args[0].keyword is None and not value.args[0].star:
                inner = self.names.resolve(value.args[0].value)
                if inner in torch_api.AUTOCASTS:
                    return self._outcome("factory", inner or "", value.args[1:], function)
            return None
        if isinstance(value, cst.Lambda):
            params = value.params
            if params.params or params.posonly_params or params.kwonly_params or isinstance(params.star_arg, cst.Param) or params.star_kwarg:
                return None
            body = value.body
            if isinstance(body, cst.Call) and self.names.resolve(body.func) in torch_api.AUTOCASTS:
                return self._outcome("factory", self.names.resolve(body.func) or "", body.args, function)
            return None
        qualified = self.names.resolve(value)
        if qualified in NO_OP_CONTEXTS:
            return {"kind": "factory"}
        if qualified in torch_api.AUTOCASTS:
            return self._outcome("factory", qualified or "", (), function)
        return None

    def _context_manager(self, function: cst.FunctionDef) -> list[Source | None]:
        """``@contextmanager``: each bare ``yield`` runs the caller's block inside the
        autocast of the innermost ``with`` around it (several, on branches chosen by the
        torch version, say), or in no autocast when none is around it."""
        outcomes: list[Source | None] = []
        for node in self._own(self.tree.index.yields, function):
            statement = self.tree.statement_of(node)
            if node.value is not None or not (
                isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Expr)
                and statement.body[0].value is node
            ):
                return [None]
            outcomes.append(self._around(statement, function))
        return outcomes

    def _around(self, statement: cst.SimpleStatementLine, function: cst.FunctionDef) -> Source | None:
        for ancestor in self.tree.ancestors(statement):
            if ancestor is function:
                break
            if isinstance(ancestor, cst.With):
                for item in ancestor.items:
                    if isinstance(item.item, cst.Call) and self.names.resolve(item.item.func) in torch_api.AUTOCASTS:
                        return self._outcome("context", self.names.resolve(item.item.func) or "", item.item.args, function)
        return {"kind": "context"}

    def _outcome(self, kind: str, qualified: str, args: Any, function: cst.FunctionDef) -> Source | None:
        """The autocast ``qualified`` called with ``args`` inside ``function``."""
        found = torch_api.symbol(qualified)
        order = torch_api.DEPRECATED_AUTOCAST_ORDER if found is not None and found.deprecated else torch_api.AUTOCAST_ORDER
        parameters = {param.name.value for param in _all_params(function)}
        kwargs = function.params.star_kwarg.name.value if function.params.star_kwarg is not None else None
        forwarded = [arg for arg in args if arg.star == "**" and isinstance(arg.value, cst.Name) and arg.value.value == kwargs]
        matched = match_arguments([arg for arg in args if all(arg is not other for other in forwarded)], order)
        if matched is None:
            return None
        recorded = {key: self._argument_source(value, parameters) for key, value in matched[0].items() if key in RECORDED}
        forwards = bool(forwarded)
        return {"kind": kind, "autocast": qualified, "arguments": recorded, "forwards": forwards}

    def _argument_source(self, value: cst.BaseExpression, parameters: set[str]) -> Source:
        if isinstance(value, cst.Name) and value.value in parameters and self._is_parameter(value):
            return {"param": value.value}
        return self._value_source(value)

    def _is_parameter(self, name: cst.Name) -> bool:
        bindings = self.bindings.of(name)
        return bool(bindings) and all(isinstance(getattr(binding, "node", None), cst.Param) for binding in bindings)

    def _value_source(self, value: cst.BaseExpression) -> Source:
        if isinstance(value, cst.Name) and value.value == "None":
            return {"none": True}
        known = bool_value(value)
        if known is not None:
            return {"bool": known}
        dtypes = self.values.dtype_values(value)
        if dtypes is not None:
            return {"dtypes": sorted(dtypes)}
        strings = self.values.string_values(value)
        if strings is not None:
            return {"strings": sorted(strings)}
        return {}

    # -- wrappers a call names ----------------------------------------------------------------

    def named_by(self, func: cst.BaseExpression) -> FoundWrapper | None:
        """The wrapper the callee expression ``func`` runs, if it is one. Only a callee
        whose name contains ``autocast`` is looked up (``torch_autocast``,
        ``get_autocast``, ``self.maybe_autocast``): the pre-filter runs the autocast rules
        only on files that name such an identifier, and resolving every call of a file
        through other files' summaries would cost more than the rest of its lint."""
        if not _names_autocast(func):
            return None
        spec = self.calls.function_spec(func)
        if spec is None:
            return None
        found = self.calls.find(spec, "autocast_wrappers", lambda: {"autocast_wrappers": self.defined})
        if found is None or not isinstance(found[3], dict):
            return None
        path, _summary, key, record = found
        bound = bool(spec.get("bound")) and "." in key and not record.get("static")
        return FoundWrapper(record, f"{self.modules.display(path)}:{record['line']}", bound)


def bind(found: FoundWrapper, call: cst.Call) -> tuple[dict[str, cst.BaseExpression], dict[str, cst.BaseExpression]] | None:
    """The call's arguments by the wrapper's parameter, and the keywords its ``**kwargs``
    receives; None when they cannot be matched (``*args``/``**kw`` at the call, an
    unknown keyword, too many positional arguments)."""
    record = found.record
    positional = [name for name, _ in record["params"]][1 if found.bound else 0 :]
    matched = match_arguments(call.args, positional, {*positional, *(name for name, _ in record["kwonly"])})
    if matched is None or (matched[1] and record["kwargs"] is None):
        return None
    return matched


def default_of(record: Wrapper, param: str) -> Source | None:
    for name, default in (*record["params"], *record["kwonly"]):
        if name == param:
            return default if isinstance(default, dict) else None
    return None


def _names_autocast(expr: cst.BaseExpression) -> bool:
    name = last_name(expr)
    if name is None and isinstance(expr, cst.Lambda):
        return _names_autocast(expr.body)
    if name is None and isinstance(expr, cst.Call):
        return _names_autocast(expr.func)
    return name is not None and "autocast" in name


def _deprecated(outcome: Source) -> bool:
    found = torch_api.symbol(str(outcome["autocast"]))
    return found is not None and found.deprecated


def _all_params(function: cst.FunctionDef) -> Iterator[cst.Param]:
    params = function.params
    yield from (*params.posonly_params, *params.params, *params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    if params.star_kwarg is not None:
        yield params.star_kwarg


@dataclass(eq=False)
class ScalerMakers:
    """Scaler makers: those this file defines, and those its calls name."""

    source: SourceContext
    tree: Tree
    names: NameResolver
    calls: CallTargets
    modules: ProjectModules

    @functools.cached_property
    def defined(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        holders = self._holders()
        for statement in self.source.module.body:
            built: cst.Call | None = None
            if statement not in holders:
                continue
            if isinstance(statement, cst.FunctionDef) and not statement.decorators:
                returned = [node.value for node in self.tree.index.returns if self.tree.scope_of(node) is statement]
                if returned and all(isinstance(value, cst.Call) and self._always_enabled(value) for value in returned):
                    built = returned[0]  # type: ignore[assignment]
            elif isinstance(statement, cst.ClassDef):
                built = self._built_in_init(statement)
            if built is not None and isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                line = self.source.location(self.source.span(built)[0]).row
                found[statement.name.value] = {"name": statement.name.value, "line": line}
        return found

    def _holders(self) -> set[cst.CSTNode]:
        """The module-level functions and classes whose code builds a GradScaler."""
        found: set[cst.CSTNode] = set()
        for call in self.tree.index.calls:
            if self.names.resolve(call.func) not in torch_api.GRAD_SCALERS:
                continue
            scope = self.tree.scope_of(call)
            if isinstance(scope, cst.FunctionDef):
                found.add(scope)
                owner = self.tree.class_of(scope)
                if owner is not None:
                    found.add(owner)
        return found

    def _built_in_init(self, cls: cst.ClassDef) -> cst.Call | None:
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None or not isinstance(init.body, cst.IndentedBlock):
            return None
        for statement in init.body.body:  # unconditional: the top level of __init__
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if (
                    isinstance(small, cst.Assign)
                    and all(isinstance(target.target, cst.Attribute) for target in small.targets)
                    and isinstance(small.value, cst.Call)
                    and self._always_enabled(small.value)
                ):
                    return small.value
        return None

    def _always_enabled(self, call: cst.Call) -> bool:
        qualified = self.names.resolve(call.func)
        order = torch_api.positional_order(qualified or "") if qualified in torch_api.GRAD_SCALERS else None
        arguments = match_arguments(call.args, order) if order is not None else None
        if arguments is None:
            return False
        enabled = arguments[0].get("enabled")
        return enabled is None or bool_value(enabled) is True

    def named_by(self, func: cst.BaseExpression) -> Found | None:
        """The scaler maker the callee expression ``func`` runs, if it is one (only a
        callee whose name contains ``scaler``, any case, is looked up: ``NativeScaler``,
        ``make_scaler``)."""
        name = last_name(func)
        if name is None or "scaler" not in name.lower():
            return None
        spec = self.calls.function_spec(func)
        if spec is None or spec.get("bound"):
            return None
        found = self.calls.find(spec, "scaler_makers", lambda: {"scaler_makers": self.defined})
        if found is None or not isinstance(found[3], dict):
            return None
        return Found(found[3], f"{self.modules.display(found[0])}:{found[3]['line']}")
