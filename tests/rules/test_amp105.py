"""AMP105 fp16-without-scaler: its VALID and INVALID examples."""

from __future__ import annotations

import pytest

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
