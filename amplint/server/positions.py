"""amplint's positions (1-based rows, 1-based columns in code points) as LSP positions
(0-based lines, 0-based characters in the encoding the client negotiated), and text
edits as small LSP edits.

Rows split at ``\\n``, ``\\r\\n`` and ``\\r`` only, as both amplint and LSP count lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from lsprotocol import types as lsp

_NEWLINE = re.compile(r"\r\n|\r|\n")

# Counts the code units of a string in the client's position encoding (UTF-16 unless
# the client asked for another).
Units = Callable[[str], int]


def lines_of(text: str) -> list[str]:
    return _NEWLINE.split(text)


def position(lines: Sequence[str], row: int, column: int, units: Units) -> lsp.Position:
    """The LSP position of 1-based ``row`` and ``column`` in a text split by `lines_of`."""
    line = min(max(row - 1, 0), len(lines) - 1) if lines else 0
    if row - 1 > line:  # past the end: the end of the text
        return lsp.Position(line=line, character=units(lines[line]) if lines else 0)
    content = lines[line] if lines else ""
    before = content[: max(column - 1, 0)]
    # A column past the end of the line (a range ending at its line break) counts one
    # unit per column, as amplint counts it.
    beyond = max(column - 1 - len(content), 0)
    return lsp.Position(line=line, character=units(before) + beyond)


def text_range(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int], units: Units) -> lsp.Range:
    return lsp.Range(start=position(lines, *start, units), end=position(lines, *end, units))


def contains(outer: lsp.Range, point: lsp.Position) -> bool:
    """Whether ``point`` is inside ``outer`` (ends included: the cursor just after a name)."""
    start = (outer.start.line, outer.start.character)
    end = (outer.end.line, outer.end.character)
    return start <= (point.line, point.character) <= end


def overlaps(first: lsp.Range, second: lsp.Range) -> bool:
    a = ((first.start.line, first.start.character), (first.end.line, first.end.character))
    b = ((second.start.line, second.start.character), (second.end.line, second.end.character))
    return a[0] <= b[1] and b[0] <= a[1]


def replacement(old: str, new: str, units: Units) -> lsp.TextEdit | None:
    """One edit turning ``old`` into ``new``: the span between their common prefix and
    suffix (a whole-document replacement would move the editor's cursor and folds)."""
    if old == new:
        return None
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    # Never split a "\r\n" pair: a position between them is no position in LSP.
    while prefix and old[prefix - 1] == "\r" and old[prefix : prefix + 1] == "\n":
        prefix -= 1
    while suffix and old[len(old) - suffix - 1 : len(old) - suffix] == "\r" and old[len(old) - suffix] == "\n":
        suffix -= 1
    return lsp.TextEdit(
        range=lsp.Range(
            start=_offset_position(old, prefix, units),
            end=_offset_position(old, len(old) - suffix, units),
        ),
        new_text=new[prefix : len(new) - suffix],
    )


def _offset_position(text: str, offset: int, units: Units) -> lsp.Position:
    """The LSP position of ``offset`` (never between the halves of a "\r\n")."""
    before = text[:offset]
    line = len(_NEWLINE.findall(before))
    start = max(before.rfind("\n"), before.rfind("\r")) + 1
    return lsp.Position(line=line, character=units(text[start:offset]))
