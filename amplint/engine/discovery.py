"""Which files a run checks: Python files and Jupyter notebooks under the given paths,
minus exclusions.

Directories are walked without following symbolic links to directories (no loops);
inside a git repository, ``.gitignore`` files from the repository root down are
honoured; ``exclude`` and ``extend-exclude`` are gitignore-style patterns relative to
the project root. Each directory is walked with the settings of its nearest
configuration file (a subproject's own exclusions hold inside it). A file named
explicitly is always checked unless ``force_exclude`` is set. A directory that cannot
be read is reported as a warning, never skipped silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from amplint.engine.config import ConfigResolver, Settings

# Notebooks are found like .py files; the library API gives the engine their decoder.
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # paths that do not exist etc.
    warnings: list[str] = field(default_factory=list)  # directories that cannot be read


def _spec(patterns: Sequence[str]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


class _Ignorer:
    def __init__(self, settings: Settings, anchor: Path | None = None) -> None:
        # With an anchor (an excluded directory the user named explicitly), patterns are
        # matched below it only, so that its own exclusion does not empty it.
        self.anchor = anchor
        self.root = anchor if anchor is not None else Path(settings.project_root).resolve()
        self.exclude = _spec([*settings.exclude, *settings.extend_exclude])
        self.respect_gitignore = settings.respect_gitignore
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._chains: dict[Path, list[Path]] = {}

    def _gitignore(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._gitignores:
            spec = None
            candidate = directory / ".gitignore"
            try:
                if candidate.is_file():
                    spec = _spec(candidate.read_text(encoding="utf-8", errors="replace").splitlines())
            except OSError:
                spec = None
            self._gitignores[directory] = spec
        return self._gitignores[directory]

    def _relative(self, path: Path, base: Path) -> str | None:
        try:
            return path.relative_to(base).as_posix()
        except ValueError:
            return None

    def excluded(self, path: Path, is_dir: bool) -> bool:
        suffix = "/" if is_dir else ""
        relative = self._relative(path, self.root)
        candidates = [relative] if relative is not None else []
        candidates.append(path.name)  # basename patterns apply wherever the tree is
        if any(self.exclude.match_file(candidate + suffix) for candidate in candidates):
            return True
        if not self.respect_gitignore:
            return False
        for directory in self._git_dirs(path.parent):
            if self.anchor is not None and not directory.is_relative_to(self.anchor):
                continue
            spec = self._gitignore(directory)
            rel = self._relative(path, directory)
            if spec is not None and rel is not None and spec.match_file(rel + suffix):
                return True
        return False

    def _git_dirs(self, directory: Path) -> list[Path]:
        """Directories from the enclosing git repository root down to ``directory``.

        Outside a git repository there are none: like git and Ruff, ``.gitignore``
        files mean nothing there (``exclude`` still applies).
        """
        if directory not in self._chains:
            chain: list[Path] = []
            found: list[Path] = []
            for candidate in (directory, *directory.parents):
                chain.append(candidate)
                if (candidate / ".git").exists():
                    found = list(reversed(chain))
                    break
            self._chains[directory] = found
        return self._chains[directory]


class _Walker:
    """Walks directories with the ignorer of each directory's settings."""

    def __init__(self, settings_for: Callable[[Path], Settings], result: Discovery) -> None:
        self.settings_for = settings_for
        self.result = result
        self._ignorers: dict[tuple[int, Path | None], tuple[Settings, _Ignorer]] = {}

    def ignorer(self, directory: Path, anchor: Path | None = None) -> _Ignorer:
        """The ignorer for entries of ``directory`` (excluded patterns below ``anchor`` only)."""
        settings = self.settings_for(directory)
        key = (id(settings), anchor)
        if key not in self._ignorers:
            # The settings are kept with it, so that their id is not reused.
            self._ignorers[key] = (settings, _Ignorer(settings, anchor))
        return self._ignorers[key][1]

    def walk(self, directory: Path, anchor: Path | None) -> Iterator[Path]:
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as error:
            self.result.warnings.append(f"{directory}: cannot read directory: {error.strerror or error}; skipped")
            return
        ignorer = self.ignorer(directory.absolute(), anchor)
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=True)
            except OSError:
                continue
            if is_dir:
                if not ignorer.excluded(path.absolute(), is_dir=True):
                    yield from self.walk(path, anchor)
            elif is_file and path.suffix in SOURCE_SUFFIXES and not ignorer.excluded(path.absolute(), is_dir=False):
                yield path


def _settings_function(settings: Settings | ConfigResolver) -> Callable[[Path], Settings]:
    if isinstance(settings, Settings):
        return lambda directory: settings
    return settings.for_directory


def discover(paths: Sequence[str], settings: Settings | ConfigResolver) -> Discovery:
    """The files to check under ``paths``, with one ``Settings`` for all or a resolver
    that gives each directory the settings of its nearest configuration."""
    result = Discovery()
    walker = _Walker(_settings_function(settings), result)
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists() and not path.is_symlink():
            result.errors.append(f"{raw}: no such file or directory")
            continue
        absolute = path.absolute()
        # A directory's own configuration decides about it; a file's, its directory's.
        home = absolute if path.is_dir() else absolute.parent
        parent_settings = walker.settings_for(home)
        ignorer = walker.ignorer(home)
        found: Iterator[Path]
        if path.is_dir():
            if ignorer.excluded(absolute, is_dir=True):
                if parent_settings.force_exclude:
                    continue
                found = walker.walk(path, absolute)
            else:
                found = walker.walk(path, None)
        else:
            if parent_settings.force_exclude and ignorer.excluded(absolute, is_dir=False):
                continue
            found = iter([path])
        for file in found:
            key = file.absolute()
            if key not in seen:
                seen.add(key)
                result.files.append(file)
    result.files.sort(key=lambda p: p.as_posix())
    return result


def is_excluded(path: str, settings: Settings) -> bool:
    """Whether ``exclude``/``extend-exclude`` or a ``.gitignore`` excludes ``path``
    (used for ``--stdin-filename`` with ``--force-exclude``)."""
    return _Ignorer(settings).excluded(Path(path).absolute(), is_dir=False)
