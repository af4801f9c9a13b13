"""``json`` and ``json-lines``: Ruff's JSON schema, so tools that read Ruff's output
(reviewdog, editor plugins, dashboards) read amplint's unchanged.

Rows and columns are 1-based; columns count characters. ``filename`` is absolute, as
in Ruff; ``noqa_row`` is the row a ``# noqa`` comment must be on to silence it.

In a notebook, as in Ruff, ``cell`` is the cell's 1-based number (every cell counts)
and every row, the fix's edits' included, counts from that cell's first line. A fix
can reach into another cell (an import added to the first code cell), which Ruff's
schema cannot say: each edit of a notebook finding carries its own ``cell`` too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from amplint.diagnostics import Diagnostic, Edit, Fix
from amplint.docs import rule_url
from amplint.output.model import Sourced
from amplint.output.paths import absolute_path


def _position(row: int, column: int) -> dict[str, int]:
    return {"row": row, "column": column}


def _edit_json(edit: Edit) -> dict[str, object]:
    entry: dict[str, object] = {
        "content": edit.content,
        "location": _position(edit.location.row, edit.location.column),
        "end_location": _position(edit.end_location.row, edit.end_location.column),
    }
    if edit.cell is not None:
        entry["cell"] = edit.cell
    return entry


def fix_json(fix: Fix | None) -> dict[str, object] | None:
    if fix is None:
        return None
    return {
        "applicability": fix.applicability.value,
        "message": fix.message,
        "edits": [_edit_json(edit) for edit in sorted(fix.edits, key=lambda edit: (edit.start, edit.end))],
    }


def diagnostic_json(d: Diagnostic) -> dict[str, object]:
    """One diagnostic in Ruff's JSON schema."""
    return {
        "cell": d.cell,
        "code": d.code,
        "end_location": _position(d.end_location.row, d.end_location.column),
        "filename": absolute_path(d.path),
        "fix": fix_json(d.fix),
        "location": _position(d.location.row, d.location.column),
        "message": d.message,
        # The engine matches noqa comments on the row where the diagnostic starts.
        "noqa_row": d.location.row,
        "url": rule_url(d.code),
    }


def format_json(items: Sequence[Sourced]) -> str:
    return json.dumps([diagnostic_json(item.diagnostic) for item in items], indent=2) + "\n"


def format_json_lines(items: Sequence[Sourced]) -> str:
    return "".join(json.dumps(diagnostic_json(item.diagnostic)) + "\n" for item in items)
