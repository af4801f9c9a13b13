"""amplint.runtime's device, dtype, autocast, scaler, clipping, seeding and doctor helpers.

Everything CPU torch can do is checked against torch itself. What only other hardware
can show (CUDA capabilities, XPU, MPS) is checked by patching torch's own detection
functions, with expected values taken from the hardware facts, not from the code.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from amplint import runtime
from amplint.runtime import doctor

# -- fake hardware ------------------------------------------------------------------------------


def _grad(parameter: torch.Tensor) -> torch.Tensor:
    """A parameter's gradient, which a backward has certainly populated."""
    assert parameter.grad is not None
    return parameter.grad


def _index(device: Any) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    index = torch.device(device).index
    return 0 if index is None else index


@pytest.fixture
def no_accelerators(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with only a CPU, even when the tests run on a GPU box."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch, no_accelerators: None) -> Callable[..., None]:
    """Install CUDA GPUs given as (name, (major, minor)) pairs."""

    def install(*gpus: tuple[str, tuple[int, int]], hip: str | None = None) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(
            torch.cuda, "get_device_capability", lambda device=None: gpus[_index(device)][1]
        )
        monkeypatch.setattr(
            torch.cuda, "get_device_name", lambda device=None: gpus[_index(device)][0]
        )
        # What torch.amp.autocast("cuda", dtype=bfloat16) consults: Ampere or ROCm.
        monkeypatch.setattr(
            torch.cuda,
            "is_bf16_supported",
            lambda including_emulation=True: hip is not None or gpus[0][1] >= (8, 0),
        )
        monkeypatch.setattr(
            torch.cuda,
            "get_device_properties",
            lambda device=None: types.SimpleNamespace(
                name=gpus[_index(device)][0], total_memory=GPU_MEMORY[gpus[_index(device)][0]]
            ),
        )
        monkeypatch.setattr(torch.version, "hip", hip)

    return install


@pytest.fixture
def fake_xpu(monkeypatch: pytest.MonkeyPatch, no_accelerators: None) -> None:
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "device_count", lambda: 1)
    monkeypatch.setattr(
        torch.xpu, "get_device_name", lambda device=None: "Intel Data Center GPU Max 1550"
    )


@pytest.fixture
def fake_mps(
    monkeypatch: pytest.MonkeyPatch, no_accelerators: None
) -> Callable[[tuple[int, int]], None]:
    def install(macos: tuple[int, int]) -> None:
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
        monkeypatch.setattr(
            torch.backends.mps, "is_macos_or_newer", lambda major, minor: macos >= (major, minor)
        )
        monkeypatch.setattr(torch.backends.mps, "get_name", lambda: "Apple M2")

    return install


P100 = ("Tesla P100-PCIE-16GB", (6, 0))
V100 = ("Tesla V100-SXM2-16GB", (7, 0))
T4 = ("Tesla T4", (7, 5))
A100 = ("NVIDIA A100-SXM4-40GB", (8, 0))
H100 = ("NVIDIA H100 80GB HBM3", (9, 0))
MI250X = ("AMD Instinct MI250X", (9, 0))
GPU_MEMORY = {
    P100[0]: 16 * 2**30,
    V100[0]: 16 * 2**30,
    T4[0]: 15 * 2**30,
    A100[0]: 40 * 2**30,
    H100[0]: 80 * 2**30,
    MI250X[0]: 64 * 2**30,
}


# -- device_type / default_device -------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("cuda:1", "cuda"),
        ("cuda", "cuda"),
        (torch.device("cuda", 0), "cuda"),
        ("cpu", "cpu"),
        (torch.device("cpu"), "cpu"),
        ("mps", "mps"),
        ("xpu:2", "xpu"),
        ("meta", "meta"),
    ],
)
def test_device_type_parses_strings_and_devices(device: Any, expected: str) -> None:
    assert runtime.device_type(device) == expected


def test_device_type_none_is_the_default_device() -> None:
    assert runtime.device_type(None) == runtime.default_device().type
    assert runtime.device_type() == runtime.default_device().type


def test_device_type_none_follows_the_hardware(fake_cuda: Callable[..., None]) -> None:
    fake_cuda(A100)
    assert runtime.device_type() == "cuda"


def test_device_type_of_an_index_is_the_accelerators(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without an accelerator torch.device(0) raises (as on this CPU machine); an index still
    # meant CUDA there (DSINE passes `device=args.gpu`).
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    assert runtime.device_type(0) == "cuda"
    assert runtime.device_type(1) == "cuda"
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: torch.device("xpu"))
    assert runtime.device_type(0) == "xpu"


@pytest.mark.skipif(torch.accelerator.is_available(), reason="a machine with an accelerator")
def test_torch_an_index_is_no_device_without_an_accelerator() -> None:
    with pytest.raises(RuntimeError):
        torch.device(0)
    assert runtime.device_type(0) == "cuda"


def test_device_type_rejects_non_devices() -> None:
    with pytest.raises(ValueError, match="gpu"):
        runtime.device_type("gpu")


def test_default_device_cpu_only(no_accelerators: None) -> None:
    assert runtime.default_device() == torch.device("cpu")


def test_default_device_precedence_cuda_xpu_mps(
    monkeypatch: pytest.MonkeyPatch, no_accelerators: None
) -> None:
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert runtime.default_device() == torch.device("mps")
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    assert runtime.default_device() == torch.device("xpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.default_device() == torch.device("cuda")


# -- amp_dtype ----------------------------------------------------------------------------------


def test_amp_dtype_cpu_is_bfloat16_which_cpu_autocast_runs() -> None:
    assert runtime.amp_dtype("cpu") == torch.bfloat16
    lin = torch.nn.Linear(4, 4)
    with torch.autocast("cpu", dtype=runtime.amp_dtype("cpu")):
        assert lin(torch.randn(2, 4)).dtype == torch.bfloat16


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        (("P100", (6, 0)), "float16"),
        (V100, "float16"),
        (T4, "float16"),
        (A100, "bfloat16"),
        (H100, "bfloat16"),
    ],
)
def test_amp_dtype_cuda_bfloat16_from_ampere(
    fake_cuda: Callable[..., None], gpu: tuple[str, tuple[int, int]], expected: str
) -> None:
    fake_cuda(gpu)
    assert runtime.amp_dtype("cuda") == getattr(torch, expected)
    assert runtime.amp_dtype(torch.device("cuda", 0)) == getattr(torch, expected)
    assert runtime.amp_dtype() == getattr(torch, expected)


def test_amp_dtype_asks_the_indexed_gpu(fake_cuda: Callable[..., None]) -> None:
    fake_cuda(V100, A100)
    assert runtime.amp_dtype("cuda:0") == torch.float16
    assert runtime.amp_dtype("cuda:1") == torch.bfloat16


def test_amp_dtype_rocm_is_bfloat16(fake_cuda: Callable[..., None]) -> None:
    fake_cuda(("AMD Instinct MI210", (9, 0)), hip="6.0")
    assert runtime.amp_dtype("cuda") == torch.bfloat16


def test_amp_dtype_absent_cuda_is_float16_without_error(no_accelerators: None) -> None:
    assert runtime.amp_dtype("cuda:0") == torch.float16


def test_amp_dtype_xpu_bfloat16(fake_xpu: None) -> None:
    assert runtime.amp_dtype("xpu") == torch.bfloat16
    assert runtime.amp_dtype() == torch.bfloat16


@pytest.mark.parametrize("macos", [(13, 0), (14, 0), (15, 2)])
def test_amp_dtype_mps_float16_even_with_bf16(
    fake_mps: Callable[[tuple[int, int]], None], macos: tuple[int, int]
) -> None:
    fake_mps(macos)
    assert runtime.amp_dtype("mps") == torch.float16
    assert runtime.amp_dtype() == torch.float16


def test_amp_dtype_without_autocast_is_float32() -> None:
    assert not torch.amp.is_autocast_available("meta")
    assert runtime.amp_dtype("meta") == torch.float32


# -- autocast -------------------------------------------------------------------------------


@pytest.fixture
def lin() -> torch.nn.Linear:
    return torch.nn.Linear(8, 8)


def test_autocast_cpu_runs_matmuls_in_bfloat16(lin: torch.nn.Linear) -> None:
    x = torch.randn(3, 8)
    with runtime.autocast("cpu"):
        assert lin(x).dtype == torch.bfloat16
    assert lin(x).dtype == torch.float32


def test_autocast_explicit_dtype(lin: torch.nn.Linear) -> None:
    with runtime.autocast(torch.device("cpu"), dtype=torch.float16):
        assert lin(torch.randn(3, 8)).dtype == torch.float16


def test_autocast_is_torch_autocast_for_the_type(lin: torch.nn.Linear) -> None:
    ctx = runtime.autocast("cpu", cache_enabled=False)
    assert isinstance(ctx, torch.amp.autocast)
    assert ctx.device == "cpu"
    assert ctx.fast_dtype == torch.bfloat16
    assert ctx._cache_enabled is False


def test_autocast_as_decorator(lin: torch.nn.Linear) -> None:
    @runtime.autocast("cpu")
    def forward(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = lin(x)
        return out

    assert forward(torch.randn(2, 8)).dtype == torch.bfloat16
    assert lin(torch.randn(2, 8)).dtype == torch.float32


def test_autocast_enabled_false_runs_full_precision_inside_autocast(lin: torch.nn.Linear) -> None:
    x = torch.randn(2, 8)
    with runtime.autocast("cpu"):
        with runtime.autocast("cpu", enabled=False):
            assert lin(x).dtype == torch.float32
        assert lin(x).dtype == torch.bfloat16


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "meta", "mps", "xpu"])
def test_autocast_unavailable_is_a_silent_no_op(
    no_accelerators: None, lin: torch.nn.Linear, device: str
) -> None:
    x = torch.randn(2, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctx = runtime.autocast(device)
        with ctx:
            assert lin(x).dtype == torch.float32
        # It must not switch off an enclosing autocast of another type.
        with torch.autocast("cpu", dtype=torch.bfloat16), runtime.autocast(device):
            assert lin(x).dtype == torch.bfloat16

        @runtime.autocast(device)
        def forward(t: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = lin(t)
            return out

        assert forward(x).dtype == torch.float32
    assert isinstance(ctx, runtime.DisabledAutocast)
    assert ctx.device == runtime.device_type(device)


@pytest.mark.parametrize(("gpu", "expected"), [(V100, "float16"), (A100, "bfloat16")])
def test_autocast_cuda_index_and_dtype(
    fake_cuda: Callable[..., None], gpu: tuple[str, tuple[int, int]], expected: str
) -> None:
    fake_cuda(gpu, gpu)
    ctx = runtime.autocast("cuda:1")
    assert isinstance(ctx, torch.amp.autocast)
    assert ctx.device == "cuda"
    assert ctx.fast_dtype == getattr(torch, expected)


# -- grad_scaler ----------------------------------------------------------------------------


def test_grad_scaler_off_for_bfloat16_on_for_float16() -> None:
    assert not runtime.grad_scaler("cpu").is_enabled()  # CPU recommends bfloat16
    assert not runtime.grad_scaler("cpu", torch.bfloat16).is_enabled()
    assert runtime.grad_scaler("cpu", torch.float16).is_enabled()
    assert not runtime.grad_scaler("cpu", torch.float16, enabled=False).is_enabled()


def test_grad_scaler_forwards_kwargs() -> None:
    scaler = runtime.grad_scaler("cpu", torch.float16, init_scale=8.0, growth_interval=7)
    assert scaler.get_scale() == 8.0
    assert scaler.state_dict()["growth_interval"] == 7


def test_grad_scaler_is_a_real_cpu_scaler() -> None:
    scaler = runtime.grad_scaler("cpu:0", torch.float16, init_scale=4.0)
    assert isinstance(scaler, torch.amp.GradScaler)
    assert scaler._device == "cpu"
    assert scaler.scale(torch.tensor(3.0)).item() == 12.0


@pytest.mark.parametrize(("gpu", "enabled"), [(V100, True), (T4, True), (A100, False)])
def test_grad_scaler_cuda_by_capability(
    fake_cuda: Callable[..., None], gpu: tuple[str, tuple[int, int]], enabled: bool
) -> None:
    fake_cuda(gpu, gpu)
    scaler = runtime.grad_scaler("cuda:1")
    assert scaler.is_enabled() is enabled
    assert scaler._device == "cuda"


def test_grad_scaler_absent_device_disabled_without_warning(no_accelerators: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not runtime.grad_scaler("cuda", torch.float16).is_enabled()
        assert not runtime.grad_scaler("meta", torch.float16).is_enabled()


# -- clip_grad_norm_ ------------------------------------------------------------------------

SCALE = 2.0**10  # a power of two: scaling and unscaling are exact in float32


def _problem(seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    return model, torch.randn(16, 6, generator=gen), torch.randn(16, 3, generator=gen)


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = torch.nn.functional.mse_loss(model(x), y)
    return out


def _reference_grads() -> list[torch.Tensor]:
    model, x, y = _problem()
    _loss(model, x, y).backward()
    return [_grad(p).detach().clone() for p in model.parameters()]


def _norm(grads: list[torch.Tensor], p: float = 2.0) -> torch.Tensor:
    """The total norm from its definition, in float64."""
    flat = torch.cat([g.double().flatten() for g in grads])
    if math.isinf(p):
        return flat.abs().max()
    return flat.abs().pow(p).sum().pow(1.0 / p)


@pytest.fixture
def scaled() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.amp.GradScaler]:
    model, x, y = _problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=SCALE)
    scaler.scale(_loss(model, x, y)).backward()
    return model, optimizer, scaler


def test_clipping_scaled_grads_without_unscale_is_wrong(scaled: Any) -> None:
    """The bug clip_grad_norm_ exists for: the norm of still-scaled gradients is scale times too big."""
    model, _, _ = scaled
    wrong = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    torch.testing.assert_close(wrong.double(), _norm(_reference_grads()) * SCALE)


def test_clip_unscales_and_returns_the_true_norm(scaled: Any) -> None:
    model, optimizer, scaler = scaled
    norm = runtime.clip_grad_norm_(model.parameters(), 1e9, scaler=scaler, optimizer=optimizer)
    reference = _reference_grads()
    torch.testing.assert_close(norm.double(), _norm(reference))
    for p, g in zip(model.parameters(), reference, strict=True):
        torch.testing.assert_close(p.grad, g)


def test_clip_clips_to_max_norm_then_step_does_not_unscale_again(scaled: Any) -> None:
    model, optimizer, scaler = scaled
    before = [p.detach().clone() for p in model.parameters()]
    reference = _reference_grads()
    true_norm = _norm(reference).item()
    max_norm = true_norm / 4
    norm = runtime.clip_grad_norm_(model.parameters(), max_norm, scaler=scaler, optimizer=optimizer)
    assert norm.item() == pytest.approx(true_norm, rel=1e-5)
    clipped = [p.grad.detach().clone() for p in model.parameters()]
    assert _norm(clipped).item() == pytest.approx(max_norm, rel=1e-4)
    scaler.step(optimizer)  # would raise, or divide by the scale twice, if unscaling repeated
    scaler.update()
    coefficient = max_norm / (true_norm + 1e-6)  # torch's documented clip coefficient
    for p, p0, g in zip(model.parameters(), before, reference, strict=True):
        torch.testing.assert_close(p.detach(), p0 - 0.1 * coefficient * g)


def test_clip_respects_an_earlier_unscale(scaled: Any) -> None:
    model, optimizer, scaler = scaled
    scaler.unscale_(optimizer)
    norm = runtime.clip_grad_norm_(model.parameters(), 1e9, scaler=scaler, optimizer=optimizer)
    torch.testing.assert_close(norm.double(), _norm(_reference_grads()))
    again = runtime.clip_grad_norm_(model.parameters(), 1e9, scaler=scaler, optimizer=optimizer)
    torch.testing.assert_close(again, norm)


def test_clip_after_step_is_torchs_error(scaled: Any) -> None:
    model, optimizer, scaler = scaled
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match="after step"):
        runtime.clip_grad_norm_(model.parameters(), 1.0, scaler=scaler, optimizer=optimizer)


def test_clip_with_enabled_scaler_needs_the_optimizer(scaled: Any) -> None:
    model, _, scaler = scaled
    with pytest.raises(ValueError, match="optimizer"):
        runtime.clip_grad_norm_(model.parameters(), 1.0, scaler=scaler)


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_clip_without_scaler_is_plain_clipping(norm_type: float) -> None:
    model, x, y = _problem()
    _loss(model, x, y).backward()
    disabled = runtime.grad_scaler("cpu", torch.bfloat16)
    norm = runtime.clip_grad_norm_(model.parameters(), 1e9, scaler=disabled, norm_type=norm_type)
    torch.testing.assert_close(norm.double(), _norm(_reference_grads(), norm_type))
    norm = runtime.clip_grad_norm_(list(model.parameters()), 1e9, norm_type=norm_type)
    torch.testing.assert_close(norm.double(), _norm(_reference_grads(), norm_type))


class _ScalerWithoutPrivateState:
    """A scaler like a future torch's: no _per_optimizer_states, raises on a second unscale_."""

    def __init__(self, error: str = "unscale_() has already been called on this optimizer") -> None:
        self.calls = 0
        self.error = error

    def is_enabled(self) -> bool:
        return True

    def unscale_(self, optimizer: object) -> None:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError(self.error)


def test_clip_fallback_recognises_torchs_repeat_unscale_error() -> None:
    model, x, y = _problem()
    _loss(model, x, y).backward()
    scaler: Any = _ScalerWithoutPrivateState()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    runtime.clip_grad_norm_(model.parameters(), 1e9, scaler=scaler, optimizer=optimizer)
    norm = runtime.clip_grad_norm_(model.parameters(), 1e9, scaler=scaler, optimizer=optimizer)
    assert scaler.calls == 2
    torch.testing.assert_close(norm.double(), _norm(_reference_grads()))
    other: Any = _ScalerWithoutPrivateState("something else went wrong")
    other.calls = 1
    with pytest.raises(RuntimeError, match="something else"):
        runtime.clip_grad_norm_(model.parameters(), 1e9, scaler=other, optimizer=optimizer)


# -- seed_all -------------------------------------------------------------------------------


def _draws() -> tuple[float, list[float], list[float]]:
    return random.random(), torch.rand(4).tolist(), torch.randn(3).tolist()


def test_seed_all_reproduces_python_and_torch() -> None:
    runtime.seed_all(1234)
    first = _draws()
    runtime.seed_all(1234)
    assert _draws() == first
    runtime.seed_all(1235)
    assert _draws() != first


def test_seed_all_seeds_numpy_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds: list[int] = []
    fake = types.ModuleType("numpy")
    fake.random = types.SimpleNamespace(seed=seeds.append)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "numpy", fake)
    runtime.seed_all(99)
    assert seeds == [99]


def test_seed_all_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # makes `import numpy` fail
    runtime.seed_all(5)
    value = random.random()
    runtime.seed_all(5)
    assert random.random() == value


def test_seed_all_real_numpy() -> None:
    numpy = pytest.importorskip("numpy")
    runtime.seed_all(7)
    first = numpy.random.rand(3).tolist()
    runtime.seed_all(7)
    assert numpy.random.rand(3).tolist() == first


def test_seed_all_seeds_cuda_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeds.append)
    runtime.seed_all(42)
    assert 42 in seeds


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seed_all_range(seed: int) -> None:
    with pytest.raises(ValueError, match="seed"):
        runtime.seed_all(seed)


def test_seed_all_accepts_the_largest_seed() -> None:
    runtime.seed_all(2**32 - 1)
    assert torch.initial_seed() == 2**32 - 1


# -- dist_backend ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("cuda", "NCCL"),
        ("cuda:3", "NCCL"),
        (torch.device("cuda", 1), "NCCL"),
        ("xpu", "XCCL"),
        (torch.device("xpu", 0), "XCCL"),
        ("cpu", "GLOO"),
        ("mps", "GLOO"),
    ],
)
def test_dist_backend(device: Any, expected: str) -> None:
    # The names must be ones torch.distributed knows.
    assert runtime.dist_backend(device) == getattr(torch.distributed.Backend, expected)


def test_dist_backend_default(no_accelerators: None) -> None:
    assert runtime.dist_backend() == "gloo"


def test_dist_backend_default_cuda(fake_cuda: Callable[..., None]) -> None:
    fake_cuda(A100)
    assert runtime.dist_backend() == "nccl"


# -- capabilities ---------------------------------------------------------------------------


def test_capabilities_cpu_matches_what_cpu_autocast_does() -> None:
    caps = runtime.capabilities("cpu")
    assert caps.device_type == "cpu"
    assert caps.available and caps.autocast_available
    assert caps.name
    assert caps.recommended_dtype == torch.bfloat16
    assert caps.needs_grad_scaler is False
    assert caps.tf32_supported is False
    assert caps.dist_backend == "gloo"
    lin = torch.nn.Linear(4, 4)
    for dtype, supported in [
        (torch.bfloat16, caps.bf16_supported),
        (torch.float16, caps.fp16_supported),
    ]:
        with torch.autocast("cpu", dtype=dtype):
            assert (lin(torch.randn(2, 4)).dtype == dtype) == supported


def test_capabilities_is_frozen() -> None:
    caps = runtime.capabilities("cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.name = "other"  # type: ignore[misc]
    assert isinstance(caps, runtime.Capabilities)


@pytest.mark.parametrize(
    ("gpu", "bf16", "tf32", "dtype"),
    [
        (V100, False, False, "float16"),
        (T4, False, False, "float16"),
        (A100, True, True, "bfloat16"),
    ],
)
def test_capabilities_cuda(
    fake_cuda: Callable[..., None],
    gpu: tuple[str, tuple[int, int]],
    bf16: bool,
    tf32: bool,
    dtype: str,
) -> None:
    fake_cuda(H100, gpu)
    caps = runtime.capabilities("cuda:1")
    assert caps.device_type == "cuda"
    assert caps.index == 1
    assert caps.name == gpu[0]
    assert caps.available and caps.autocast_available
    assert caps.bf16_supported is bf16
    assert caps.fp16_supported is True
    assert caps.tf32_supported is tf32
    assert caps.recommended_dtype == getattr(torch, dtype)
    assert caps.needs_grad_scaler is (dtype == "float16")
    assert caps.dist_backend == "nccl"


def test_capabilities_rocm_has_bf16_but_no_tf32(fake_cuda: Callable[..., None]) -> None:
    fake_cuda(MI250X, hip="6.1")
    caps = runtime.capabilities("cuda")
    assert caps.bf16_supported and not caps.tf32_supported
    assert caps.recommended_dtype == torch.bfloat16


def test_capabilities_absent_cuda(no_accelerators: None) -> None:
    caps = runtime.capabilities("cuda")
    assert not caps.available and not caps.autocast_available
    assert not (caps.bf16_supported or caps.fp16_supported or caps.tf32_supported)
    assert caps.needs_grad_scaler is False


@pytest.mark.parametrize(("macos", "bf16"), [((13, 5), False), ((14, 0), True)])
def test_capabilities_mps(
    fake_mps: Callable[[tuple[int, int]], None], macos: tuple[int, int], bf16: bool
) -> None:
    fake_mps(macos)
    caps = runtime.capabilities()
    assert caps.device_type == "mps"
    assert caps.name == "Apple M2"
    assert caps.bf16_supported is bf16
    assert caps.fp16_supported and not caps.tf32_supported
    assert caps.recommended_dtype == torch.float16
    assert caps.needs_grad_scaler
    assert caps.dist_backend == "gloo"


def test_capabilities_xpu(fake_xpu: None) -> None:
    caps = runtime.capabilities("xpu:0")
    assert caps.name == "Intel Data Center GPU Max 1550"
    assert caps.bf16_supported and caps.fp16_supported
    assert caps.recommended_dtype == torch.bfloat16
    assert not caps.needs_grad_scaler
    assert caps.dist_backend == "xccl"


def test_capabilities_device_without_autocast() -> None:
    caps = runtime.capabilities("meta")
    assert not caps.available and not caps.autocast_available
    assert caps.recommended_dtype == torch.float32


@pytest.mark.parametrize(
    ("gpu", "tensor_cores"), [(P100, False), (V100, True), (T4, True), (A100, True)]
)
def test_capabilities_count_memory_and_tensor_cores(
    fake_cuda: Callable[..., None], gpu: tuple[str, tuple[int, int]], tensor_cores: bool
) -> None:
    fake_cuda(H100, gpu)
    caps = runtime.capabilities("cuda:1")
    assert caps.device_count == 2
    assert caps.total_memory == GPU_MEMORY[gpu[0]]
    assert caps.compute_capability == gpu[1]
    # Tensor cores arrived with Volta (compute capability 7.0).
    assert caps.tensor_cores is tensor_cores


def test_capabilities_rocm_reports_memory_but_no_compute_capability(
    fake_cuda: Callable[..., None],
) -> None:
    fake_cuda(MI250X, hip="6.1")
    caps = runtime.capabilities("cuda")
    assert caps.total_memory == GPU_MEMORY[MI250X[0]]
    assert caps.compute_capability is None and caps.tensor_cores is None


def test_capabilities_without_device_properties(
    fake_cuda: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_cuda(A100)

    def unavailable(device: Any = None) -> None:
        raise RuntimeError("no properties")

    monkeypatch.setattr(torch.cuda, "get_device_properties", unavailable)
    caps = runtime.capabilities("cuda")
    assert caps.total_memory is None and caps.tensor_cores is True


def test_capabilities_cpu_and_absent_devices_counts() -> None:
    caps = runtime.capabilities("cpu")
    assert caps.device_count == 1
    assert caps.total_memory is None and caps.tensor_cores is None
    assert caps.compute_capability is None


def test_capabilities_absent_cuda_has_no_devices(no_accelerators: None) -> None:
    caps = runtime.capabilities("cuda")
    assert caps.device_count == 0 and caps.total_memory is None


def test_capabilities_xpu_memory_and_matrix_engines(
    fake_xpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        torch.xpu,
        "get_device_properties",
        lambda device=None: types.SimpleNamespace(
            total_memory=64 * 2**30, has_subgroup_matrix_multiply_accumulate=True
        ),
    )
    caps = runtime.capabilities("xpu")
    assert caps.device_count == 1
    assert caps.total_memory == 64 * 2**30 and caps.tensor_cores is True


# -- enable_tf32 -----------------------------------------------------------------------------


@pytest.fixture
def tf32_flags() -> Iterator[None]:
    """Leave torch's global TF32 switches as the test found them."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


def test_enable_tf32_on_cpu_changes_nothing(tf32_flags: None) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    status = runtime.enable_tf32("cpu")
    assert not status.supported and not status.changed
    assert status.matmul is None and status.cudnn is None
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert "nothing changed" in str(status) and "compute capability 8.0" in str(status)


@pytest.mark.parametrize("gpu", [V100, T4])
def test_enable_tf32_before_ampere_changes_nothing(
    fake_cuda: Callable[..., None], tf32_flags: None, gpu: tuple[str, tuple[int, int]]
) -> None:
    fake_cuda(gpu)
    torch.backends.cuda.matmul.allow_tf32 = False
    status = runtime.enable_tf32("cuda")
    assert not status.supported and torch.backends.cuda.matmul.allow_tf32 is False
    assert gpu[0] in status.message


def test_enable_tf32_on_ampere_turns_both_switches_on(
    fake_cuda: Callable[..., None], tf32_flags: None
) -> None:
    fake_cuda(A100)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    status = runtime.enable_tf32()
    assert status.supported and status.changed
    assert status.matmul == (False, True) and status.cudnn == (True, True)
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cudnn.allow_tf32 is True
    assert "matmuls turned on" in str(status) and "convolutions already on" in str(status)
    again = runtime.enable_tf32()
    assert not again.changed and "matmuls already on" in str(again)


def test_enable_tf32_on_rocm_changes_nothing(
    fake_cuda: Callable[..., None], tf32_flags: None
) -> None:
    fake_cuda(MI250X, hip="6.1")
    assert not runtime.enable_tf32("cuda").supported


# -- doctor ---------------------------------------------------------------------------------


def _rows(report: str) -> Iterator[list[str]]:
    for line in report.splitlines():
        yield re.split(r"\s{2,}", line.strip())


def _table(report: str) -> dict[str, dict[str, str]]:
    rows = [r for r in _rows(report) if len(r) >= 7]
    header, *body = rows
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def test_doctor_report_on_this_machine() -> None:
    report = doctor.doctor_report()
    assert f"torch {torch.__version__}" in report
    table = _table(report)
    assert table["cpu"]["bf16"] == "yes"
    assert table["cpu"]["recommended"] == "bfloat16"


def test_doctor_report_lists_each_gpu(fake_cuda: Callable[..., None]) -> None:
    fake_cuda(V100, A100)
    report = doctor.doctor_report()
    assert "default device: cuda" in report and "nccl" in report
    table = _table(report)
    assert set(table) == {"cpu", "cuda:0", "cuda:1"}
    assert table["cuda:0"]["name"] == V100[0]
    assert (table["cuda:0"]["bf16"], table["cuda:0"]["tf32"]) == ("no", "no")
    assert table["cuda:0"]["recommended"] == "float16"
    assert table["cuda:0"]["GradScaler"] == "needed"
    assert table["cuda:1"]["name"] == A100[0]
    assert (table["cuda:1"]["bf16"], table["cuda:1"]["tf32"]) == ("yes", "yes")
    assert table["cuda:1"]["recommended"] == "bfloat16"
    assert table["cuda:1"]["GradScaler"] == "not needed"


def test_doctor_report_shows_memory_tensor_cores_and_tf32(
    fake_cuda: Callable[..., None], tf32_flags: None
) -> None:
    fake_cuda(P100, A100)
    torch.backends.cuda.matmul.allow_tf32 = False
    report = doctor.doctor_report()
    assert "default device: cuda (2 present)" in report
    table = _table(report)
    assert table["cuda:0"]["compute"] == "6.0" and table["cuda:0"]["tensor cores"] == "no"
    assert table["cuda:1"]["compute"] == "8.0" and table["cuda:1"]["tensor cores"] == "yes"
    assert table["cuda:1"]["memory"] == "40.0 GiB"
    assert table["cpu"]["memory"] == "-" and table["cpu"]["tensor cores"] == "-"
    assert "TF32: CUDA matmuls off" in report and "enable_tf32()" in report
    runtime.enable_tf32("cuda:1")
    assert "TF32: CUDA matmuls on, cuDNN on\n" in doctor.doctor_report()


def test_doctor_report_without_tf32_hardware(no_accelerators: None) -> None:
    assert "TF32: no device here supports it" in doctor.doctor_report()


def test_doctor_report_mps(fake_mps: Callable[[tuple[int, int]], None]) -> None:
    fake_mps((14, 0))
    table = _table(doctor.doctor_report())
    assert table["mps"]["name"] == "Apple M2"
    assert table["mps"]["recommended"] == "float16"


def test_doctor_main_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main() == 0
    out, err = capsys.readouterr()
    assert out == doctor.doctor_report()
    assert err == ""
