"""Line-level edits that fixes moving statements between blocks share."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from amplint.analysis.context import RuleContext
from amplint.diagnostics import Edit


def lines_of(context: RuleContext, first: cst.CSTNode, last: cst.CSTNode | None = None) -> tuple[int, int]:
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


def body_indent(context: RuleContext, block: cst.BaseSuite) -> str | None:
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return None
    return context.indentation(block.body[0])


def remove_statement(context: RuleContext, statement: cst.BaseStatement, siblings: Sequence[cst.BaseStatement]) -> Edit:
    """Delete a statement's lines, or turn it into ``pass`` when it is alone in its block."""
    if len(siblings) == 1 and not isinstance(statement, cst.BaseCompoundStatement):
        assert isinstance(statement, cst.SimpleStatementLine)
        start, end = context.span(statement.body[0])
        return context.edit(start, context.span(statement.body[-1])[1], "pass")
    start, end = lines_of(context, statement)
    return context.edit(start, end, "")
