"""AMP303 scaler-step-protocol: its examples, and real torch (CPU) proving what
each protocol mistake does and that the fixed loops train."""

from __future__ import annotations

from types import ModuleType

import pytest

from amplint.api import check_source, fix_text
from amplint.engine.rule import Invalid
from amplint.rules.amp303_scaler_step_protocol import ScalerStepProtocol
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)
from rules.snippets import run_snippet

RULE = ScalerStepProtocol


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


MISSING_UPDATE = """
def train(model, optimizer, scaler, steps):
    for _ in range(steps):
        loss = model(torch.ones(2, 4)).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        optimizer.zero_grad()


def main(model, optimizer):
    train(model, optimizer, torch.amp.GradScaler("cpu"), 3)
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


def _train(torch: ModuleType, source: str, steps: int = 3) -> None:
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    run_snippet(source, torch=torch)[0]["train"](model, optimizer, scaler, steps)


def test_missing_update_raises_and_the_fix_survives(torch: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="unscale_"):
        _train(torch, MISSING_UPDATE)
    fixed = fix_text(MISSING_UPDATE, select=["AMP303"])
    assert "scaler.update()" in fixed
    _train(torch, fixed, steps=5)


def test_double_unscale_raises_and_is_reported(torch: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="unscale_"):
        _train(torch, DOUBLE_UNSCALE)
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


def test_bare_optimizer_step_applies_scaled_gradients_and_the_fix_does_not(torch: ModuleType) -> None:
    def weight_change(source: str) -> float:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        before = model.weight.detach().clone()
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
        run_snippet(source, torch=torch)[0]["train"](model, optimizer, scaler, 1)
        return float((model.weight.detach() - before).abs().max())

    fixed = fix_text(BARE_STEP, select=["AMP303"])
    assert "scaler.step(optimizer)" in fixed
    # Gradient of sum(W x) w.r.t. each weight is 2 (batch of ones); lr 1e-3 → step 2e-3.
    assert weight_change(fixed) == pytest.approx(2e-3, rel=1e-5)
    assert weight_change(BARE_STEP) == pytest.approx(2e-3 * 2.0**16, rel=1e-5)


HELPER_STEPS_CALLER_UPDATES = """
def step_all(optimizers, scaler):
    for optimizer in optimizers:
        scaler.step(optimizer)

def train(models, optimizers, scaler, steps):
    for _ in range(steps):
        loss = sum(model(torch.ones(2, 4)).sum() for model in models)
        scaler.scale(loss).backward()
        step_all(optimizers, scaler)
        scaler.update()
        for optimizer in optimizers:
            optimizer.zero_grad()
"""


def test_a_helper_that_only_steps_is_right_and_an_update_inside_it_breaks_the_caller(torch: ModuleType) -> None:
    # nerfstudio's pattern: amplint stays silent, and the code trains as written.
    assert [d.code for d in check_source(HELPER_STEPS_CALLER_UPDATES, select=["AMP303"])] == []
    models = [torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)]
    optimizers = [torch.optim.SGD(model.parameters(), lr=0.01) for model in models]
    namespace, _ = run_snippet(HELPER_STEPS_CALLER_UPDATES, torch=torch)
    namespace["train"](models, optimizers, torch.amp.GradScaler("cpu"), 3)
    # The update() the old fix added after each step in the helper: the caller's own
    # update() then finds no inf checks recorded and raises.
    per_step_update = HELPER_STEPS_CALLER_UPDATES.replace(
        "        scaler.step(optimizer)\n", "        scaler.step(optimizer)\n        scaler.update()\n", 1
    )
    namespace, _ = run_snippet(per_step_update, torch=torch)
    with pytest.raises(AssertionError, match="No inf checks were recorded"):
        namespace["train"](models, optimizers, torch.amp.GradScaler("cpu"), 3)


WRAPPER = """\
import torch


class Wrapped:
    def __init__(self, optimizer, scaler=None):
        self._optimizer = optimizer
        self._scaler = {bound}

    def step(self, loss):
{body}        self._scaler.step(self._optimizer)
"""


@pytest.mark.parametrize(
    ("bound", "body", "reported"),
    [
        # Handed in and only stepped: the owner updates (animeface).
        ("scaler", "", False),
        # The class scales the backward itself: the protocol is its own, update missing.
        ("scaler", "        self._scaler.scale(loss).backward()\n", True),
        # The class may build the scaler itself: it owns the update.
        ("scaler or torch.amp.GradScaler()", "", True),
        ("torch.amp.GradScaler()", "", True),
    ],
)
def test_a_scaler_member_the_class_is_handed_leaves_update_to_its_owner(bound: str, body: str, reported: bool) -> None:
    source = WRAPPER.format(bound=bound, body=body)
    codes = [d.code for d in check_source(source, "wrap.py", select=["AMP303"])]
    assert (codes != []) is reported, codes
