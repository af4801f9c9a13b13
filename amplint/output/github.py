"""``github``: GitHub Actions workflow commands, one ``::error`` annotation per line.

The ``file`` property is relative to ``$GITHUB_WORKSPACE`` (the checkout) when that is
set, so annotations land on the right file even when amplint runs in a subdirectory.

In a notebook, ``line`` and ``endLine`` are rows of the ``.ipynb`` file's JSON text (the
``source`` lines of the cell), so the annotation lands on the line a pull request's diff
shows; the message starts with the position in the cell (``cell 3:2:5:``), and no
columns are given (a JSON line's columns are not the cell's).
"""

from __future__ import annotations

from collections.abc import Sequence

from amplint.output.model import Sourced
from amplint.output.paths import annotation_path
from amplint.output.text import position


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
        head = [f"title={escape_property(f'amplint ({d.code})')}", f"file={escape_property(annotation_path(d.path))}"]
        if d.cell is not None and d.file_rows is not None:
            first, last = d.file_rows
            properties = ",".join([*head, f"line={first}", f"endLine={last}"])
            message = f"{position(d)}: {d.code} {d.message}"
        else:
            properties = ",".join(
                [
                    *head,
                    f"line={d.location.row}",
                    f"col={d.location.column}",
                    f"endLine={d.end_location.row}",
                    f"endColumn={d.end_location.column}",
                ]
            )
            message = f"{d.code} {d.message}"
        lines.append(f"::error {properties}::{escape_data(message)}")
    return "".join(line + "\n" for line in lines)
