"""Device-agnostic helpers for PyTorch automatic mixed precision.

amplint's fixes replace hard-coded ``"cuda"``, ``float16`` and hand-ordered GradScaler
calls with these helpers, so the rewritten code picks the right device, dtype and
scaling at run time instead of baking in the author's machine. torch is an optional
dependency (``pip install 'amplint[runtime]'``): importing this package never imports
it, and calling a helper without it raises :class:`TorchNotInstalledError`.
"""

from __future__ import annotations

from amplint.runtime._amp import (
    AutocastContext,
    DisabledAutocast,
    autocast,
    clip_grad_norm_,
    grad_scaler,
)
from amplint.runtime._devices import (
    Capabilities,
    DeviceLike,
    amp_dtype,
    capabilities,
    default_device,
    device_type,
    dist_backend,
)
from amplint.runtime._precision import LossScaleWarning, MixedPrecision
from amplint.runtime._seed import seed_all
from amplint.runtime._torch import TorchNotInstalledError

__all__ = [
    "AutocastContext",
    "Capabilities",
    "DeviceLike",
    "DisabledAutocast",
    "LossScaleWarning",
    "MixedPrecision",
    "TorchNotInstalledError",
    "amp_dtype",
    "autocast",
    "capabilities",
    "clip_grad_norm_",
    "default_device",
    "device_type",
    "dist_backend",
    "grad_scaler",
    "seed_all",
]
