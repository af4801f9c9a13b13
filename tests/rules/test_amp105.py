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


UNSCALED_STEP = (
    "import torch\n\ndef run_steps(model, batch):\n    with torch.cuda.amp.autocast():\n"
    "        out = model(batch).mean()\n    out.backward()\n"
)


@pytest.mark.parametrize("path", ["tests/test_vit_fsdp.py", "test_fsdp.py", "pkg/fsdp_test.py", "test/helpers.py"])
def test_test_modules_are_silent(path: str) -> None:
    # vissl's FSDP tests: a few unscaled float16 steps compare numerics, they do not train.
    assert [d.code for d in check_source(UNSCALED_STEP, path, select=["AMP105"])] == []


@pytest.mark.parametrize("path", ["train.py", "src/testing_utils.py", "latest/train.py"])
def test_other_modules_are_checked(path: str) -> None:
    assert [d.code for d in check_source(UNSCALED_STEP, path, select=["AMP105"])] == ["AMP105"]
