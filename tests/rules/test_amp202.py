"""AMP202 autocast-disabled-off-cuda: its examples, and its fix on both conditional
forms: they become amplint.runtime.autocast with their arguments kept, and the fixed
nanoGPT context really autocasts on CPU."""

from __future__ import annotations

from types import ModuleType

import pytest

from amplint.api import check_source, fix_text
from amplint.engine.rule import Invalid
from amplint.rules.amp202_autocast_disabled_off_cuda import AutocastDisabledOffCuda
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)

RULE = AutocastDisabledOffCuda


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


MIRROR = '''from contextlib import nullcontext

import torch


def train(model, x, device):
    ctx = torch.autocast("cuda", enabled=use_amp, cache_enabled=False) if device.type == "cuda" else nullcontext()
    with ctx:
        loss = model(x).sum()
    loss.backward()
'''

# By hand: the device the test examines; CUDA's default dtype made explicit; the rest kept.
MIRROR_FIXED = '''from contextlib import nullcontext

import torch
import amplint.runtime


def train(model, x, device):
    ctx = amplint.runtime.autocast(device, dtype=torch.float16, enabled=use_amp, cache_enabled=False)
    with ctx:
        loss = model(x).sum()
    loss.backward()
'''

NANOGPT = '''import contextlib

import torch

device_type = "cuda" if torch.cuda.is_available() else "cpu"
ctx = contextlib.nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=torch.bfloat16)
with ctx:
    loss = model(x).sum()
loss.backward()
'''

NANOGPT_FIXED = '''import contextlib

import torch
import amplint.runtime

device_type = "cuda" if torch.cuda.is_available() else "cpu"
ctx = amplint.runtime.autocast(device_type, dtype=torch.bfloat16)
with ctx:
    loss = model(x).sum()
loss.backward()
'''


@pytest.mark.parametrize(("source", "expected"), [(MIRROR, MIRROR_FIXED), (NANOGPT, NANOGPT_FIXED)])
def test_fix_output(source: str, expected: str) -> None:
    fixed = fix_text(source, select=["AMP202"], unsafe_fixes=True)
    assert fixed == expected
    compile(fixed, "fixed.py", "exec")
    assert fix_text(fixed, select=["AMP202"], unsafe_fixes=True) == fixed


def test_the_fix_is_unsafe_only() -> None:
    assert fix_text(NANOGPT, select=["AMP202"]) == NANOGPT


def test_the_fixed_nanogpt_context_autocasts_on_cpu(torch: ModuleType) -> None:
    seen: list[tuple[bool, object]] = []

    def model(x: object) -> object:
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return torch.ones(1, requires_grad=True)

    for source, expected in ((NANOGPT, False), (NANOGPT_FIXED, True)):
        seen.clear()
        code = source.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"')
        exec(compile(code, "train.py", "exec"), {"model": model, "x": None, "__name__": "train"})
        assert seen[0][0] is expected
    assert seen[0][1] == torch.bfloat16


FLOAT16_OFF_CUDA = """\
import torch
from contextlib import nullcontext

def train(model, x, optimizer, device_type):
    ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=DTYPE)
    with ctx:
        loss = model(x)
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("dtype", "newest", "reported"),
    [
        # tiny-universe pins torch 2.0.1: CPU autocast there took only bfloat16, and MPS and
        # XPU had no autocast in torch, so a float16 region loses nothing off CUDA.
        ("torch.float16", (2, 0), False),
        ("torch.float16", (2, 1), False),
        ("torch.float16", (2, 2), True),
        ("torch.float16", None, True),
        # bfloat16 runs under CPU autocast on every torch with it (Sophia's torch 2.1).
        ("torch.bfloat16", (2, 1), True),
    ],
)
def test_a_float16_region_is_reported_only_where_another_device_could_autocast_it(
    dtype: str, newest: tuple[int, int] | None, reported: bool
) -> None:
    from amplint.engine.project import ProjectFacts

    found = check_source(
        FLOAT16_OFF_CUDA.replace("DTYPE", dtype), "train.py", select=["AMP202"], project=ProjectFacts(newest_torch=newest)
    )
    assert [(d.code, d.location.row) for d in found] == ([("AMP202", 5)] if reported else [])
