"""``# noqa`` comments, read from real comment tokens only (never from strings)."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Set

from amplint.diagnostics import Diagnostic

_NOQA = re.compile(
    r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"[\s,]+")
_MAYBE_NOQA = re.compile(r"noqa", re.IGNORECASE)

ALL = frozenset({"*"})


def parse_noqa_comment(comment: str) -> frozenset[str] | None:
    """Codes a comment suppresses: ``ALL`` for a bare ``# noqa``, None if not a noqa."""
    match = _NOQA.search(comment)
    if match is None:
        return None
    codes = match.group("codes")
    if codes is None:
        # A colon followed by nothing recognisable is treated like Ruff does: bare.
        return ALL
    return frozenset(code.upper() for code in _SPLIT.split(codes.strip()) if code)


def noqa_lines(text: str) -> dict[int, frozenset[str]]:
    """Map 1-based row → suppressed codes, for every row with a noqa comment."""
    result: dict[int, frozenset[str]] = {}
    if "#" not in text or not _MAYBE_NOQA.search(text):
        return result
    # One "\n" per line break keeps row numbers (a lone "\r" ends a line too) while
    # sparing tokenize the line endings it does not split on.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                codes = parse_noqa_comment(token.string)
                if codes is not None:
                    result[token.start[0]] = codes
    except (tokenize.TokenError, SyntaxError, ValueError):
        # Tokenize is stricter than the parser on some valid files; fall back to lines.
        # split("\n"), not splitlines(): form feeds and other separators are not line breaks.
        for row, line in enumerate(text.split("\n"), start=1):
            if "#" in line:
                codes = parse_noqa_comment(line[line.index("#") :])
                if codes is not None:
                    result[row] = codes
    return result


def is_suppressed(code: str, row: int, table: dict[int, frozenset[str]]) -> bool:
    codes = table.get(row)
    return codes is not None and (codes is ALL or code in codes)


def apply_noqa(diagnostics: list[Diagnostic], text: str, *, never: Set[str]) -> list[Diagnostic]:
    """The diagnostics no ``# noqa`` silences; codes in ``never`` are never silenced."""
    if all(diagnostic.code in never for diagnostic in diagnostics):
        return diagnostics
    table = noqa_lines(text)
    return [
        diagnostic
        for diagnostic in diagnostics
        if diagnostic.code in never or not is_suppressed(diagnostic.code, diagnostic.location.row, table)
    ]
