"""How paths are shown: relative to the current directory for people, and relative to
the checkout for CI annotations (GitHub resolves annotation and SARIF paths against the
repository root, GitLab Code Quality paths against the project directory; neither is
always the directory amplint runs in)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote


def display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies beneath it."""
    if path == "-":
        return path
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if relative == ".." or relative.startswith(".." + os.sep) else relative


def absolute_path(path: str) -> str:
    """Ruff's ``filename``: absolute, but not resolved through symbolic links."""
    return path if path == "-" else os.path.abspath(path)


def annotation_root() -> Path:
    """The directory CI tools resolve relative paths against."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    return Path(workspace).absolute() if workspace else Path.cwd()


def relative_posix(path: str, root: Path) -> str:
    """``path`` relative to ``root``, with forward slashes; absolute outside it."""
    if path == "-":
        return path
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return absolute.as_posix()


def annotation_path(path: str) -> str:
    """``path`` relative to :func:`annotation_root`, with forward slashes; absolute outside it."""
    return relative_posix(path, annotation_root())


def gitlab_root() -> Path:
    """The directory GitLab resolves Code Quality paths against: the checkout."""
    project_dir = os.environ.get("CI_PROJECT_DIR")
    return Path(os.path.abspath(project_dir)) if project_dir else Path.cwd()


def relative_uri(path: str) -> str | None:
    """A percent-encoded URI reference relative to :func:`annotation_root`, or None outside it."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(annotation_root())
    except ValueError:
        return None
    return quote(relative.as_posix())


def file_uri(path: str | Path) -> str:
    return Path(os.path.abspath(path)).as_uri()
