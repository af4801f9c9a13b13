"""``rdjson``: reviewdog's Diagnostic Format (the ``DiagnosticResult`` message as JSON),
for ``reviewdog -f=rdjson``, which turns findings into pull request comments and fixes
into suggested changes.

Paths are relative to the current directory (reviewdog resolves them against the
directory it runs in), with forward slashes. Lines are 1-based; columns are 1-based
UTF-8 byte offsets, as the format requires, and end positions are exclusive. Severities
use the enum names (``ERROR``), which reviewdog's protobuf JSON parser insists on. Every
fix, safe or not, becomes ``suggestions`` (one per edit): a suggestion is only applied
by a reviewer who accepts it.

In a notebook the range is the rows of the ``.ipynb`` file's JSON text that hold the
cell's flagged lines, without columns (a JSON line's are not the cell's), the message
starts with the position in the cell (``cell 3:2:5:``), and there are no suggestions:
a replacement in cell coordinates would corrupt the JSON file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from amplint.diagnostics import Diagnostic, Location
from amplint.docs import docs_base_url, rule_url
from amplint.output.model import Sourced
from amplint.output.paths import relative_posix
from amplint.output.text import position, source_lines

SEVERITY = "ERROR"


def byte_column(lines: Sequence[str], location: Location) -> int:
    """The 1-based UTF-8 byte column of a 1-based character ``location``."""
    if not 1 <= location.row <= len(lines):
        return location.column
    line = lines[location.row - 1]
    before = line[: location.column - 1]
    # Columns past the end of the line (a range ending at its line break) are one byte each.
    beyond = max(location.column - 1 - len(line), 0)
    return len(before.encode("utf-8", errors="replace")) + beyond + 1


def _range(lines: Sequence[str], start: Location, end: Location) -> dict[str, object]:
    return {
        "start": {"line": start.row, "column": byte_column(lines, start)},
        "end": {"line": end.row, "column": byte_column(lines, end)},
    }


def rdjson_diagnostic(d: Diagnostic, lines: Sequence[str], path: str) -> dict[str, object]:
    if d.cell is not None and d.file_rows is not None:
        first, last = d.file_rows
        return {
            "message": f"{position(d)}: {d.message}",
            "location": {"path": path, "range": {"start": {"line": first}, "end": {"line": last}}},
            "severity": SEVERITY,
            "code": {"value": d.code, "url": rule_url(d.code)},
        }
    diagnostic: dict[str, object] = {
        "message": d.message,
        "location": {"path": path, "range": _range(lines, d.location, d.end_location)},
        "severity": SEVERITY,
        "code": {"value": d.code, "url": rule_url(d.code)},
    }
    if d.fix is not None and d.fix.edits:
        diagnostic["suggestions"] = [
            {"range": _range(lines, edit.location, edit.end_location), "text": edit.content}
            for edit in sorted(d.fix.edits, key=lambda edit: (edit.start, edit.end))
        ]
    return diagnostic


def rdjson_document(items: Sequence[Sourced]) -> dict[str, object]:
    root = Path.cwd()
    lines: dict[tuple[str, int | None], list[str]] = {}
    diagnostics = []
    for item in items:
        d = item.diagnostic
        where = (d.path, d.cell)
        if where not in lines:
            lines[where] = source_lines(item.text)
        diagnostics.append(rdjson_diagnostic(d, lines[where], relative_posix(d.path, root)))
    source: dict[str, str] = {"name": "amplint"}
    base = docs_base_url()
    if base is not None:
        source["url"] = base
    return {
        "source": source,
        "severity": SEVERITY,
        "diagnostics": diagnostics,
    }


def format_rdjson(items: Sequence[Sourced]) -> str:
    return json.dumps(rdjson_document(items), indent=2) + "\n"
