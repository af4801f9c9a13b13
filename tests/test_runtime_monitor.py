"""StabilityMonitor: detections, summary, checkpoints, and what MixedPrecision feeds it.

The standalone tests feed hand-written step sequences whose expected warnings follow from
the documented thresholds. The MixedPrecision tests train a real model on CPU torch in
float16 (with a real GradScaler), bfloat16 and float32; non-finite values are injected
into the loss or the gradients.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from amplint import runtime
from amplint.runtime import (
    GradNormSpikeWarning,
    LossScaleWarning,
    MixedPrecision,
    NonFiniteWarning,
    OverflowWarning,
    PrecisionWarning,
    StabilityMonitor,
)


@pytest.fixture
def caught() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        yield records


def _of(records: list[warnings.WarningMessage], category: type[Warning]) -> list[str]:
    return [str(w.message) for w in records if issubclass(w.category, category)]


def _problem(
    seed: int = 0,
) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    return model, optimizer, torch.randn(16, 6, generator=gen), torch.randn(16, 3, generator=gen)


def _train_step(
    mp: MixedPrecision,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_factor: float = 1.0,
) -> bool:
    optimizer.zero_grad()
    with mp.autocast():
        out = model(x)
    loss = torch.nn.functional.mse_loss(out.float(), y) * loss_factor
    mp.backward(loss)
    return mp.step(optimizer)


# -- the warning family --------------------------------------------------------------------


@pytest.mark.parametrize(
    "category", [LossScaleWarning, OverflowWarning, NonFiniteWarning, GradNormSpikeWarning]
)
def test_every_warning_is_a_precision_warning(category: type[Warning]) -> None:
    assert issubclass(category, PrecisionWarning)
    assert issubclass(category, UserWarning)


def test_precision_warning_filter_stops_a_run_on_any_of_them() -> None:
    monitor = StabilityMonitor()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        with pytest.raises(NonFiniteWarning):
            monitor.record(loss=float("nan"))


# -- argument checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window": 0}, "window"),
        ({"window": 10, "history": 5}, "history"),
        ({"max_skip_rate": 0.0}, "max_skip_rate"),
        ({"max_skip_rate": 1.5}, "max_skip_rate"),
        ({"max_scale_drop": 1.0}, "max_scale_drop"),
        ({"spike_factor": 1.0}, "spike_factor"),
        ({"spike_min_steps": 0}, "spike_min_steps"),
        ({"warn_after_skipped": 0}, "warn_after_skipped"),
    ],
)
def test_bad_thresholds_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        StabilityMonitor(**kwargs)


# -- recording -----------------------------------------------------------------------------


def test_record_reads_tensors_and_numbers() -> None:
    monitor = StabilityMonitor()
    record = monitor.record(torch.tensor(2.5), grad_norm=torch.tensor([3.0, 4.0]), scale=8.0)
    # A non-scalar loss is summed: 3 + 4.
    assert (record.step, record.loss, record.grad_norm, record.scale) == (1, 2.5, 7.0, 8.0)
    assert record.skipped is False
    assert monitor.history == [record] and monitor.last == record


def test_a_falling_scale_means_a_skipped_step() -> None:
    monitor = StabilityMonitor()
    skipped = [monitor.record(scale=s).skipped for s in (1024.0, 512.0, 512.0, 1024.0, 256.0)]
    # The first record has no previous scale to compare with.
    assert skipped == [False, True, False, False, True]
    assert monitor.skipped_steps == 2 and monitor.consecutive_skipped_steps == 1


def test_explicit_skipped_wins_over_the_scale() -> None:
    monitor = StabilityMonitor()
    monitor.record(scale=8.0)
    assert monitor.record(scale=4.0, skipped=False).skipped is False
    assert monitor.record(scale=4.0, skipped=torch.tensor(1.0)).skipped is True


def test_record_with_a_real_grad_scaler_sees_its_skips() -> None:
    model, optimizer, x, y = _problem()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    monitor = StabilityMonitor()
    seen = []
    for poison in (False, True, False, True, True):
        optimizer.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()  # type: ignore[no-untyped-call]
        if poison:
            grad = next(iter(model.parameters())).grad
            assert grad is not None
            grad.view(-1)[0] = float("inf")
        scaler.step(optimizer)
        scaler.update()
        seen.append(monitor.record(scaler=scaler).skipped)
    assert seen == [False, True, False, True, True]
    assert monitor.last is not None and monitor.last.scale == 1024.0 / 8


def test_history_is_bounded_but_counters_are_not() -> None:
    monitor = StabilityMonitor(window=3, history=4)
    for i in range(10):
        monitor.record(loss=float(i))
    assert [r.loss for r in monitor.history] == [6.0, 7.0, 8.0, 9.0]
    assert monitor.steps == 10


class _Counting:
    """Counts Tensor.item and Tensor.tolist calls: each is one host-device transfer."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        for name in ("item", "tolist"):
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._wrap(original))

    def _wrap(self, original: Any) -> Any:
        def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return original(tensor, *args, **kwargs)

        return counted


def test_one_transfer_for_all_of_a_steps_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    monitor = StabilityMonitor()
    loss, norm, scale, before = (torch.tensor(v) for v in (1.0, 2.0, 4.0, 8.0))
    counter = _Counting(monkeypatch)
    record = monitor._observe(loss, norm, scale, before, None, stacklevel=1)
    assert counter.calls == 1
    assert (record.loss, record.grad_norm, record.scale, record.skipped) == (1.0, 2.0, 4.0, True)
    monitor.record(loss=1.0, grad_norm=2.0, scale=4.0)
    assert counter.calls == 1  # Python numbers need no transfer


@pytest.mark.parametrize(
    ("dtype", "monitor", "expected"),
    [
        (torch.float16, True, 2),  # GradScaler.step's own found_inf check, then the monitor's one
        (torch.float16, False, 2),
        (torch.bfloat16, True, 1),
        (torch.bfloat16, False, 0),
    ],
)
def test_mixed_precision_step_transfers(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, monitor: bool, expected: int
) -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", dtype, monitor=monitor)
    _train_step(mp, model, optimizer, x, y)  # the first step creates the scaler's state
    optimizer.zero_grad()
    with mp.autocast():
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    mp.backward(loss)
    counter = _Counting(monkeypatch)
    mp.step(optimizer)
    assert counter.calls == expected


def test_plain_grad_scaler_step_needs_one_transfer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline the previous test compares against: torch's own sync in scaler.step."""
    model, optimizer, x, y = _problem()
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()  # type: ignore[no-untyped-call]
    counter = _Counting(monkeypatch)
    scaler.step(optimizer)
    scaler.update()
    assert counter.calls == 1


# -- non-finite loss -----------------------------------------------------------------------


def test_non_finite_loss_warns_once_per_streak(caught: list[warnings.WarningMessage]) -> None:
    monitor = StabilityMonitor()
    for loss in (1.0, float("nan"), float("inf"), 1.0, float("-inf")):
        monitor.record(loss=loss)
    messages = _of(caught, NonFiniteWarning)
    assert len(messages) == 2
    assert "step 2" in messages[0] and "nan" in messages[0]
    assert "step 5" in messages[1]
    assert monitor.nonfinite_steps == 3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_bfloat16_and_float32_runs_detect_a_non_finite_loss(
    caught: list[warnings.WarningMessage], dtype: torch.dtype
) -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", dtype)
    assert not mp.scaler.is_enabled()
    for _ in range(3):
        assert _train_step(mp, model, optimizer, x, y) is False
    assert _of(caught, NonFiniteWarning) == []
    bad = x.clone()
    bad[0, 0] = float("nan")
    _train_step(mp, model, optimizer, bad, y)
    messages = _of(caught, NonFiniteWarning)
    assert len(messages) == 1 and "step 4: the loss is nan" in messages[0]
    assert "has float32's range" in messages[0]
    assert mp.monitor.summary()["nonfinite_steps"] == 1


def test_bfloat16_warns_when_inf_gradients_were_applied(
    caught: list[warnings.WarningMessage],
) -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.bfloat16)
    optimizer.zero_grad()
    with mp.autocast():
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    mp.backward(loss)
    grad = next(iter(model.parameters())).grad
    assert grad is not None
    grad.view(-1)[0] = float("inf")
    assert mp.step(optimizer) is False  # nothing skips a bfloat16 step
    messages = _of(caught, NonFiniteWarning)
    assert len(messages) == 1 and "gradient norm is inf and the step was applied" in messages[0]


def test_float16_nan_loss_advice_mentions_overflow(caught: list[warnings.WarningMessage]) -> None:
    monitor = StabilityMonitor(dtype=torch.float16)
    monitor.record(loss=float("inf"))
    assert "65504" in _of(caught, NonFiniteWarning)[0]


def test_skipped_float16_steps_with_inf_gradients_are_not_non_finite_applications(
    caught: list[warnings.WarningMessage],
) -> None:
    monitor = StabilityMonitor()
    monitor.record(loss=1.0, grad_norm=float("inf"), skipped=True)
    assert _of(caught, NonFiniteWarning) == []


# -- skip rate and scale trend ------------------------------------------------------------


def test_skip_rate_warns_at_the_threshold_within_the_window(
    caught: list[warnings.WarningMessage],
) -> None:
    # window 10, rate 0.3: the third skip among the last 10 steps warns.
    monitor = StabilityMonitor(window=10, max_skip_rate=0.3)
    pattern = [False, True, False, False, True, False, False, False]
    for skipped in pattern:
        monitor.record(skipped=skipped)
    assert _of(caught, OverflowWarning) == [] and not monitor.persistent_overflow
    monitor.record(skipped=True)
    messages = _of(caught, OverflowWarning)
    assert len(messages) == 1 and "3 of the last 9 steps" in messages[0]
    assert monitor.persistent_overflow
    assert monitor.overflow_reason == "3 of the last 9 steps skipped for inf/NaN gradients"


def test_skip_rate_clears_when_old_skips_leave_the_window(
    caught: list[warnings.WarningMessage],
) -> None:
    monitor = StabilityMonitor(window=4, max_skip_rate=0.5)
    for skipped in (True, True, False, False, False):
        monitor.record(skipped=skipped)
    # Steps 1-2 skipped: the warning came at step 2; by step 5 only one skip is in the window.
    assert len(_of(caught, OverflowWarning)) == 1
    assert not monitor.persistent_overflow
    for skipped in (True, True):
        monitor.record(skipped=skipped)
    assert len(_of(caught, OverflowWarning)) == 2  # re-armed


def test_half_of_all_steps_overflowing_warns_within_the_window(
    caught: list[warnings.WarningMessage],
) -> None:
    """The issue's case: alternating skips never make 5 in a row, and took 16 halvings to warn."""
    model, optimizer, x, y = _problem()
    window = 20
    mp = MixedPrecision("cpu", torch.float16, monitor=StabilityMonitor(window=window))
    first_warning = None
    for step in range(1, 3 * window):
        optimizer.zero_grad()
        with mp.autocast():
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        mp.backward(loss)
        if step % 2:
            grad = next(iter(model.parameters())).grad
            assert grad is not None
            grad.view(-1)[0] = float("inf")
        mp.step(optimizer)
        if first_warning is None and _of(caught, OverflowWarning):
            first_warning = step
    assert mp.consecutive_skipped_steps <= 1
    assert first_warning is not None and first_warning <= window


def test_falling_scale_trend_warns(caught: list[warnings.WarningMessage]) -> None:
    monitor = StabilityMonitor(window=50, max_skip_rate=1.0, max_scale_drop=2.0**4)
    scale = 2.0**16
    for _ in range(3):
        monitor.record(scale=scale)
        scale /= 2
    assert _of(caught, OverflowWarning) == []
    monitor.record(scale=scale)  # 2**16 -> 2**13 is only a factor of 8
    assert _of(caught, OverflowWarning) == []
    monitor.record(scale=scale / 2)  # a factor of 16
    messages = _of(caught, OverflowWarning)
    assert len(messages) == 1 and "fell from 65536 to 4096" in messages[0]
    assert monitor.persistent_overflow


def test_consecutive_skips_and_collapse_are_loss_scale_warnings(
    caught: list[warnings.WarningMessage],
) -> None:
    monitor = StabilityMonitor(warn_after_skipped=2)
    for scale in (4.0, 2.0, 1.0, 0.5):
        monitor.record(scale=scale)
    messages = _of(caught, LossScaleWarning)
    assert len(messages) == 2
    assert "2 consecutive optimizer steps were skipped" in messages[0]
    assert "collapsed to 0.5 (below 1)" in messages[1]
    # Three skips of a 100-step window and a fall by 8: a warning, not persistent overflow.
    assert not monitor.persistent_overflow


# -- gradient-norm spikes ------------------------------------------------------------------


def test_grad_norm_spike_needs_a_baseline_then_warns(
    caught: list[warnings.WarningMessage],
) -> None:
    monitor = StabilityMonitor(spike_factor=10.0, spike_min_steps=5)
    monitor.record(grad_norm=1.0)
    monitor.record(grad_norm=100.0)  # no baseline yet
    for norm in (1.0, 2.0, 1.0):
        monitor.record(grad_norm=norm)
    assert _of(caught, GradNormSpikeWarning) == []
    monitor.record(grad_norm=15.0)  # median of [1, 100, 1, 2, 1] is 1
    messages = _of(caught, GradNormSpikeWarning)
    assert len(messages) == 1 and "15 is 15.0x the median 1" in messages[0]
    monitor.record(grad_norm=20.0)  # the same spike goes on: no second warning
    monitor.record(grad_norm=1.0)
    monitor.record(grad_norm=30.0)
    assert len(_of(caught, GradNormSpikeWarning)) == 2
    assert monitor.grad_norm_spikes == 3


def test_skipped_steps_do_not_count_toward_the_spike_baseline(
    caught: list[warnings.WarningMessage],
) -> None:
    monitor = StabilityMonitor(spike_factor=10.0, spike_min_steps=3)
    for _ in range(5):
        monitor.record(grad_norm=1e6, skipped=True)
    for _ in range(3):
        monitor.record(grad_norm=1.0)
    monitor.record(grad_norm=50.0)
    assert len(_of(caught, GradNormSpikeWarning)) == 1


# -- summary, warnings' location, checkpoints ----------------------------------------------


def test_summary() -> None:
    monitor = StabilityMonitor(window=3, max_skip_rate=1.0, dtype=torch.float16)
    steps = [
        (2.0, 1.0, 8.0),
        (1.0, math.inf, 4.0),  # skipped
        (float("nan"), 3.0, 4.0),
        (4.0, 5.0, 8.0),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for loss, norm, scale in steps:
            monitor.record(loss, grad_norm=norm, scale=scale)
    summary = monitor.summary()
    assert summary["steps"] == 4 and summary["skipped_steps"] == 1
    assert summary["skip_rate"] == 0.25
    assert summary["window"] == {"steps": 3, "skipped_steps": 1, "skip_rate": 1 / 3}
    assert summary["nonfinite_steps"] == 1
    assert summary["loss"] == {"last": 4.0, "min": 1.0, "max": 4.0, "mean": 7.0 / 3}
    assert summary["grad_norm"] == {"last": 5.0, "median": 3.0, "max": 5.0}
    assert summary["scale"] == {"last": 8.0, "min": 4.0, "max": 8.0}
    assert summary["warnings"] == {"NonFiniteWarning": 1}
    assert summary["dtype"] == "float16"


def test_warnings_point_at_the_callers_line() -> None:
    monitor = StabilityMonitor()
    with pytest.warns(NonFiniteWarning) as record:
        monitor.record(loss=float("nan"))
    assert record[0].filename == __file__


def test_mixed_precision_warnings_point_at_the_callers_step() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.bfloat16)
    bad = x.clone()
    bad[0, 0] = float("inf")
    with pytest.warns(NonFiniteWarning) as record:
        _train_step(mp, model, optimizer, bad, y)
    assert record[0].filename == __file__


def _through_torch_save(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: dict[str, Any] = torch.load(buffer, weights_only=True)
    return loaded


def test_state_dict_round_trip_keeps_history_window_and_warning_state(
    caught: list[warnings.WarningMessage],
) -> None:
    monitor = StabilityMonitor(window=4, max_skip_rate=0.5)
    for skipped in (False, True, True):
        monitor.record(loss=1.0, skipped=skipped)
    assert len(_of(caught, OverflowWarning)) == 1
    state = _through_torch_save(monitor.state_dict())
    resumed = StabilityMonitor(window=4, max_skip_rate=0.5)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == monitor.state_dict()
    assert resumed.history == monitor.history
    assert resumed.persistent_overflow
    resumed.record(loss=1.0, skipped=True)  # still overflowing: no second warning
    assert len(_of(caught, OverflowWarning)) == 1
    assert resumed.summary()["window"]["steps"] == 4


def test_reset_window_needs_fresh_evidence(caught: list[warnings.WarningMessage]) -> None:
    monitor = StabilityMonitor(window=4, max_skip_rate=0.5)
    for _ in range(2):
        monitor.record(skipped=True)
    assert monitor.persistent_overflow
    monitor.reset_window()
    assert not monitor.persistent_overflow and monitor.consecutive_skipped_steps == 0
    assert monitor.steps == 2 and len(monitor.history) == 2
    monitor.record(skipped=True)
    assert not monitor.persistent_overflow
    monitor.record(skipped=True)
    assert monitor.persistent_overflow
    assert len(_of(caught, OverflowWarning)) == 2


# -- MixedPrecision owns a monitor -----------------------------------------------------------


def test_mixed_precision_feeds_loss_norm_and_scale() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, init_scale=256.0)
    optimizer.zero_grad()
    with mp.autocast():
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    mp.backward(loss)
    # The true norm, computed independently from the scaled gradients.
    scaled = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    mp.step(optimizer)
    record = mp.monitor.last
    assert record is not None
    assert record.loss == pytest.approx(loss.item())
    assert record.grad_norm == pytest.approx(float(scaled.double().norm()) / 256.0, rel=1e-5)
    assert record.scale == 256.0 and record.skipped is False


def test_gradient_accumulation_records_the_sum_of_the_losses() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.bfloat16)
    optimizer.zero_grad()
    losses = []
    for half in (x[:8], x[8:]):
        with mp.autocast():
            loss = torch.nn.functional.mse_loss(model(half).float(), y[:8]) / 2
        mp.backward(loss)
        losses.append(loss.item())
    mp.step(optimizer)
    assert mp.monitor.last is not None
    assert mp.monitor.last.loss == pytest.approx(sum(losses))


def test_monitor_false_records_no_loss_or_norm() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, monitor=False)
    _train_step(mp, model, optimizer, x, y)
    record = mp.monitor.last
    assert record is not None and record.loss is None and record.grad_norm is None
    assert record.scale == 65536.0


def test_a_monitor_of_your_own() -> None:
    monitor = StabilityMonitor(window=7)
    mp = MixedPrecision("cpu", torch.float16, monitor=monitor)
    assert mp.monitor is monitor and monitor.dtype == torch.float16
    with pytest.raises(ValueError, match="warn_after_skipped"):
        MixedPrecision("cpu", monitor=StabilityMonitor(), warn_after_skipped=3)


def test_mixed_precision_counters_come_from_the_monitor() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, warn_after_skipped=7)
    assert mp.warn_after_skipped == 7 == mp.monitor.warn_after_skipped
    _train_step(mp, model, optimizer, x, y)
    assert mp.steps == mp.monitor.steps == 1


def test_old_checkpoint_without_monitor_state_loads() -> None:
    mp = MixedPrecision("cpu", torch.float16, warn_after_skipped=2)
    old = {
        "scaler": {
            "scale": 0.5,
            "growth_factor": 2.0,
            "backoff_factor": 0.5,
            "growth_interval": 2000,
            "_growth_tracker": 0,
        },
        "steps": 10,
        "skipped_steps": 4,
        "consecutive_skipped_steps": 3,
    }
    mp.load_state_dict(old)
    assert (mp.steps, mp.skipped_steps, mp.consecutive_skipped_steps) == (10, 4, 3)
    model, optimizer, x, y = _problem()
    with warnings.catch_warnings():
        # Both conditions were already met when the checkpoint was written.
        warnings.simplefilter("error", LossScaleWarning)
        optimizer.zero_grad()
        mp.backward(torch.nn.functional.mse_loss(model(x), y))
        grad = next(iter(model.parameters())).grad
        assert grad is not None
        grad.view(-1)[0] = float("inf")
        assert mp.step(optimizer) is True


def test_runtime_exports() -> None:
    for name in ("StabilityMonitor", "StepRecord", "PrecisionWarning", "OverflowWarning"):
        assert name in runtime.__all__ and hasattr(runtime, name)
