"""The rule registry: the engine's own codes (AMP900, AMP999, AMP901) and every rule
defined in this package.

:func:`catalog` is what a run reads to select rules; it imports no rule. The table it
returns is generated from the classes (``python -m amplint.docs`` writes
``_catalog.py``, and a test fails when it is stale); :func:`all_rules` loads the classes
themselves.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import TYPE_CHECKING, Any

from amplint.engine.catalog import FixAvailability, RuleSpec

if TYPE_CHECKING:
    from amplint.engine.rule import RuleType

__all__ = ["FixAvailability", "Invalid", "Rule", "all_rules", "catalog", "rule_by_code"]


def __getattr__(name: str) -> Any:
    # The rule contract, re-exported without importing libcst for a run that needs none.
    if name in ("Invalid", "Rule"):
        from amplint.engine import rule

        return getattr(rule, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def catalog() -> tuple[RuleSpec, ...]:
    from amplint.rules._catalog import CATALOG

    return CATALOG


@functools.cache
def all_rules() -> tuple[RuleType, ...]:
    from amplint.engine.rule import ENGINE_RULES, Rule
    from amplint.engine.unused_noqa import UnusedNoqaRule

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


def rule_by_code(code: str) -> RuleSpec | None:
    """The catalog entry whose code (any case) or name is ``code``."""
    for rule in catalog():
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None
