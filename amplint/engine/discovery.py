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
import re
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
    skipped: list[str] = field(default_factory=list)  # vendored library copies left out


_PLAIN_NAME = re.compile(r"[\w.-]+")


def _spec(patterns: Sequence[str]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def _relative(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` (both absolute, ``/``-separated), or None if outside."""
    if path == base:
        return "."
    prefix = base if base.endswith("/") else base + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _child(directory: str, name: str) -> str:
    # Joined as pathlib would join them ("." / "x" is "x"), without making a Path per
    # entry: a tree of thousands of files is walked on strings.
    if directory == ".":
        return name
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


class _Ignorer:
    def __init__(self, settings: Settings, anchor: str | None = None) -> None:
        # With an anchor (an excluded directory the user named explicitly), patterns are
        # matched below it only, so that its own exclusion does not empty it.
        self.anchor = anchor
        self.root = anchor if anchor is not None else Path(settings.project_root).resolve().as_posix()
        patterns = [*settings.exclude, *settings.extend_exclude]
        # A plain name ("build", ".venv": all the defaults) excludes any path with a part of
        # that name, as gitignore reads it; a set lookup per part is much cheaper than
        # matching every pattern against every path. Negations keep the patterns' order,
        # so then every pattern goes to pathspec.
        plain = set() if any(pattern.startswith("!") for pattern in patterns) else {p for p in patterns if _PLAIN_NAME.fullmatch(p)}
        self.excluded_names = frozenset(plain)
        self.exclude = _spec([pattern for pattern in patterns if pattern not in plain])
        self.respect_gitignore = settings.respect_gitignore
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}
        self._chains: dict[str, list[str]] = {}
        self._applying: dict[str, list[tuple[str, pathspec.GitIgnoreSpec]]] = {}

    def _gitignore(self, directory: str) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._gitignores:
            spec = None
            candidate = _child(directory, ".gitignore")
            try:
                if os.path.isfile(candidate):
                    with open(candidate, encoding="utf-8", errors="replace") as handle:
                        spec = _spec(handle.read().splitlines())
            except OSError:
                spec = None
            self._gitignores[directory] = spec
        return self._gitignores[directory]

    def excluded(self, path: str, is_dir: bool) -> bool:
        """Whether the absolute ``path`` is excluded by a pattern or a ``.gitignore``."""
        suffix = "/" if is_dir else ""
        relative = _relative(path, self.root)
        basename = os.path.basename(path)
        if self.excluded_names and (
            basename in self.excluded_names
            or (relative is not None and relative != "." and not self.excluded_names.isdisjoint(relative.split("/")))
        ):
            return True
        candidates = [relative] if relative is not None else []
        candidates.append(basename)  # basename patterns apply wherever the tree is
        if self.exclude.patterns and any(self.exclude.match_file(candidate + suffix) for candidate in candidates):
            return True
        if not self.respect_gitignore:
            return False
        for directory, spec in self._gitignores_over(os.path.dirname(path)):
            rel = _relative(path, directory)
            if rel is not None and spec.match_file(rel + suffix):
                return True
        return False

    def _gitignores_over(self, directory: str) -> list[tuple[str, pathspec.GitIgnoreSpec]]:
        """The ``.gitignore`` files that apply in ``directory`` (those of its git repository,
        from the root down, below the anchor if there is one), with their directories."""
        if directory not in self._applying:
            self._applying[directory] = [
                (folder, spec)
                for folder in self._git_dirs(directory)
                if (self.anchor is None or _relative(folder, self.anchor) is not None)
                and (spec := self._gitignore(folder)) is not None
            ]
        return self._applying[directory]

    def _git_dirs(self, directory: str) -> list[str]:
        """Directories from the enclosing git repository root down to ``directory``.

        Outside a git repository there are none: like git and Ruff, ``.gitignore``
        files mean nothing there (``exclude`` still applies).
        """
        if directory not in self._chains:
            chain: list[str] = []
            found: list[str] = []
            candidate = directory
            while True:
                chain.append(candidate)
                if os.path.exists(_child(candidate, ".git")):
                    found = list(reversed(chain))
                    break
                parent = os.path.dirname(candidate)
                if parent == candidate:
                    break
                candidate = parent
            self._chains[directory] = found
        return self._chains[directory]


class _Walker:
    """Walks directories with the ignorer of each directory's settings."""

    def __init__(self, settings_for: Callable[[Path], Settings], result: Discovery) -> None:
        self.settings_for = settings_for
        self.result = result
        self._ignorers: dict[tuple[int, str | None], tuple[Settings, _Ignorer]] = {}

    def ignorer(self, directory: str, anchor: str | None = None) -> _Ignorer:
        """The ignorer for entries of the absolute ``directory`` (excluded patterns below
        ``anchor`` only)."""
        settings = self.settings_for(Path(directory))
        key = (id(settings), anchor)
        if key not in self._ignorers:
            # The settings are kept with it, so that their id is not reused.
            self._ignorers[key] = (settings, _Ignorer(settings, anchor))
        return self._ignorers[key][1]

    def walk(self, directory: str, absolute: str, anchor: str | None) -> Iterator[tuple[str, str]]:
        """The source files under ``directory`` (as the user spelled it; ``absolute`` is
        the same directory made absolute), each spelled both ways."""
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            self.result.warnings.append(f"{directory}: cannot read directory: {error.strerror or error}; skipped")
            return
        ignorer = self.ignorer(absolute, anchor)
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=True)
            except OSError:
                continue
            entry_absolute = _child(absolute, entry.name)
            if is_dir:
                if ignorer.excluded(entry_absolute, is_dir=True):
                    continue
                child = _child(directory, entry.name)
                library = vendored_library(entry_absolute) if self.settings_for(Path(entry_absolute)).skip_vendored else None
                if library is not None:
                    self.result.skipped.append(
                        f"{child}: skipped, a copy of the `{library}` library (name it on the command line, "
                        "or pass --no-skip-vendored, to check it)"
                    )
                    continue
                yield from self.walk(child, entry_absolute, anchor)
            elif (
                is_file
                and os.path.splitext(entry.name)[1] in SOURCE_SUFFIXES
                and not ignorer.excluded(entry_absolute, is_dir=False)
                and not _is_apple_double(entry.path, entry.name)
            ):
                yield _child(directory, entry.name), entry_absolute


# Libraries that projects keep a copy of in their tree (ECG-Byte's and PL-Marker's whole
# `transformers/` checkout, DriveArena's `third_party/diffusers`), by the distribution name
# their own packaging file declares. Their examples, templates and apex branches are the
# library's, not the project's: 55 of 62 judged findings in such copies were noise
# (rounds BE-BG). A project's own subpackages never declare these names.
VENDORED_LIBRARIES = frozenset(
    {
        "accelerate", "allennlp", "apex", "bitsandbytes", "clip", "datasets", "deepspeed", "detectron2",
        "diffusers", "espnet", "fairscale", "fairseq", "flash-attn", "k-diffusion", "kornia", "lavis",
        "lightning", "llava", "mamba-ssm", "megatron-core", "mmaction2", "mmagic", "mmcls", "mmcv",
        "mmcv-full", "mmdet", "mmdet3d", "mmediting", "mmengine", "mmgen", "mmocr", "mmpose",
        "mmpretrain", "mmrotate", "mmsegmentation", "mmtrack", "mmyolo", "monai", "nemo-toolkit",
        "nnunet", "nnunetv2", "open-clip-torch", "peft", "pytorch-lightning", "pytorch-pretrained-bert",
        "pytorch3d", "salesforce-lavis", "segment-anything", "sentence-transformers", "speechbrain",
        "stable-baselines3", "taming-transformers", "timm", "tokenizers", "torchaudio", "torchvision",
        "transformers", "trl", "ultralytics", "vllm", "xformers",
    }
)  # fmt: skip
_DECLARED_NAME = {
    "setup.py": re.compile(r"""\bname\s*=\s*['"]([A-Za-z0-9_.-]+)['"]"""),
    "pyproject.toml": re.compile(r"""^\s*name\s*=\s*['"]([A-Za-z0-9_.-]+)['"]""", re.MULTILINE),
    "setup.cfg": re.compile(r"""^\s*name\s*=\s*([A-Za-z0-9_.-]+)\s*$""", re.MULTILINE),
}


def vendored_library(directory: str) -> str | None:
    """The library ``directory`` is a copy of: the well-known distribution its own
    ``setup.py``, ``pyproject.toml`` or ``setup.cfg`` names, if any."""
    for file, pattern in _DECLARED_NAME.items():
        path = _child(directory, file)
        try:
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8", errors="replace") as handle:
                found = pattern.search(handle.read(256 * 1024))
        except OSError:
            continue
        if found is not None:
            name = re.sub(r"[-_.]+", "-", found.group(1)).lower()
            return name if name in VENDORED_LIBRARIES else None
    return None


# macOS writes a file's metadata beside it as `._<name>` (AppleDouble) on filesystems
# without extended attributes; archives and commits carry them along (protein_generator's
# `._attention.py`). They are binary, not Python: a walk skips them, by name and magic.
_APPLE_DOUBLE_MAGIC = b"\x00\x05\x16\x07"


def _is_apple_double(path: str, name: str) -> bool:
    if not name.startswith("._"):
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == _APPLE_DOUBLE_MAGIC
    except OSError:
        return False


def _settings_function(settings: Settings | ConfigResolver) -> Callable[[Path], Settings]:
    if isinstance(settings, Settings):
        return lambda directory: settings
    return settings.for_directory


def discover(paths: Sequence[str], settings: Settings | ConfigResolver) -> Discovery:
    """The files to check under ``paths``, with one ``Settings`` for all or a resolver
    that gives each directory the settings of its nearest configuration."""
    result = Discovery()
    walker = _Walker(_settings_function(settings), result)
    seen: set[str] = set()
    found_files: list[str] = []
    # Folders already asked about: pre-commit names many files of the same few folders.
    libraries: dict[str, str | None] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists() and not path.is_symlink():
            result.errors.append(f"{raw}: no such file or directory")
            continue
        absolute = path.absolute()
        spelled = absolute.as_posix()
        # A directory's own configuration decides about it; a file's, its directory's.
        home = absolute if path.is_dir() else absolute.parent
        parent_settings = walker.settings_for(home)
        ignorer = walker.ignorer(home.as_posix())
        found: Iterator[tuple[str, str]]
        # `--force-exclude` (pre-commit names each changed file) also leaves out files in a
        # vendored library copy, as a directory walk does.
        vendored = (
            parent_settings.force_exclude
            and parent_settings.skip_vendored
            and _in_vendored_copy(absolute, parent_settings, libraries)
        )
        if path.is_dir():
            if ignorer.excluded(spelled, is_dir=True) or vendored:
                if parent_settings.force_exclude:
                    continue
                found = walker.walk(str(path), spelled, spelled)
            else:
                found = walker.walk(str(path), spelled, None)
        else:
            if parent_settings.force_exclude and (ignorer.excluded(spelled, is_dir=False) or vendored):
                continue
            found = iter([(str(path), spelled)])
        for file, key in found:
            if key not in seen:
                seen.add(key)
                found_files.append(file)
    result.files = sorted(map(Path, found_files), key=lambda file: file.as_posix())
    return result


def _in_vendored_copy(path: Path, settings: Settings, libraries: dict[str, str | None]) -> bool:
    """Is ``path`` (or a folder above it, below the project root) a vendored library copy?
    ``libraries`` keeps what each folder was found to be."""
    root = Path(settings.project_root).resolve()
    current = (path if path.is_dir() else path.parent).resolve()
    while current != root and root in current.parents:
        folder = current.as_posix()
        if folder not in libraries:
            libraries[folder] = vendored_library(folder)
        if libraries[folder] is not None:
            return True
        current = current.parent
    return False


def is_excluded(path: str, settings: Settings) -> bool:
    """Whether ``exclude``/``extend-exclude`` or a ``.gitignore`` excludes ``path``
    (used for ``--stdin-filename`` with ``--force-exclude``)."""
    return _Ignorer(settings).excluded(Path(path).absolute().as_posix(), is_dir=False)
