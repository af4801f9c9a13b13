"""Device-agnostic helpers for PyTorch automatic mixed precision.

amplint's fixes replace hard-coded ``"cuda"``, ``float16`` and hand-ordered GradScaler
calls with these helpers, so the rewritten code picks the right device, dtype and
scaling at run time instead of baking in the author's machine. Beyond the helpers, a
run can be watched (:class:`StabilityMonitor`), fall back when float16 keeps
overflowing (``MixedPrecision(fallback=...)``), and a model can be checked layer by
layer (:func:`precision_report`, :func:`amp_check`). torch is an optional dependency
(``pip install 'amplint[runtime]'``): importing this package never imports it, and
calling a helper without it raises :class:`TorchNotInstalledError`.
"""

from __future__ import annotations

from amplint.runtime._amp import (
    AutocastContext,
    DisabledAutocast,
    autocast,
    clip_grad_norm_,
    grad_scaler,
)
from amplint.runtime._check import AmpCheck, AmpCheckError, amp_check
from amplint.runtime._devices import (
    Capabilities,
    DeviceLike,
    Tf32Status,
    amp_dtype,
    capabilities,
    default_device,
    device_type,
    dist_backend,
    enable_tf32,
)
from amplint.runtime._fallback import Fallback, Float32Modules, fallback_dtype, keep_float32
from amplint.runtime._monitor import StabilityMonitor, StepRecord
from amplint.runtime._precision import MixedPrecision
from amplint.runtime._report import ModuleReport, OpReport, PrecisionReport, precision_report
from amplint.runtime._seed import seed_all
from amplint.runtime._torch import TorchNotInstalledError
from amplint.runtime._warnings import (
    GradNormSpikeWarning,
    LossScaleWarning,
    NonFiniteWarning,
    OverflowWarning,
    PrecisionWarning,
)

__all__ = [
    "AmpCheck",
    "AmpCheckError",
    "AutocastContext",
    "Capabilities",
    "DeviceLike",
    "DisabledAutocast",
    "Fallback",
    "Float32Modules",
    "GradNormSpikeWarning",
    "LossScaleWarning",
    "MixedPrecision",
    "ModuleReport",
    "NonFiniteWarning",
    "OpReport",
    "OverflowWarning",
    "PrecisionReport",
    "PrecisionWarning",
    "StabilityMonitor",
    "StepRecord",
    "Tf32Status",
    "TorchNotInstalledError",
    "amp_check",
    "amp_dtype",
    "autocast",
    "capabilities",
    "clip_grad_norm_",
    "default_device",
    "device_type",
    "dist_backend",
    "enable_tf32",
    "fallback_dtype",
    "grad_scaler",
    "keep_float32",
    "precision_report",
    "seed_all",
]
