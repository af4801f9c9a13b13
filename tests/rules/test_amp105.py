"""AMP105 fp16-without-scaler: its VALID and INVALID examples."""

from __future__ import annotations

import pytest

from amplint.api import check_source
from amplint.engine.rule import Invalid
from amplint.rules.amp105_fp16_without_scaler import Fp16WithoutScaler
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)

RULE = Fp16WithoutScaler


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


# A dict of autocast contexts bound to a name, then looked up in the `with` item (the
# example pins the literal-dict spelling); with no float16 entry there is nothing to say.
NAMED_CONTEXTS = """\
import torch

def step(m, x, precision):
    contexts = {'bf16': torch.autocast('cuda', dtype=torch.bfloat16),
                'fp16': torch.autocast('cuda', dtype=torch.float16)}
    with contexts[precision]:
        loss = m(x)
    loss.backward()
    optimizer.step()
"""


def test_a_named_dict_of_contexts_is_an_autocast_block() -> None:
    found = [(d.code, d.location.row) for d in check_source(NAMED_CONTEXTS, "train.py", select=["AMP105"])]
    assert found == [("AMP105", 6)]
    bfloat16_only = NAMED_CONTEXTS.replace("'fp16': torch.autocast('cuda', dtype=torch.float16)", "'bf': torch.autocast('cuda', dtype=torch.bfloat16)")
    assert check_source(bfloat16_only, "train.py", select=["AMP105"]) == []


TIMED_TRAINING = """\
import torch

def run(model, x, y, optimizer, dtype):
    for _ in range(10):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x, y)
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("path", "reported"),
    [
        # nanoGPT's bench.py and xformers' benchmarks time training steps on random data:
        # nobody reads their convergence (rounds BB and BC).
        ("bench.py", False),
        ("xformers/benchmarks/benchmark_encoder.py", False),
        ("tools/attention_bench.py", False),
        ("benchmarks/run.py", False),
        # Not benchmarks by their names.
        ("train.py", True),
        ("benchmarking_utils/train.py", True),
        ("workbench.py", True),
        # physicsnemo's performance scripts and profiling tutorial (round BL).
        ("examples/vit/utils/measure_perf.py", False),
        ("docs/test_scripts/profiling/optimized_code_2/workload.py", False),
        ("perfect_model.py", True),
    ],
)
def test_a_benchmark_module_times_float16_steps_without_a_scaler(path: str, reported: bool) -> None:
    codes = [d.code for d in check_source(TIMED_TRAINING, path, select=["AMP105"])]
    assert codes == (["AMP105"] if reported else [])


@pytest.mark.parametrize(("path", "reported"), [("nbs/00_benchmark.ipynb", False), ("nbs/00_train.ipynb", True)])
def test_a_benchmark_notebook_times_float16_steps_without_a_scaler(path: str, reported: bool) -> None:
    # ready-steady-go's `nbs/00_benchmark.ipynb` (round BF): a notebook named as a benchmark.
    from amplint.notebook import notebook_json

    data = notebook_json([("markdown", "# Benchmark"), ("code", TIMED_TRAINING)])
    codes = [d.code for d in check_source(data, path, select=["AMP105"])]
    assert codes == (["AMP105"] if reported else [])


@pytest.mark.parametrize(
    ("table", "reported"),
    [
        # SAM2-Distillation-Pipeline (round BK): the dtype comes from a dict held in a name.
        ('{"fp16": torch.float16, "bf16": torch.bfloat16}', True),
        ('{"fp32": torch.float32, "bf16": torch.bfloat16}', False),
    ],
)
def test_a_dtype_looked_up_in_a_dict_held_in_a_name(table: str, reported: bool) -> None:
    source = (
        "import torch\n\ndef train(model, loader, optimizer, amp_dtype='bf16'):\n"
        f"    dtype_by_name = {table}\n"
        "    for x in loader:\n        with torch.autocast('cuda', dtype=dtype_by_name[amp_dtype]):\n"
        "            loss = model(x).mean()\n        loss.backward()\n        optimizer.step()\n"
    )
    codes = [d.code for d in check_source(source, "train.py", select=["AMP105"])]
    assert codes == (["AMP105"] if reported else []), codes
