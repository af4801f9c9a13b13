"""``# noqa`` comments, read from real comment tokens only (never from strings)."""

from __future__ import annotations

import io
import re
import tokenize

_NOQA = re.compile(
    r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"[\s,]+")

ALL = frozenset({"*"})


def parse_noqa_comment(comment: str) -> frozenset[str] | None:
    """Codes a comment suppresses: ``ALL`` for a bare ``# noqa``, None if not a noqa."""
    match = _NOQA.search(comment)
    if match is None:
        return None
    codes = match.group("codes")
    if codes is None:
        # "# noqa:" followed by nothing recognisable is treated like Ruff does: bare.
        return ALL
    return frozenset(code.upper() for code in _SPLIT.split(codes.strip()) if code)


def noqa_lines(text: str) -> dict[int, frozenset[str]]:
    """Map 1-based row → suppressed codes, for every row with a noqa comment."""
    result: dict[int, frozenset[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                codes = parse_noqa_comment(token.string)
                if codes is not None:
                    result[token.start[0]] = codes
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # Tokenize is stricter than the parser on some valid files; fall back to lines.
        for row, line in enumerate(text.splitlines(), start=1):
            if "#" in line:
                codes = parse_noqa_comment(line[line.index("#") :])
                if codes is not None:
                    result[row] = codes
    return result


def is_suppressed(code: str, row: int, table: dict[int, frozenset[str]]) -> bool:
    codes = table.get(row)
    return codes is not None and (codes is ALL or code in codes)
