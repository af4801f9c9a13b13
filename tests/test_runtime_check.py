"""amp_check on CPU autocast: it sees whether autocast is really on, and measures both ways.

No timing is asserted (the numbers are machine noise here); what is asserted is what the
measurement must satisfy whatever the machine: bfloat16 activations take half the bytes of
float32 ones, and the check leaves the model, its gradients and the random state alone.
"""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("torch")

import torch

from amplint import runtime
from amplint.runtime import AmpCheck, AmpCheckError, amp_check


def _wide_batch_model() -> tuple[torch.nn.Module, torch.Tensor]:
    """Tiny weights, a large batch: the saved activations dominate what backward keeps."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    return model, torch.randn(4096, 8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_active_autocast(dtype: torch.dtype) -> None:
    model, x = _wide_batch_model()
    result = amp_check(model, x, dtype=dtype, repeat=2, warmup=0)
    name = str(dtype).removeprefix("torch.")
    assert result.autocast_active and result.dtype == name
    assert result.output_dtypes == (name,)
    assert set(result.low_precision_modules) == {"", "0", "1", "2"} and result.modules == 4
    assert result.backward
    assert result.fp32_seconds > 0 and result.amp_seconds > 0
    assert result.speedup == result.fp32_seconds / result.amp_seconds
    assert result.fp32_peak_memory is None and result.amp_peak_memory is None  # CPU
    # Half-size activations; the autocast weight copies are a few hundred bytes here.
    assert result.amp_saved_bytes < 0.6 * result.fp32_saved_bytes


def test_saved_bytes_match_what_autograd_saves() -> None:
    model, x = _wide_batch_model()
    result = amp_check(model, x, repeat=1, warmup=0)
    # float32: Linear saves its input x (4096x8) for the weight gradient, ReLU its output
    # (4096x8) and the second Linear its input — the ReLU output again. Parameters are
    # not counted. So: two 4096x8 float32 tensors.
    assert result.fp32_saved_bytes == 2 * 4096 * 8 * 4


def test_autocast_disabled_inside_forward_is_caught() -> None:
    class Stubborn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.autocast("cpu", enabled=False):
                out: torch.Tensor = self.layer(x.float())
            return out

    with pytest.raises(AmpCheckError, match="not active"):
        amp_check(Stubborn(), torch.randn(2, 4), repeat=1, warmup=0)
    result = amp_check(Stubborn(), torch.randn(2, 4), repeat=1, warmup=0, strict=False)
    assert not result.autocast_active and result.low_precision_modules == ()
    assert "NOT active" in str(result)
    assert issubclass(AmpCheckError, AssertionError)


def test_float64_inputs_are_caught() -> None:
    model = torch.nn.Linear(4, 4).double()
    # CPU autocast leaves float64 alone: nothing runs in low precision.
    with pytest.raises(AmpCheckError):
        amp_check(model, torch.randn(2, 4, dtype=torch.float64), repeat=1, warmup=0)


def test_model_grads_buffers_and_random_state_are_left_alone() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 2)
    )
    x = torch.randn(32, 8)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    amp_check(model, x, repeat=2, warmup=1)
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), rng)
    assert model.training


def test_forward_only() -> None:
    model, x = _wide_batch_model()
    result = amp_check(model, x, backward=False, repeat=1, warmup=0)
    assert not result.backward and result.fp32_saved_bytes == 0
    with torch.no_grad():
        assert amp_check(model, x, repeat=1, warmup=0).fp32_saved_bytes == 0


def test_keyword_inputs_and_report_formats() -> None:
    class Keyword(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(3, 3)

        def forward(self, *, features: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.layer(features)
            return out

    result = amp_check(Keyword(), {"features": torch.randn(4, 3)}, repeat=1, warmup=0)
    data = result.to_dict()
    assert data["speedup"] == result.speedup and data["autocast_active"] is True
    json.dumps(data)
    text = str(result)
    assert "amp_check on cpu, autocast bfloat16: active" in text and "speedup" in text


def test_bad_repeat() -> None:
    with pytest.raises(ValueError):
        amp_check(torch.nn.Linear(2, 2), torch.randn(1, 2), repeat=0)


def test_speedup_of_a_zero_time_is_infinite() -> None:
    result = AmpCheck(
        device="cpu",
        dtype="bfloat16",
        autocast_active=True,
        output_dtypes=(),
        low_precision_modules=(),
        modules=0,
        backward=False,
        fp32_seconds=1.0,
        amp_seconds=0.0,
        fp32_peak_memory=None,
        amp_peak_memory=None,
        fp32_saved_bytes=0,
        amp_saved_bytes=0,
    )
    assert math.isinf(result.speedup)


def test_exported() -> None:
    assert {"amp_check", "AmpCheck", "AmpCheckError"} <= set(runtime.__all__)
