"""The project index: finding a project's modules, and what the analysis learned of each.

Cross-file rules need facts held in other files of the project (a loss function in
``losses.py`` called from the trainer's autocast block; a dtype constant in
``config.py``). The engine knows files, not facts: it finds the file a module name
refers to, reads it, and keeps the *summary* the analysis computed from it — a small
JSON-able dict — keyed by the file's bytes, in memory and (with a cache directory) on
disk, so that each file is summarised once however many files import it.

Every summary a lint reads is recorded as a dependency of the file being linted (path
and content digest): a cached result is valid only while those files are unchanged.

Modules are looked up the way a script run from its own directory or from a directory
above it, or a package installed from the project root, would find them: next to the
importing file, then in each of its ancestor directories inside the project, then under
each project root (and its ``src/``). A module that is not found is not part of
the project (a third-party package), and the analysis treats calls into it as unknown.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Summary = dict[str, Any]
# Computes a file's summary from its path and text; None when it cannot (bad syntax...).
Summarizer = Callable[[str, bytes], Summary | None]

_MAX_SIZE = 2 * 1024 * 1024
_STAR_IMPORT = re.compile(rb"\bimport\s*\(?\s*\*")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ProjectIndex:
    """Modules of one project and their summaries (one per worker process)."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]], cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.roots = tuple(dict.fromkeys(Path(root).resolve() for root in roots))
        self.cache_dir = Path(cache_dir) / "summaries" if cache_dir is not None else None
        self._memo: dict[tuple[str, str], Summary | None] = {}
        self._found: dict[tuple[str, str, int], Path | None] = {}
        # Files whose summaries the current lint read: path -> digest of their bytes.
        self.consulted: dict[str, str] = {}

    # -- modules ----------------------------------------------------------------------------

    def module_path(self, module: str, importer: str, level: int = 0) -> Path | None:
        """The file of ``module`` as ``importer`` would import it (``level`` dots for a
        relative import), or None when it is not a file of this project."""
        key = (module, importer, level)
        if key not in self._found:
            self._found[key] = self._find(module, Path(importer).resolve(), level)
        return self._found[key]

    def _find(self, module: str, importer: Path, level: int) -> Path | None:
        parts = [part for part in module.split(".") if part]
        if level:
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            bases = [base]
        else:
            # The importing file's directory and its ancestors inside the project (a script
            # run from a repository's root imports the repository's packages), then the roots.
            ancestors = [importer.parent, *(p for p in importer.parent.parents if self._inside_project(p))]
            bases = [*ancestors, *self.roots, *(root / "src" for root in self.roots)]
        for base in bases:
            found = _module_file(base, parts)
            if found is not None and self._inside_project(found):
                return found
        return None

    def checkout_module_path(self, module: str, importer: str) -> Path | None:
        """The file of ``module`` inside a checkout of its package's repository kept in the
        project under its own name (SHERL's ``CLIP-ViL/apex-22.04-dev/apex/amp/``: a folder
        named for the package, with a suffix, next to the importing file or an ancestor of
        it), as the checkout's own install would provide it; else None."""
        parts = [part for part in module.split(".") if part]
        if not parts:
            return None
        start = Path(importer).resolve().parent
        for base in (start, *(p for p in start.parents if self._inside_project(p))):
            try:
                children = sorted(base.iterdir())
            except OSError:
                continue
            for child in children:
                name = child.name.lower()
                if name.startswith(parts[0].lower()) and name != parts[0].lower() and child.is_dir():
                    found = _module_file(child, parts)
                    if found is not None and self._inside_project(found):
                        return found
        return None

    def _inside_project(self, path: Path) -> bool:
        return any(root == path or root in path.parents for root in self.roots)

    def module_name(self, path: Path) -> str:
        """The dotted name ``path`` has under its project root (``pkg.losses``)."""
        resolved = path.resolve()
        for root in (*self.roots, *(root / "src" for root in self.roots)):
            if root in resolved.parents:
                parts = list(resolved.relative_to(root).with_suffix("").parts)
                if parts and parts[-1] == "__init__":
                    parts.pop()
                return ".".join(parts)
        return resolved.stem

    # -- summaries ----------------------------------------------------------------------------

    def summary(self, path: Path, summarize: Summarizer, version: str) -> Summary | None:
        """The summary of ``path`` (computed by ``summarize`` on a miss), recording the file
        as a dependency of the current lint. ``version`` names the summarizer: summaries
        of an older one are not reused."""
        consulted = self._consult(path)
        if consulted is None:
            return None
        data, content = consulted
        key = (content, version)
        if key not in self._memo:
            self._memo[key] = self._load(key)
            if self._memo[key] is None:
                self._memo[key] = summarize(str(path), data)
                self._store(key, self._memo[key])
        return self._memo[key]

    def may_define(self, path: Path, name: str) -> bool:
        """Could ``path`` define or re-export ``name``: does its text hold the name as a word
        that is no attribute (``utils.clean()`` defines nothing), or a star import? Far
        cheaper than a summary, so a package's ``__init__`` that star-imports a generated
        module of tables (quip-sharp's 1.6 MB ``matmul_had.py``) costs nothing for names it
        does not hold. Recorded as a dependency, as a summary is."""
        consulted = self._consult(path)
        if consulted is None:
            return False
        data = consulted[0]
        word = re.escape(name.encode("utf-8", "replace"))
        return _STAR_IMPORT.search(data) is not None or re.search(rb"(?<![\w.])" + word + rb"(?!\w)", data) is not None

    def _consult(self, path: Path) -> tuple[bytes, str] | None:
        """``path``'s bytes and digest, recorded as a dependency of the current lint (None:
        unreadable, or too large to follow)."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) > _MAX_SIZE:
            return None
        content = digest(data)
        self.consulted[str(path)] = content
        return data, content

    def _entry(self, key: tuple[str, str]) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{key[1]}-{key[0]}.json"

    def _load(self, key: tuple[str, str]) -> Summary | None:
        entry = self._entry(key)
        if entry is None:
            return None
        try:
            loaded = json.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return loaded if isinstance(loaded, dict) else None

    def _store(self, key: tuple[str, str], summary: Summary | None) -> None:
        entry = self._entry(key)
        if entry is None or summary is None:
            return
        with contextlib.suppress(OSError):
            entry.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
            try:
                with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                    json.dump(summary, handle)
                os.replace(temporary, entry)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    def start_file(self) -> None:
        """Forget the dependencies recorded for the previous file."""
        self.consulted = {}


_SHARED: dict[tuple[tuple[str, ...], str | None], ProjectIndex] = {}


def shared_index(roots: Sequence[str], cache_dir: str | None) -> ProjectIndex:
    """The one index of this process for these roots (summaries are reused across files)."""
    key = (tuple(roots), cache_dir)
    if key not in _SHARED:
        _SHARED[key] = ProjectIndex(roots, cache_dir)
    return _SHARED[key]


def _module_file(base: Path, parts: list[str]) -> Path | None:
    if not parts:
        candidate = base / "__init__.py"
        return candidate if candidate.is_file() else None
    directory = base.joinpath(*parts)
    for candidate in (directory.with_suffix(".py"), directory / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None
