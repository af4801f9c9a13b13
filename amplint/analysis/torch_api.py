"""PyTorch's AMP API as data: every symbol the rules know, in every spelling.

One table serves every rule: which qualified names are an autocast, a GradScaler or a
``custom_fwd``/``custom_bwd`` (modern and deprecated spellings), what device a deprecated
spelling implies, the positional order of each signature, the deprecated autocast-state
functions and their replacements, the dtype names, and each device type's default
autocast dtype. The facts were verified on torch 2.13 and 2.14 (RULES.md); the tests
that prove what fixes depend on run the installed torch.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- the AMP objects ----------------------------------------------------------------------------

AUTOCAST = "autocast"
GRAD_SCALER = "GradScaler"
CUSTOM_FWD = "custom_fwd"
CUSTOM_BWD = "custom_bwd"


@dataclass(frozen=True)
class AmpSymbol:
    """One spelling of an AMP object: what it is, and for a deprecated one, the device it
    implied (``torch.cuda.amp.autocast`` is the CUDA autocast)."""

    kind: str  # AUTOCAST | GRAD_SCALER | CUSTOM_FWD | CUSTOM_BWD
    implied_device: str | None = None  # None: the modern, device-taking spelling

    @property
    def deprecated(self) -> bool:
        return self.implied_device is not None

    @property
    def replacement(self) -> str:
        """The modern spelling a fix emits (after ``<torch>.``)."""
        return f"amp.{self.kind}"


DEPRECATED_NAMESPACES = ("torch.cuda.amp", "torch.cpu.amp")
# Modules of the deprecated namespaces that are imported as modules (their members
# are what is deprecated).
DEPRECATED_MODULES = frozenset(
    f"{namespace}{suffix}" for namespace in DEPRECATED_NAMESPACES for suffix in ("", ".autocast_mode", ".grad_scaler")
)
# Members of the deprecated namespaces that PyTorch does not deprecate, or that are
# submodules referenced as modules.
NOT_DEPRECATED_MEMBERS = frozenset({"autocast_mode", "grad_scaler", "common", "amp_definitely_not_available"})

SYMBOLS: dict[str, AmpSymbol] = {
    # Modern spellings: torch.amp, its submodules, and the top-level aliases
    # (`torch.GradScaler is torch.amp.GradScaler`, `torch.autocast` is torch.amp's).
    "torch.autocast": AmpSymbol(AUTOCAST),
    "torch.amp.autocast": AmpSymbol(AUTOCAST),
    "torch.amp.autocast_mode.autocast": AmpSymbol(AUTOCAST),
    "torch.GradScaler": AmpSymbol(GRAD_SCALER),
    "torch.amp.GradScaler": AmpSymbol(GRAD_SCALER),
    "torch.amp.grad_scaler.GradScaler": AmpSymbol(GRAD_SCALER),
    **{f"torch.amp{module}.{kind}": AmpSymbol(kind) for module in ("", ".autocast_mode") for kind in (CUSTOM_FWD, CUSTOM_BWD)},
    # Deprecated spellings (PyTorch 2.4): the device is in the namespace.
    **{
        f"torch.{device}.amp.{path}": AmpSymbol(AUTOCAST, device)
        for device in ("cuda", "cpu")
        for path in ("autocast", "autocast_mode.autocast")
    },
    **{
        f"torch.{device}.amp.{path}": AmpSymbol(GRAD_SCALER, device)
        for device in ("cuda", "cpu")
        for path in ("GradScaler", "grad_scaler.GradScaler")
    },
    **{
        f"torch.cuda.amp.{path}": AmpSymbol(kind, "cuda")
        for kind in (CUSTOM_FWD, CUSTOM_BWD)
        for path in (kind, f"autocast_mode.{kind}")
    },
}


def symbol(qualified: str | None) -> AmpSymbol | None:
    return SYMBOLS.get(qualified) if qualified else None


def spellings(kind: str, *, deprecated: bool | None = None) -> frozenset[str]:
    """Every qualified name of ``kind``; only the deprecated (or modern) ones if asked."""
    return frozenset(
        name
        for name, found in SYMBOLS.items()
        if found.kind == kind and (deprecated is None or found.deprecated == deprecated)
    )


AUTOCASTS = spellings(AUTOCAST)
MODERN_AUTOCASTS = spellings(AUTOCAST, deprecated=False)
GRAD_SCALERS = spellings(GRAD_SCALER)
MODERN_GRAD_SCALERS = spellings(GRAD_SCALER, deprecated=False)
MODERN_CUSTOM_AUTOGRAD = spellings(CUSTOM_FWD, deprecated=False) | spellings(CUSTOM_BWD, deprecated=False)


# amplint.runtime's helpers, which fixes rewrite code to use: an autocast that picks the
# device's dtype when none is given (bfloat16 where native, float16 otherwise), and scalers
# that are enabled only for float16 (MixedPrecision wraps one).
RUNTIME_AUTOCASTS = frozenset({"amplint.runtime.autocast", "amplint.runtime._amp.autocast"})
RUNTIME_AUTOCAST_ORDER = ("device", "dtype", "enabled", "cache_enabled")
RUNTIME_DTYPES = frozenset({"bfloat16", "float16"})
# grad_scaler() returns a torch GradScaler (the scale/step/update protocol applies);
# MixedPrecision scales inside its own backward/step.
RUNTIME_GRAD_SCALERS = frozenset({"amplint.runtime.grad_scaler", "amplint.runtime._amp.grad_scaler"})
RUNTIME_SCALING = RUNTIME_GRAD_SCALERS | frozenset(
    {"amplint.runtime.MixedPrecision", "amplint.runtime._precision.MixedPrecision"}
)

def is_modern_amp(name: str) -> bool:
    """Does ``name`` spell the current API (``torch.amp.*`` or a top-level alias)? Code that
    uses it beside a deprecated spelling is a compatibility fallback."""
    return name == "torch.amp" or name.startswith("torch.amp.") or name in ("torch.autocast", "torch.GradScaler")


# -- signatures ---------------------------------------------------------------------------------

# torch.amp.autocast(device_type, dtype, enabled, cache_enabled)
AUTOCAST_ORDER = ("device_type", "dtype", "enabled", "cache_enabled")
# Deprecated torch.{cuda,cpu}.amp.autocast(enabled, dtype, cache_enabled): another order.
DEPRECATED_AUTOCAST_ORDER = ("enabled", "dtype", "cache_enabled")
# torch.amp.GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled)
GRAD_SCALER_ORDER = ("device", "init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
# Deprecated torch.{cuda,cpu}.amp.GradScaler: the same order without the device.
DEPRECATED_GRAD_SCALER_ORDER = GRAD_SCALER_ORDER[1:]


def positional_order(qualified: str) -> tuple[str, ...] | None:
    """The parameter names of an autocast or GradScaler spelling, in positional order."""
    found = SYMBOLS.get(qualified)
    if found is None:
        return None
    if found.kind == AUTOCAST:
        return DEPRECATED_AUTOCAST_ORDER if found.deprecated else AUTOCAST_ORDER
    if found.kind == GRAD_SCALER:
        return DEPRECATED_GRAD_SCALER_ORDER if found.deprecated else GRAD_SCALER_ORDER
    return None


# -- autocast state ------------------------------------------------------------------------------

# Deprecated function → (replacement, device type argument to prepend).
DEPRECATED_STATE_FUNCTIONS: dict[str, tuple[str, str]] = {
    f"torch.{old}": (new, device)
    for device, alias in (("cuda", "gpu"), ("cpu", "cpu"), ("ipu", "ipu"), ("xla", "xla"))
    for old, new in (
        (f"get_autocast_{alias}_dtype", "get_autocast_dtype"),
        (f"set_autocast_{alias}_dtype", "set_autocast_dtype"),
        (f"is_autocast_{alias}_enabled", "is_autocast_enabled"),
        (f"set_autocast_{alias}_enabled", "set_autocast_enabled"),
    )
    # torch never had is_/set_autocast_gpu_enabled: the device-less forms mean CUDA.
    if not (alias == "gpu" and "enabled" in old)
}
STATE_REPLACEMENTS = frozenset(f"torch.{new}" for new, _ in DEPRECATED_STATE_FUNCTIONS.values())

# -- which torch has what -------------------------------------------------------------------------

# The torch release (major, minor) that first has each API a fix may emit. Verified on the
# released code at each tag (torch/amp/autocast_mode.py, torch/amp/grad_scaler.py,
# torch/__init__.py, torch/_C/__init__.pyi of v1.10 … v2.13); see docs/target-torch.md.
INTRODUCED: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("torch.cuda.is_available", "torch.nn.functional.binary_cross_entropy_with_logits"), (0, 4)),
    **dict.fromkeys(("torch.amp.GradScaler.unscale_",), (1, 6)),
    **dict.fromkeys(("torch.autocast",), (1, 10)),
    **dict.fromkeys(("torch.amp.autocast",), (1, 12)),
    **dict.fromkeys(("torch.amp.GradScaler", "torch.GradScaler"), (2, 3)),
    **dict.fromkeys(
        (
            "torch.amp.custom_fwd",
            "torch.amp.custom_bwd",
            "torch.get_autocast_dtype",
            "torch.set_autocast_dtype",
            "torch.is_autocast_enabled(device_type)",
            "torch.set_autocast_enabled(device_type)",
        ),
        (2, 4),
    ),
}
# torch.cuda.amp / torch.cpu.amp and the device-specific autocast-state functions warn
# from 2.4 on (FutureWarning; the state functions DeprecationWarning): code that must run
# on an older torch has no replacement to move to.
DEPRECATED_SINCE = (2, 4)
# amplint.runtime's helpers need torch 2.4 (the `runtime` extra's lower bound).
RUNTIME_TORCH = (2, 4)
# From 2.4 on, autocast reads its device type through `torch.device` parsing
# (`is_autocast_available`), so an indexed `"cuda:0"` works; before, anything but a bare
# device type raised "unsupported autocast device_type".
AUTOCAST_TAKES_INDEXED_DEVICE = (2, 4)
# The first torch whose own builds autocast on an accelerator other than CUDA: Intel XPU
# joined torch in 2.4, MPS autocast followed in 2.5 (pytorch#99272). On older torch a
# device string that is not CUDA is CPU or a plugin's (IPEX, Habana) device.
AUTOCAST_BEYOND_CUDA = (2, 4)
# Modules torch itself dropped, with the release that dropped them: code importing one
# (MAE's copied `from torch._six import inf`) runs only on an older torch.
REMOVED_TORCH_MODULES = {"torch._six": (2, 0)}
# CPU autocast took only bfloat16 through torch 2.1 (any other dtype: "CPU Autocast only
# supports dtype of torch.bfloat16 currently", and it disabled itself); float16 support was
# proposed after 2.1 had branched (pytorch#112484, October 2023).
CPU_AUTOCAST_TAKES_FLOAT16 = (2, 2)

# -- dtypes and devices ----------------------------------------------------------------------------

LOW_PRECISION = frozenset({"float16", "bfloat16"})
# torch attributes naming dtypes, by canonical name.
DTYPE_ALIASES = {
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
}
HALF_TENSOR_TYPES = frozenset(
    {"torch.HalfTensor", "torch.cuda.HalfTensor", "torch.BFloat16Tensor", "torch.cuda.BFloat16Tensor"}
)
# torch.get_autocast_dtype(device) when nothing was set (verified on torch 2.13; a test
# re-checks it against the installed torch).
DEFAULT_DTYPE = {
    "cuda": "float16",
    "cpu": "bfloat16",
    "mps": "float16",
    "xpu": "float16",
    "mtia": "float16",
    "hpu": "bfloat16",
    "xla": "bfloat16",
}
# Device types torch knows (``torch.device(...).type``).
DEVICE_TYPES = frozenset(
    {"cuda", "cpu", "mps", "xpu", "hpu", "npu", "xla", "mtia", "maia", "meta", "ipu", "privateuseone"}
)
AVAILABILITY_TESTS = frozenset(
    {
        "torch.cuda.is_available",
        "torch.backends.mps.is_available",
        "torch.mps.is_available",
        "torch.xpu.is_available",
        "torch.cuda.device_count",
    }
)
DEVICE_CONSTRUCTORS = frozenset({"torch.device"})
INIT_PROCESS_GROUP = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
)
NO_GRAD = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode"}
)
