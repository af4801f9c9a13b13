"""AMP302 scaler-with-bfloat16: its VALID and INVALID examples."""

from __future__ import annotations

import pytest

from amplint.api import check_source
from amplint.engine.rule import Invalid
from amplint.rules.amp302_scaler_with_bfloat16 import ScalerWithBfloat16
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)

RULE = ScalerWithBfloat16


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


# The scaler's device decides whether CPU's default bfloat16 meets it: a CUDA scaler
# disables itself without CUDA (the real-torch test below proves it).
SCALER_BESIDE_CPU_OR_CUDA_AUTOCAST = """\
import torch

scaler = SCALER
for x in loader:
    with torch.autocast(device_type="cuda" if torch.cuda.is_available() else "cpu"DTYPE):
        loss = model(x).sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


@pytest.mark.parametrize(
    ("scaler", "dtype", "fires"),
    [
        ('torch.amp.GradScaler("cuda")', "", False),
        ("torch.amp.GradScaler()", "", False),
        ("torch.cuda.amp.GradScaler()", "", False),
        ('torch.amp.GradScaler("cuda:0")', "", False),
        ('torch.amp.GradScaler("cpu")', "", True),
        ("torch.cpu.amp.GradScaler()", "", True),
        ("torch.amp.GradScaler(device)", "", True),
        ('torch.amp.GradScaler("cuda")', ", dtype=torch.bfloat16", True),
    ],
)
def test_a_cuda_scaler_meets_no_bfloat16_that_only_cpu_defaults_to(scaler: str, dtype: str, fires: bool) -> None:
    source = SCALER_BESIDE_CPU_OR_CUDA_AUTOCAST.replace("SCALER", scaler).replace("DTYPE", dtype)
    found = [d.code for d in check_source(source, "train.py", select=["AMP302"])]
    assert found == (["AMP302"] if fires else [])


def test_torch_a_cuda_scaler_is_off_without_cuda_and_cpu_autocast_defaults_to_bfloat16(torch) -> None:  # type: ignore[no-untyped-def]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert torch.amp.GradScaler("cuda").is_enabled() is torch.cuda.is_available()
    assert torch.amp.GradScaler("cpu").is_enabled()
    with torch.autocast("cpu"):
        assert torch.get_autocast_dtype("cpu") is torch.bfloat16


def test_a_cpu_only_autocast_beside_a_cuda_scaler_is_still_reported() -> None:
    source = SCALER_BESIDE_CPU_OR_CUDA_AUTOCAST.replace("SCALER", "torch.amp.GradScaler()").replace(
        '"cuda" if torch.cuda.is_available() else "cpu"DTYPE', '"cpu"'
    )
    assert [d.code for d in check_source(source, "train.py", select=["AMP302"])] == ["AMP302"]


HANDED_OVER = """\
import torch

def train_and_evaluate(model, loader, optimizer, scaler):
    for x in loader:
        with torch.autocast("cuda", dtype=DTYPE):
            loss = model(x).sum()
        SCALER.scale(loss).backward()
        SCALER.step(optimizer)
        SCALER.update()

def run(args, model, loader, optimizer):
    scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
    train_and_evaluate(CALL_ARGS)
"""


@pytest.mark.parametrize(
    ("dtype", "scaler", "call_args", "fires"),
    [
        ("torch.bfloat16", "scaler", "model, loader, optimizer, scaler", True),
        ("torch.bfloat16", "scaler", "model, loader, optimizer=optimizer, scaler=scaler", True),
        ("args.dtype", "scaler", "model, loader, optimizer, scaler", False),  # dtype unknown
        ("torch.float16", "scaler", "model, loader, optimizer, scaler", False),
        # The callee uses another scaler than the parameter it is handed.
        ("torch.bfloat16", "other_scaler", "model, loader, optimizer, scaler", False),
        # The scaler goes to another parameter than the callee's scaler.
        ("torch.bfloat16", "scaler", "model, loader, scaler, None", False),
        ("torch.bfloat16", "scaler", "*parts", False),
    ],
)
def test_a_scaler_handed_to_a_function_meets_its_autocast(dtype: str, scaler: str, call_args: str, fires: bool) -> None:
    source = HANDED_OVER.replace("DTYPE", dtype).replace("SCALER", scaler).replace("CALL_ARGS", call_args)
    found = [(d.code, d.location.row) for d in check_source(source, "train.py", select=["AMP302"])]
    assert found == ([("AMP302", 12)] if fires else [])


FLAG_ENABLED = """\
import torch

dtype = 'bfloat16' if torch.cuda.is_bf16_supported() else 'float16'
ptdtype = {{'bfloat16': torch.bfloat16, 'float16': torch.float16}}[dtype]
{flag}
scaler = torch.amp.GradScaler('cuda', enabled=grad_scaling_enabled)
with torch.autocast('cuda', dtype=torch.bfloat16):
    loss = model(x)
"""


@pytest.mark.parametrize(
    ("flag", "reported"),
    [
        # micror1: the flag `enabled=` reads is a float16 test.
        ("grad_scaling_enabled = (dtype == 'float16')", False),
        ("grad_scaling_enabled = ptdtype == torch.float16", False),
        # A flag that says nothing of float16 leaves the scaler on for bfloat16.
        ("grad_scaling_enabled = args.amp", True),
        ("grad_scaling_enabled = True", True),
    ],
)
def test_an_enabled_flag_bound_to_a_float16_test_conditions_the_scaler(flag: str, reported: bool) -> None:
    codes = [d.code for d in check_source(FLAG_ENABLED.format(flag=flag), "train.py", select=["AMP302"])]
    assert (codes != []) is reported, codes


@pytest.mark.parametrize(
    ("flag", "reported"),
    [
        # BirdCLEF (round BK): the float16 flag is one `and`-part of `enabled=`.
        ("grad_scaling_enabled = ptdtype == torch.float16", False),
        ("grad_scaling_enabled = args.amp", True),
    ],
)
def test_a_float16_flag_among_the_and_parts_of_enabled_conditions_the_scaler(flag: str, reported: bool) -> None:
    source = FLAG_ENABLED.format(flag=flag).replace(
        "enabled=grad_scaling_enabled", "enabled=bool(cfg['amp']) and torch.cuda.is_available() and grad_scaling_enabled"
    )
    codes = [d.code for d in check_source(source, "train.py", select=["AMP302"])]
    assert (codes != []) is reported, codes
