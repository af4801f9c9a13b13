"""``--add-noqa``: silence every current finding with a coded noqa comment on its row.

The way to adopt amplint on a large codebase and then ratchet: suppress what is there
today, fail on anything new, and remove suppressions as the code is fixed (AMP901
reports the ones that became unnecessary). As in Ruff, a comment goes on the row a
finding starts on (where amplint looks for it), with the codes sorted; an existing
directive gets the missing codes merged in, and an existing comment keeps its text.

A row that ends inside a string (a triple-quoted string going on to the next line) or
with a backslash continuation cannot take a comment without changing the code: its
findings are left as they are and reported back. So are findings no comment can
silence (AMP900, AMP999).
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field

from amplint.diagnostics import Diagnostic
from amplint.engine.noqa import _NOQA as NOQA_DIRECTIVE
from amplint.engine.noqa import parse_noqa_comment
from amplint.engine.source import line_starts
from amplint.engine.unused_noqa import NEVER_SUPPRESSED

_MULTI_LINE_EXEMPT = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER})


@dataclass
class NoqaAdded:
    text: str
    added: int = 0  # rows that got a directive or more codes
    left: list[Diagnostic] = field(default_factory=list)  # findings that could not be silenced


@dataclass(frozen=True)
class _Row:
    comment: tuple[int, str] | None  # (column, text) of the row's comment
    blocked: bool  # ends inside a string or with a backslash continuation


def _rows(text: str) -> dict[int, _Row] | None:
    """Per row: its comment, and whether a comment could be appended; None if the text
    does not tokenise."""
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    comments: dict[int, tuple[int, str]] = {}
    blocked: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(normalized).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = (token.start[1], token.string)
            elif token.type not in _MULTI_LINE_EXEMPT and token.end[0] > token.start[0]:
                blocked.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    lines = normalized.split("\n")
    rows: dict[int, _Row] = {}
    for number, line in enumerate(lines, start=1):
        comment = comments.get(number)
        continued = comment is None and line.rstrip().endswith("\\")
        rows[number] = _Row(comment, number in blocked or continued)
    return rows


def add_noqa(text: str, diagnostics: Sequence[Diagnostic]) -> NoqaAdded:
    """``text`` with a noqa comment for every finding of ``diagnostics`` (findings of
    ``text``) that one can silence."""
    result = NoqaAdded(text)
    wanted: dict[int, set[str]] = {}
    for diagnostic in diagnostics:
        if diagnostic.code in NEVER_SUPPRESSED:
            result.left.append(diagnostic)
        else:
            wanted.setdefault(diagnostic.location.row, set()).add(diagnostic.code)
    if not wanted:
        return result
    rows = _rows(text)
    if rows is None:
        result.left.extend(d for d in diagnostics if d.code not in NEVER_SUPPRESSED)
        return result
    starts = line_starts(text)
    edits: list[tuple[int, int, str]] = []
    for row, codes in sorted(wanted.items()):
        info = rows.get(row)
        if info is None or info.blocked:
            result.left.extend(d for d in diagnostics if d.location.row == row and d.code in codes)
            continue
        edit = _edit(text, starts, row, info, sorted(codes))
        if edit is not None:
            edits.append(edit)
            result.added += 1
    pieces: list[str] = []
    cursor = 0
    for start, end, content in sorted(edits):
        pieces.append(text[cursor:start])
        pieces.append(content)
        cursor = end
    pieces.append(text[cursor:])
    result.text = "".join(pieces)
    return result


def _line_end(text: str, starts: list[int], row: int) -> int:
    """Offset of the end of ``row``'s content (before its line break)."""
    end = starts[row] if row < len(starts) else len(text)
    while end > starts[row - 1] and text[end - 1] in "\r\n":
        end -= 1
    return end


def _edit(text: str, starts: list[int], row: int, info: _Row, codes: list[str]) -> tuple[int, int, str] | None:
    line_start = starts[row - 1]
    if info.comment is not None:
        column, comment = info.comment
        suppressed = parse_noqa_comment(comment)
        match = NOQA_DIRECTIVE.search(comment)
        if suppressed is not None and match is not None:
            missing = [code for code in codes if code not in suppressed]
            if match.group("codes") is None or not missing:
                return None  # a bare directive already silences everything
            at = line_start + column + match.end("codes")
            return at, at, ", " + ", ".join(missing)
        end = line_start + column + len(comment)
        return end, end, "  # noqa: " + ", ".join(codes)
    end = _line_end(text, starts, row)
    content_end = end
    while content_end > line_start and text[content_end - 1] in " \t":
        content_end -= 1
    return content_end, end, "  # noqa: " + ", ".join(codes)
