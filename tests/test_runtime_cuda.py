"""The runtime part 2 features on a real CUDA GPU (``pytest -m cuda``); skipped without one.

Everything here is also covered on CPU or with the hardware detection patched; these
tests check what only a GPU can show: torch's own device properties, GradScaler("cuda"),
CUDA autocast's op lists (softmax runs in float32 there), host-device synchronisations,
the caching allocator's peak memory, and TF32 really changing matmul results.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from amplint import runtime
from amplint.runtime import MixedPrecision, StabilityMonitor, doctor

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DEVICE = "cuda"


def _bf16_native() -> bool:
    return bool(torch.version.hip) or torch.cuda.get_device_capability() >= (8, 0)


# -- capabilities, TF32, doctor -------------------------------------------------------------


def test_capabilities_match_torchs_device_properties() -> None:
    caps = runtime.capabilities("cuda:0")
    props = torch.cuda.get_device_properties(0)
    assert caps.available and caps.device_count == torch.cuda.device_count()
    assert caps.total_memory == props.total_memory
    if not torch.version.hip:
        assert caps.compute_capability == tuple(torch.cuda.get_device_capability(0))
        assert caps.tensor_cores is (caps.compute_capability >= (7, 0))


@pytest.fixture
def tf32_flags() -> Iterator[None]:
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


def _matmul_error() -> float:
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    a = torch.randn(1024, 1024, device=DEVICE, generator=gen)
    b = torch.randn(1024, 1024, device=DEVICE, generator=gen)
    exact = a.double() @ b.double()
    return float(((a @ b).double() - exact).norm() / exact.norm())


def test_enable_tf32_really_switches_matmuls_to_tf32(tf32_flags: None) -> None:
    if not runtime.capabilities(DEVICE).tf32_supported:
        pytest.skip("TF32 needs compute capability 8.0")
    torch.backends.cuda.matmul.allow_tf32 = False
    ieee = _matmul_error()
    status = runtime.enable_tf32(DEVICE)
    assert status.supported and status.matmul == (False, True)
    # TF32 keeps a 10-bit mantissa: errors about 1e-3 instead of float32's 1e-6.
    assert _matmul_error() > 10 * ieee


def test_doctor_shows_this_gpu() -> None:
    report = doctor.doctor_report()
    line = next(row for row in report.splitlines() if row.startswith("cuda:0"))
    assert torch.cuda.get_device_name(0) in line
    gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    assert f"{gib:.1f} GiB" in line


# -- the monitor's synchronisations --------------------------------------------------------


def _problem() -> tuple[Any, Any, Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8)
    ).to(DEVICE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, device=DEVICE)
    y = torch.randn(32, 8, device=DEVICE)
    return model, optimizer, x, y


def _syncs(action: Any) -> int:
    """How many synchronising CUDA calls ``action`` makes (torch's sync debug mode)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            action()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def _backward(mp: MixedPrecision, model: Any, optimizer: Any, x: Any, y: Any) -> None:
    optimizer.zero_grad()
    with mp.autocast():
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    mp.backward(loss)


def test_monitor_adds_one_sync_to_a_float16_step() -> None:
    model, optimizer, x, y = _problem()
    scaler = torch.amp.GradScaler(DEVICE)
    scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()  # type: ignore[no-untyped-call]

    def plain() -> None:
        scaler.step(optimizer)
        scaler.update()

    baseline = _syncs(plain)
    mp = MixedPrecision(DEVICE, torch.float16)
    _backward(mp, model, optimizer, x, y)
    mp.step(optimizer)
    _backward(mp, model, optimizer, x, y)
    assert _syncs(lambda: mp.step(optimizer)) == baseline + 1


@pytest.mark.parametrize(("monitor", "expected"), [(True, 1), (False, 0)])
def test_bfloat16_step_syncs(monitor: bool, expected: int) -> None:
    if not _bf16_native():
        pytest.skip("bfloat16 autocast needs Ampere")
    model, optimizer, x, y = _problem()
    mp = MixedPrecision(DEVICE, torch.bfloat16, monitor=monitor)
    _backward(mp, model, optimizer, x, y)
    assert _syncs(lambda: mp.step(optimizer)) == expected


def test_monitor_reads_cuda_tensors() -> None:
    monitor = StabilityMonitor()
    record = monitor.record(
        torch.tensor(1.5, device=DEVICE), grad_norm=torch.tensor(2.0, device=DEVICE)
    )
    assert (record.loss, record.grad_norm) == (1.5, 2.0)


# -- fallback on a GPU ---------------------------------------------------------------------


def test_injected_overflow_falls_back_on_cuda() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision(DEVICE, torch.float16, fallback="auto", monitor=StabilityMonitor(window=10))
    expected = torch.bfloat16 if _bf16_native() else torch.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(30):
            factor = 1e8 if mp.dtype == torch.float16 else 1.0
            optimizer.zero_grad()
            with mp.autocast():
                loss = torch.nn.functional.mse_loss(model(x).float(), y) * factor
            mp.backward(loss)
            mp.step(optimizer)
    assert mp.dtype == expected and not mp.scaler.is_enabled()
    assert mp.fallback_history[0]["to"] == str(expected).removeprefix("torch.")


# -- precision_report, keep_float32, amp_check ---------------------------------------------


class Similarity(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x: Any) -> Any:
        h = self.proj(x)
        norms = h.norm(dim=-1)
        return (h @ h.T) / (norms[:, None] * norms[None, :])


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.similarity = Similarity()
        self.value = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x: Any) -> Any:
        weights = torch.softmax(4 * self.similarity(x), dim=-1)
        return self.head(weights @ self.value(x / 255))


def _net_data() -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    model = Net().to(DEVICE)
    gen = torch.Generator().manual_seed(1)
    x = (torch.rand(64, 16, generator=gen) * 255).to(DEVICE)
    y = torch.randn(64, 1, generator=gen).to(DEVICE)
    return model, x, y


def test_precision_report_on_cuda_flags_the_overflow_and_sees_float32_ops() -> None:
    model, x, _ = _net_data()
    report = runtime.precision_report(model, x, torch.float16)
    assert report.device.startswith("cuda")
    assert report.keep_fp32 == ["similarity"]
    ops = {op.name: op for op in report.ops}
    # CUDA autocast runs softmax in float32 (unlike CPU autocast).
    assert ops["softmax"].low_precision_calls == 0
    assert ops["linear"].low_precision_calls == ops["linear"].calls


def test_kept_module_trains_without_skips_on_cuda() -> None:
    model, x, y = _net_data()
    mp = MixedPrecision(DEVICE, torch.float16, model=model, keep_fp32=["similarity"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    skipped = []
    for _ in range(20):
        optimizer.zero_grad()
        with mp.autocast():
            out = model(x)
        mp.backward(torch.nn.functional.mse_loss(out.float(), y))
        skipped.append(mp.step(optimizer))
    assert not any(skipped)
    with mp.autocast():
        assert model.similarity(x).dtype == torch.float32
        assert model.value(x).dtype == torch.float16


def test_amp_check_on_cuda_reports_peak_memory() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024)
    ).to(DEVICE)
    x = torch.randn(8192, 1024, device=DEVICE)
    result = runtime.amp_check(model, x, dtype=torch.float16, repeat=3, warmup=1)
    assert result.autocast_active and result.device.startswith("cuda")
    assert result.fp32_peak_memory is not None and result.amp_peak_memory is not None
    assert 0 < result.amp_peak_memory < result.fp32_peak_memory
    assert result.amp_saved_bytes < result.fp32_saved_bytes
    assert result.fp32_seconds > 0 and result.amp_seconds > 0
