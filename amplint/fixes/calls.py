"""Minimal text edits to a bracketed list: a call's arguments, an import's names.

Fixes that re-render a libcst node lose what libcst keeps outside that node: rendered
alone, a continuation line inside an indented block comes out without the block's
indentation. These edits touch only the characters a fix changes (rename the callee,
add an argument, turn a positional argument into a keyword, drop an argument), so a
call keeps the layout its author gave it: one line, hanging indent, aligned with the
bracket, comments, trailing commas, line endings, tabs.

Layout rules:
- a new element gets a line of its own when every element has one (hanging indent,
  one per line), except a new first element, which goes inline before the old first
  one (``f(\n    "cuda", x=1,\n)``); in other layouts it goes inline;
- a dropped element takes its own lines with it when it has them (its comments too);
  otherwise it goes with the comma before it, and a comment on the previous element's
  line keeps the edit from being made at all (``None``: no fix rather than a lost
  comment);
- when the text before the opening bracket changes length (a renamed callee), the
  continuation lines aligned with the bracket or with something after it on its line
  (indented at least as far as the first argument) move with it; the lines of a
  multi-line string keep their bytes, which are its value.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from amplint.diagnostics import Edit
from amplint.engine.context import SourceContext

_STRING_TYPES: tuple[type[cst.CSTNode], ...] = tuple(
    t for t in (cst.SimpleString, cst.FormattedString, getattr(cst, "TemplatedString", None)) if t is not None
)


@dataclass(frozen=True)
class _Piece:
    start: int
    end: int
    text: str
    order: int
    # Comments before this offset may go (a dropped element's own lines, its own
    # end-of-line comment); None: none may.
    drops_comments_until: int | None = None
    # Realignment spaces go before any other insertion at the same offset.
    first: bool = False


def outer_span(context: SourceContext, node: cst.CSTNode) -> tuple[int, int]:
    """A node's extent with the parentheses written around it."""
    start, end = context.span(node)
    lpar: Sequence[cst.LeftParen] = getattr(node, "lpar", ())
    rpar: Sequence[cst.RightParen] = getattr(node, "rpar", ())
    if lpar:
        start = context.span(lpar[0])[0]
    if rpar:
        end = context.span(rpar[-1])[1]
    return start, end


def source_of(context: SourceContext, node: cst.CSTNode) -> str:
    """The node's text as written (parentheses around it included), every byte kept."""
    start, end = outer_span(context, node)
    return context.text[start:end]


def comment_spans(context: SourceContext, node: cst.CSTNode) -> list[tuple[int, int]]:
    """The extents of the comments inside ``node``."""
    return [context.span(found) for found in _descendants(node) if isinstance(found, cst.Comment)]


def has_comment(context: SourceContext, node: cst.CSTNode) -> bool:
    """Does replacing ``node`` wholesale lose a comment written inside it?"""
    return bool(comment_spans(context, node))


def multiline_strings(context: SourceContext, node: cst.CSTNode) -> list[tuple[int, int]]:
    """The extents of the string literals inside ``node`` that span lines: their lines
    cannot be re-indented without changing the string."""
    spans = []
    for found in _descendants(node):
        if isinstance(found, _STRING_TYPES):
            start, end = context.span(found)
            if "\n" in context.text[start:end] or "\r" in context.text[start:end]:
                spans.append((start, end))
    return spans


def _descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.children)
    return found


class ListEdits:
    """Edits to the comma-separated ``elements`` written between the brackets at
    ``open_at`` and ``close_at`` (None: a list without brackets, ``import a, b``)."""

    def __init__(
        self,
        context: SourceContext,
        owner: cst.CSTNode,
        elements: Sequence[cst.CSTNode],
        open_at: int | None,
        close_at: int | None,
    ) -> None:
        self.context = context
        self.text = context.text
        self.owner = owner
        self.elements = list(elements)
        self.open_at = open_at
        self.close_at = close_at
        self._pieces: list[_Piece] = []
        self.failed = False

    # -- layout facts ----------------------------------------------------------------------

    @cached_property
    def _starts(self) -> list[int]:
        return [self.context.span(element)[0] for element in self.elements]

    @cached_property
    def _ends(self) -> list[int]:
        return [self.context.span(element)[1] for element in self.elements]

    def _line_start(self, offset: int) -> int:
        return self.context.line_start(offset)

    def _starts_line(self, offset: int) -> bool:
        return self.text[self._line_start(offset) : offset].strip(" \t\f") == ""

    def _indentation(self, offset: int) -> str:
        line = self.text[self._line_start(offset) : offset]
        return line[: len(line) - len(line.lstrip(" \t\f"))]

    @cached_property
    def hanging(self) -> bool:
        """Does the first element start on a line after the opening bracket?"""
        return (
            self.open_at is not None
            and bool(self.elements)
            and self._line_start(self._starts[0]) > self.open_at
        )

    @cached_property
    def own_lines(self) -> bool:
        """Hanging, with every element starting a line of its own."""
        return self.hanging and all(self._starts_line(start) for start in self._starts)

    def comma_after(self, index: int) -> int | None:
        """The offset of the comma after element ``index``, if it has one."""
        position = self._ends[index]
        text = self.text
        while position < len(text):
            char = text[position]
            if char == ",":
                return position
            if char == "#":
                while position < len(text) and text[position] not in "\r\n":
                    position += 1
                continue
            if char not in " \t\f\r\n\\":
                return None
            position += 1
        return None

    # -- recording edits ---------------------------------------------------------------------

    def replace(self, start: int, end: int, text: str, *, drops_comments_until: int | None = None) -> None:
        self._pieces.append(_Piece(start, end, text, len(self._pieces), drops_comments_until))

    def insert(self, at: int, text: str) -> None:
        self.replace(at, at, text)

    def replace_node(self, node: cst.CSTNode, text: str) -> None:
        """Replace a node's extent (parentheses around it stay)."""
        self.replace(*self.context.span(node), text)

    def add(self, index: int, text: str) -> None:
        """Insert ``text`` as a new element before element ``index`` (at the end when
        ``index`` is the number of elements)."""
        newline = self.context.source.newline
        count = len(self.elements)
        if count == 0:
            if self.open_at is None:
                self.failed = True
                return
            self.insert(self.open_at + 1, text)
            return
        if index < count:
            start = self._starts[index]
            if self.own_lines and index > 0:
                self.insert(self._line_start(start), f"{self._indentation(start)}{text},{newline}")
            else:
                # A new first element goes inline before the old one: `f(\n    "cuda", x=1,\n)`.
                self.insert(start, f"{text}, ")
            return
        last = count - 1
        end = self._ends[last]
        indent = self._indentation(self._starts[last])
        closes_later = self.close_at is not None and self._line_start(self.close_at) > self._line_start(end)
        if self.own_lines and closes_later:
            comma = self.comma_after(last)
            if comma is not None:
                self.insert(self.context.line_end(comma), f"{indent}{text},{newline}")
            else:
                self.insert(end, ",")
                self.insert(self.context.line_end(end), f"{indent}{text}{newline}")
        elif self.own_lines:
            self.insert(end, f",{newline}{indent}{text}")
        else:
            self.insert(end, f", {text}")

    def drop(self, indices: set[int]) -> None:
        """Remove the elements at ``indices`` (at least one element stays)."""
        count = len(self.elements)
        kept = [i for i in range(count) if i not in indices]
        if not indices:
            return
        if not kept:
            self.failed = True
            return
        starts, ends = self._starts, self._ends
        if self.own_lines:
            for index in sorted(indices):
                start = self._line_start(starts[index])
                if index + 1 < count:
                    end = self._line_start(starts[index + 1])
                elif self.close_at is not None and self._line_start(self.close_at) > self._line_start(ends[index]):
                    end = self._line_start(self.close_at)
                else:
                    self.failed = True  # `)` shares the last element's line
                    return
                self.replace(start, end, "", drops_comments_until=end)
            if kept[-1] < count - 1 and self.comma_after(count - 1) is None:
                # The list had no trailing comma: the new last element has none either.
                comma = self.comma_after(kept[-1])
                if comma is not None:
                    self.replace(comma, comma + 1, "")
            return
        trailing_from = kept[-1] + 1
        for index in sorted(indices):
            if index >= trailing_from:
                continue
            # The element, its comma and what follows them up to the next element; a
            # comment on a line of its own there is about the next one, and stays.
            end_of_line = self.context.line_end(ends[index])
            self.replace(starts[index], starts[index + 1], "", drops_comments_until=end_of_line)
        if trailing_from < count:
            # The trailing elements go with the comma before them.
            self.replace(ends[trailing_from - 1], ends[count - 1], "")

    # -- the result ----------------------------------------------------------------------------

    def edit(self) -> Edit | None:
        """One edit that rewrites the owner's text (a call, an import), in which only the
        recorded changes differ; None when they would break the layout or lose a comment."""
        if self.failed:
            return None
        pieces = list(self._pieces)
        comments = comment_spans(self.context, self.owner)
        for piece in pieces:
            kept_from = piece.start if piece.drops_comments_until is None else piece.drops_comments_until
            if any(max(piece.start, kept_from) <= c_start < piece.end for c_start, _ in comments):
                return None
        shifts = self._realignment(pieces)
        if shifts is None:
            return None
        pieces.extend(shifts)
        ordered = self._ordered(pieces)
        if ordered is None:
            return None
        start, end = self.context.span(self.owner)
        start = min([start, *(piece.start for piece in ordered)])
        end = max([end, *(piece.end for piece in ordered)])
        text, cursor = [], start
        for piece in ordered:
            text.append(self.text[cursor : piece.start])
            text.append(piece.text)
            cursor = piece.end
        text.append(self.text[cursor:end])
        return self.context.edit(start, end, "".join(text))

    def _realignment(self, pieces: Sequence[_Piece]) -> list[_Piece] | None:
        """Continuation lines aligned with the opening bracket, or with something after it
        on its line, follow what they are aligned with when the text before it changes
        length (a renamed callee, an argument added before a nested bracket)."""
        if self.open_at is None or self.close_at is None:
            return []
        text = self.text
        line_start = self._line_start(self.open_at)
        line_end = self.context.line_end(self.open_at)
        if any(piece.start < line_start < piece.end for piece in pieces):
            return None
        on_line = [
            piece
            for piece in pieces
            if line_start <= piece.start and piece.end < line_end and not any(c in piece.text for c in "\r\n")
        ]
        if all(len(piece.text) == piece.end - piece.start for piece in on_line):
            return []
        first = self.open_at + 1
        while first < len(text) and text[first] in " \t\f":
            first += 1
        if first >= len(text) or text[first] in "\r\n#":
            return []  # hanging indent: nothing is aligned with the bracket
        column = first - line_start
        starts = self.context.line_starts
        lines = starts[bisect.bisect_right(starts, self.open_at) : bisect.bisect_right(starts, self.close_at)]
        strings = multiline_strings(self.context, self.owner)
        shifts = []
        for start in lines:
            content = text[start : self.context.line_end(start)]
            width = len(content) - len(content.lstrip(" \t\f"))
            if not content.strip() or width < column:
                continue  # blank, or indented on its own terms (a hanging `)`)
            if any(s_start < start < s_end for s_start, s_end in strings):
                continue  # inside a string: its bytes are its value
            # What it is aligned with moves by the changes before it on the bracket's line
            # (an insertion right at it is new text that takes its place, and does not).
            anchor = line_start + width
            delta = sum(
                len(piece.text) - (piece.end - piece.start)
                for piece in on_line
                if piece.end < anchor or (piece.start < anchor == piece.end)
            )
            at = start + width
            if delta > 0:
                shifts.append(_Piece(at, at, " " * delta, -1, first=True))
            elif delta < 0 and text[at + delta : at] == " " * -delta:
                shifts.append(_Piece(at + delta, at, "", -1))
            elif delta < 0:
                return None  # tabs where spaces would have to go
        return shifts

    def _ordered(self, pieces: Sequence[_Piece]) -> list[_Piece] | None:
        """The pieces in text order (insertions at one offset in the order they were asked
        for, realignment first); None when two changes overlap."""
        ordered = sorted(pieces, key=lambda piece: (piece.start, piece.end > piece.start, not piece.first, piece.order))
        for before, after in itertools.pairwise(ordered):
            if after.start < before.end:
                return None  # overlapping changes: the fix asked for two things at once
        return ordered


def open_bracket(context: SourceContext, call: cst.Call) -> int:
    """The offset of a call's ``(``: after the callee and any parentheses around it."""
    text = context.text
    position = outer_span(context, call.func)[1]
    while text[position] != "(":
        if text[position] == "#":
            while text[position] not in "\r\n":
                position += 1
        position += 1
    return position


class CallEdits(ListEdits):
    """Edits to one call: its callee and its arguments."""

    def __init__(self, context: SourceContext, call: cst.Call) -> None:
        close_at = context.span(call)[1] - 1
        super().__init__(context, call, call.args, open_bracket(context, call), close_at)
        self.call = call

    def rename(self, text: str) -> None:
        """Write ``text`` for the callee."""
        self.replace_node(self.call.func, text)

    def keyword(self, arg: cst.Arg, name: str) -> None:
        """Turn a positional argument into ``name=<it>``."""
        self.insert(self.context.span(arg)[0], f"{name}=")

    def unwrap(self, wrapper: cst.CSTNode, kept: cst.CSTNode) -> None:
        """Replace ``wrapper`` (an argument's value) by ``kept``, a part of it, by deleting
        the text around ``kept``: ``torch.sigmoid(x)`` → ``x``, ``x.sigmoid()`` → ``x``."""
        start, end = self.context.span(wrapper)
        kept_start, kept_end = outer_span(self.context, kept)
        if start < kept_start:
            self.replace(start, kept_start, "")
        if kept_end < end:
            self.replace(kept_end, end, "")
