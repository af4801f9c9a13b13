"""AMP301 clip-without-unscale: its examples, and real torch (CPU) proving that
clipping before `unscale_` clips the scaled gradients and the fix clips the real ones."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from amplint.api import check_source, fix_text
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


def _linear_step(torch: ModuleType) -> tuple[Any, Any, Any]:
    """A 4-to-1 linear model of weights 1 and bias 0, its SGD optimizer, and the loss of a
    batch of two rows of tens: d(loss)/dW is 20 per weight and d(loss)/db is 2."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loss = model(torch.full((2, 4), 10.0)).sum()
    return model, optimizer, loss


def _clip_run(torch: ModuleType, source: str, init_scale: float) -> tuple[float, Any]:
    model, optimizer, loss = _linear_step(torch)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
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


TWO_CLIPS = """
import torch

def step(unet, text_encoder, loss, optimizer, scaler):
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(unet.parameters(), 1.0)
    torch.nn.utils.clip_grad_norm_(text_encoder.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
"""


def test_two_clips_get_one_unscale_which_torch_accepts(torch: ModuleType) -> None:
    # waifu-diffusion: one optimizer holds both models. An `unscale_` before each clip
    # raises "unscale_() has already been called on this optimizer since the last update()".
    fixed = fix_text(TWO_CLIPS, select=["AMP301"])
    assert fixed.count("scaler.unscale_(optimizer)") == 1
    twice = TWO_CLIPS.replace(
        "    torch.nn.utils.clip_grad_norm_(text_encoder",
        "    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_(text_encoder",
    ).replace("    torch.nn.utils.clip_grad_norm_(unet", "    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_(unet")

    def run(source: str) -> None:
        unet, text_encoder = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD([*unet.parameters(), *text_encoder.parameters()], lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        x = torch.ones(2, 4)
        loss = (unet(x) + text_encoder(x)).sum()
        run_snippet(source, torch=torch)[0]["step"](unet, text_encoder, loss, optimizer, scaler)

    run(fixed)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        run(twice)


BRANCHES = """\
import torch

def step(model, loss, optimizer, scaler, enable_amp):
    if enable_amp:
        scaler.scale(loss).backward()
{amp_branch}    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize(
    ("amp_branch", "reported"),
    [
        # OneVOS (round BH): the clip in the else never follows the scaled backward.
        ("", False),
        ("        scaler.unscale_(optimizer)\n        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", False),
        # A clip on the scaled branch itself is still reported.
        ("        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n", True),
    ],
)
def test_a_clip_on_the_other_branch_of_the_scaled_backward(amp_branch: str, reported: bool) -> None:
    codes = [d.code for d in check_source(BRANCHES.format(amp_branch=amp_branch), "train.py", select=["AMP301"])]
    assert (codes != []) is reported, codes


OTHER_SCALER_STEP = """\
import torch

def step(model, loss, optimizer, g_scaler, d_scaler, max_norm):
    g_scaler.scale(loss).backward()
    d_scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    g_scaler.step(optimizer)
    g_scaler.update()
    return norm
"""


def test_unscaling_with_another_scaler_clips_wrongly_scaled_gradients_and_the_fix_unscales_right(torch: ModuleType) -> None:
    # pytorch-animeGAN (round BN): `scaler_d.unscale_(optimizer_g)` after a backward scaled
    # by `scaler_g`. With different scales, the clip sees gradients times g/d.
    found = check_source(OTHER_SCALER_STEP, select=["AMP301"])
    assert [(d.code, d.location.row) for d in found] == [("AMP301", 6)]
    assert "another scaler's scale" in found[0].message
    fixed = fix_text(OTHER_SCALER_STEP, select=["AMP301"], unsafe_fixes=True)
    assert "    g_scaler.unscale_(optimizer)\n" in fixed and "d_scaler.unscale_" not in fixed
    assert fix_text(OTHER_SCALER_STEP, select=["AMP301"]) == OTHER_SCALER_STEP  # unsafe only

    def run(source: str) -> float:
        model, optimizer, loss = _linear_step(torch)
        g_scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        d_scaler = torch.amp.GradScaler("cpu", init_scale=16.0)
        d_scaler.scale(torch.ones(()))  # the discriminator's step scaled its own loss earlier
        return float(run_snippet(source, torch=torch)[0]["step"](model, loss, optimizer, g_scaler, d_scaler, 1e9))

    true_norm = (4 * 20.0**2 + 2.0**2) ** 0.5
    assert run(OTHER_SCALER_STEP) == pytest.approx(true_norm * 1024.0 / 16.0)
    assert run(fixed) == pytest.approx(true_norm)
