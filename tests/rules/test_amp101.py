"""AMP101 manual-half-cast: its VALID and INVALID examples."""

from __future__ import annotations

import pytest

from amplint.api import check_source
from amplint.engine.rule import Invalid
from amplint.rules.amp101_manual_half_cast import ManualHalfCast
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)

RULE = ManualHalfCast


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


@pytest.mark.parametrize(
    ("path", "reported"),
    [
        # VALOR keeps apex's repository: its kernel tests and profiling examples run in half.
        ("apex/apex/contrib/bottleneck/test.py", False),
        ("third_party/apex/pyprof/examples/imagenet.py", False),
        # A project's own folders, whatever their names.
        ("train.py", True),
        ("apex_experiments/train.py", True),
        ("models/apex/train.py", True),
    ],
)
def test_a_copy_of_apex_is_the_library_s_code(path: str, reported: bool) -> None:
    source = (
        "import torch\n\n"
        "def train(model, loader, optimizer):\n"
        "    model = model.half()\n"
        "    for x, y in loader:\n"
        "        loss = torch.nn.functional.mse_loss(model(x.half()), y)\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
    )
    codes = [d.code for d in check_source(source.encode(), path, select=["AMP101"])]
    assert bool(codes) is reported


EVAL_ONLY_BRANCH = """\
import torch

def do_train(args, cfg):
    model, optimizer = cfg.build()
    for x in cfg.loader:
        model(x).backward()
        optimizer.step()

def main(args, cfg, build, wrap, do_test):
    if args.{flag}:
        model = build(cfg)
        model.to(torch.float16)
        model = wrap(model)
        print(do_test(cfg, model))
    else:
        do_train(args, cfg)
"""


@pytest.mark.parametrize(
    ("flag", "reported"),
    [
        # APE's train_net.py: an eval-only branch builds, casts and tests a model (round AZ).
        ("eval_only", False),
        ("evaluate", False),
        ("test", False),
        # A flag not named for evaluation: the cast may feed training.
        ("finetune", True),
        ("eval_interval", True),
    ],
)
def test_a_cast_in_a_branch_named_for_evaluation(flag: str, reported: bool) -> None:
    codes = [d.code for d in check_source(EVAL_ONLY_BRANCH.format(flag=flag), "train_net.py", select=["AMP101"])]
    assert codes == (["AMP101"] if reported else [])


HALF_TRAINED = """\
import torch

def run(model, x, y, optimizer):
    model = model.to(dtype=torch.float16)
    for _ in range(10):
        loss = model(x, y)
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("path", "reported"),
    [
        # superbenchmark's model benchmarks time the precision they are told to (round BF).
        ("superbench/benchmarks/model_benchmarks/pytorch_bert.py", False),
        ("benchmark_fp16.py", False),
        # Performance measurements count as benchmarks too (round BL).
        ("utils/measure_perf.py", False),
        ("docs/profiling/workload.py", False),
        ("train.py", True),
        ("workbench.py", True),
    ],
)
def test_a_benchmark_module_casts_the_model_on_purpose(path: str, reported: bool) -> None:
    codes = [d.code for d in check_source(HALF_TRAINED, path, select=["AMP101"])]
    assert codes == (["AMP101"] if reported else [])
