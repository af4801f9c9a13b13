"""Settings: ``[tool.amplint]`` in pyproject.toml or top-level keys in amplint.toml.

Each file is checked with the nearest configuration file above it (hierarchical, as in
Ruff), whatever the order of the paths on the command line; command-line options
(:class:`Overrides`) go on top of every configuration. Rule selection follows Ruff:
selectors are codes, prefixes (``AMP1``), rule names or ``ALL``; the most specific
selector wins, and on a tie ``ignore`` wins. ``per-file-ignores`` remove every rule any
of their selectors matches, prefixes and ``ALL`` included.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

import pathspec

from amplint.engine.catalog import RuleInfo
from amplint.engine.project import parse_torch_version

# A registry entry: a rule class or its catalog entry (selection reads only identities).
R = TypeVar("R", bound=RuleInfo)

CONFIG_FILES = ("amplint.toml", ".amplint.toml", "pyproject.toml")
DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".mypy_cache", ".nox",
    ".pants.d", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", "__pypackages__",
    "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
    "__pycache__", ".amplint_cache", ".ipynb_checkpoints",
)  # fmt: skip
DEFAULT_MAX_FILE_SIZE = 4 * 1024 * 1024
# Generous: the slowest real file measured takes a few seconds; this only catches hangs.
DEFAULT_FILE_TIMEOUT = 60.0
DEFAULT_CACHE_DIR = ".amplint_cache"

PerFileIgnores = Mapping[str, tuple[str, ...]]


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: PerFileIgnores = field(default_factory=dict)
    extend_per_file_ignores: PerFileIgnores = field(default_factory=dict)
    unsafe_fixes: bool = False
    respect_gitignore: bool = True
    # A directory walk skips copies of well-known libraries kept in the tree (a folder
    # whose own setup.py or pyproject.toml names `transformers`, `diffusers`, ...).
    skip_vendored: bool = True
    force_exclude: bool = False
    cache_dir: str = DEFAULT_CACHE_DIR
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    file_timeout: float = DEFAULT_FILE_TIMEOUT
    # The oldest torch the code must run on ("2.1"); None: from the project's requirements.
    target_torch: str | None = None
    # May fixes import amplint.runtime? None: only if the project declares amplint.
    runtime_helpers: bool | None = None
    # Ruff's fix policy: never apply these rules' fixes; treat these as safe / unsafe.
    unfixable: tuple[str, ...] = ()
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()
    config_path: str | None = None
    project_root: str = "."

    def with_overrides(self, **overrides: Any) -> Settings:
        return replace(self, **{key: value for key, value in overrides.items() if value is not None})

    def enabled_rules(self, registry: Sequence[R]) -> tuple[R, ...]:
        """The rules of ``registry`` these settings select (before per-file ignores)."""
        return select_rules(registry, self.select, self.extend_select, self.ignore)

    def all_per_file_ignores(self) -> list[tuple[str, tuple[str, ...]]]:
        """``per-file-ignores`` then ``extend-per-file-ignores``, as (pattern, selectors)."""
        return [*self.per_file_ignores.items(), *self.extend_per_file_ignores.items()]

    def ignored_for(self, path: str) -> tuple[str, ...]:
        """The selectors that per-file ignores remove for ``path``."""
        ignored: list[str] = []
        if not self.per_file_ignores and not self.extend_per_file_ignores:
            return ()
        relative = self.relative_path(path)
        name = Path(path).name
        for pattern, selectors in self.all_per_file_ignores():
            if _pattern_matches(pattern, relative, name):
                ignored.extend(selectors)
        return tuple(ignored)

    def rules_for(self, path: str, registry: Sequence[R]) -> tuple[R, ...]:
        """The rules that run on ``path``: the selection minus its per-file ignores.

        Like Ruff, a per-file ignore removes every rule one of its selectors matches, a
        prefix or ``ALL`` as much as an exact code: it is applied after selection, not
        weighed against it.
        """
        rules = self.enabled_rules(registry)
        ignored = self.ignored_for(path)
        if not ignored:
            return rules
        return tuple(rule for rule in rules if not any(_specificity(s, rule) >= 0 for s in ignored))

    def relative_path(self, path: str) -> str:
        """``path`` relative to the project root (forward slashes), or as given outside it."""
        absolute = Path(path).absolute()
        try:
            return absolute.relative_to(_resolved(self.project_root)).as_posix()
        except ValueError:
            try:
                return absolute.resolve().relative_to(_resolved(self.project_root)).as_posix()
            except (ValueError, OSError):
                return Path(path).as_posix()

    def fingerprint(self, registry: Sequence[RuleInfo]) -> str:
        """What cached results depend on, as a stable string."""
        codes = ",".join(rule.code for rule in self.enabled_rules(registry))
        pfi = sorted((pattern, tuple(sorted(codes))) for pattern, codes in self.all_per_file_ignores())
        policy = (self.unfixable, self.extend_safe_fixes, self.extend_unsafe_fixes)
        return f"rules={codes};pfi={pfi};torch={self.target_torch};helpers={self.runtime_helpers};fixes={policy}"

    def fix_policy(self, code: str, registry: Sequence[RuleInfo]) -> str | None:
        """How this configuration overrides a rule's fixes: "unfixable", "safe", "unsafe" or None."""
        rule = next((rule for rule in registry if rule.code == code), None)
        if rule is None:
            return None
        for name, selectors in (
            ("unfixable", self.unfixable),
            ("unsafe", self.extend_unsafe_fixes),
            ("safe", self.extend_safe_fixes),
        ):
            if any(_specificity(selector, rule) >= 0 for selector in selectors):
                return name
        return None

    def cache_path(self) -> Path:
        """The cache directory: ``cache-dir`` relative to the project root."""
        path = Path(self.cache_dir)
        return path if path.is_absolute() else Path(self.project_root) / path


@functools.lru_cache(maxsize=64)
def _resolved(root: str) -> Path:
    return Path(root).resolve()


@functools.lru_cache(maxsize=256)
def _pattern_spec(pattern: str) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines([pattern])


def _pattern_matches(pattern: str, relative: str, name: str) -> bool:
    """gitignore semantics (a pattern without a slash matches at any depth); a leading
    ``!`` applies the ignore to every file the rest of the pattern does *not* match."""
    negated = pattern.startswith("!")
    spec = _pattern_spec(pattern[1:] if negated else pattern)
    matched = spec.match_file(relative) or spec.match_file(name)
    return matched != negated


def _specificity(selector: str, rule: RuleInfo) -> int:
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


def validate_selectors(selectors: Iterable[str], registry: Sequence[RuleInfo]) -> None:
    for selector in selectors:
        if not any(_specificity(selector, rule) >= 0 for rule in registry):
            raise ConfigError(f"unknown rule selector: {selector!r}")


def select_rules(
    rules: Sequence[R],
    select: Sequence[str] | None,
    extend_select: Sequence[str],
    ignore: Sequence[str],
) -> tuple[R, ...]:
    chosen: list[R] = []
    for rule in rules:
        positive = max((_specificity(s, rule) for s in (*(select or ()), *extend_select)), default=-1)
        negative = max((_specificity(s, rule) for s in ignore), default=-1)
        if select is None and rule.default_enabled:
            positive = max(positive, 0)
        if positive >= 0 and positive > negative:
            chosen.append(rule)
    return tuple(chosen)


def _config_in(directory: Path) -> Path | None:
    """The configuration file of ``directory`` itself, if it has one."""
    for name in CONFIG_FILES:
        candidate = directory / name
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


def find_config(start: Path) -> Path | None:
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate_dir in (directory, *directory.parents):
        found = _config_in(candidate_dir)
        if found is not None:
            return found
    return None


_KEYS = {
    "select", "extend-select", "ignore", "exclude", "extend-exclude", "per-file-ignores",
    "extend-per-file-ignores", "unsafe-fixes", "respect-gitignore", "skip-vendored", "force-exclude",
    "cache-dir", "max-file-size", "file-timeout", "target-torch", "runtime-helpers",
    "unfixable", "extend-safe-fixes", "extend-unsafe-fixes",
}  # fmt: skip


def _strings(value: Any, key: str, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: '{key}' must be a list of strings")
    return tuple(value)


def _per_file_table(value: Any, key: str, path: Path) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: '{key}' must be a table")
    return {pattern: _strings(codes, f"{key}.{pattern}", path) for pattern, codes in value.items()}


def load_config(path: Path, registry: Sequence[RuleInfo]) -> Settings:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    tool = data.get("tool", {})
    table = tool.get("amplint", {}) if path.name == "pyproject.toml" else tool.get("amplint", data)
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    settings = Settings(config_path=str(path), project_root=str(path.parent))
    values: dict[str, Any] = {}
    if "select" in table:
        values["select"] = _strings(table["select"], "select", path)
    for key in ("extend-select", "ignore", "extend-exclude", "exclude", "unfixable", "extend-safe-fixes", "extend-unsafe-fixes"):
        if key in table:
            values[key.replace("-", "_")] = _strings(table[key], key, path)
    if "target-torch" in table:
        if not isinstance(table["target-torch"], str) or parse_torch_version(table["target-torch"]) is None:
            raise ConfigError(f"{path}: 'target-torch' must be a torch version such as \"2.1\"")
        values["target_torch"] = table["target-torch"]
    for key in ("per-file-ignores", "extend-per-file-ignores"):
        if key in table:
            values[key.replace("-", "_")] = _per_file_table(table[key], key, path)
    for key in ("unsafe-fixes", "respect-gitignore", "skip-vendored", "force-exclude", "runtime-helpers"):
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
    if "file-timeout" in table:
        timeout = table["file-timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not _valid_timeout(timeout):
            raise ConfigError(f"{path}: 'file-timeout' must be a positive number of seconds")
        values["file_timeout"] = float(timeout)
    settings = replace(settings, **values)
    try:
        validate_settings(settings, registry)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    return settings


def _valid_timeout(value: float) -> bool:
    return value > 0 and math.isfinite(value)


def validate_settings(settings: Settings, registry: Sequence[RuleInfo]) -> None:
    validate_selectors((*(settings.select or ()), *settings.extend_select, *settings.ignore), registry)
    validate_selectors((*settings.unfixable, *settings.extend_safe_fixes, *settings.extend_unsafe_fixes), registry)
    for _, selectors in settings.all_per_file_ignores():
        validate_selectors(selectors, registry)


def resolve_settings(start: Path, registry: Sequence[RuleInfo], explicit_config: Path | None = None) -> Settings:
    if explicit_config is not None:
        return load_config(explicit_config, registry)
    found = find_config(start)
    return load_config(found, registry) if found else Settings(project_root=str(Path.cwd()))


# -- the command line on top ------------------------------------------------------------------


def parse_per_file_ignores(entries: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``PATTERN:CODES`` entries (codes comma-separated), as given on the command line."""
    table: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        pattern, colon, codes = entry.rpartition(":")
        selectors = tuple(code.strip() for code in codes.split(",") if code.strip())
        if not colon or not pattern.strip() or not selectors:
            raise ConfigError(f"per-file ignore {entry!r} is not PATTERN:CODES (for example 'tests/*:AMP1')")
        key = pattern.strip()
        table[key] = table.get(key, ()) + selectors
    return table


@dataclass(frozen=True)
class Overrides:
    """Command-line settings, applied on top of whichever configuration a file gets.

    ``select`` replaces the configured ``select`` and ``extend-select`` (Ruff's "only
    these rules"); ``extend_select`` and ``ignore`` add to the configured lists, so a
    rule ignored in the configuration needs a more specific selector to come back.
    ``per_file_ignores`` replaces both configured per-file tables; the extend form adds.
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: PerFileIgnores | None = None
    extend_per_file_ignores: PerFileIgnores = field(default_factory=dict)
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    skip_vendored: bool | None = None
    unsafe_fixes: bool | None = None
    cache_dir: str | None = None  # absolute: relative to where the command ran
    file_timeout: float | None = None
    target_torch: str | None = None
    unfixable: tuple[str, ...] = ()
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()

    def validate(self, registry: Sequence[RuleInfo]) -> None:
        validate_selectors((*(self.select or ()), *self.extend_select, *self.ignore), registry)
        for table in (self.per_file_ignores or {}, self.extend_per_file_ignores):
            for selectors in table.values():
                validate_selectors(selectors, registry)
        if self.file_timeout is not None and not _valid_timeout(self.file_timeout):
            raise ConfigError("the file timeout must be a positive number of seconds")
        if self.target_torch is not None and parse_torch_version(self.target_torch) is None:
            raise ConfigError(f"--target-torch {self.target_torch!r} is not a torch version such as 2.1")
        validate_selectors((*self.unfixable, *self.extend_safe_fixes, *self.extend_unsafe_fixes), registry)

    def apply(self, settings: Settings) -> Settings:
        changes: dict[str, Any] = {"ignore": settings.ignore + self.ignore}
        if self.select is not None:
            changes["select"] = self.select
            changes["extend_select"] = self.extend_select
        else:
            changes["extend_select"] = settings.extend_select + self.extend_select
        if self.per_file_ignores is not None:
            changes["per_file_ignores"] = dict(self.per_file_ignores)
            changes["extend_per_file_ignores"] = dict(self.extend_per_file_ignores)
        elif self.extend_per_file_ignores:
            merged = dict(settings.extend_per_file_ignores)
            for pattern, selectors in self.extend_per_file_ignores.items():
                merged[pattern] = merged.get(pattern, ()) + selectors
            changes["extend_per_file_ignores"] = merged
        if self.exclude is not None:
            changes["exclude"] = self.exclude
        if self.extend_exclude:
            changes["extend_exclude"] = settings.extend_exclude + self.extend_exclude
        for name in ("force_exclude", "respect_gitignore", "skip_vendored", "unsafe_fixes", "cache_dir", "file_timeout", "target_torch"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = value
        for name in ("unfixable", "extend_safe_fixes", "extend_unsafe_fixes"):
            if getattr(self, name):
                changes[name] = getattr(settings, name) + getattr(self, name)
        return replace(settings, **changes)


class ConfigResolver:
    """The settings of every file: its nearest configuration file, with the overrides.

    ``explicit`` (``--config``) gives every file the same configuration, ``isolated``
    (``--isolated``) none. Configuration files are read once each and directories looked
    up once each, so resolving every file of a large tree costs one lookup per directory.
    """

    def __init__(
        self,
        registry: Sequence[RuleInfo],
        overrides: Overrides | None = None,
        *,
        explicit: Path | None = None,
        isolated: bool = False,
        cwd: Path | None = None,
    ) -> None:
        self.registry = tuple(registry)
        self.overrides = overrides or Overrides()
        self.overrides.validate(self.registry)
        self.cwd = (cwd or Path.cwd()).absolute()
        self._by_directory: dict[Path, Settings] = {}
        self._resolved: set[Path] = set()  # keys of _by_directory that are resolved paths
        self._by_config: dict[Path | None, Settings] = {}
        self._fixed: Settings | None = None
        if explicit is not None:
            self._fixed = self.overrides.apply(load_config(explicit, self.registry))
        elif isolated:
            self._fixed = self.overrides.apply(Settings(project_root=str(self.cwd)))

    def root(self) -> Settings:
        """The settings of the current directory (used for what is not per file)."""
        return self.for_directory(self.cwd)

    def for_path(self, path: str | Path) -> Settings:
        """The settings of a file (or of a directory: its own configuration counts)."""
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        if candidate.is_dir():
            return self.for_directory(candidate)
        # The file need not exist (an unsaved editor buffer): its nearest existing
        # ancestor decides.
        directory = candidate.parent
        while not directory.is_dir() and directory != directory.parent:
            directory = directory.parent
        return self.for_directory(directory)

    def for_directory(self, directory: Path) -> Settings:
        if self._fixed is not None:
            return self._fixed
        given = self._by_directory.get(directory)
        if given is not None:
            return given
        resolved = True
        if directory.parent in self._resolved and directory.name not in ("", ".", "..") and not directory.is_symlink():
            key = directory  # a real folder in a resolved one: resolved itself (one lstat, not one per part)
        else:
            try:
                key = directory.resolve()
            except OSError:
                key, resolved = directory.absolute(), False
        found = self._by_directory.get(key)
        if found is not None:
            return found
        config = _config_in(key)
        if config is not None:
            settings = self._load(config)
        elif key.parent == key:
            settings = self._load(None)
        else:
            settings = self.for_directory(key.parent)
        self._by_directory[key] = self._by_directory[directory] = settings
        if resolved:
            self._resolved.add(key)
        return settings

    def _load(self, config: Path | None) -> Settings:
        if config not in self._by_config:
            base = load_config(config, self.registry) if config is not None else Settings(project_root=str(self.cwd))
            self._by_config[config] = self.overrides.apply(base)
        return self._by_config[config]

    def configurations(self) -> list[Settings]:
        """Every distinct settings object handed out so far."""
        if self._fixed is not None:
            return [self._fixed]
        return list(self._by_config.values())
