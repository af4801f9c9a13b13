"""Watching a mixed-precision run step by step, and saying early when it goes wrong.

A GradScaler hides float16 trouble: it skips the step and halves the scale, and nothing
tells the user until the scale has collapsed (from 65536, that is seventeen halvings).
A bfloat16 or float32 run has no scaler at all, so a NaN loss is applied to the weights
without a sound. :class:`StabilityMonitor` keeps a bounded history of the numbers that
show it (loss, true gradient norm, loss scale, skipped flag) and raises a
:class:`PrecisionWarning` as soon as a window of steps shows a pattern.

Reading device tensors costs a host-device synchronisation each; the monitor reads all
of one step's tensors with a single ``tolist()`` per device, so a step costs at most one
sync (none when every value is a Python number or lives on the CPU).
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from amplint.runtime._torch import needs_torch
from amplint.runtime._warnings import (
    GradNormSpikeWarning,
    LossScaleWarning,
    NonFiniteWarning,
    OverflowWarning,
    PrecisionWarning,
)

if TYPE_CHECKING:
    import torch

__all__ = ["StabilityMonitor", "StepRecord"]

Number = Union[float, int, "torch.Tensor", None]

# Conditions that warn once and re-arm when they clear.
_NONFINITE = "nonfinite"
CONSECUTIVE_CONDITION = _CONSECUTIVE = "consecutive_skips"
COLLAPSE_CONDITION = _COLLAPSE = "scale_collapse"
_SKIP_RATE = "skip_rate"
_SCALE_TREND = "scale_trend"
_SPIKE = "grad_norm_spike"
_WINDOW_CONDITIONS = (_CONSECUTIVE, _COLLAPSE, _SKIP_RATE, _SCALE_TREND)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One optimizer step as the monitor saw it; ``step`` counts from 1."""

    step: int
    loss: float | None
    grad_norm: float | None
    scale: float | None
    skipped: bool


def _fetch(values: Sequence[Number]) -> list[float | None]:
    """``values`` as Python floats, reading all tensors of one device in one transfer."""
    import torch

    out: list[float | None] = [None] * len(values)
    by_device: dict[torch.device, list[int]] = {}
    for i, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            by_device.setdefault(value.device, []).append(i)
        elif value is not None:
            out[i] = float(value)
    for indices in by_device.values():
        tensors = []
        for i in indices:
            tensor = values[i]
            assert isinstance(tensor, torch.Tensor)
            tensor = tensor.detach()
            tensors.append((tensor.sum() if tensor.numel() != 1 else tensor.reshape(())).float())
        for i, number in zip(indices, torch.stack(tensors).tolist(), strict=True):
            out[i] = float(number)
    return out


def _scaler_scale(scaler: Any) -> Number:
    """The scaler's current scale, as the tensor it keeps (no sync) where torch exposes it."""
    if not scaler.is_enabled():
        return None
    get_async = getattr(scaler, "_get_scale_async", None)
    tensor = get_async() if get_async is not None else None
    return tensor if tensor is not None else float(scaler.get_scale())


class StabilityMonitor:
    """A bounded step history of a training run, with warnings when it turns unstable.

    Call :meth:`record` once per optimizer step, after ``scaler.update()`` when there is
    a scaler::

        monitor = StabilityMonitor()
        ...
        scaler.step(optimizer)
        scaler.update()
        monitor.record(loss, grad_norm=norm, scaler=scaler)

    :class:`~amplint.runtime.MixedPrecision` owns one and feeds it. Detections, each
    warning once until its condition clears:

    * a non-finite loss, or non-finite gradients on a step nobody skipped
      (:class:`NonFiniteWarning`; any dtype);
    * ``warn_after_skipped`` consecutive skipped steps, or a loss scale below 1
      (:class:`LossScaleWarning`);
    * at least ``max_skip_rate`` of a ``window``-step window skipped, or the loss scale
      down by ``max_scale_drop`` or more within the window (:class:`OverflowWarning`;
      either sets :attr:`persistent_overflow`);
    * a gradient norm above ``spike_factor`` times the median of the window's earlier
      finite norms, once ``spike_min_steps`` of those exist (:class:`GradNormSpikeWarning`).

    ``history`` bounds how many records are kept (at least ``window``).
    ``track_grad_norm`` tells :class:`MixedPrecision` to measure the gradient norm on
    steps that do not clip; a standalone monitor records whatever it is given.
    """

    @needs_torch
    def __init__(
        self,
        *,
        window: int = 100,
        history: int = 1000,
        max_skip_rate: float = 0.2,
        max_scale_drop: float = 2.0**8,
        spike_factor: float = 10.0,
        spike_min_steps: int = 10,
        warn_after_skipped: int = 5,
        track_grad_norm: bool = True,
        dtype: torch.dtype | None = None,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if history < window:
            raise ValueError(f"history ({history}) must be at least window ({window})")
        if not 0 < max_skip_rate <= 1:
            raise ValueError(f"max_skip_rate must be in (0, 1], got {max_skip_rate}")
        if max_scale_drop <= 1:
            raise ValueError(f"max_scale_drop must be > 1, got {max_scale_drop}")
        if spike_factor <= 1:
            raise ValueError(f"spike_factor must be > 1, got {spike_factor}")
        if spike_min_steps < 1:
            raise ValueError(f"spike_min_steps must be >= 1, got {spike_min_steps}")
        if warn_after_skipped < 1:
            raise ValueError(f"warn_after_skipped must be >= 1, got {warn_after_skipped}")
        self.window = window
        self.max_skip_rate = max_skip_rate
        self.max_scale_drop = max_scale_drop
        self.spike_factor = spike_factor
        self.spike_min_steps = spike_min_steps
        self.warn_after_skipped = warn_after_skipped
        self.track_grad_norm = track_grad_norm
        # Only for the advice in messages: what an overflow means depends on the dtype.
        self.dtype = dtype
        self._history: deque[StepRecord] = deque(maxlen=history)
        self._window: deque[StepRecord] = deque(maxlen=window)
        # Kept up to date as records enter and leave the window, so that a step costs the
        # same whatever the window's length: its skip count, its falling maxima of the
        # scale, and the finite gradient norms of its applied steps.
        self._window_skips = 0
        self._scale_peaks: deque[tuple[int, float]] = deque()
        self._norms: deque[tuple[int, float]] = deque()
        self._skip_threshold = max(1, math.ceil(max_skip_rate * window))
        self.steps = 0
        self.skipped_steps = 0
        self.consecutive_skipped_steps = 0
        self.nonfinite_steps = 0
        self.grad_norm_spikes = 0
        self.warning_counts: dict[str, int] = {}
        self._active: set[str] = set()
        self._overflow_reason: str | None = None

    def __repr__(self) -> str:
        return (
            f"StabilityMonitor(steps={self.steps}, skipped_steps={self.skipped_steps}, "
            f"window={self.window}, persistent_overflow={self.persistent_overflow})"
        )

    # -- recording ---------------------------------------------------------------------------

    def record(
        self,
        loss: Number = None,
        grad_norm: Number = None,
        *,
        scale: Number = None,
        skipped: bool | torch.Tensor | None = None,
        scaler: torch.amp.GradScaler | None = None,
    ) -> StepRecord:
        """Add one step and run the detections; returns what was recorded.

        ``loss`` and ``grad_norm`` may be tensors (a non-scalar loss is summed) or numbers.
        ``scaler`` supplies ``scale`` (after ``update()``); a step counts as skipped when
        ``skipped`` says so or, if it is None, when the scale fell since the previous
        record (GradScaler shrinks the scale exactly on the steps it skips).
        """
        if scaler is not None and scale is None:
            scale = _scaler_scale(scaler)
            if not self._history and scale is not None:
                # The first step has no previous record; the scaler's starting scale stands in.
                initial = getattr(scaler, "_init_scale", None)
                previous: Number = float(initial) if initial is not None else None
                return self._observe(loss, grad_norm, scale, previous, skipped, stacklevel=3)
        return self._observe(loss, grad_norm, scale, None, skipped, stacklevel=3)

    def _observe(
        self,
        loss: Number,
        grad_norm: Number,
        scale: Number,
        scale_before: Number,
        skipped: bool | torch.Tensor | None,
        *,
        stacklevel: int,
    ) -> StepRecord:
        """``record`` with the scale before the step known (None: the previous record's)."""
        skip_value: Number = None if skipped is None or isinstance(skipped, bool) else skipped
        loss_f, norm_f, scale_f, before_f, skip_f = _fetch(
            [loss, grad_norm, scale, scale_before, skip_value]
        )
        if isinstance(skipped, bool):
            was_skipped = skipped
        elif skip_f is not None:
            was_skipped = skip_f != 0
        else:
            if before_f is None and self._history:
                before_f = self._history[-1].scale
            was_skipped = scale_f is not None and before_f is not None and scale_f < before_f
        self.steps += 1
        record = StepRecord(self.steps, loss_f, norm_f, scale_f, was_skipped)
        self._history.append(record)
        self._push(record)
        if was_skipped:
            self.skipped_steps += 1
            self.consecutive_skipped_steps += 1
        else:
            self.consecutive_skipped_steps = 0
        self._detect(record, stacklevel + 1)
        return record

    def _push(self, record: StepRecord) -> None:
        """Add ``record`` to the window and update what is kept about it."""
        if len(self._window) == self._window.maxlen:
            self._window_skips -= self._window[0].skipped
        self._window.append(record)
        self._window_skips += record.skipped
        oldest = self._window[0].step
        if record.scale is not None:
            while self._scale_peaks and self._scale_peaks[-1][1] <= record.scale:
                self._scale_peaks.pop()
            self._scale_peaks.append((record.step, record.scale))
        while self._scale_peaks and self._scale_peaks[0][0] < oldest:
            self._scale_peaks.popleft()
        while self._norms and self._norms[0][0] < oldest:
            self._norms.popleft()

    def _rebuild_window(self, records: list[StepRecord]) -> None:
        self._window.clear()
        self._window_skips = 0
        self._scale_peaks.clear()
        self._norms.clear()
        for record in records:
            self._push(record)
            self._add_norm(record)

    def _add_norm(self, record: StepRecord) -> None:
        norm = record.grad_norm
        if not record.skipped and norm is not None and math.isfinite(norm):
            self._norms.append((record.step, norm))

    # -- detections --------------------------------------------------------------------------

    def _warn(
        self,
        condition: str,
        active: bool,
        category: type[PrecisionWarning],
        message: str,
        stacklevel: int,
    ) -> None:
        """Warn when ``condition`` becomes active; it re-arms once it is inactive again.

        Every ``stacklevel`` in this class is the value that function would pass to
        ``warnings.warn`` itself; each call one level deeper adds one.
        """
        if not active:
            self._active.discard(condition)
            return
        if condition in self._active:
            return
        self._active.add(condition)
        name = category.__name__
        self.warning_counts[name] = self.warning_counts.get(name, 0) + 1
        warnings.warn(message, category, stacklevel=stacklevel)

    def _detect(self, record: StepRecord, stacklevel: int) -> None:
        level = stacklevel + 1
        self._detect_nonfinite(record, level)
        self._detect_loss_scale(record, level)
        self._detect_overflow(record, level)
        self._detect_spike(record, level)

    def _dtype_name(self) -> str | None:
        return None if self.dtype is None else str(self.dtype).removeprefix("torch.")

    def _detect_nonfinite(self, record: StepRecord, stacklevel: int) -> None:
        bad_loss = record.loss is not None and not math.isfinite(record.loss)
        bad_grads = (
            not record.skipped
            and record.grad_norm is not None
            and not math.isfinite(record.grad_norm)
        )
        if bad_loss or bad_grads:
            self.nonfinite_steps += 1
        what = (
            f"the loss is {record.loss}"
            if bad_loss
            else (f"the gradient norm is {record.grad_norm} and the step was applied")
        )
        dtype = self._dtype_name()
        if dtype == "float16":
            advice = (
                "In float16 this usually means an activation overflowed (above 65504): find "
                "it with amplint.runtime.precision_report(), or train in bfloat16."
            )
        elif dtype in ("bfloat16", "float32"):
            advice = (
                f"{dtype} has float32's range, so this is rarely the dtype overflowing: look "
                "at the data, the learning rate, and layers such as exp/log/division; "
                "amplint.runtime.precision_report() compares every layer against float32."
            )
        else:
            advice = "Look at the data, the learning rate, and numerically fragile layers."
        self._warn(
            _NONFINITE,
            bad_loss or bad_grads,
            NonFiniteWarning,
            f"step {record.step}: {what}. {advice}",
            stacklevel + 1,
        )

    def _detect_loss_scale(self, record: StepRecord, stacklevel: int) -> None:
        scale = record.scale
        self._warn(
            _CONSECUTIVE,
            self.consecutive_skipped_steps >= self.warn_after_skipped,
            LossScaleWarning,
            f"{self.consecutive_skipped_steps} consecutive optimizer steps were skipped for "
            f"inf/NaN gradients; the loss scale is now {scale if scale is not None else 0:g}. "
            "If the loss itself is not finite, look at the data and the learning rate; if "
            "float16 overflows in the forward pass, try dtype=torch.bfloat16.",
            stacklevel + 1,
        )
        self._warn(
            _COLLAPSE,
            scale is not None and scale < 1.0,
            LossScaleWarning,
            f"the loss scale collapsed to {scale if scale is not None else 0:g} (below 1): the "
            "gradients overflow float16 even without scaling, so every step is being skipped. "
            "Look for a non-finite loss, or train in bfloat16.",
            stacklevel + 1,
        )

    def window_skips(self) -> int:
        """Skipped steps among the records in the current window."""
        return self._window_skips

    def _scale_drop(self) -> tuple[float, float] | None:
        """(highest scale in the window, latest scale), when both are known and positive."""
        if not self._scale_peaks:
            return None
        latest = self._scale_peaks[-1][1]  # the newest scale is always the last peak
        return (self._scale_peaks[0][1], latest) if latest > 0 else None

    def _detect_overflow(self, record: StepRecord, stacklevel: int) -> None:
        skips = self.window_skips()
        advice = (
            "float16 overflows persistently. Find the layer with "
            "amplint.runtime.precision_report() and keep it in float32 "
            "(MixedPrecision(keep_fp32=...)), or train in bfloat16 "
            "(MixedPrecision(fallback='auto') switches by itself)."
        )
        rate_hit = skips >= self._skip_threshold
        self._warn(
            _SKIP_RATE,
            rate_hit,
            OverflowWarning,
            f"step {record.step}: {skips} of the last {len(self._window)} steps were skipped "
            f"for inf/NaN gradients (limit: {self.max_skip_rate:.0%} of a {self.window}-step "
            f"window); {advice}",
            stacklevel + 1,
        )
        drop = self._scale_drop()
        trend_hit = drop is not None and drop[0] / drop[1] >= self.max_scale_drop
        if drop is not None:
            self._warn(
                _SCALE_TREND,
                trend_hit,
                OverflowWarning,
                f"step {record.step}: the loss scale fell from {drop[0]:g} to {drop[1]:g} "
                f"within the last {len(self._window)} steps (a factor of "
                f"{drop[0] / drop[1]:g}, limit {self.max_scale_drop:g}); {advice}",
                stacklevel + 1,
            )
        if rate_hit:
            self._overflow_reason = (
                f"{skips} of the last {len(self._window)} steps skipped for inf/NaN gradients"
            )
        elif trend_hit and drop is not None:
            self._overflow_reason = (
                f"loss scale fell from {drop[0]:g} to {drop[1]:g} within {len(self._window)} steps"
            )
        else:
            self._overflow_reason = None

    def _detect_spike(self, record: StepRecord, stacklevel: int) -> None:
        norm = record.grad_norm
        baseline = [n for _, n in self._norms]  # the window's earlier applied steps
        self._add_norm(record)
        if norm is None or not math.isfinite(norm) or len(baseline) < self.spike_min_steps:
            return
        median = statistics.median(baseline)
        spiking = median > 0 and norm > self.spike_factor * median
        if spiking:
            self.grad_norm_spikes += 1
        self._warn(
            _SPIKE,
            spiking,
            GradNormSpikeWarning,
            f"step {record.step}: the gradient norm {norm:.4g} is {norm / median:.1f}x the "
            f"median {median:.4g} of the previous {len(baseline)} steps (spike_factor="
            f"{self.spike_factor:g}). A spike often precedes divergence: consider a lower "
            "learning rate or gradient clipping (MixedPrecision.step(max_norm=...)).",
            stacklevel + 1,
        )

    # -- reading -----------------------------------------------------------------------------

    @property
    def persistent_overflow(self) -> bool:
        """True while the window shows float16 overflowing persistently (what fallback acts on).

        That is: the window's skip rate or scale drop is over its limit. A scale below 1
        alone is a :class:`LossScaleWarning`, not persistent overflow: after a fallback
        stage the scale starts low, and only new skips should lead to the next stage.
        """
        return self._overflow_reason is not None

    @property
    def overflow_reason(self) -> str | None:
        """Why :attr:`persistent_overflow` is set, in words; None when it is not."""
        return self._overflow_reason

    @property
    def history(self) -> list[StepRecord]:
        """The kept records, oldest first."""
        return list(self._history)

    @property
    def last(self) -> StepRecord | None:
        return self._history[-1] if self._history else None

    def reset_window(self) -> None:
        """Forget the window (not the history), e.g. after the precision changed.

        The window-based detections then need fresh evidence; consecutive skips restart.
        """
        self._rebuild_window([])
        self.consecutive_skipped_steps = 0
        self._overflow_reason = None
        self._active.difference_update(_WINDOW_CONDITIONS)

    def summary(self) -> dict[str, Any]:
        """The run so far as plain Python values (for logging or JSON)."""
        records = list(self._history)
        losses = [r.loss for r in records if r.loss is not None and math.isfinite(r.loss)]
        norms = [
            r.grad_norm
            for r in records
            if r.grad_norm is not None and math.isfinite(r.grad_norm) and not r.skipped
        ]
        scales = [r.scale for r in records if r.scale is not None]
        last = records[-1] if records else None
        return {
            "steps": self.steps,
            "skipped_steps": self.skipped_steps,
            "skip_rate": self.skipped_steps / self.steps if self.steps else 0.0,
            "window": {
                "steps": len(self._window),
                "skipped_steps": self.window_skips(),
                "skip_rate": self.window_skips() / len(self._window) if self._window else 0.0,
            },
            "consecutive_skipped_steps": self.consecutive_skipped_steps,
            "nonfinite_steps": self.nonfinite_steps,
            "grad_norm_spikes": self.grad_norm_spikes,
            "persistent_overflow": self.persistent_overflow,
            "overflow_reason": self._overflow_reason,
            "dtype": self._dtype_name(),
            "loss": {
                "last": last.loss if last else None,
                "min": min(losses) if losses else None,
                "max": max(losses) if losses else None,
                "mean": statistics.fmean(losses) if losses else None,
            },
            "grad_norm": {
                "last": last.grad_norm if last else None,
                "median": statistics.median(norms) if norms else None,
                "max": max(norms) if norms else None,
            },
            "scale": {
                "last": last.scale if last else None,
                "min": min(scales) if scales else None,
                "max": max(scales) if scales else None,
            },
            "warnings": dict(sorted(self.warning_counts.items())),
            "history_kept": len(records),
        }

    # -- checkpoints -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Counters, history and warning state as plain Python values."""
        return {
            "history": [[r.step, r.loss, r.grad_norm, r.scale, r.skipped] for r in self._history],
            "window_length": len(self._window),
            "steps": self.steps,
            "skipped_steps": self.skipped_steps,
            "consecutive_skipped_steps": self.consecutive_skipped_steps,
            "nonfinite_steps": self.nonfinite_steps,
            "grad_norm_spikes": self.grad_norm_spikes,
            "warning_counts": dict(self.warning_counts),
            "active": sorted(self._active),
            "overflow_reason": self._overflow_reason,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output; a resumed run warns only about new trouble."""
        records = [
            StepRecord(
                int(step),
                None if loss is None else float(loss),
                None if norm is None else float(norm),
                None if scale is None else float(scale),
                bool(skipped),
            )
            for step, loss, norm, scale, skipped in state.get("history", [])
        ]
        self._history.clear()
        self._history.extend(records)
        length = min(int(state.get("window_length", 0)), len(records), self.window)
        self._rebuild_window(records[-length:] if length else [])
        self.steps = int(state.get("steps", 0))
        self.skipped_steps = int(state.get("skipped_steps", 0))
        self.consecutive_skipped_steps = int(state.get("consecutive_skipped_steps", 0))
        self.nonfinite_steps = int(state.get("nonfinite_steps", 0))
        self.grad_norm_spikes = int(state.get("grad_norm_spikes", 0))
        self.warning_counts = {str(k): int(v) for k, v in state.get("warning_counts", {}).items()}
        self._active = {str(c) for c in state.get("active", [])}
        reason = state.get("overflow_reason")
        self._overflow_reason = None if reason is None else str(reason)
