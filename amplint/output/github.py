"""``github``: GitHub Actions workflow commands, one ``::error`` annotation per line.

The ``file`` property is relative to ``$GITHUB_WORKSPACE`` (the checkout) when that is
set, so annotations land on the right file even when amplint runs in a subdirectory.
"""

from __future__ import annotations

from collections.abc import Sequence

from amplint.output.model import Sourced
from amplint.output.paths import annotation_path


def escape_property(value: str) -> str:
    return (
        value.replace("%", "%25")
        .replace("\r", "%0D")
        .replace("\n", "%0A")
        .replace(":", "%3A")
        .replace(",", "%2C")
    )


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def format_github(items: Sequence[Sourced]) -> str:
    lines = []
    for item in items:
        d = item.diagnostic
        properties = ",".join(
            [
                f"title={escape_property(f'amplint ({d.code})')}",
                f"file={escape_property(annotation_path(d.path))}",
                f"line={d.location.row}",
                f"col={d.location.column}",
                f"endLine={d.end_location.row}",
                f"endColumn={d.end_location.column}",
            ]
        )
        lines.append(f"::error {properties}::{escape_data(f'{d.code} {d.message}')}")
    return "".join(line + "\n" for line in lines)
