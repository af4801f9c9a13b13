"""The rule registry: the engine's own codes (AMP900, AMP999, AMP901) and every rule
defined in this package."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any

from amplint.engine.rule import ENGINE_RULES, FixAvailability, Invalid, Rule, RuleType
from amplint.engine.unused_noqa import UnusedNoqaRule

__all__ = ["FixAvailability", "Invalid", "Rule", "all_rules", "rule_by_code"]


@functools.cache
def all_rules() -> tuple[RuleType, ...]:
    engine: tuple[RuleType, ...] = (*ENGINE_RULES, UnusedNoqaRule)
    found: dict[str, RuleType] = {rule.code: rule for rule in engine}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name == "base" or module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value.__module__ == module.__name__:
                if "code" not in value.__dict__:
                    continue
                if value.code in found:
                    raise RuntimeError(f"two rules claim {value.code}: {found[value.code]} and {value}")
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule[Any]] | None:
    for rule in all_rules():
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None
