"""``gitlab``: a GitLab Code Quality report, the JSON array that a job's
``artifacts:reports:codequality`` uploads for the merge request widget and diff view.

Each finding has the documented fields: ``description`` (``CODE message``, since GitLab
does not show ``check_name``), ``check_name`` (the code), ``fingerprint``, ``severity``
and ``location`` (``path`` relative to ``$CI_PROJECT_DIR``, or the current directory,
with forward slashes; ``lines.begin`` and ``lines.end``).

GitLab matches findings across pipelines by fingerprint alone and keeps one finding per
fingerprint, so a fingerprint must be unique within a report and must not change when
unrelated lines move. It hashes the code, the path and the flagged source text
(whitespace collapsed; the whole line for an empty range), plus how many identical
findings come before it in the file. Row numbers and the message are left out: inserting
a line above a finding, or rewording a message in a new amplint release, keeps it.

In a notebook, ``lines`` are rows of the ``.ipynb`` file's JSON text (where the cell's
flagged lines are written, so the diff view shows the finding on them) and the
description ends with the position in the cell (``(cell 3:2:5)``); the fingerprint hashes
the flagged text of the cell, and neither the cell's number nor its rows.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence

from amplint.diagnostics import Diagnostic
from amplint.engine.catalog import INTERNAL_ERROR, PARSE_ERROR
from amplint.output.model import Sourced
from amplint.output.paths import gitlab_root, relative_posix
from amplint.output.text import position, source_lines

# A file that could not be analysed hides every finding in it.
_FILE_ERRORS = frozenset({PARSE_ERROR, INTERNAL_ERROR})


def flagged_text(d: Diagnostic, lines: Sequence[str]) -> str:
    """The source under the diagnostic's range with whitespace collapsed, or its whole
    line when the range is empty; empty when the file's text is not available."""
    start_row, start_col = d.location.row, d.location.column
    end_row, end_col = d.end_location.row, d.end_location.column
    if not 1 <= start_row <= len(lines):
        return ""
    if end_row <= start_row:
        flagged = lines[start_row - 1][start_col - 1 : end_col - 1]
    else:
        # A range may end past the last line (at the end of a file without a final newline).
        following = list(lines[start_row : min(end_row, len(lines))])
        if following and end_row <= len(lines):
            following[-1] = following[-1][: end_col - 1]
        flagged = "\n".join([lines[start_row - 1][start_col - 1 :], *following])
    collapsed = " ".join(flagged.split())
    return collapsed or " ".join(lines[start_row - 1].split())


def fingerprint(code: str, path: str, flagged: str, occurrence: int) -> str:
    payload = json.dumps([code, path, flagged, occurrence])
    return hashlib.sha256(payload.encode("ascii")).hexdigest()


def _last_row(d: Diagnostic) -> int:
    # A range that stops at the start of a line ends, visibly, on the line before.
    end_row = d.end_location.row
    if end_row > d.location.row and d.end_location.column == 1:
        end_row -= 1
    return max(end_row, d.location.row)


def code_quality_issues(items: Sequence[Sourced]) -> list[dict[str, object]]:
    root = gitlab_root()
    seen: Counter[tuple[str, str, str]] = Counter()
    lines: dict[tuple[str, int | None], list[str]] = {}
    issues: list[dict[str, object]] = []
    for item in items:
        d = item.diagnostic
        where = (d.path, d.cell)
        if where not in lines:
            lines[where] = source_lines(item.text)
        path = relative_posix(d.path, root)
        key = (d.code, path, flagged_text(d, lines[where]))
        description = f"{d.code} {d.message}"
        begin, end = d.location.row, _last_row(d)
        if d.cell is not None and d.file_rows is not None:
            description += f" ({position(d)})"
            begin, end = d.file_rows
        issues.append(
            {
                "description": description,
                "check_name": d.code,
                "fingerprint": fingerprint(*key, seen[key]),
                "severity": "critical" if d.code in _FILE_ERRORS else "major",
                "location": {"path": path, "lines": {"begin": begin, "end": end}},
            }
        )
        seen[key] += 1
    return issues


def format_gitlab(items: Sequence[Sourced]) -> str:
    return json.dumps(code_quality_issues(items), indent=2) + "\n"
