"""What every rule's examples must be, and its page's Example / Use instead blocks.

The examples themselves run in tests/rules/test_ampNNN.py, one module per rule, through
the shared checks in tests/rules/examples.py.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from amplint.api import check_source
from amplint.engine.rule import Invalid, RuleType, example_source
from amplint.rules import all_rules

RULES = [rule for rule in all_rules() if rule.INVALID or rule.VALID]


def test_every_invalid_example_pins_its_first_finding() -> None:
    unpinned = [
        f"{rule.code}-{index}"
        for rule in RULES
        for index, example in enumerate(rule.INVALID)
        if example.line is None or example.column is None or not example.message
    ]
    assert unpinned == [], f"Invalid examples without line=, column= and message=: {unpinned}"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_every_rule_with_examples_has_a_test_module_that_runs_them(rule: RuleType) -> None:
    module = importlib.import_module(f"rules.test_{rule.code.lower()}")
    assert module.RULE is rule
    for name, examples in (("test_valid_example", rule.VALID), ("test_invalid_example", rule.INVALID)):
        test = getattr(module, name, None)
        assert test is not None, f"{module.__name__} has no {name}"
        parametrized = [mark for mark in getattr(test, "pytestmark", []) if mark.name == "parametrize"]
        assert [len(mark.args[1]) for mark in parametrized] == [len(examples)]


_BLOCK = re.compile(r"## (Example|Use instead)\s*\n+```python\n(.*?)```", re.DOTALL)


def _page_blocks(rule: RuleType) -> dict[str, str]:
    page = inspect.cleandoc(rule.__doc__ or "")
    return {title: body for title, body in _BLOCK.findall(page)}


@pytest.mark.parametrize("rule", [r for r in all_rules() if _page_blocks(r)], ids=lambda r: r.code)
def test_rule_page_examples(rule: RuleType) -> None:
    blocks = _page_blocks(rule)
    assert "Example" in blocks and "Use instead" in blocks
    assert any(d.code == rule.code for d in check_source(blocks["Example"], select=["ALL"]))
    assert not any(d.code == rule.code for d in check_source(blocks["Use instead"], select=["ALL"]))


def test_an_example_block_reads_as_its_dedented_lines() -> None:
    block = """
        import torch

        with torch.autocast('cuda'):
            pass
        """
    assert example_source(block) == "import torch\n\nwith torch.autocast('cuda'):\n    pass\n"
    assert example_source("x = 1\n") == "x = 1\n"


def test_an_invalid_example_written_as_a_diff_gives_its_source_and_its_fix() -> None:
    example = Invalid(
        """
          import torch
        + import amplint.runtime
        -
        - with torch.autocast('cuda'):
        + with torch.autocast(amplint.runtime.device_type(device)):
              pass
        """
    )
    assert example.code == "import torch\n\nwith torch.autocast('cuda'):\n    pass\n"
    assert example.fixed == (
        "import torch\nimport amplint.runtime\nwith torch.autocast(amplint.runtime.device_type(device)):\n    pass\n"
    )


def test_an_invalid_example_without_marks_keeps_its_fixed_text() -> None:
    code = """
        x = a.half()
        y = b
        """
    example = Invalid(code, fixed="x = a\n")
    assert (example.code, example.fixed) == ("x = a.half()\ny = b\n", "x = a\n")


@pytest.mark.parametrize(
    ("code", "fixed"),
    [
        ("\n    - x = 1\n    + x = 2\n    ", "x = 2\n"),  # the diff already says the fix
        ("\n    - x = 1\n    y = 2\n    ", None),  # a line with no gutter
    ],
)
def test_a_malformed_diff_example_is_refused(code: str, fixed: str | None) -> None:
    with pytest.raises(ValueError, match="example written as a fix"):
        Invalid(code, fixed=fixed)
