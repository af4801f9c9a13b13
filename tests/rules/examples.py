"""The checks every rule's VALID / INVALID examples go through; tests/rules/test_ampNNN.py
parametrizes them over its rule's examples."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from amplint.api import check_source, fix_source_text
from amplint.engine.project import ProjectFacts
from amplint.engine.rule import Invalid, RuleType


def valid_examples(rule: RuleType) -> list[Any]:
    """``rule.VALID`` as pytest parameters, each named by its index."""
    return [pytest.param(source, id=str(index)) for index, source in enumerate(rule.VALID)]


def invalid_examples(rule: RuleType) -> list[Any]:
    """``rule.INVALID`` as pytest parameters, each named by its index."""
    return [pytest.param(example, id=str(index)) for index, example in enumerate(rule.INVALID)]


def assert_valid_example(rule: RuleType, source: str) -> None:
    """Silent with every rule enabled."""
    found = [d for d in check_source(source, select=["ALL"]) if d.code == rule.code]
    assert found == [], f"{rule.code} fired on its valid example:\n{source}"


def assert_invalid_example(rule: RuleType, example: Invalid) -> None:
    """Fires where and as the example says, fixes to ``fixed`` (once and for all), and
    respects the fix's safety in both directions."""
    assert example.line is not None and example.column is not None and example.message, (
        f"{rule.code}: an invalid example must pin line=, column= and message=:\n{example.code}"
    )
    found = [d for d in check_source(example.code, select=[rule.code]) if d.code == rule.code]
    assert found, f"{rule.code} did not fire on its invalid example:\n{example.code}"
    if example.count is not None:
        assert len(found) == example.count
    first = min(found, key=lambda d: (d.location.row, d.location.column))
    assert (first.location.row, first.location.column) == (example.line, example.column)
    assert example.message in first.message

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
