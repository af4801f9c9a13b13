"""The library API the CLI is a thin layer over; tests call it directly."""

from __future__ import annotations

from collections.abc import Sequence

from amplint.diagnostics import Diagnostic
from amplint.engine.config import Settings
from amplint.engine.project import ProjectFacts
from amplint.engine.runner import FileReport, Job, Mode, process_source
from amplint.rules import all_rules, rule_by_code


def _settings(select: Sequence[str] | None, settings: Settings | None) -> Settings:
    settings = settings or Settings()
    if select is not None:
        settings = settings.with_overrides(select=tuple(select))
    return settings


def check_source(
    text: str | bytes,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    settings: Settings | None = None,
    project: ProjectFacts | None = None,
) -> list[Diagnostic]:
    """Lint source text (or raw bytes, decoded per PEP 263) and return its diagnostics.
    ``project``: what the code's project declares (target torch, runtime helpers)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    job = Job(Mode.CHECK, _settings(select, settings), all_rules(), project=project)
    return process_source(path, data, job).diagnostics


def fix_source_text(
    text: str | bytes,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    unsafe_fixes: bool = False,
    settings: Settings | None = None,
    project: ProjectFacts | None = None,
) -> FileReport:
    """Fix source text; the report holds the new text, what was applied and what remains."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    job = Job(Mode.FIX, _settings(select, settings), all_rules(), unsafe_fixes=unsafe_fixes, project=project)
    return process_source(path, data, job)


def fix_text(
    text: str,
    path: str = "<string>",
    *,
    select: Sequence[str] | None = None,
    unsafe_fixes: bool = False,
) -> str:
    """The fixed text (the input itself when nothing applies)."""
    return fix_source_text(text, path, select=select, unsafe_fixes=unsafe_fixes).new_text or text


__all__ = ["ProjectFacts", "all_rules", "check_source", "fix_source_text", "fix_text", "rule_by_code"]
