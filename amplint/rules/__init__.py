"""The rule registry: every ``Rule`` subclass defined in a module of this package."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from amplint.rules.base import FixAvailability, Invalid, Rule

__all__ = ["FixAvailability", "Invalid", "Rule", "all_rules", "rule_by_code"]


@functools.cache
def all_rules() -> tuple[type[Rule], ...]:
    found: dict[str, type[Rule]] = {}
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


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper() or rule.name == code:
            return rule
    return None
