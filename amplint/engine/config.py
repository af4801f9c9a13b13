"""Settings: ``[tool.amplint]`` in pyproject.toml or top-level keys in amplint.toml.

The configuration file is found by walking up from the checked path (or the current
directory); command-line options override it. Rule selection follows Ruff: selectors
are codes or prefixes (``AMP1``, ``ALL``); the most specific selector wins, and on a tie
``ignore`` wins.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from amplint.engine.rule import RuleType

CONFIG_FILES = ("amplint.toml", ".amplint.toml", "pyproject.toml")
DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox",
    ".pants.d", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", "__pypackages__",
    "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
    "__pycache__", ".amplint_cache", ".ipynb_checkpoints",
)  # fmt: skip
DEFAULT_MAX_FILE_SIZE = 4 * 1024 * 1024


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    respect_gitignore: bool = True
    force_exclude: bool = False
    cache_dir: str = ".amplint_cache"
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    config_path: str | None = None
    project_root: str = "."

    def with_overrides(self, **overrides: Any) -> Settings:
        return replace(self, **{key: value for key, value in overrides.items() if value is not None})

    def enabled_rules(self, registry: Sequence[RuleType]) -> tuple[RuleType, ...]:
        """The rules of ``registry`` these settings select."""
        return select_rules(registry, self.select, self.extend_select, self.ignore)

    def fingerprint(self, registry: Sequence[RuleType]) -> str:
        """What cached results depend on, as a stable string."""
        codes = ",".join(rule.code for rule in self.enabled_rules(registry))
        pfi = sorted((pattern, tuple(sorted(codes))) for pattern, codes in self.per_file_ignores.items())
        return f"rules={codes};pfi={pfi}"


def _specificity(selector: str, rule: RuleType) -> int:
    selector = selector.strip().upper()
    if not selector:
        return -1  # "" would otherwise be a prefix of every code
    if selector == "ALL":
        return 0
    if rule.code.startswith(selector):
        return len(selector)
    if selector.lower() == rule.name:
        return len(rule.code)
    return -1


def validate_selectors(selectors: Iterable[str], registry: Sequence[RuleType]) -> None:
    for selector in selectors:
        if not any(_specificity(selector, rule) >= 0 for rule in registry):
            raise ConfigError(f"unknown rule selector: {selector!r}")


def select_rules(
    rules: Sequence[RuleType],
    select: Sequence[str] | None,
    extend_select: Sequence[str],
    ignore: Sequence[str],
) -> tuple[RuleType, ...]:
    chosen: list[RuleType] = []
    for rule in rules:
        positive = max((_specificity(s, rule) for s in (*(select or ()), *extend_select)), default=-1)
        negative = max((_specificity(s, rule) for s in ignore), default=-1)
        if select is None and rule.default_enabled:
            positive = max(positive, 0)
        if positive >= 0 and positive > negative:
            chosen.append(rule)
    return tuple(chosen)


def find_config(start: Path) -> Path | None:
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate_dir in (directory, *directory.parents):
        for name in CONFIG_FILES:
            candidate = candidate_dir / name
            if not candidate.is_file():
                continue
            if name != "pyproject.toml":
                return candidate
            try:
                text = candidate.read_text(encoding="utf-8")
                data = tomllib.loads(text)
            except (OSError, UnicodeDecodeError):
                continue
            except tomllib.TOMLDecodeError as error:
                # Skipping a broken file that configures amplint would silently drop its
                # ignores; one that does not mention amplint is none of our business.
                if "amplint" in text:
                    raise ConfigError(f"{candidate}: invalid TOML: {error}") from None
                continue
            if "amplint" in data.get("tool", {}):
                return candidate
    return None


_KEYS = {
    "select", "extend-select", "ignore", "exclude", "extend-exclude", "per-file-ignores",
    "unsafe-fixes", "respect-gitignore", "force-exclude", "cache-dir", "max-file-size",
}  # fmt: skip


def _strings(value: Any, key: str, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: '{key}' must be a list of strings")
    return tuple(value)


def load_config(path: Path, registry: Sequence[RuleType]) -> Settings:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    table = data.get("tool", {}).get("amplint", {}) if path.name == "pyproject.toml" else data.get("tool", {}).get("amplint", data)
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    settings = Settings(config_path=str(path), project_root=str(path.parent))
    values: dict[str, Any] = {}
    if "select" in table:
        values["select"] = _strings(table["select"], "select", path)
    for key in ("extend-select", "ignore", "extend-exclude"):
        if key in table:
            values[key.replace("-", "_")] = _strings(table[key], key, path)
    if "exclude" in table:
        values["exclude"] = _strings(table["exclude"], "exclude", path)
    if "per-file-ignores" in table:
        raw = table["per-file-ignores"]
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: 'per-file-ignores' must be a table")
        values["per_file_ignores"] = {pattern: _strings(codes, f"per-file-ignores.{pattern}", path) for pattern, codes in raw.items()}
    for key in ("unsafe-fixes", "respect-gitignore", "force-exclude"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{path}: '{key}' must be true or false")
            values[key.replace("-", "_")] = table[key]
    if "cache-dir" in table:
        if not isinstance(table["cache-dir"], str):
            raise ConfigError(f"{path}: 'cache-dir' must be a string")
        values["cache_dir"] = table["cache-dir"]
    if "max-file-size" in table:
        if not isinstance(table["max-file-size"], int) or table["max-file-size"] <= 0:
            raise ConfigError(f"{path}: 'max-file-size' must be a positive integer (bytes)")
        values["max_file_size"] = table["max-file-size"]
    settings = replace(settings, **values)
    try:
        validate_selectors((*(settings.select or ()), *settings.extend_select, *settings.ignore), registry)
        for codes in settings.per_file_ignores.values():
            validate_selectors(codes, registry)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    return settings


def resolve_settings(start: Path, registry: Sequence[RuleType], explicit_config: Path | None = None) -> Settings:
    if explicit_config is not None:
        return load_config(explicit_config, registry)
    found = find_config(start)
    return load_config(found, registry) if found else Settings(project_root=str(Path.cwd()))
