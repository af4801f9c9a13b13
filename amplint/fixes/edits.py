"""Edits that fixes share: whole lines, re-indentation, statement removal, call pieces."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from amplint.diagnostics import Edit
from amplint.engine.context import SourceContext
from amplint.fixes.calls import multiline_strings

_NO_SPACE = cst.SimpleWhitespace("")
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def lines_of(context: SourceContext, first: cst.CSTNode, last: cst.CSTNode | None = None) -> tuple[int, int]:
    """Offsets of the whole lines from ``first``'s first line to ``last``'s last line."""
    start = context.line_start(context.span(first)[0])
    end_node = last if last is not None else first
    return start, context.line_end(context.span(end_node)[1] - 1)


def reindent(text: str, old: str, new: str) -> str | None:
    """Move lines from indentation ``old`` to ``new``; None if a line is indented less."""
    result = []
    for line in text.splitlines(keepends=True):
        if not line.strip():
            result.append(line)
        elif line.startswith(old):
            result.append(new + line[len(old) :])
        else:
            return None
    return "".join(result)


def comments_above(context: SourceContext, statement: cst.BaseStatement) -> int:
    """The start of the comment lines written directly above ``statement`` (no blank line
    between them): they belong to it and move with it. Its own first line if none."""
    start = context.line_start(context.span(statement)[0])
    attached = 0
    for line in reversed(getattr(statement, "leading_lines", ())):
        if line.comment is None:
            break
        attached += 1
    for _ in range(attached):
        start = context.line_start(start - 1)
    return start


def reindent_statements(
    context: SourceContext,
    statements: Sequence[cst.BaseStatement],
    new: str,
    *,
    with_comments: bool = False,
) -> tuple[int, int, str] | None:
    """The whole lines of consecutive ``statements`` (and, ``with_comments``, the comment
    lines attached above the first), moved from the first one's indentation to ``new``:
    (start, end, text). Lines inside a multi-line string keep their bytes, a comment line
    indented otherwise keeps its own; None when a code line is indented less."""
    first, last = statements[0], statements[-1]
    start, end = lines_of(context, first, last)
    if with_comments:
        start = comments_above(context, first)
    old = context.indentation(first)
    strings = [span for statement in statements for span in multiline_strings(context, statement)]
    result = []
    offset = start
    for line in context.text[start:end].splitlines(keepends=True):
        line_start, offset = offset, offset + len(line)
        if any(s_start < line_start < s_end for s_start, s_end in strings) or not line.strip():
            result.append(line)
        elif line.startswith(old):
            result.append(new + line[len(old) :])
        elif line.lstrip(" \t\f").startswith("#"):
            result.append(line)
        else:
            return None
    return start, end, "".join(result)


def body_indent(context: SourceContext, block: cst.BaseSuite) -> str | None:
    """The indentation of a block's statements (None for a one-line suite)."""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return None
    return context.indentation(block.body[0])


def indent_unit(context: SourceContext) -> str:
    """One level of the file's indentation (four spaces when libcst cannot tell)."""
    default = context.module.default_indent
    return default if default.strip() == "" and default else "    "


def remove_statement(context: SourceContext, statement: cst.BaseStatement, siblings: Sequence[cst.BaseStatement]) -> Edit:
    """Delete a statement's lines, or turn it into ``pass`` when it is alone in its block."""
    if len(siblings) == 1 and not isinstance(statement, cst.BaseCompoundStatement):
        assert isinstance(statement, cst.SimpleStatementLine)
        start = context.span(statement.body[0])[0]
        return context.edit(start, context.span(statement.body[-1])[1], "pass")
    return delete_statement(context, statement)


def delete_statement(context: SourceContext, statement: cst.BaseStatement) -> Edit:
    """Delete the lines of a statement that is not alone in its block, with the blank
    lines that would otherwise be left over in an indented block: those after it when it
    opens the block (no blank first line) or when blank lines precede it too (one
    separator, not two), those before it when it closes the block."""
    start, end = lines_of(context, statement)
    block = context.parents.get(statement)
    if isinstance(block, cst.IndentedBlock):
        body = list(block.body)
        index = next(i for i, candidate in enumerate(body) if candidate is statement)
        blank_before = _blank_lines_before(context, start)
        if index + 1 < len(body) and (index == 0 or blank_before < start):
            end = _blank_lines_after(context, end, context.line_start(context.span(body[index + 1])[0]))
        elif index + 1 == len(body) and index > 0:
            start = blank_before
    return context.edit(start, end, "")


def _is_blank(line: str) -> bool:
    return line.strip(" \t\f\r\n") == ""


def _blank_lines_before(context: SourceContext, start: int) -> int:
    """The start of the blank lines right above the line at ``start`` (``start`` if none)."""
    while start > 0:
        previous = context.line_start(start - 1)
        if not _is_blank(context.text[previous:start]):
            break
        start = previous
    return start


def _blank_lines_after(context: SourceContext, end: int, limit: int) -> int:
    """The end of the blank lines from ``end`` on, not past ``limit``."""
    while end < limit and _is_blank(context.text[end : context.line_end(end)]):
        end = context.line_end(end)
    return end


def combine_insertions(context: SourceContext, edits: Sequence[Edit]) -> list[Edit]:
    """One fix's insertions at the same point merged into one edit (the engine refuses two
    insertions at one point, whose order would be a guess); import lines are sorted, as
    isort would, and the same line is inserted once."""
    merged: list[Edit] = []
    at: dict[int, int] = {}
    for edit in edits:
        if edit.start != edit.end or edit.start not in at:
            if edit.start == edit.end:
                at[edit.start] = len(merged)
            merged.append(edit)
            continue
        first = merged[at[edit.start]]
        lines = first.content.splitlines(keepends=True) + edit.content.splitlines(keepends=True)
        if all(line.startswith(("import ", "from ")) for line in lines):
            lines = sorted(dict.fromkeys(lines), key=str.lower)
        merged[at[edit.start]] = context.insert(edit.start, "".join(lines))
    return merged


# -- pieces of calls ----------------------------------------------------------------------------


def string(value: str) -> cst.SimpleString:
    """A double-quoted string literal."""
    return cst.SimpleString(f'"{value}"')


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value``, spaced as PEP 8 spaces keyword arguments."""
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE),
    )


def as_keyword(arg: cst.Arg, name: str) -> cst.Arg:
    """A positional argument turned into ``name=...``, keeping its value and comma."""
    return arg.with_changes(
        keyword=cst.Name(name), equal=cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE)
    )


def with_commas(args: Sequence[cst.Arg]) -> list[cst.Arg]:
    """``args`` with a comma after every argument but the last (existing commas kept)."""
    result: list[cst.Arg] = []
    for index, arg in enumerate(args):
        if index < len(args) - 1 and not isinstance(arg.comma, cst.Comma):
            arg = arg.with_changes(comma=_COMMA)
        result.append(arg)
    return result
