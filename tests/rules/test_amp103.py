"""AMP103 backward-inside-autocast: its VALID and INVALID examples."""

from __future__ import annotations

import pytest

from amplint.api import check_source
from amplint.engine.rule import Invalid
from amplint.rules.amp103_backward_inside_autocast import BackwardInsideAutocast
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)

RULE = BackwardInsideAutocast


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


KERNEL_BENCHMARK = """\
import torch

def run(q, k, v, attention, use_amp):
    with torch.autocast("cuda", enabled=use_amp):
        y = attention(q, k, v)
        torch.norm(y).backward()
    return y
"""

TRAINING_BENCHMARK = KERNEL_BENCHMARK + """
def train(model, x, optimizer):
    with torch.autocast("cuda"):
        loss = model(x)
        loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("path", "source", "reported"),
    [
        # xformers' kernel benchmarks time forward and backward together; no optimizer steps.
        ("xformers/benchmarks/benchmark_causal_blocksparse.py", KERNEL_BENCHMARK, 0),
        ("tools/attention_bench.py", KERNEL_BENCHMARK, 0),
        ("benchmark_attention.py", KERNEL_BENCHMARK, 0),
        # A benchmark that trains (an optimizer steps) is reported like any training code.
        ("xformers/benchmarks/benchmark_pytorch_transformer.py", TRAINING_BENCHMARK, 2),
        # A check script compares gradients under autocast (VMamba's); one that trains is reported.
        ("classification/models/vmamba_checks.py", KERNEL_BENCHMARK, 0),
        ("check_grads.py", KERNEL_BENCHMARK, 0),
        ("tools/model_check.py", KERNEL_BENCHMARK, 0),
        ("train_checks.py", TRAINING_BENCHMARK, 2),
        # Not a benchmark or check script by its name.
        ("checkpointing.py", KERNEL_BENCHMARK, 1),
        ("models/attention.py", KERNEL_BENCHMARK, 1),
        ("benchmarking_utils/attention.py", KERNEL_BENCHMARK, 1),
    ],
)
def test_a_kernel_benchmark_times_backward_under_autocast(path: str, source: str, reported: int) -> None:
    codes = [d.code for d in check_source(source, path, select=["AMP103"])]
    assert codes == ["AMP103"] * reported


FLOAT32_BLOCK = """\
import torch

def train(model, x, opt):
    with torch.autocast("cuda", dtype={dtype}):
        loss = model(x)
        loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    ("dtype", "reported"),
    # vae_from_scratch (round BF): a float32 autocast casts nothing, so nothing differs.
    [("torch.float32", False), ("torch.float", False), ("torch.float16", True), ("torch.bfloat16", True), ("dtype", True)],
)
def test_a_backward_inside_a_float32_autocast_is_not_reported(dtype: str, reported: bool) -> None:
    codes = [d.code for d in check_source(FLOAT32_BLOCK.format(dtype=dtype), "train.py", select=["AMP103"])]
    assert codes == (["AMP103"] if reported else [])


def test_torch_elementwise_arithmetic_means_the_same_outside_autocast(torch) -> None:  # type: ignore[no-untyped-def]
    # The fix moves `scaler.scale(loss / accum).backward()` out of the block: the division
    # must give the same dtype and values with autocast on as off (CPU autocast here).
    import operator

    for dtype in (torch.float32, torch.bfloat16):
        loss = torch.tensor([3.0, 5.0], dtype=dtype, requires_grad=True)
        other = torch.tensor([2.0, 4.0], dtype=dtype)
        for operation in (operator.truediv, operator.mul, operator.add, operator.sub):
            for value in (4, 0.5, other):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    inside = operation(loss, value)
                outside = operation(loss, value)
                assert inside.dtype == outside.dtype == dtype
                assert torch.equal(inside, outside)
