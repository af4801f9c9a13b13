"""The whole mixed-precision training step as one object, in the order torch requires.

The recipe has five calls whose order matters (scale → backward → unscale → clip →
step → update) plus checkpointing of the scaler, and getting any of it wrong fails
silently: clipping scaled gradients, forgetting ``update()``, not saving the scale so a
resumed run re-learns it with a burst of skipped steps. A run whose gradients keep
overflowing also fails silently: GradScaler just skips steps and halves the scale. This
class does the calls in order and turns those silent failures into
:class:`LossScaleWarning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from amplint.runtime._amp import AutocastContext, autocast, clip_grad_norm_, grad_scaler
from amplint.runtime._devices import DeviceLike, amp_dtype, as_device
from amplint.runtime._torch import needs_torch

if TYPE_CHECKING:
    import torch

__all__ = ["LossScaleWarning", "MixedPrecision"]


class LossScaleWarning(UserWarning):
    """The loss scale collapsed, or many consecutive steps were skipped for inf/NaN gradients."""


class MixedPrecision:
    """autocast + GradScaler + unscale-then-clip for one device, with skip accounting.

    Typical loop::

        mp = MixedPrecision()            # default device, its recommended dtype
        for x, y in loader:
            optimizer.zero_grad()
            with mp.autocast():
                loss = loss_fn(model(x), y)
            mp.backward(loss)
            mp.step(optimizer, max_norm=1.0)

    ``scaler_kwargs`` go to ``torch.amp.GradScaler`` (``init_scale``, ...). The scaler
    is enabled only for float16 (see :func:`grad_scaler`). ``warn_after_skipped``
    consecutive skipped steps, or a loss scale below 1, raise a
    :class:`LossScaleWarning` (once, until training recovers). ``enabled=False`` turns
    off both autocast and scaling, for an fp32 baseline with the same loop.
    """

    @needs_torch
    def __init__(
        self,
        device: DeviceLike = None,
        dtype: torch.dtype | None = None,
        *,
        enabled: bool = True,
        warn_after_skipped: int = 5,
        **scaler_kwargs: Any,
    ) -> None:
        if warn_after_skipped < 1:
            raise ValueError(f"warn_after_skipped must be >= 1, got {warn_after_skipped}")
        self.device: torch.device = as_device(device)
        self.dtype: torch.dtype = dtype if dtype is not None else amp_dtype(self.device)
        self.enabled = enabled
        self.warn_after_skipped = warn_after_skipped
        self.scaler: torch.amp.GradScaler = grad_scaler(
            self.device, self.dtype, enabled=enabled, **scaler_kwargs
        )
        # Calls of step(); of those, the ones the scaler skipped for inf/NaN gradients.
        self.steps = 0
        self.skipped_steps = 0
        self.consecutive_skipped_steps = 0
        # The true (unscaled) gradient norm from the last step() that clipped.
        self.grad_norm: torch.Tensor | None = None
        self._skip_warned = False
        self._collapse_warned = False

    @property
    def device_type(self) -> str:
        return self.device.type

    def __repr__(self) -> str:
        return (
            f"MixedPrecision(device={str(self.device)!r}, dtype={self.dtype}, "
            f"enabled={self.enabled}, scaler_enabled={self.scaler.is_enabled()})"
        )

    def autocast(self) -> AutocastContext:
        """The autocast region for the forward pass and the loss."""
        return autocast(self.device, self.dtype, enabled=self.enabled)

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """``loss.backward()``, on the scaled loss when the scaler is enabled."""
        # Tensor.backward carries no annotations in torch 2.13.
        self.scaler.scale(loss).backward(**kwargs)  # type: ignore[no-untyped-call]

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
        """
        if max_norm is not None:
            params = (
                list(parameters)
                if parameters is not None
                else [p for group in optimizer.param_groups for p in group["params"]]
            )
            self.grad_norm = clip_grad_norm_(
                params, max_norm, scaler=self.scaler, optimizer=optimizer
            )
        elif parameters is not None:
            raise ValueError("parameters= only selects what to clip; pass max_norm= too")
        self.steps += 1
        if not self.scaler.is_enabled():
            optimizer.step()
            self.consecutive_skipped_steps = 0
            return False
        before = self.scaler.get_scale()
        self.scaler.step(optimizer)
        self.scaler.update()
        after = self.scaler.get_scale()
        skipped = after < before
        self._account(skipped, after)
        return skipped

    def _account(self, skipped: bool, scale: float) -> None:
        if skipped:
            self.skipped_steps += 1
            self.consecutive_skipped_steps += 1
            if self.consecutive_skipped_steps >= self.warn_after_skipped and not self._skip_warned:
                self._skip_warned = True
                warnings.warn(
                    f"{self.consecutive_skipped_steps} consecutive optimizer steps were skipped "
                    f"for inf/NaN gradients; the loss scale is now {scale:g}. If the loss itself "
                    "is not finite, look at the data and the learning rate; if float16 overflows "
                    "in the forward pass, try dtype=torch.bfloat16.",
                    LossScaleWarning,
                    stacklevel=3,
                )
        else:
            self.consecutive_skipped_steps = 0
            self._skip_warned = False
        if scale < 1.0:
            if not self._collapse_warned:
                self._collapse_warned = True
                warnings.warn(
                    f"the loss scale collapsed to {scale:g} (below 1): the gradients overflow "
                    "float16 even without scaling, so every step is being skipped. Look for a "
                    "non-finite loss, or train in bfloat16.",
                    LossScaleWarning,
                    stacklevel=3,
                )
        else:
            self._collapse_warned = False

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state and the step counters, for a checkpoint (plain Python values)."""
        return {
            "scaler": self.scaler.state_dict(),
            "steps": self.steps,
            "skipped_steps": self.skipped_steps,
            "consecutive_skipped_steps": self.consecutive_skipped_steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output.

        Scaler state is loaded only into an enabled scaler and only when the checkpoint
        has some (a bfloat16 run saves none; resuming it in float16 starts from the
        initial scale).
        """
        scaler_state = state.get("scaler") or {}
        if self.scaler.is_enabled() and scaler_state:
            self.scaler.load_state_dict(dict(scaler_state))
        self.steps = int(state.get("steps", 0))
        self.skipped_steps = int(state.get("skipped_steps", 0))
        self.consecutive_skipped_steps = int(state.get("consecutive_skipped_steps", 0))
        self._skip_warned = self.consecutive_skipped_steps >= self.warn_after_skipped
        self._collapse_warned = self.scaler.is_enabled() and self.scaler.get_scale() < 1.0
