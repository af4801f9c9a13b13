"""A rule's class from its catalog entry: the one place a run imports a rule."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import cast

from amplint.engine.catalog import RuleInfo, RuleSpec
from amplint.engine.rule import RuleType


def rule_class(rule: RuleInfo) -> RuleType:
    """The class of ``rule``, importing its module if ``rule`` is a catalog entry."""
    if isinstance(rule, RuleSpec):
        return cast("RuleType", getattr(importlib.import_module(rule.module), rule.qualname))
    return cast("RuleType", rule)


def rule_classes(rules: Sequence[RuleInfo]) -> tuple[RuleType, ...]:
    return tuple(rule_class(rule) for rule in rules)
