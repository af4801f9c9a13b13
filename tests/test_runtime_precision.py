"""MixedPrecision: the step order, skip detection, LossScaleWarning and checkpoint round trip.

float16 with an enabled GradScaler runs on CPU torch, so the scaler paths are exercised
for real; inf/NaN gradients are forced by writing them into ``.grad``. Expected
parameter values come from SGD's definition applied to gradients computed in plain
float32, and expected scales from GradScaler's documented backoff (scale * backoff_factor
on every skipped step).
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from amplint import runtime
from amplint.runtime import LossScaleWarning, MixedPrecision

LR = 0.1



def _grad(parameter: torch.Tensor) -> torch.Tensor:
    """A parameter's gradient, which a backward has certainly populated."""
    assert parameter.grad is not None
    return parameter.grad

def _problem() -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    return model, optimizer, torch.randn(16, 6, generator=gen), torch.randn(16, 3, generator=gen)


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = torch.nn.functional.mse_loss(model(x), y)
    return out


def _fp32_grads() -> list[torch.Tensor]:
    model, _, x, y = _problem()
    _loss(model, x, y).backward()
    return [_grad(p).detach().clone() for p in model.parameters()]


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _total_norm(grads: list[torch.Tensor]) -> float:
    return float(torch.cat([g.double().flatten() for g in grads]).pow(2).sum().sqrt())


def _poison(model: torch.nn.Module) -> None:
    """Make this step's gradients non-finite, as a float16 overflow would."""
    _grad(next(iter(model.parameters()))).view(-1)[0] = float("inf")


def _skip_step(mp: MixedPrecision, model: torch.nn.Module, optimizer: Any, x: Any, y: Any) -> bool:
    optimizer.zero_grad()
    mp.backward(_loss(model, x, y))
    _poison(model)
    return mp.step(optimizer)


def _good_step(mp: MixedPrecision, model: torch.nn.Module, optimizer: Any, x: Any, y: Any) -> bool:
    optimizer.zero_grad()
    mp.backward(_loss(model, x, y))
    return mp.step(optimizer)


# -- defaults -------------------------------------------------------------------------------


def test_cpu_defaults_to_bfloat16_without_scaler() -> None:
    mp = MixedPrecision("cpu")
    assert mp.dtype == torch.bfloat16
    assert mp.device == torch.device("cpu") and mp.device_type == "cpu"
    assert not mp.scaler.is_enabled()
    with mp.autocast():
        assert torch.nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.bfloat16


def test_default_device_is_used() -> None:
    assert MixedPrecision().device == runtime.default_device()


def test_enabled_false_is_full_precision() -> None:
    mp = MixedPrecision("cpu", torch.float16, enabled=False)
    assert not mp.scaler.is_enabled()
    with mp.autocast():
        assert torch.nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.float32


def test_warn_after_skipped_must_be_positive() -> None:
    with pytest.raises(ValueError, match="warn_after_skipped"):
        MixedPrecision("cpu", warn_after_skipped=0)


def test_loss_scale_warning_is_a_user_warning() -> None:
    assert issubclass(LossScaleWarning, UserWarning)


# -- one step -------------------------------------------------------------------------------


def test_bfloat16_step_is_plain_sgd() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu")
    before = _params(model)
    assert _good_step(mp, model, optimizer, x, y) is False
    for p, p0, g in zip(model.parameters(), before, _fp32_grads(), strict=True):
        torch.testing.assert_close(p.detach(), p0 - LR * g)
    assert mp.steps == 1 and mp.skipped_steps == 0


def test_float16_backward_scales_and_step_unscales() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, init_scale=2.0**12)
    assert mp.scaler.is_enabled()
    before = _params(model)
    mp.backward(_loss(model, x, y))
    reference = _fp32_grads()
    for p, g in zip(model.parameters(), reference, strict=True):
        torch.testing.assert_close(p.grad, g * 2.0**12)
    assert mp.step(optimizer) is False
    for p, p0, g in zip(model.parameters(), before, reference, strict=True):
        torch.testing.assert_close(p.detach(), p0 - LR * g)
    assert mp.scaler.get_scale() == 2.0**12  # no growth before growth_interval good steps


def test_step_clips_the_unscaled_gradients() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, init_scale=2.0**12)
    before = _params(model)
    reference = _fp32_grads()
    true_norm = _total_norm(reference)
    max_norm = true_norm / 3
    mp.backward(_loss(model, x, y))
    assert mp.step(optimizer, max_norm=max_norm) is False
    assert mp.grad_norm is not None
    assert mp.grad_norm.item() == pytest.approx(true_norm, rel=1e-5)
    coefficient = max_norm / (true_norm + 1e-6)
    for p, p0, g in zip(model.parameters(), before, reference, strict=True):
        torch.testing.assert_close(p.detach(), p0 - LR * coefficient * g)


def test_step_clips_only_the_given_parameters() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, init_scale=2.0**12)
    first, *rest = list(model.parameters())
    reference = _fp32_grads()
    mp.backward(_loss(model, x, y))
    tiny = 1e-3
    mp.step(optimizer, max_norm=tiny, parameters=[first])
    assert mp.grad_norm is not None
    assert mp.grad_norm.item() == pytest.approx(_total_norm(reference[:1]), rel=1e-5)
    assert _total_norm([_grad(first)]) == pytest.approx(tiny, rel=1e-3)
    for p, g in zip(rest, reference[1:], strict=True):
        torch.testing.assert_close(p.grad, g)  # unscaled, not clipped


def test_parameters_without_max_norm_is_an_error() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu")
    mp.backward(_loss(model, x, y))
    with pytest.raises(ValueError, match="max_norm"):
        mp.step(optimizer, parameters=model.parameters())


def test_inf_gradients_skip_the_step_and_back_off() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, init_scale=2.0**12, backoff_factor=0.25)
    before = _params(model)
    assert _skip_step(mp, model, optimizer, x, y) is True
    for p, p0 in zip(model.parameters(), before, strict=True):
        torch.testing.assert_close(p.detach(), p0)
    assert mp.scaler.get_scale() == 2.0**12 * 0.25
    assert (mp.steps, mp.skipped_steps, mp.consecutive_skipped_steps) == (1, 1, 1)
    assert _good_step(mp, model, optimizer, x, y) is False
    assert (mp.steps, mp.skipped_steps, mp.consecutive_skipped_steps) == (2, 1, 0)


def test_skip_detected_even_when_clipping() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16)
    optimizer.zero_grad()
    mp.backward(_loss(model, x, y))
    _poison(model)
    assert mp.step(optimizer, max_norm=1.0) is True
    assert mp.grad_norm is not None and not torch.isfinite(mp.grad_norm)


# -- LossScaleWarning -----------------------------------------------------------------------


def _loss_scale_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, LossScaleWarning)]


def test_warns_after_consecutive_skips_once_until_recovery() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, warn_after_skipped=3)  # scale 65536: no collapse
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _skip_step(mp, model, optimizer, x, y)
        _skip_step(mp, model, optimizer, x, y)
        assert _loss_scale_warnings(caught) == []
        _skip_step(mp, model, optimizer, x, y)
        messages = _loss_scale_warnings(caught)
        assert len(messages) == 1
        assert "loss scale" in messages[0] and "3 consecutive" in messages[0]
        _skip_step(mp, model, optimizer, x, y)
        assert len(_loss_scale_warnings(caught)) == 1  # not repeated every step
        _good_step(mp, model, optimizer, x, y)
        for _ in range(3):
            _skip_step(mp, model, optimizer, x, y)
        assert len(_loss_scale_warnings(caught)) == 2  # re-armed by the good step
    assert mp.skipped_steps == 7


def test_default_threshold_is_five() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            _skip_step(mp, model, optimizer, x, y)
        assert _loss_scale_warnings(caught) == []
        _skip_step(mp, model, optimizer, x, y)
        assert len(_loss_scale_warnings(caught)) == 1


def test_warns_when_the_loss_scale_collapses_below_one() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision(
        "cpu", torch.float16, init_scale=2.0, backoff_factor=0.5, warn_after_skipped=1000
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _skip_step(mp, model, optimizer, x, y)
        assert mp.scaler.get_scale() == 1.0
        assert _loss_scale_warnings(caught) == []
        _skip_step(mp, model, optimizer, x, y)
        assert mp.scaler.get_scale() == 0.5
        messages = _loss_scale_warnings(caught)
        assert len(messages) == 1 and "loss scale" in messages[0] and "below 1" in messages[0]
        _skip_step(mp, model, optimizer, x, y)
        assert len(_loss_scale_warnings(caught)) == 1


def test_warning_points_at_the_callers_step() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, warn_after_skipped=1)
    with pytest.warns(LossScaleWarning, match="loss scale") as record:
        _skip_step(mp, model, optimizer, x, y)
    assert record[0].filename == __file__


def test_no_warning_for_healthy_training() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, warn_after_skipped=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossScaleWarning)
        for _ in range(10):
            assert _good_step(mp, model, optimizer, x, y) is False


# -- checkpoints ----------------------------------------------------------------------------


def _through_torch_save(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: dict[str, Any] = torch.load(buffer, weights_only=True)
    return loaded


def test_state_dict_round_trip_resumes_identically() -> None:
    kwargs: dict[str, Any] = {"init_scale": 2.0**10, "growth_interval": 3}
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, **kwargs)
    for i in range(8):
        if i in (2, 5):
            _skip_step(mp, model, optimizer, x, y)
        else:
            _good_step(mp, model, optimizer, x, y)
    _skip_step(mp, model, optimizer, x, y)
    state = mp.state_dict()
    assert state["steps"] == 9 and state["skipped_steps"] == 3
    assert state["consecutive_skipped_steps"] == 1
    # Each skip halves the scale; growth needs 3 good steps in a row, and the runs of good
    # steps were 2 long, so the scale only shrank: 2**10 / 2**3.
    assert state["scaler"]["scale"] == 2.0**10 / 2**3

    resumed = MixedPrecision("cpu", torch.float16)  # default kwargs: all must come from the state
    resumed.load_state_dict(_through_torch_save(state))
    assert resumed.state_dict() == state

    # The next steps behave the same in the original and the resumed object.
    model2, optimizer2, _, _ = _problem()
    model2.load_state_dict(model.state_dict())
    optimizer2.load_state_dict(optimizer.state_dict())
    for step in (_good_step, _good_step, _good_step, _skip_step):
        assert step(mp, model, optimizer, x, y) == step(resumed, model2, optimizer2, x, y)
        assert mp.scaler.get_scale() == resumed.scaler.get_scale()
    assert mp.state_dict() == resumed.state_dict()
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_scale_growth_survives_the_round_trip() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, init_scale=4.0, growth_interval=2)
    for _ in range(5):
        _good_step(mp, model, optimizer, x, y)
    state = mp.state_dict()
    assert state["scaler"]["scale"] == 4.0 * 2**2  # doubled after good steps 2 and 4
    assert state["scaler"]["_growth_tracker"] == 1
    resumed = MixedPrecision("cpu", torch.float16)
    resumed.load_state_dict(state)
    assert resumed.scaler.get_scale() == 16.0
    _good_step(mp, model, optimizer, x, y)
    model2, optimizer2, _, _ = _problem()
    _good_step(resumed, model2, optimizer2, x, y)
    assert resumed.scaler.get_scale() == mp.scaler.get_scale() == 32.0


def test_resumed_collapse_does_not_warn_again() -> None:
    model, optimizer, x, y = _problem()
    mp = MixedPrecision("cpu", torch.float16, init_scale=1.0, warn_after_skipped=2)
    with pytest.warns(LossScaleWarning):
        _skip_step(mp, model, optimizer, x, y)
        _skip_step(mp, model, optimizer, x, y)
    resumed = MixedPrecision("cpu", torch.float16, warn_after_skipped=2)
    resumed.load_state_dict(mp.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossScaleWarning)
        _skip_step(resumed, model, optimizer, x, y)


def test_bfloat16_checkpoint_into_float16_keeps_the_initial_scale() -> None:
    model, optimizer, x, y = _problem()
    bf16 = MixedPrecision("cpu", torch.bfloat16)
    _good_step(bf16, model, optimizer, x, y)
    state = bf16.state_dict()
    assert state["scaler"] == {}
    fp16 = MixedPrecision("cpu", torch.float16, init_scale=256.0)
    fp16.load_state_dict(state)
    assert fp16.scaler.get_scale() == 256.0
    assert fp16.steps == 1


def test_float16_checkpoint_into_bfloat16_ignores_the_scaler() -> None:
    model, optimizer, x, y = _problem()
    fp16 = MixedPrecision("cpu", torch.float16)
    _skip_step(fp16, model, optimizer, x, y)
    bf16 = MixedPrecision("cpu", torch.bfloat16)
    bf16.load_state_dict(fp16.state_dict())
    assert not bf16.scaler.is_enabled()
    assert (bf16.steps, bf16.skipped_steps) == (1, 1)
