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
from typing import TYPE_CHECKING, Any, TypeAlias, Union

from amplint.runtime._torch import needs_torch

if TYPE_CHECKING:
    import torch

__all__ = [
    "Capabilities",
    "DeviceLike",
    "Tf32Status",
    "amp_dtype",
    "as_device",
    "autocast_usable",
    "backend_available",
    "capabilities",
    "default_device",
    "device_type",
    "dist_backend",
    "enable_tf32",
    "tf32_flags",
]

DeviceLike: TypeAlias = Union[str, "torch.device", int, None]
"""What every helper accepts as a device: ``"cuda:1"``, ``torch.device(...)``, an index, or None."""

_DIST_BACKENDS = {"cuda": "nccl", "xpu": "xccl"}
_AMPERE = (8, 0)
_VOLTA = (7, 0)
# What torch raises for device queries on a build or machine without that device.
_QUERY_ERRORS = (AssertionError, AttributeError, RuntimeError, ValueError)


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
    """The device *type* (``"cuda:1"`` → ``"cuda"``), which is what autocast and GradScaler take.

    A bare index (``device=args.gpu``, ``0``) names a device of the machine's accelerator,
    as ``torch.device(0)`` does; on a machine without one, where ``torch.device(0)``
    raises, it is ``"cuda"``, what an index meant before torch knew other accelerators.
    """
    import torch

    if isinstance(device, int) and not isinstance(device, bool):
        accelerator = getattr(torch, "accelerator", None)
        current = accelerator.current_accelerator() if accelerator is not None and accelerator.is_available() else None
        return current.type if current is not None else "cuda"
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
    device_count: int = 0
    total_memory: int | None = None
    compute_capability: tuple[int, int] | None = None
    tensor_cores: bool | None = None


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


def _device_properties(kind: str, device: torch.device) -> Any:
    """``torch.<kind>.get_device_properties(device)``, or None where torch cannot say."""
    import torch

    backend = getattr(torch, kind, None)
    get_properties = getattr(backend, "get_device_properties", None)
    if get_properties is None:
        return None
    try:
        return get_properties(device)
    except _QUERY_ERRORS:
        return None


def _device_count(kind: str) -> int:
    import torch

    if kind in ("cpu", "mps"):
        return 1
    count = getattr(getattr(torch, kind, None), "device_count", None)
    if count is None:
        return 1
    try:
        return int(count())
    except _QUERY_ERRORS:
        return 0


def _memory(properties: Any) -> int | None:
    total = getattr(properties, "total_memory", None)
    return int(total) if isinstance(total, int) and total > 0 else None


@needs_torch
def capabilities(device: DeviceLike = None) -> Capabilities:
    """Mixed-precision facts about ``device`` (default: :func:`default_device`).

    ``bf16_supported``/``fp16_supported`` mean autocast can run at that dtype on this
    device; ``tf32_supported`` is only reported for CUDA (Ampere and newer, not ROCm).
    ``device_count``, ``total_memory`` (bytes), ``compute_capability`` and
    ``tensor_cores`` are filled in where torch reports them (CUDA, XPU) and None
    otherwise; tensor cores are reported for NVIDIA GPUs (compute capability 7.0 and
    newer) and for XPU's matrix engines. An absent device reports everything as
    unsupported.
    """
    import torch

    dev = as_device(device)
    kind = dev.type
    available = backend_available(kind)
    recommended = amp_dtype(dev)
    bf16 = fp16 = tf32 = False
    name = kind
    count = 0
    memory: int | None = None
    capability: tuple[int, int] | None = None
    tensor_cores: bool | None = None
    if available:
        count = _device_count(kind)
        if kind == "cuda":
            name = str(torch.cuda.get_device_name(dev))
            bf16 = _cuda_bf16_native(dev)
            fp16 = True
            tf32 = not torch.version.hip and bf16
            memory = _memory(_device_properties(kind, dev))
            if not torch.version.hip:
                major, minor = torch.cuda.get_device_capability(dev)
                capability = (int(major), int(minor))
                tensor_cores = capability >= _VOLTA
        elif kind == "xpu":
            name = str(torch.xpu.get_device_name(dev))
            bf16 = fp16 = True
            properties = _device_properties(kind, dev)
            memory = _memory(properties)
            xmx = getattr(properties, "has_subgroup_matrix_multiply_accumulate", None)
            tensor_cores = xmx if isinstance(xmx, bool) else None
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
        device_count=count,
        total_memory=memory,
        compute_capability=capability,
        tensor_cores=tensor_cores,
    )


@dataclass(frozen=True, slots=True)
class Tf32Status:
    """What :func:`enable_tf32` found and did; ``str()`` says it in a sentence.

    ``matmul`` and ``cudnn`` are ``(before, after)`` for
    ``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32``;
    None where TF32 is not supported (nothing was touched).
    """

    device: str
    supported: bool
    matmul: tuple[bool, bool] | None
    cudnn: tuple[bool, bool] | None
    message: str

    @property
    def changed(self) -> bool:
        return any(
            flags is not None and flags[0] != flags[1] for flags in (self.matmul, self.cudnn)
        )

    def __str__(self) -> str:
        return self.message


def tf32_flags() -> tuple[bool, bool]:
    """The current (CUDA matmul, cuDNN) TF32 switches."""
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)


@needs_torch
def enable_tf32(device: DeviceLike = None) -> Tf32Status:
    """Let float32 matmuls and convolutions use TF32 on ``device`` if it supports it.

    TF32 (a 10-bit mantissa inside the tensor cores) speeds up the float32 work that
    autocast leaves in float32 — and whole float32 runs — on NVIDIA GPUs of compute
    capability 8.0 and newer; torch leaves it off for matmuls by default. On such a GPU
    this sets ``torch.backends.cuda.matmul.allow_tf32`` and
    ``torch.backends.cudnn.allow_tf32``; anywhere else it changes nothing. Either way
    the result says what it did.
    """
    import torch

    dev = as_device(device)
    caps = capabilities(dev)
    if not caps.tf32_supported:
        where = f"{dev} ({caps.name})" if caps.available else f"{dev} (not present)"
        return Tf32Status(
            device=str(dev),
            supported=False,
            matmul=None,
            cudnn=None,
            message=(
                f"TF32 not enabled: it needs an NVIDIA GPU of compute capability 8.0 or newer, "
                f"and {where} is not one; nothing changed"
            ),
        )
    matmul_before, cudnn_before = tf32_flags()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    matmul_after, cudnn_after = tf32_flags()

    def state(before: bool, after: bool) -> str:
        return "already on" if before else ("turned on" if after else "could not be turned on")

    return Tf32Status(
        device=str(dev),
        supported=True,
        matmul=(matmul_before, matmul_after),
        cudnn=(cudnn_before, cudnn_after),
        message=(
            f"TF32 on {dev} ({caps.name}): CUDA matmuls {state(matmul_before, matmul_after)}, "
            f"cuDNN convolutions {state(cudnn_before, cudnn_after)}. float32 matmuls now round "
            "their inputs to a 10-bit mantissa inside the tensor cores."
        ),
    )
