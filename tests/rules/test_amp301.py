"""AMP301 clip-without-unscale: its examples, and real torch (CPU) proving that
clipping before `unscale_` clips the scaled gradients and the fix clips the real ones."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from amplint.api import fix_text
from amplint.engine.rule import Invalid
from amplint.rules.amp301_clip_without_unscale import ClipWithoutUnscale
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)
from rules.snippets import run_snippet

RULE = ClipWithoutUnscale


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


CLIP_STEP = """
import torch

def step(model, loss, optimizer, scaler, max_norm):
    scaler.scale(loss).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm
"""


def _clip_run(torch: ModuleType, source: str, init_scale: float) -> tuple[float, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    x = torch.full((2, 4), 10.0)
    loss = model(x).sum()
    norm = run_snippet(source, torch=torch)[0]["step"](model, loss, optimizer, scaler, 1.0)
    return float(norm), model


def test_original_clips_scaled_gradients_and_fixed_clips_the_real_ones(torch: ModuleType) -> None:
    fixed = fix_text(CLIP_STEP, select=["AMP301"])
    assert "scaler.unscale_(optimizer)" in fixed
    scale = 1024.0
    # First principles: d(sum(W x + b))/dW = sum over the batch of x = 20 per weight,
    # db = 2; true norm = sqrt(4 * 20**2 + 2**2).
    true_norm = (4 * 20.0**2 + 2.0**2) ** 0.5
    original_norm, original_model = _clip_run(torch, CLIP_STEP, scale)
    fixed_norm, fixed_model = _clip_run(torch, fixed, scale)
    assert original_norm == pytest.approx(true_norm * scale)  # clipped the scaled gradients
    assert fixed_norm == pytest.approx(true_norm)
    # The original's effective threshold was max_norm / scale: its update is `scale` times smaller.
    original_step = 1.0 - original_model.weight.detach()[0, 0].item()
    fixed_step = 1.0 - fixed_model.weight.detach()[0, 0].item()
    assert fixed_step == pytest.approx(20.0 / true_norm, rel=1e-4)
    assert original_step == pytest.approx(fixed_step / scale, rel=1e-3)
