"""autocast, GradScaler and gradient clipping that are correct on whatever device runs them.

The three classic AMP bugs these guard against: hard-coding ``"cuda"`` (the script then
crashes or warns on CPU/MPS/XPU), keeping a GradScaler on with bfloat16 (pointless work
and a host-device sync every step), and clipping gradients that are still multiplied by
the loss scale (the measured norm is ~65536 times too large, so clipping fires on every
step and, once unscaled, leaves the real gradients far below ``max_norm``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from amplint.runtime._devices import (
    DeviceLike,
    amp_dtype,
    as_device,
    autocast_usable,
    backend_available,
)
from amplint.runtime._torch import needs_torch

if TYPE_CHECKING:
    import torch

__all__ = ["AutocastContext", "DisabledAutocast", "autocast", "clip_grad_norm_", "grad_scaler"]

_F = TypeVar("_F", bound=Callable[..., Any])


class AutocastContext(Protocol):
    """What :func:`autocast` returns: a context manager that also decorates functions.

    Declared so that ``@runtime.autocast()`` keeps the decorated function's type
    (``torch.amp.autocast.__call__`` carries no annotations).
    """

    device: str
    fast_dtype: torch.dtype

    def __enter__(self) -> Any: ...

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> Any: ...

    def __call__(self, func: _F) -> _F: ...


class DisabledAutocast(contextlib.ContextDecorator):
    """Stands in for ``torch.amp.autocast`` where autocast cannot run; does nothing.

    It touches no autocast state: falling back to ``torch.amp.autocast("cpu",
    enabled=False)`` instead would switch off an enclosing CPU autocast region. Usable as a
    context manager and as a decorator; exposes ``device``, ``fast_dtype`` and
    ``_enabled`` like the real class.
    """

    def __init__(self, device: str, dtype: torch.dtype) -> None:
        self.device = device
        self.fast_dtype = dtype
        self._enabled = False

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

    def __repr__(self) -> str:
        return f"DisabledAutocast(device={self.device!r}, dtype={self.fast_dtype})"


@needs_torch
def autocast(
    device: DeviceLike = None,
    dtype: torch.dtype | None = None,
    enabled: bool = True,
    cache_enabled: bool | None = None,
) -> AutocastContext:
    """``torch.amp.autocast`` for ``device``'s type at ``dtype or amp_dtype(device)``.

    ``device`` may carry an index (``"cuda:1"``); autocast is per device *type*, so the
    index does not matter. On a device type that has no autocast, or whose hardware is
    absent, the result is a :class:`DisabledAutocast` (no warning, no error), so the
    same code runs everywhere. ``enabled=False`` on a usable device gives a real,
    disabled autocast: the usual way to run a region in full precision inside an
    autocast block. Both results work as context manager and as decorator.
    """
    import torch

    dev = as_device(device)
    chosen = dtype if dtype is not None else amp_dtype(dev)
    if not autocast_usable(dev.type):
        return DisabledAutocast(dev.type, chosen)
    return torch.amp.autocast(dev.type, dtype=chosen, enabled=enabled, cache_enabled=cache_enabled)


@needs_torch
def grad_scaler(
    device: DeviceLike = None,
    dtype: torch.dtype | None = None,
    enabled: bool = True,
    **kwargs: Any,
) -> torch.amp.GradScaler:
    """A ``torch.amp.GradScaler`` for ``device``'s type that is enabled only when it helps.

    Loss scaling exists for float16's narrow exponent range; bfloat16 has float32's
    range and needs none. So the scaler is enabled iff ``enabled`` is true, the dtype
    (``dtype or amp_dtype(device)``) is float16, and the device is present. ``kwargs``
    (``init_scale``, ``growth_interval``, ...) go to ``GradScaler``.
    """
    import torch

    dev = as_device(device)
    chosen = dtype if dtype is not None else amp_dtype(dev)
    on = enabled and chosen == torch.float16 and backend_available(dev.type)
    return torch.amp.GradScaler(dev.type, enabled=on, **kwargs)


def _unscale_once(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> None:
    """``scaler.unscale_(optimizer)`` unless that already happened since the last ``update()``.

    torch raises on a second ``unscale_`` for the same optimizer in one step, and a
    training loop may unscale itself (to log gradients, say) before clipping. The
    scaler's per-optimizer stage is private, so if it is ever missing the RuntimeError
    torch raises for a repeated unscale is recognised instead.
    """
    states = getattr(scaler, "_per_optimizer_states", None)
    if isinstance(states, dict):
        state = states.get(id(optimizer))
        stage = state.get("stage") if isinstance(state, dict) else None
        if getattr(stage, "name", None) == "UNSCALED":
            return
        scaler.unscale_(optimizer)
        return
    try:
        scaler.unscale_(optimizer)
    except RuntimeError as error:
        if "already been called" not in str(error):
            raise


@needs_torch
def clip_grad_norm_(
    parameters: torch.Tensor | Iterable[torch.Tensor],
    max_norm: float,
    *,
    scaler: torch.amp.GradScaler | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    norm_type: float = 2.0,
) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` on *unscaled* gradients; returns their true total norm.

    With an enabled ``scaler`` the gradients are first unscaled for ``optimizer``
    (exactly once per step: an earlier ``scaler.unscale_(optimizer)`` is respected), so
    ``max_norm`` means what it says and the returned norm is the real one. A
    subsequent ``scaler.step(optimizer)`` does not unscale again. If the gradients hold
    inf/NaN the returned norm is non-finite and ``scaler.step`` will skip the step.
    """
    import torch

    if scaler is not None and scaler.is_enabled():
        if optimizer is None:
            raise ValueError(
                "clip_grad_norm_ with an enabled GradScaler needs optimizer=: the gradients "
                "must be unscaled for that optimizer before clipping"
            )
        _unscale_once(scaler, optimizer)
    return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)
