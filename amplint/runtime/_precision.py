"""The whole mixed-precision training step as one object, in the order torch requires.

The recipe has five calls whose order matters (scale → backward → unscale → clip →
step → update) plus checkpointing of the scaler, and getting any of it wrong fails
silently: clipping scaled gradients, forgetting ``update()``, not saving the scale so a
resumed run re-learns it with a burst of skipped steps. A run whose gradients keep
overflowing also fails silently: GradScaler just skips steps and halves the scale. This
class does the calls in order, feeds a :class:`StabilityMonitor` that turns those silent
failures into warnings, and can fall back (modules to float32, float16 to bfloat16 or
float32) when float16 keeps overflowing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from amplint.runtime._amp import (
    AutocastContext,
    _unscale_once,
    autocast,
    clip_grad_norm_,
    grad_scaler,
)
from amplint.runtime._devices import DeviceLike, amp_dtype, as_device
from amplint.runtime._fallback import Fallback, Float32Modules, fallback_dtype, keep_float32
from amplint.runtime._monitor import (
    COLLAPSE_CONDITION,
    CONSECUTIVE_CONDITION,
    Number,
    StabilityMonitor,
    _scaler_scale,
)
from amplint.runtime._torch import needs_torch
from amplint.runtime._warnings import LossScaleWarning

if TYPE_CHECKING:
    import torch

__all__ = ["LossScaleWarning", "MixedPrecision"]

logger = logging.getLogger("amplint.runtime")

_DEFAULT_WARN_AFTER_SKIPPED = 5


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _scale_snapshot(scaler: torch.amp.GradScaler) -> Number:
    """The scale before a step, without a sync: a copy of the tensor ``update()`` rewrites."""
    import torch

    scale = _scaler_scale(scaler)
    return scale.clone() if isinstance(scale, torch.Tensor) else scale


def _total_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    import torch

    get_total_norm = getattr(torch.nn.utils, "get_total_norm", None)
    if get_total_norm is not None:
        norm: torch.Tensor = get_total_norm(grads)
        return norm
    first = grads[0].device
    total: torch.Tensor = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g.detach()).to(first) for g in grads])
    )
    return total


class MixedPrecision:
    """autocast + GradScaler + unscale-then-clip for one device, watched by a monitor.

    Typical loop::

        mp = MixedPrecision()            # default device, its recommended dtype
        for x, y in loader:
            optimizer.zero_grad()
            with mp.autocast():
                loss = loss_fn(model(x), y)
            mp.backward(loss)
            mp.step(optimizer, max_norm=1.0)

    ``scaler_kwargs`` go to ``torch.amp.GradScaler`` (``init_scale``, ...). The scaler
    is enabled only for float16 (see :func:`grad_scaler`). ``enabled=False`` turns off
    both autocast and scaling, for an fp32 baseline with the same loop.

    ``monitor``: True (default) creates a :class:`StabilityMonitor` fed with the loss of
    :meth:`backward`, the true gradient norm and the loss scale (one device sync per
    step); pass your own to choose its thresholds; False keeps a monitor that only sees
    the scaler (skip and loss-scale warnings, no extra sync in bfloat16).
    ``warn_after_skipped`` (default 5) is the new monitor's consecutive-skip limit.

    ``model`` and ``keep_fp32`` (qualified module names, e.g. ``report.keep_fp32`` from
    :func:`precision_report`) run those modules in float32 inside :meth:`autocast`.
    ``fallback`` (a :class:`Fallback`, ``"auto"``, ``"bfloat16"`` or ``"float32"``) acts
    when the monitor reports persistent float16 overflow; every switch is logged to the
    ``amplint.runtime`` logger, kept in :attr:`fallback_history` and in
    :meth:`state_dict`, so a resumed run keeps it.
    """

    @needs_torch
    def __init__(
        self,
        device: DeviceLike = None,
        dtype: torch.dtype | None = None,
        *,
        enabled: bool = True,
        warn_after_skipped: int | None = None,
        monitor: StabilityMonitor | bool = True,
        fallback: Fallback | str | None = None,
        model: torch.nn.Module | None = None,
        keep_fp32: Iterable[str] = (),
        **scaler_kwargs: Any,
    ) -> None:
        self.device: torch.device = as_device(device)
        self.dtype: torch.dtype = dtype if dtype is not None else amp_dtype(self.device)
        self._initial_dtype = self.dtype
        self.enabled = enabled
        self._scaler_kwargs = scaler_kwargs
        self.scaler: torch.amp.GradScaler = grad_scaler(
            self.device, self.dtype, enabled=enabled, **scaler_kwargs
        )
        if isinstance(monitor, StabilityMonitor):
            if warn_after_skipped is not None:
                raise ValueError(
                    "warn_after_skipped belongs to the StabilityMonitor you passed; set it there"
                )
            self.monitor = monitor
            self.monitor.dtype = self.dtype
        else:
            self.monitor = StabilityMonitor(
                warn_after_skipped=(
                    _DEFAULT_WARN_AFTER_SKIPPED
                    if warn_after_skipped is None
                    else warn_after_skipped
                ),
                track_grad_norm=bool(monitor),
                dtype=self.dtype,
            )
        self._feed_monitor = monitor is not False
        self.fallback: Fallback | None = Fallback.coerce(fallback)
        self.model = model
        self.keep_fp32: list[str] = []
        self._kept: list[Float32Modules] = []
        self.fallback_history: list[dict[str, Any]] = []
        if self.fallback is not None and self.fallback.keep_fp32 and model is None:
            raise ValueError("a fallback that keeps modules in float32 needs model=")
        self._keep(list(keep_fp32))
        # The true (unscaled) gradient norm of the last step that clipped or measured it.
        self.grad_norm: torch.Tensor | None = None
        self._pending_loss: torch.Tensor | None = None

    # Counters live in the monitor; these keep the attributes older code reads.
    @property
    def steps(self) -> int:
        return self.monitor.steps

    @property
    def skipped_steps(self) -> int:
        return self.monitor.skipped_steps

    @property
    def consecutive_skipped_steps(self) -> int:
        return self.monitor.consecutive_skipped_steps

    @property
    def warn_after_skipped(self) -> int:
        return self.monitor.warn_after_skipped

    @property
    def device_type(self) -> str:
        return self.device.type

    def __repr__(self) -> str:
        extra = f", keep_fp32={self.keep_fp32!r}" if self.keep_fp32 else ""
        return (
            f"MixedPrecision(device={str(self.device)!r}, dtype={self.dtype}, "
            f"enabled={self.enabled}, scaler_enabled={self.scaler.is_enabled()}{extra})"
        )

    def _keep(self, names: list[str]) -> None:
        names = [n for n in dict.fromkeys(names) if n not in self.keep_fp32]
        if not names:
            return
        if self.model is None:
            raise ValueError(f"keeping modules in float32 ({names}) needs model=")
        self._kept.append(keep_float32(self.model, names))
        self.keep_fp32.extend(names)

    def autocast(self) -> AutocastContext:
        """The autocast region for the forward pass and the loss."""
        import torch

        low_precision = self.dtype != torch.float32
        return autocast(self.device, self.dtype, enabled=self.enabled and low_precision)

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """``loss.backward()``, on the scaled loss when the scaler is enabled.

        The monitor records the sum of the losses passed since the last :meth:`step`.
        """
        if self._feed_monitor:
            detached = loss.detach()
            detached = (detached.sum() if detached.numel() != 1 else detached.reshape(())).float()
            pending = self._pending_loss
            self._pending_loss = detached if pending is None else pending + detached
        # Tensor.backward carries no annotations in torch 2.13.
        self.scaler.scale(loss).backward(**kwargs)  # type: ignore[no-untyped-call]

    def _measured_grad_norm(self, optimizer: torch.optim.Optimizer) -> torch.Tensor | None:
        grads = [
            p.grad
            for group in optimizer.param_groups
            for p in group["params"]
            if p.grad is not None
        ]
        if not grads:
            return None
        if self.scaler.is_enabled():
            _unscale_once(self.scaler, optimizer)
        return _total_norm(grads)

    def step(
        self,
        optimizer: torch.optim.Optimizer,
        max_norm: float | None = None,
        parameters: Iterable[torch.Tensor] | None = None,
    ) -> bool:
        """Unscale, clip to ``max_norm`` (if given), step and update; True if the step was skipped.

        ``parameters`` are the tensors to clip (default: every parameter of
        ``optimizer``). A skipped step is one where the scaler found inf/NaN gradients
        and left the parameters alone; it is detected by the scale shrinking in
        ``update()``, which happens exactly then (torch requires ``backoff_factor < 1``).
        The monitor then records the step (one device sync for all its values) and the
        fallback policy, if any, acts on what it saw.
        """
        norm: torch.Tensor | None = None
        if max_norm is not None:
            params = (
                list(parameters)
                if parameters is not None
                else [p for group in optimizer.param_groups for p in group["params"]]
            )
            norm = clip_grad_norm_(params, max_norm, scaler=self.scaler, optimizer=optimizer)
        elif parameters is not None:
            raise ValueError("parameters= only selects what to clip; pass max_norm= too")
        elif self._feed_monitor and self.monitor.track_grad_norm:
            norm = self._measured_grad_norm(optimizer)
        if norm is not None:
            self.grad_norm = norm
        loss, self._pending_loss = self._pending_loss, None
        if not self._feed_monitor:
            norm = None
        if not self.scaler.is_enabled():
            optimizer.step()
            self.monitor._observe(loss, norm, None, None, False, stacklevel=3)
            skipped = False
        else:
            before = _scale_snapshot(self.scaler)
            self.scaler.step(optimizer)
            self.scaler.update()
            after = _scaler_scale(self.scaler)
            skipped = self.monitor._observe(loss, norm, after, before, None, stacklevel=3).skipped
        self._maybe_fall_back()
        return skipped

    # -- fallback ----------------------------------------------------------------------------

    def _maybe_fall_back(self) -> None:
        import torch

        policy = self.fallback
        if (
            policy is None
            or not self.enabled
            or self.dtype != torch.float16
            or not self.monitor.persistent_overflow
        ):
            return
        reason = self.monitor.overflow_reason
        pending = [n for n in policy.keep_fp32 if n not in self.keep_fp32]
        if pending:
            self._keep(pending)
            switch: dict[str, Any] = {"kind": "keep_fp32", "modules": pending}
            logger.warning(
                "step %d: %s; keeping %s in float32 (fallback)",
                self.steps,
                reason,
                ", ".join(repr(n) for n in pending),
            )
        elif policy.dtype is not None:
            target = fallback_dtype(self.device, policy.dtype)
            switch = {"kind": "dtype", "from": _dtype_name(self.dtype), "to": _dtype_name(target)}
            self._switch_dtype(target)
            logger.warning(
                "step %d: %s; switching from %s to %s (fallback)",
                self.steps,
                reason,
                switch["from"],
                switch["to"],
            )
        else:
            return
        self.fallback_history.append({"step": self.steps, "reason": reason, **switch})
        self.monitor.reset_window()

    def _switch_dtype(self, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.monitor.dtype = dtype
        self.scaler = grad_scaler(self.device, dtype, enabled=self.enabled, **self._scaler_kwargs)

    # -- checkpoints -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Scaler, counters, monitor, precision and fallback switches, for a checkpoint.

        Plain Python values only, so ``torch.load(weights_only=True)`` reads it.
        """
        return {
            "scaler": self.scaler.state_dict(),
            "steps": self.steps,
            "skipped_steps": self.skipped_steps,
            "consecutive_skipped_steps": self.consecutive_skipped_steps,
            "dtype": _dtype_name(self.dtype),
            "initial_dtype": _dtype_name(self._initial_dtype),
            "keep_fp32": list(self.keep_fp32),
            "fallback": {"switches": [dict(s) for s in self.fallback_history]},
            "monitor": self.monitor.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output.

        Fallback switches in the checkpoint are re-applied when this object starts from
        the same dtype the saved run started from (a dtype you choose differently wins);
        modules the fallback kept in float32 are kept again (that needs ``model=``).
        Scaler state is loaded only into an enabled scaler and only when the checkpoint
        has some (a bfloat16 run saves none; resuming it in float16 starts from the
        initial scale).
        """
        import torch

        switches = [dict(s) for s in (state.get("fallback") or {}).get("switches", [])]
        kept = [n for s in switches if s.get("kind") == "keep_fp32" for n in s.get("modules", [])]
        if kept:
            missing = [n for n in kept if n not in self.keep_fp32]
            if missing and self.model is None:
                raise ValueError(
                    f"the checkpoint's fallback kept {missing} in float32; pass model= so the "
                    "resumed run keeps them too"
                )
            self._keep(missing)
        saved_dtype = state.get("dtype")
        same_start = state.get("initial_dtype") == _dtype_name(self._initial_dtype)
        if switches and same_start and isinstance(saved_dtype, str):
            target = getattr(torch, saved_dtype)
            if target != self.dtype:
                self._switch_dtype(target)
        self.fallback_history = switches

        scaler_state = state.get("scaler") or {}
        if self.scaler.is_enabled() and scaler_state:
            self.scaler.load_state_dict(dict(scaler_state))
        monitor_state = state.get("monitor")
        if monitor_state is not None:
            self.monitor.load_state_dict(monitor_state)
            return
        # A checkpoint from before the monitor: counters only, and the warnings they imply.
        consecutive = int(state.get("consecutive_skipped_steps", 0))
        self.monitor.load_state_dict(
            {
                "steps": int(state.get("steps", 0)),
                "skipped_steps": int(state.get("skipped_steps", 0)),
                "consecutive_skipped_steps": consecutive,
                "active": [
                    name
                    for name, on in (
                        (CONSECUTIVE_CONDITION, consecutive >= self.warn_after_skipped),
                        (
                            COLLAPSE_CONDITION,
                            self.scaler.is_enabled() and self.scaler.get_scale() < 1.0,
                        ),
                    )
                    if on
                ],
            }
        )
