"""The human formats: ``concise`` (one line per diagnostic) and ``full`` (Ruff's
default: the header line, then the source with the range underlined and the fix).

In a notebook a finding is placed as Ruff places it, ``nb.ipynb:cell 3:2:5``, and
``full`` quotes the lines of that cell.

Rows split only at ``\\n``, ``\\r\\n`` and ``\\r``, like the parser that produced the
positions (``str.splitlines`` would also split at form feeds and other separators).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from amplint.diagnostics import Applicability, Diagnostic
from amplint.output.model import Sourced
from amplint.output.paths import display_path
from amplint.output.style import PLAIN, Style

CONTEXT_LINES = 2
# A range longer than this shows its first and last lines around an elision.
MAX_SPAN_LINES = 6
_NEWLINE = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _visible(line: str) -> str:
    return line.replace("\t", "    ")


def _offset(line: str, column: int) -> int:
    """Where 1-based character column ``column`` of ``line`` is drawn, tabs expanded."""
    return len(_visible(line[: max(column - 1, 0)]))


def position(diagnostic: Diagnostic, colon: str = ":") -> str:
    """``row:column``, or ``cell N:row:column`` in a notebook (Ruff's spelling)."""
    d = diagnostic
    cell = f"cell {d.cell}{colon}" if d.cell is not None else ""
    return f"{cell}{d.location.row}{colon}{d.location.column}"


def header(diagnostic: Diagnostic, unsafe: bool, style: Style = PLAIN) -> str:
    d = diagnostic
    colon = style.punct(":")
    marker = style.fixable("[*]") + " " if d.fixable_with(unsafe) else ""
    return (
        f"{style.path(display_path(d.path))}{colon}{position(d, colon)}{colon}"
        f" {style.code(d.code)} {marker}{d.message}"
    )


def format_concise(items: Sequence[Sourced], unsafe: bool, style: Style = PLAIN) -> str:
    lines = []
    for item in items:
        lines.append(header(item.diagnostic, unsafe, style))
        if item.diagnostic.detail:
            lines.append(item.diagnostic.detail.rstrip())
    return "".join(line + "\n" for line in lines)


def _snippet(diagnostic: Diagnostic, lines: list[str], style: Style) -> list[str]:
    d = diagnostic
    start_row, start_col = d.location.row, d.location.column
    end_row, end_col = d.end_location.row, d.end_location.column
    if end_row > start_row and end_col == 1:
        # A range that stops at the start of a line ends, visibly, on the line before.
        end_row -= 1
        end_col = len(lines[end_row - 1]) + 1 if end_row <= len(lines) else 1
    end_row = min(max(end_row, start_row), len(lines))
    before = list(range(max(1, start_row - CONTEXT_LINES), start_row))
    after = list(range(end_row + 1, min(len(lines), end_row + CONTEXT_LINES) + 1))
    while before and not lines[before[0] - 1].strip():
        before.pop(0)
    while after and not lines[after[-1] - 1].strip():
        after.pop()
    width = len(str(after[-1] if after else end_row))
    blank = " " * width
    bar = style.gutter("|")

    def numbered(row: int, prefix: str = "") -> str:
        text = prefix + _visible(lines[row - 1])
        number = style.gutter(f"{row:>{width}}")
        return f"{number} {bar} {text}".rstrip() if text.strip() else f"{number} {bar}"

    def annotation(text: str) -> str:
        return f"{style.gutter(blank)} {bar} {text}"

    # A multi-line range draws its left edge in a two-column margin that every line gets.
    margin = "  " if end_row > start_row else ""
    out = [f"{style.gutter(blank)} {bar}"]
    out.extend(numbered(row, margin) for row in before)
    first = lines[start_row - 1]
    code = style.marker(d.code)
    if end_row == start_row:
        begin = _offset(first, start_col)
        finish = _offset(first, end_col) if end_col > start_col else begin + 1
        out.append(numbered(start_row))
        out.append(
            annotation(" " * begin + style.marker("^" * max(1, finish - begin)) + " " + code)
        )
    else:
        at_indent = not first[: start_col - 1].strip()
        if at_indent:
            out.append(numbered(start_row, style.marker("/") + " "))
        else:
            out.append(numbered(start_row, "  "))
            out.append(annotation(style.marker(" " + "_" * (_offset(first, start_col) + 1) + "^")))
        middle = list(range(start_row + 1, end_row + 1))
        if end_row - start_row + 1 > MAX_SPAN_LINES:
            keep = MAX_SPAN_LINES // 2
            shown = [*middle[: keep - 1], 0, *middle[-keep:]]
        else:
            shown = middle
        for row in shown:
            if row == 0:
                out.append(f"{style.gutter('.' * max(width, 3))}")
            else:
                out.append(numbered(row, style.marker("|") + " "))
        last = lines[end_row - 1]
        underline = "|" + "_" * (_offset(last, max(end_col - 1, 1)) + 1) + "^"
        out.append(annotation(style.marker(underline) + " " + code))
    out.extend(numbered(row, margin) for row in after)
    out.append(f"{style.gutter(blank)} {bar}")
    if d.fix is not None:
        label = "help" if d.fix.applicability is Applicability.SAFE else "help (unsafe)"
        out.append(
            f"{style.gutter(blank)} {style.gutter('=')} {style.help(label)}: {d.fix.message}"
        )
    return out


def format_full(items: Sequence[Sourced], unsafe: bool, style: Style = PLAIN) -> str:
    blocks = []
    for item in items:
        d = item.diagnostic
        block = [header(d, unsafe, style)]
        lines = source_lines(item.text)
        if 1 <= d.location.row <= len(lines):
            block.extend(_snippet(d, lines, style))
        if d.detail:
            block.append(d.detail.rstrip())
        blocks.append("\n".join(block) + "\n")
    # Like Ruff, every diagnostic is followed by a blank line (the summary comes after).
    return "".join(block + "\n" for block in blocks)
