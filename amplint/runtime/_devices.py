"""Device detection and the per-device AMP facts that training code usually hard-codes.

Scripts written for one machine say ``"cuda"``, ``torch.float16`` and ``"nccl"``; the
same script then fails or silently runs slowly on a laptop, an Intel GPU or an older
data-centre card. These functions answer those questions from what torch reports about
the hardware at run time, so that the choice is made in one place.

Decisions (also in docs/runtime.md):

* CUDA recommends bfloat16 from compute capability 8.0 (Ampere) and on ROCm, float16
  below: pre-Ampere cards only *emulate* bfloat16, which is slower than float32.
  ``torch.cuda.is_bf16_supported()`` is not used because it counts emulation.
* MPS recommends float16 even where bfloat16 is supported (macOS 14+): float16 is
  native on every Apple GPU and is torch's own MPS autocast default, while bfloat16 is
  emulated on M1-class chips. Pass ``dtype=torch.bfloat16`` to choose it.
* XPU and CPU recommend bfloat16, which both support natively and which needs no
  GradScaler.
* A device type whose hardware is absent (``"cuda"`` on a CPU-only machine) is not an
  error: it reports as unavailable and recommends its float16 default, so code that
  names it still constructs.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, Union

from amplint.runtime._torch import needs_torch

if TYPE_CHECKING:
    import torch

__all__ = [
    "Capabilities",
    "DeviceLike",
    "amp_dtype",
    "as_device",
    "autocast_usable",
    "backend_available",
    "capabilities",
    "default_device",
    "device_type",
    "dist_backend",
]

DeviceLike: TypeAlias = Union[str, "torch.device", int, None]
"""What every helper accepts as a device: ``"cuda:1"``, ``torch.device(...)``, an index, or None."""

_DIST_BACKENDS = {"cuda": "nccl", "xpu": "xccl"}
_AMPERE = (8, 0)


@needs_torch
def default_device() -> torch.device:
    """The best accelerator present: CUDA (or ROCm), then XPU, then MPS, else the CPU."""
    import torch

    for kind in ("cuda", "xpu", "mps"):
        if backend_available(kind):
            return torch.device(kind)
    return torch.device("cpu")


@needs_torch
def as_device(device: DeviceLike = None) -> torch.device:
    """``device`` as a ``torch.device``; None means :func:`default_device`.

    Raises ``ValueError`` for a string torch does not recognise as a device.
    """
    import torch

    if device is None:
        return default_device()
    if isinstance(device, torch.device):
        return device
    try:
        return torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"not a device: {device!r} ({error})") from error


@needs_torch
def device_type(device: DeviceLike = None) -> str:
    """The device *type* (``"cuda:1"`` → ``"cuda"``), which is what autocast and GradScaler take."""
    return as_device(device).type


@needs_torch
def backend_available(kind: str) -> bool:
    """Whether hardware of device type ``kind`` is present and usable by this torch build."""
    import torch

    if kind == "cpu":
        return True
    if kind == "cuda":
        return bool(torch.cuda.is_available())
    if kind == "xpu":
        return hasattr(torch, "xpu") and bool(torch.xpu.is_available())
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        return mps is not None and bool(mps.is_available())
    # Other backends (privateuse1, hpu, ...): torch knows whether it has autocast for them.
    return bool(torch.amp.is_autocast_available(kind))


@needs_torch
def autocast_usable(kind: str) -> bool:
    """Whether ``torch.amp.autocast(kind)`` would do something here (type known and hardware present)."""
    import torch

    return backend_available(kind) and bool(torch.amp.is_autocast_available(kind))


def _cuda_bf16_native(device: torch.device) -> bool:
    import torch

    if torch.version.hip:
        return True
    return tuple(torch.cuda.get_device_capability(device)) >= _AMPERE


def _mps_bf16_supported() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    check = getattr(mps, "is_macos_or_newer", None)
    return bool(check is not None and check(14, 0))


@needs_torch
def amp_dtype(device: DeviceLike = None) -> torch.dtype:
    """The reduced-precision dtype autocast should use on ``device``.

    bfloat16 where the hardware runs it natively (CUDA capability >= 8.0, ROCm, XPU,
    CPU), float16 otherwise (older CUDA, MPS). A device type with no autocast at all
    gets float32: there is nothing to reduce to.
    """
    import torch

    dev = as_device(device)
    kind = dev.type
    if kind == "cuda":
        if not backend_available("cuda"):
            return torch.float16
        return torch.bfloat16 if _cuda_bf16_native(dev) else torch.float16
    if kind in ("cpu", "xpu"):
        return torch.bfloat16
    if kind == "mps":
        return torch.float16
    if torch.amp.is_autocast_available(kind):
        dtype: torch.dtype = torch.get_autocast_dtype(kind)
        return dtype
    return torch.float32


@needs_torch
def dist_backend(device: DeviceLike = None) -> str:
    """The ``torch.distributed`` backend for ``device``: nccl (CUDA/ROCm), xccl (XPU), else gloo."""
    return _DIST_BACKENDS.get(device_type(device), "gloo")


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one device supports for mixed precision (see :func:`capabilities`)."""

    device_type: str
    index: int | None
    name: str
    available: bool
    autocast_available: bool
    bf16_supported: bool
    fp16_supported: bool
    tf32_supported: bool
    recommended_dtype: torch.dtype
    needs_grad_scaler: bool
    dist_backend: str


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def _mps_name() -> str:
    import torch

    get_name = getattr(torch.backends.mps, "get_name", None)
    if get_name is not None:
        try:
            return str(get_name())
        except RuntimeError:
            pass
    return "Apple GPU (MPS)"


@needs_torch
def capabilities(device: DeviceLike = None) -> Capabilities:
    """Mixed-precision facts about ``device`` (default: :func:`default_device`).

    ``bf16_supported``/``fp16_supported`` mean autocast can run at that dtype on this
    device; ``tf32_supported`` is only reported for CUDA (Ampere and newer, not ROCm).
    An absent device reports everything as unsupported.
    """
    import torch

    dev = as_device(device)
    kind = dev.type
    available = backend_available(kind)
    recommended = amp_dtype(dev)
    bf16 = fp16 = tf32 = False
    name = kind
    if available:
        if kind == "cuda":
            name = str(torch.cuda.get_device_name(dev))
            bf16 = _cuda_bf16_native(dev)
            fp16 = True
            tf32 = not torch.version.hip and bf16
        elif kind == "xpu":
            name = str(torch.xpu.get_device_name(dev))
            bf16 = fp16 = True
        elif kind == "mps":
            name = _mps_name()
            bf16 = _mps_bf16_supported()
            fp16 = True
        elif kind == "cpu":
            name = _cpu_name()
            bf16 = fp16 = True
        else:
            bf16 = fp16 = bool(torch.amp.is_autocast_available(kind))
    return Capabilities(
        device_type=kind,
        index=dev.index,
        name=name,
        available=available,
        autocast_available=available and bool(torch.amp.is_autocast_available(kind)),
        bf16_supported=bf16,
        fp16_supported=fp16,
        tf32_supported=tf32,
        recommended_dtype=recommended,
        needs_grad_scaler=available and recommended == torch.float16,
        dist_backend=_DIST_BACKENDS.get(kind, "gloo"),
    )
