"""Output formats: human text (``full``, ``concise``) and machine-readable reports.

Machine-readable formats (json, json-lines, github, gitlab, sarif, rdjson, junit) print
nothing else on stdout, so that their output can be piped straight into other tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from amplint.output.github import format_github
from amplint.output.gitlab import format_gitlab
from amplint.output.junit import format_junit
from amplint.output.model import Sourced
from amplint.output.paths import display_path
from amplint.output.rdjson import format_rdjson
from amplint.output.ruff_json import diagnostic_json, format_json, format_json_lines
from amplint.output.sarif import format_sarif
from amplint.output.statistics import format_statistics, format_statistics_json
from amplint.output.style import PLAIN, Style
from amplint.output.text import format_concise, format_full

FORMATS = ("full", "concise", "json", "json-lines", "github", "gitlab", "sarif", "rdjson", "junit")
MACHINE_FORMATS = frozenset({"json", "json-lines", "github", "gitlab", "sarif", "rdjson", "junit"})


def render(
    output_format: str,
    items: Sequence[Sourced],
    *,
    unsafe: bool,
    checked: Iterable[str] = (),
    style: Style = PLAIN,
    successful: bool = True,
) -> str:
    """The report of ``items`` (already sorted) in ``output_format``."""
    if output_format == "concise":
        return format_concise(items, unsafe, style)
    if output_format == "full":
        return format_full(items, unsafe, style)
    if output_format == "json":
        return format_json(items)
    if output_format == "json-lines":
        return format_json_lines(items)
    if output_format == "github":
        return format_github(items)
    if output_format == "gitlab":
        return format_gitlab(items)
    if output_format == "sarif":
        return format_sarif(items, successful=successful)
    if output_format == "rdjson":
        return format_rdjson(items)
    if output_format == "junit":
        return format_junit(items, checked)
    raise ValueError(f"unknown output format {output_format!r}")


__all__ = [
    "FORMATS",
    "MACHINE_FORMATS",
    "Sourced",
    "Style",
    "diagnostic_json",
    "display_path",
    "format_statistics",
    "format_statistics_json",
    "render",
]
