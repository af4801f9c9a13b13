"""The engine's view of one file under analysis: its text, tree, spans, parents, metadata
and the edits fixes are made of, each computed once per file, on first use.

The analysis layer builds on this (``amplint.analysis.context.RuleContext`` adds the
shared AMP facts); the engine itself never needs more than this class.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
from collections.abc import Mapping
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from amplint.diagnostics import Edit, Location
from amplint.engine.index import ProjectIndex
from amplint.engine.metadata import FastMetadataWrapper
from amplint.engine.project import ProjectFacts
from amplint.engine.source import SourceFile, line_starts
from amplint.engine.walk import significant_children


class SourceContext:
    def __init__(
        self,
        path: str,
        source: SourceFile,
        module: cst.Module,
        project: ProjectFacts | None = None,
        index: ProjectIndex | None = None,
    ) -> None:
        self.path = path
        # What the file's project declares (target torch, runtime helpers allowed).
        self.project = project or ProjectFacts()
        # The project's other modules, for facts that cross files (None: this file alone).
        self.index = index
        self.source = source
        self.text = source.text
        self.module = module
        self.wrapper: MetadataWrapper = FastMetadataWrapper(module, unsafe_skip_copy=True)
        self.line_starts = line_starts(self.text)

    @functools.cached_property
    def parents(self) -> Mapping[cst.CSTNode, cst.CSTNode]:
        """Every node's parent (libcst's ParentNodeProvider, formatting nodes left out)."""
        return parent_map(self.module)

    def metadata(self, provider: Any) -> Mapping[cst.CSTNode, Any]:
        """A libcst metadata provider's results for every node, computed on first use."""
        if provider is ParentNodeProvider:
            return self.parents
        return self.wrapper.resolve(provider)

    @functools.cached_property
    def _noqa(self) -> dict[int, frozenset[str]]:
        from amplint.engine.noqa import noqa_lines

        return noqa_lines(self.text)

    def is_suppressed(self, code: str, node: cst.CSTNode) -> bool:
        """Will a diagnostic of ``code`` reported at ``node`` be silenced by ``# noqa``?

        Fixes that must change several places together (a use and its import) check
        this, so that a suppressed use never loses the import it relies on.
        """
        from amplint.engine.noqa import is_suppressed

        return is_suppressed(code, self.location(self.span(node)[0]).row, self._noqa)

    @functools.cached_property
    def _spans(self) -> dict[cst.CSTNode, tuple[int, int]]:
        return syntactic_spans(self.module)

    def never_runs(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a branch that can never run: the body of ``if False:`` (or of a
        test such as ``x and False``, HazyResearch m2's switched-off ``if self.num_labels
        == 2 and False:``), the ``else`` of ``if True:``, or the body of ``while False:``?
        Findings there are not reported: the author switched that code off."""
        child = node
        parents = self.parents
        ancestor = parents.get(child)
        while ancestor is not None:
            if isinstance(ancestor, (cst.If, cst.While)):
                if child is ancestor.body and _constant_truth(ancestor.test) is False:
                    return True
                if child is ancestor.orelse and isinstance(ancestor, cst.If) and _constant_truth(ancestor.test) is True:
                    return True
            child, ancestor = ancestor, parents.get(ancestor)
        return False

    # -- positions ----------------------------------------------------------------------

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """Offsets of the node's syntactic extent (parentheses around it excluded): what
        libcst's PositionProvider gives, as offsets into the text."""
        return self._spans[node]

    def location(self, offset: int) -> Location:
        row = bisect.bisect_right(self.line_starts, offset)
        return Location(row=row, column=offset - self.line_starts[row - 1] + 1)

    def line_start(self, offset: int) -> int:
        return self.line_starts[bisect.bisect_right(self.line_starts, offset) - 1]

    def line_end(self, offset: int) -> int:
        """Offset just past the newline of the line holding ``offset``."""
        index = bisect.bisect_right(self.line_starts, offset)
        return self.line_starts[index] if index < len(self.line_starts) else len(self.text)

    def indentation(self, node: cst.CSTNode) -> str:
        start, _ = self.span(node)
        line_start = self.line_start(start)
        prefix = self.text[line_start:start]
        return prefix[: len(prefix) - len(prefix.lstrip(" \t\f"))]

    # -- edits --------------------------------------------------------------------------

    def edit(self, start: int, end: int, content: str) -> Edit:
        return Edit(start, end, content, self.location(start), self.location(end))

    def replace(self, node: cst.CSTNode, new: cst.CSTNode | str) -> Edit:
        """Replace an expression's syntactic extent; parentheses around it stay as they are."""
        start, end = self.span(node)
        if isinstance(new, cst.CSTNode):
            if isinstance(new, cst.BaseExpression) and (new.lpar or new.rpar):
                new = new.with_changes(lpar=(), rpar=())
            new = self.module.code_for_node(new)
        return self.edit(start, end, new)

    def insert(self, offset: int, content: str) -> Edit:
        return self.edit(offset, offset, content)

    def delete_lines(self, node: cst.CSTNode) -> Edit:
        """Delete the whole lines a statement occupies (it must be alone on them)."""
        start, end = self.span(node)
        return self.edit(self.line_start(start), self.line_end(max(start, end - 1)), "")


class _RenderState(CodegenState):
    """libcst's code generation state, without the generator-based context manager it
    enters around every node to record positions no one asked for here."""

    def record_syntactic_position(  # type: ignore[override]
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return _NO_POSITIONS


_NO_POSITIONS = contextlib.nullcontext()


class _SpanState(CodegenState):
    """libcst's position-recording code generation (PositionProvider's), keeping offsets
    instead of line and column: it skips splitting every token on newlines and the
    generator-based context manager entered around every node."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.spans: dict[cst.CSTNode, tuple[int, int]] = {}
        self.offset = 0
        self._starts: list[int] = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        # A syntactic position recorded inside the node wins (as in libcst).
        if node not in self.spans:
            self.spans[node] = (start, self.offset)

    def record_syntactic_position(  # type: ignore[override]
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return _SyntacticSpan(self, node, start_node, end_node)


class _SyntacticSpan:
    __slots__ = ("end_node", "node", "start", "start_node", "state")

    def __init__(self, state: _SpanState, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exc: object) -> None:
        spans = self.state.spans
        start = spans[self.start_node][0] if self.start_node is not None else self.start
        end = spans[self.end_node][1] if self.end_node is not None else self.state.offset
        spans[self.node] = (start, end)


def syntactic_spans(module: cst.Module) -> dict[cst.CSTNode, tuple[int, int]]:
    """Every node's syntactic extent as offsets into ``render(module)``."""
    state = _SpanState(module)
    module._codegen(state)
    return state.spans


def render(module: cst.Module) -> str:
    """``module.code``, a third faster."""
    state = _RenderState(default_indent=module.default_indent, default_newline=module.default_newline)
    module._codegen(state)
    return "".join(state.tokens)


def parent_map(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """Map each node to its parent, keys in pre-order (the order visitors meet the nodes).

    Formatting nodes (whitespace, punctuation: ``walk.TRIVIA``) are left out; nothing
    asks for their parents, and they are two thirds of the nodes.

    libcst's ParentNodeProvider gives the same map through a full visitor traversal,
    about ten times slower; this walk is a large share of a file's cost otherwise.
    """
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[tuple[cst.CSTNode, cst.CSTNode]] = [(child, module) for child in reversed(significant_children(module))]
    while stack:
        node, parent = stack.pop()
        parents[node] = parent
        stack.extend((child, node) for child in reversed(significant_children(node)))
    return parents


def _constant_truth(test: cst.BaseExpression) -> bool | None:
    """The truth of a test that is the same every time (``False``, ``0``, ``x and False``,
    ``not True``), or None."""
    if isinstance(test, cst.Name) and test.value in ("True", "False", "None"):
        return test.value == "True"
    if isinstance(test, cst.Integer):
        return test.evaluated_value != 0
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _constant_truth(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _constant_truth(test.left), _constant_truth(test.right)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else (True if left is right is True else None)
        return True if True in (left, right) else (False if left is right is False else None)
    return None
