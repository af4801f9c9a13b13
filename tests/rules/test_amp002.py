"""AMP002 deprecated-autocast-state: its examples, and real torch (CPU) proving that
the fixed state calls read and set the same state without the deprecation warning."""

from __future__ import annotations

import pytest

from amplint.api import fix_text
from amplint.engine.rule import Invalid
from amplint.rules.amp002_deprecated_autocast_state import DeprecatedAutocastState
from rules.examples import (
    assert_invalid_example,
    assert_valid_example,
    invalid_examples,
    valid_examples,
)
from rules.snippets import run_snippet

RULE = DeprecatedAutocastState


@pytest.mark.parametrize("source", valid_examples(RULE))
def test_valid_example(source: str) -> None:
    assert_valid_example(RULE, source)


@pytest.mark.parametrize("example", invalid_examples(RULE))
def test_invalid_example(example: Invalid) -> None:
    assert_invalid_example(RULE, example)


STATE_SNIPPETS = [
    ("import torch\nvalue = torch.get_autocast_cpu_dtype()\n", "value"),
    ("import torch\nvalue = torch.get_autocast_gpu_dtype()\n", "value"),
    ("import torch\nvalue = torch.is_autocast_cpu_enabled()\n", "value"),
    (
        "import torch\ntorch.set_autocast_cpu_dtype(torch.float16)\nvalue = torch.get_autocast_dtype('cpu')\n"
        "torch.set_autocast_cpu_dtype(torch.bfloat16)\n",
        "value",
    ),
    (
        "import torch\ntorch.set_autocast_cpu_enabled(True)\nvalue = torch.is_autocast_enabled('cpu')\n"
        "torch.set_autocast_cpu_enabled(False)\n",
        "value",
    ),
]


@pytest.mark.parametrize(("source", "name"), STATE_SNIPPETS)
@pytest.mark.usefixtures("torch")
def test_fixed_autocast_state_calls_are_equivalent(source: str, name: str) -> None:
    fixed = fix_text(source)
    assert fixed != source
    original, old_warnings = run_snippet(source)
    rewritten, new_warnings = run_snippet(fixed)
    assert old_warnings and new_warnings == []
    assert rewritten[name] == original[name]
