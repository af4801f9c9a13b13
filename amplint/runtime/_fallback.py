"""Running chosen modules in float32 inside an autocast region, and the fallback policy.

Some layers cannot take float16: attention logits or an ``exp`` that exceed 65504, a
large reduction, a loss. The usual fix is to wrap their forward in
``autocast(enabled=False)`` and cast their inputs back to float32 — by hand, in the
model's source. :func:`keep_float32` does it from the outside by qualified module name
(what :func:`~amplint.runtime.precision_report` reports), with forward hooks, so the
model's code and its ``state_dict`` stay as they are.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from amplint.runtime._devices import DeviceLike, capabilities
from amplint.runtime._torch import needs_torch

if TYPE_CHECKING:
    import torch

__all__ = ["FALLBACK_DTYPES", "Fallback", "Float32Modules", "fallback_dtype", "keep_float32"]

FALLBACK_DTYPES = ("auto", "bfloat16", "float32")

# Device types whose autocast a kept module switches off; whichever is on at call time.
_AUTOCAST_CANDIDATES = ("cpu", "cuda", "xpu", "mps", "hpu", "mtia", "xla")

_calls = threading.local()
# Module -> the hook handles that keep it in float32 (weak: the model may be dropped).
_kept: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=1)
def _autocast_device_types() -> tuple[str, ...]:
    import torch

    names = [*_AUTOCAST_CANDIDATES, torch._C._get_privateuse1_backend_name()]
    return tuple(dict.fromkeys(t for t in names if torch.amp.is_autocast_available(t)))


def _to_float32(value: Any) -> Any:
    """``value`` with every float16/bfloat16 tensor in it (nested in tuples, lists, dicts) as float32."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype in (torch.float16, torch.bfloat16) else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_to_float32(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_to_float32(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_float32(v) for k, v in value.items()}
    return value


def _stack(module: Any) -> list[list[Any]]:
    stacks: dict[int, list[list[Any]]] | None = getattr(_calls, "stacks", None)
    if stacks is None:
        stacks = _calls.stacks = {}
    return stacks.setdefault(id(module), [])


def _enter_float32(
    module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    import torch

    active = [t for t in _autocast_device_types() if torch.is_autocast_enabled(t)]
    # torch.autocast's methods carry no annotations.
    contexts: list[Any] = [torch.autocast(t, enabled=False) for t in active]
    for context in contexts:
        context.__enter__()
    _stack(module).append(contexts)
    if not contexts:
        return None  # not under autocast: the module runs as it always does
    return _to_float32(args), _to_float32(kwargs)


def _exit_float32(module: Any, args: Any, kwargs: Any, output: Any) -> None:
    stack = _stack(module)
    if not stack:  # an earlier pre-hook raised before ours ran
        return
    for context in reversed(stack.pop()):
        context.__exit__(None, None, None)
    if not stack:
        _calls.stacks.pop(id(module), None)


class Float32Modules:
    """What :func:`keep_float32` returns: the names it kept; :meth:`remove` undoes it."""

    def __init__(self, names: tuple[str, ...], modules: list[Any]) -> None:
        self.names = names
        self._modules = modules

    def __repr__(self) -> str:
        return f"Float32Modules({list(self.names)!r})"

    def remove(self) -> None:
        """Let the modules run under autocast again."""
        for module in self._modules:
            handles = _kept.pop(module, None)
            for handle in handles or ():
                handle.remove()
        self._modules = []


def is_kept_float32(module: torch.nn.Module) -> bool:
    """Whether :func:`keep_float32` currently holds ``module`` in float32."""
    return module in _kept


@needs_torch
def keep_float32(model: torch.nn.Module, names: Iterable[str]) -> Float32Modules:
    """Run the named submodules of ``model`` in float32 even inside an autocast region.

    Each named module's forward runs in ``autocast(enabled=False)`` for every device type
    whose autocast is on at call time, with its float16/bfloat16 tensor inputs cast to
    float32 (a disabled region does not cast them back by itself, and a float32 weight
    cannot multiply a float16 input). Outside autocast the modules run unchanged.
    ``names`` are qualified names as ``model.named_modules()`` gives them (``""`` is the
    model itself). Unknown names raise ``ValueError``; a module kept already stays kept
    once.
    """
    wanted = list(dict.fromkeys(names))
    known = dict(model.named_modules())
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"no such submodule(s) in {type(model).__name__}: {unknown}")
    modules = []
    for name in wanted:
        module = known[name]
        if module in _kept:
            continue
        pre = module.register_forward_pre_hook(_enter_float32, with_kwargs=True)
        post = module.register_forward_hook(_exit_float32, with_kwargs=True, always_call=True)
        _kept[module] = (pre, post)
        modules.append(module)
    return Float32Modules(tuple(wanted), modules)


@dataclass(frozen=True, slots=True)
class Fallback:
    """What :class:`~amplint.runtime.MixedPrecision` does while float16 keeps overflowing.

    Each time its monitor reports persistent overflow, the next stage runs: first keep
    the ``keep_fp32`` modules in float32 (if any; ``MixedPrecision`` then needs
    ``model=``), then switch the dtype to ``dtype``: ``"auto"`` (bfloat16 where the
    hardware supports it, else float32), ``"bfloat16"``, ``"float32"``, or None for no
    dtype stage. A string passed as ``fallback=`` means ``Fallback(dtype=that)``.
    """

    keep_fp32: tuple[str, ...] = ()
    dtype: str | None = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.keep_fp32, str):
            raise TypeError("keep_fp32 takes a list of module names, not one string")
        object.__setattr__(self, "keep_fp32", tuple(self.keep_fp32))
        if self.dtype is not None and self.dtype not in FALLBACK_DTYPES:
            raise ValueError(
                f"fallback dtype must be one of {FALLBACK_DTYPES} or None, got {self.dtype!r}"
            )
        if not self.keep_fp32 and self.dtype is None:
            raise ValueError("a Fallback with neither keep_fp32 nor dtype does nothing")

    @classmethod
    def coerce(cls, value: Fallback | str | None) -> Fallback | None:
        if value is None or isinstance(value, Fallback):
            return value
        if isinstance(value, str):
            return cls(dtype=value)
        raise TypeError(f"fallback must be a Fallback, one of {FALLBACK_DTYPES}, or None")


@needs_torch
def fallback_dtype(device: DeviceLike, choice: str) -> torch.dtype:
    """The dtype a float16 run on ``device`` falls back to for ``choice`` (see :class:`Fallback`)."""
    import torch

    if choice == "float32":
        return torch.float32
    if choice == "bfloat16":
        return torch.bfloat16
    if choice != "auto":
        raise ValueError(f"fallback dtype must be one of {FALLBACK_DTYPES}, got {choice!r}")
    return torch.bfloat16 if capabilities(device).bf16_supported else torch.float32
