"""Every rule's own VALID / INVALID examples and its page's Example / Use instead blocks."""

from __future__ import annotations

import ast
import re

import pytest

from amplint.api import check_source, fix_source_text
from amplint.engine.project import ProjectFacts
from amplint.engine.rule import RuleType
from amplint.rules import all_rules

RULES = [rule for rule in all_rules() if rule.INVALID or rule.VALID]


def _cases(attribute: str) -> list[tuple[RuleType, int]]:
    return [(rule, index) for rule in RULES for index in range(len(getattr(rule, attribute)))]


def _id(case: tuple[RuleType, int]) -> str:
    return f"{case[0].code}-{case[1]}"


@pytest.mark.parametrize("case", _cases("VALID"), ids=_id)
def test_valid_example_is_silent(case: tuple[RuleType, int]) -> None:
    rule, index = case
    source = rule.VALID[index]
    found = [d for d in check_source(source, select=["ALL"]) if d.code == rule.code]
    assert found == [], f"{rule.code} fired on its valid example:\n{source}"


def test_every_invalid_example_pins_its_first_finding() -> None:
    unpinned = [
        f"{rule.code}-{index}"
        for rule in RULES
        for index, example in enumerate(rule.INVALID)
        if example.line is None or example.column is None or not example.message
    ]
    assert unpinned == [], f"Invalid examples without line=, column= and message=: {unpinned}"


@pytest.mark.parametrize("case", _cases("INVALID"), ids=_id)
def test_invalid_example_fires_and_fixes(case: tuple[RuleType, int]) -> None:
    rule, index = case
    example = rule.INVALID[index]
    found = [d for d in check_source(example.code, select=[rule.code]) if d.code == rule.code]
    assert found, f"{rule.code} did not fire on its invalid example:\n{example.code}"
    if example.count is not None:
        assert len(found) == example.count
    first = min(found, key=lambda d: (d.location.row, d.location.column))
    assert (first.location.row, first.location.column) == (example.line, example.column)
    assert example.message and example.message in first.message
    fixed = fix_source_text(example.code, select=[rule.code], unsafe_fixes=example.unsafe).new_text
    if example.fixed is None:
        assert fixed == example.code, f"{rule.code} changed an example that declares no fix"
    else:
        assert fixed == example.fixed
        ast.parse(fixed)  # the fix re-parses as Python
        again = fix_source_text(fixed, select=[rule.code], unsafe_fixes=example.unsafe).new_text
        assert again == fixed, "fixing twice must equal fixing once"
    # Safe-only mode, both ways: an unsafe example is left exactly as it is (no other rule
    # is selected), and a safe one reaches its fixed text without --unsafe-fixes.
    safe_only = fix_source_text(example.code, select=[rule.code], unsafe_fixes=False).new_text
    if example.unsafe:
        assert safe_only == example.code, f"{rule.code} applied a fix declared unsafe without --unsafe-fixes"
        # A project that declares amplint lifts the runtime-dependency policy: what stays
        # unsafe then is the rule's own judgement.
        declared = fix_source_text(
            example.code, select=[rule.code], unsafe_fixes=False, project=ProjectFacts(runtime_helpers=True)
        ).new_text
        assert declared == example.code, f"{rule.code}'s fix is safe where the project declares amplint"
    else:
        assert safe_only == (example.code if example.fixed is None else example.fixed)


_BLOCK = re.compile(r"## (Example|Use instead)\s*\n+```python\n(.*?)```", re.DOTALL)


def _page_blocks(rule: RuleType) -> dict[str, str]:
    import inspect

    page = inspect.cleandoc(rule.__doc__ or "")
    return {title: body for title, body in _BLOCK.findall(page)}


@pytest.mark.parametrize("rule", [r for r in all_rules() if _page_blocks(r)], ids=lambda r: r.code)
def test_rule_page_examples(rule: RuleType) -> None:
    blocks = _page_blocks(rule)
    assert "Example" in blocks and "Use instead" in blocks
    assert any(d.code == rule.code for d in check_source(blocks["Example"], select=["ALL"]))
    assert not any(d.code == rule.code for d in check_source(blocks["Use instead"], select=["ALL"]))
