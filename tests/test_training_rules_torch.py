"""Real torch (CPU) proves what the training-loop rules claim and that their fixes help."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from amplint.api import check_source, fix_text

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _exec(source: str, **names: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"torch": torch, **names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, "<snippet>", "exec"), namespace)
    return namespace


# -- AMP104 -------------------------------------------------------------------------------

BCE_SNIPPETS = [
    "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda', enabled=True):\n    pass\n"
    "loss = F.binary_cross_entropy(torch.sigmoid(logits), target)\n",
    "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n    pass\n"
    "loss = F.binary_cross_entropy(logits.sigmoid(), target, weight, reduction='sum')\n",
    "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cuda'):\n    pass\n"
    "loss = F.binary_cross_entropy(input=F.sigmoid(logits), target=target, weight=weight, reduction='none')\n",
]


@pytest.mark.parametrize("source", BCE_SNIPPETS)
def test_amp104_fix_computes_the_same_loss(source: str) -> None:
    fixed = fix_text(source, select=["AMP104"])
    assert "binary_cross_entropy_with_logits" in fixed and "sigmoid" not in fixed
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "logits": torch.randn(16, 5, generator=generator),
        "target": torch.randint(0, 2, (16, 5), generator=generator).float(),
        "weight": torch.rand(16, 5, generator=generator),
    }
    original = _exec(source, **inputs)["loss"]
    rewritten = _exec(fixed, **inputs)["loss"]
    # Equal up to float32 rounding; the fused form is the more accurate of the two.
    torch.testing.assert_close(rewritten, original, rtol=1e-4, atol=1e-6)


def test_bce_does_not_raise_under_cpu_autocast_which_is_why_cpu_files_are_silent() -> None:
    probabilities = torch.rand(4, 3)
    target = torch.randint(0, 2, (4, 3)).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.binary_cross_entropy(probabilities, target)
    assert torch.isfinite(loss)
    assert not check_source(
        "import torch\nimport torch.nn.functional as F\nwith torch.autocast('cpu'):\n"
        "    loss = F.binary_cross_entropy(p, y)\n",
        select=["AMP104"],
    )


# -- AMP301 -------------------------------------------------------------------------------

CLIP_STEP = """
import torch

def step(model, loss, optimizer, scaler, max_norm):
    scaler.scale(loss).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm
"""


def _clip_run(source: str, init_scale: float) -> tuple[float, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    x = torch.full((2, 4), 10.0)
    loss = model(x).sum()
    norm = _exec(source)["step"](model, loss, optimizer, scaler, 1.0)
    return float(norm), model


def test_amp301_original_clips_scaled_gradients_and_fixed_clips_the_real_ones() -> None:
    fixed = fix_text(CLIP_STEP, select=["AMP301"])
    assert "scaler.unscale_(optimizer)" in fixed
    scale = 1024.0
    # First principles: d(sum(W x + b))/dW = sum over the batch of x = 20 per weight,
    # db = 2; true norm = sqrt(4 * 20**2 + 2**2).
    true_norm = (4 * 20.0**2 + 2.0**2) ** 0.5
    original_norm, original_model = _clip_run(CLIP_STEP, scale)
    fixed_norm, fixed_model = _clip_run(fixed, scale)
    assert original_norm == pytest.approx(true_norm * scale)  # clipped the scaled gradients
    assert fixed_norm == pytest.approx(true_norm)
    # The original's effective threshold was max_norm / scale: its update is `scale` times smaller.
    original_step = 1.0 - original_model.weight.detach()[0, 0].item()
    fixed_step = 1.0 - fixed_model.weight.detach()[0, 0].item()
    assert fixed_step == pytest.approx(20.0 / true_norm, rel=1e-4)
    assert original_step == pytest.approx(fixed_step / scale, rel=1e-3)


# -- AMP303 -------------------------------------------------------------------------------

MISSING_UPDATE = """
def train(model, optimizer, scaler, steps):
    for _ in range(steps):
        loss = model(torch.ones(2, 4)).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        optimizer.zero_grad()
"""

DOUBLE_UNSCALE = """
def train(model, optimizer, scaler, steps):
    for _ in range(steps):
        loss = model(torch.ones(2, 4)).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
"""


def _train(source: str, steps: int = 3) -> None:
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    _exec(source)["train"](model, optimizer, scaler, steps)


def test_amp303_missing_update_raises_and_the_fix_survives() -> None:
    with pytest.raises(RuntimeError, match="unscale_"):
        _train(MISSING_UPDATE)
    fixed = fix_text(MISSING_UPDATE, select=["AMP303"])
    assert "scaler.update()" in fixed
    _train(fixed, steps=5)


def test_amp303_double_unscale_raises_and_is_reported() -> None:
    with pytest.raises(RuntimeError, match="unscale_"):
        _train(DOUBLE_UNSCALE)
    codes = [d.code for d in check_source(DOUBLE_UNSCALE, select=["AMP303"])]
    assert codes == ["AMP303"]


BARE_STEP = """
def train(model, optimizer, scaler, steps):
    for _ in range(steps):
        loss = model(torch.ones(2, 4)).sum()
        scaler.scale(loss).backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_amp303_bare_optimizer_step_applies_scaled_gradients_and_the_fix_does_not() -> None:
    def weight_change(source: str) -> float:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        before = model.weight.detach().clone()
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
        _exec(source)["train"](model, optimizer, scaler, 1)
        return float((model.weight.detach() - before).abs().max())

    fixed = fix_text(BARE_STEP, select=["AMP303"])
    assert "scaler.step(optimizer)" in fixed
    # Gradient of sum(W x) w.r.t. each weight is 2 (batch of ones); lr 1e-3 → step 2e-3.
    assert weight_change(fixed) == pytest.approx(2e-3, rel=1e-5)
    assert weight_change(BARE_STEP) == pytest.approx(2e-3 * 2.0**16, rel=1e-5)
