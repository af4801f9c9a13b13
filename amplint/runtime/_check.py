"""Is autocast really on, and does it pay? One model, one batch, float32 against AMP.

The common silent AMP failure is no AMP at all: ``autocast("cuda")`` around a model on
the CPU, a forward that calls ``.float()`` everywhere, a module that disables autocast,
float64 inputs. Training still works; it is just as slow and as large as float32.
:func:`amp_check` looks at the dtypes the modules actually produce under autocast and
measures step time and memory both ways on the model's own device.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from amplint.runtime._amp import autocast
from amplint.runtime._devices import amp_dtype, autocast_usable
from amplint.runtime._probe import (
    LOW_PRECISION_NAMES,
    RngReplay,
    call_model,
    float_tensors,
    model_device,
    synchronize,
)
from amplint.runtime._torch import needs_torch

if TYPE_CHECKING:
    import torch

__all__ = ["AmpCheck", "AmpCheckError", "amp_check"]


class AmpCheckError(AssertionError):
    """Autocast produced no low-precision output anywhere in the model."""


@dataclass(frozen=True, slots=True)
class AmpCheck:
    """What :func:`amp_check` measured. Times are medians in seconds; sizes in bytes.

    ``peak_memory`` is the device allocator's peak above what was allocated before the
    step (None where torch reports none: CPU, MPS). ``saved_bytes`` is the size of the
    distinct tensors autograd saved for backward, counted on every device: activations,
    plus the low-precision weight copies autocast makes (parameters themselves are not
    counted). Smaller activations save memory; the weight copies cost some, which
    dominates for small batches.
    """

    device: str
    dtype: str
    autocast_active: bool
    output_dtypes: tuple[str, ...]
    low_precision_modules: tuple[str, ...]
    modules: int
    backward: bool
    fp32_seconds: float
    amp_seconds: float
    fp32_peak_memory: int | None
    amp_peak_memory: int | None
    fp32_saved_bytes: int
    amp_saved_bytes: int

    @property
    def speedup(self) -> float:
        """float32 step time over AMP step time (above 1: AMP is faster)."""
        return self.fp32_seconds / self.amp_seconds if self.amp_seconds > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "speedup": self.speedup}

    def __str__(self) -> str:
        step = "forward+backward" if self.backward else "forward"
        active = (
            f"active ({len(self.low_precision_modules)} of {self.modules} modules produce "
            f"{self.dtype})"
            if self.autocast_active
            else "NOT active (no module produced float16/bfloat16)"
        )
        lines = [
            f"amp_check on {self.device}, autocast {self.dtype}: {active}",
            f"  model outputs: {', '.join(self.output_dtypes) or '-'}",
            f"  {step} time: float32 {self.fp32_seconds * 1e3:.3f} ms, "
            f"AMP {self.amp_seconds * 1e3:.3f} ms (speedup {self.speedup:.2f}x)",
            f"  saved for backward: float32 {_size(self.fp32_saved_bytes)}, "
            f"AMP {_size(self.amp_saved_bytes)}",
        ]
        if self.fp32_peak_memory is not None and self.amp_peak_memory is not None:
            lines.append(
                f"  peak memory: float32 {_size(self.fp32_peak_memory)}, "
                f"AMP {_size(self.amp_peak_memory)}"
            )
        return "\n".join(lines)


class _Timing(NamedTuple):
    """One way of running the step (float32 or AMP), as :class:`AmpCheck` reports it."""

    seconds: float
    peak_memory: int | None
    saved_bytes: int


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value = count / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _memory_api(device: torch.device) -> Any:
    """The ``torch.cuda``-like module with peak-memory statistics for ``device``, or None."""
    import torch

    backend = getattr(torch, device.type, None)
    needed = ("reset_peak_memory_stats", "max_memory_allocated", "memory_allocated")
    if device.type == "cpu" or not all(hasattr(backend, n) for n in needed):
        return None
    return backend


class _SavedBytes:
    """Pack hook for ``saved_tensors_hooks``: adds up distinct storages autograd keeps."""

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self.seen: set[int] = set()
        self.total = 0

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self.seen and key not in self.exclude:
            self.seen.add(key)
            self.total += storage.nbytes()
        return tensor

    @staticmethod
    def unpack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor


def _module_dtypes(
    model: torch.nn.Module, sample_inputs: Any
) -> tuple[dict[str, set[str]], tuple[str, ...]]:
    """The dtypes each module's floating-point outputs had in one forward, and the model's."""
    seen: dict[str, set[str]] = {}
    handles = []

    def hook(name: str, module: Any, args: Any, output: Any) -> None:
        seen.setdefault(name, set()).update(
            str(t.dtype).removeprefix("torch.") for t in float_tensors(output)
        )

    try:
        for name, module in model.named_modules():
            handles.append(module.register_forward_hook(functools.partial(hook, name)))
        output = call_model(model, sample_inputs)
    finally:
        for handle in handles:
            handle.remove()
    return seen, tuple(str(t.dtype).removeprefix("torch.") for t in float_tensors(output))


@needs_torch
def amp_check(
    model: torch.nn.Module,
    sample_inputs: Any,
    *,
    dtype: torch.dtype | None = None,
    backward: bool = True,
    repeat: int = 5,
    warmup: int = 2,
    strict: bool = True,
) -> AmpCheck:
    """Check that autocast really runs ``model`` in low precision, and measure what it buys.

    Runs ``model`` on ``sample_inputs`` (a tensor, a tuple of positional arguments or a
    dict of keyword arguments) on its own device, under autocast at ``dtype`` (default
    :func:`amp_dtype`) and in float32: module output dtypes once, then ``warmup`` +
    ``repeat`` timed steps each way (forward, plus backward to the parameters when
    ``backward`` and the output needs gradients; with ``backward=False`` the forward runs
    without autograd, as inference does). Gradients go through
    ``torch.autograd.grad``, so ``.grad``, parameters, buffers and the global random
    state are left as they were. With ``strict`` (the default), raises
    :class:`AmpCheckError` when no module produced float16/bfloat16 output.
    """
    import torch

    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0, got {repeat} and {warmup}")
    device = model_device(model, sample_inputs)
    chosen = dtype if dtype is not None else amp_dtype(device)
    params = [p for p in model.parameters() if p.requires_grad]
    # The caller's no_grad() counts as backward=False.
    backward = backward and torch.is_grad_enabled() and bool(params)
    exclude = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    memory_api = _memory_api(device)

    def step(mixed: bool) -> None:
        # Forward-only means inference: no graph, nothing saved for a backward.
        with autocast(device, chosen, enabled=mixed), torch.set_grad_enabled(backward):
            output = call_model(model, sample_inputs)
        outputs = [t for t in float_tensors(output) if t.requires_grad]
        if backward and outputs:
            loss = torch.stack([t.float().sum() for t in outputs]).sum()
            torch.autograd.grad(loss, params, allow_unused=True)

    def measure(mixed: bool) -> _Timing:
        saved = _SavedBytes(exclude)
        synchronize(device)
        if memory_api is not None:
            memory_api.reset_peak_memory_stats(device)
            baseline = memory_api.memory_allocated(device)
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
            step(mixed)
        synchronize(device)
        peak = None
        if memory_api is not None:
            peak = int(memory_api.max_memory_allocated(device) - baseline)
        for _ in range(warmup):
            step(mixed)
        times = []
        for _ in range(repeat):
            synchronize(device)
            start = time.perf_counter()
            step(mixed)
            synchronize(device)
            times.append(time.perf_counter() - start)
        return _Timing(statistics.median(times), peak, saved.total)

    rng = RngReplay(device)
    try:
        with autocast(device, chosen):
            module_dtypes, output_dtypes = _module_dtypes(model, sample_inputs)
        fp32 = measure(False)
        amp = measure(True)
    finally:
        rng.rewind()
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                if name in buffers:
                    buffer.copy_(buffers[name])
    low = tuple(name for name, dtypes in module_dtypes.items() if dtypes & set(LOW_PRECISION_NAMES))
    result = AmpCheck(
        device=str(device),
        dtype=str(chosen).removeprefix("torch."),
        autocast_active=bool(low),
        output_dtypes=output_dtypes,
        low_precision_modules=low,
        modules=len(module_dtypes),
        backward=backward,
        fp32_seconds=fp32.seconds,
        amp_seconds=amp.seconds,
        fp32_peak_memory=fp32.peak_memory,
        amp_peak_memory=amp.peak_memory,
        fp32_saved_bytes=fp32.saved_bytes,
        amp_saved_bytes=amp.saved_bytes,
    )
    if strict and not result.autocast_active:
        reason = (
            f"autocast cannot run on {device}"
            if not autocast_usable(device.type)
            else "every module produced float32/float64: is autocast disabled inside forward, "
            "are the inputs float64, or does the model cast with .float()?"
        )
        raise AmpCheckError(
            f"autocast ({result.dtype}) is not active for this model: {reason} "
            f"(model outputs: {', '.join(output_dtypes) or 'none'})"
        )
    return result
